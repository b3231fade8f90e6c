"""``python -m chaos [--backend file|kafka] [--duration S] [--short] [--seed N]``."""

from __future__ import annotations

import argparse
import dataclasses
import logging
import sys
from pathlib import Path

from .harness import ChaosResult, full_options, run_chaos, short_options


def report(result: ChaosResult) -> str:
    """The lines printed after a run; the last one is the summary, the reconcile's summary
    line comes just before it."""
    stats, found = result.workload, result.findings
    lines = [
        f"workload: transactions={stats.transactions} large={stats.large_transactions} "
        f"truncates={stats.truncates} failed_attempts={stats.failures}",
        "faults: " + " ".join(f"{kind}={count}" for kind, count in sorted(result.faults.items())),
        f"log: committed_changes={found.committed} logged={found.logged} "
        f"misordered={found.misordered} wrong_images={found.wrong_images}",
        f"sinks: rows_diverged={found.sink_rows_diverged} "
        f"log_replay_rows_diverged={found.log_rows_diverged} dead_letters={found.dead_letters} "
        f"unexpected_child_exits={result.unexpected_exits}",
        *(f"problem: {problem}" for problem in found.problems),
        *(f"fault not injected: {error}" for error in result.fault_errors),
        found.reconcile_summary or "reconcile: not run",
        result.summary(),
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the chaos harness; exit 1 when anything was lost, duplicated or diverged."""
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    parser.add_argument("--short", action="store_true",
                        help="a few faults of each kind (the version in make test)")
    parser.add_argument("--duration", type=float, default=None,
                        help="seconds of workload (default 600, short: 40)")
    parser.add_argument("--seed", type=int, default=1, help="random seed (faults, workload)")
    parser.add_argument("--backend", choices=("file", "kafka"), default="file",
                        help="the log: the file backend on a small tmpfs, or Kafka with two "
                             "capture replicas (DISTRIBUTARY_TEST_KAFKA_BOOTSTRAP, else a "
                             "3-broker cluster started here)")
    parser.add_argument("--keep-logs", type=Path, default=None, metavar="DIR",
                        help="copy the output of cdc capture and cdc connect here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s",
                        stream=sys.stderr)
    if args.short:
        options = short_options(args.duration or 40.0, args.seed)
    else:
        options = full_options(args.duration or 600.0, args.seed)
    options = dataclasses.replace(options, keep_logs=args.keep_logs, backend=args.backend)
    result = run_chaos(options)
    print(report(result), flush=True)
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
