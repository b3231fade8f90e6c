"""``python -m soak [--minutes M] [--rate ROWS_PER_S] [--out DIR]`` (``make soak``)."""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from pathlib import Path

from .figures import Figures, Thirds, figures
from .harness import SoakOptions, SoakResult, run_soak
from .output import write_chart, write_csv


def report(options: SoakOptions, result: SoakResult, found: Figures) -> list[str]:
    """The ``name=value`` lines, the checks' line last."""
    stats, checks = result.workload, result.findings
    achieved = stats.rows / options.duration_s
    lines = [
        f"soak_minutes={options.minutes:g}",
        f"soak_rows_per_s={achieved:.0f}",
        f"soak_transactions={stats.transactions} soak_large_transactions="
        f"{stats.large_transactions} soak_migrations={stats.migrations} "
        f"soak_skipped_ticks={stats.skipped_ticks} soak_write_failures={stats.failures}",
        "soak_faults=" + ",".join(f"{f.kind}@{f.start / 60:.1f}m" for f in result.faults),
        *(f"soak_catchup_s_{kind}={seconds:.1f}" for kind, seconds in found.catchup_s.items()),
        f"soak_final_catchup_s={result.catch_up_s:.1f}",
        f"soak_log_records_checked={checks.records} soak_unresolved_toast={checks.unresolved}",
        f"soak_pipeline_restarts={result.restarts}",
        f"soak_thread_growth={found.thread_growth}",
        f"soak_disk_growth_mb={found.disk_growth_mb:.1f}",
        f"soak_catchup_s={found.slowest_catchup_s:.1f}",
        f"soak_lag_p99_s={found.lag_p99_s:.3f}",
        f"soak_fd_growth={found.fd_growth}",
        f"soak_rss_growth_mb={found.rss_growth_mb:.1f}",
        *(f"problem: {problem}" for problem in checks.problems),
        *(f"fault not injected: {error}" for error in result.fault_errors),
        checks.reconcile_line,
        f"soak: lost={checks.lost} duplicated={checks.duplicated} diverged={checks.diverged}",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    """Run the soak; exit 1 when anything was lost, duplicated or diverged."""
    parser = argparse.ArgumentParser(prog="python -m soak", description=__doc__)
    parser.add_argument("--minutes", type=float,
                        default=float(os.environ.get("SOAK_MINUTES", "30")),
                        help="minutes of workload (SOAK_MINUTES, default 30)")
    parser.add_argument("--rate", type=float, default=5_000.0, help="rows a second")
    parser.add_argument("--out", type=Path, default=Path("soak-results"),
                        help="where the CSV, the chart and cdc run's output go")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s",
                        stream=sys.stderr)
    logging.getLogger("opensearch").setLevel(logging.CRITICAL)  # a line per lag probe
    options = SoakOptions(minutes=args.minutes, rate=args.rate, out_dir=args.out)
    result = run_soak(options)
    thirds = Thirds(options.warmup_s, options.duration_s)
    found = figures(result.samples, result.lags, result.faults, thirds, options.retention_s)
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "soak.csv", result.samples, result.lags)
    write_chart(args.out / "soak.png", result.samples, result.lags, result.faults)
    print(f"soak: samples in {args.out / 'soak.csv'}, chart in {args.out / 'soak.png'}",
          file=sys.stderr)
    for line in report(options, result, found):
        print(line, flush=True)
    checks = result.findings
    bad = checks.lost or checks.duplicated or checks.diverged or result.fault_errors
    return 1 if bad or math.isinf(found.lag_p99_s) else 0


if __name__ == "__main__":
    sys.exit(main())
