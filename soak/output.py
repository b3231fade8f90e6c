"""The soak's samples as CSV and as a PNG chart (matplotlib, installed by ``make soak``)."""

from __future__ import annotations

import csv
from collections.abc import Sequence
from pathlib import Path

from .figures import Fault, LagSample, Sample


def roles_of(samples: Sequence[Sample]) -> list[str]:
    """Every process role sampled, the supervisor and the capture first."""
    seen = {role for sample in samples for role in sample.processes}
    first = [role for role in ("supervisor", "capture") if role in seen]
    return first + sorted(seen - set(first))


def write_csv(path: Path, samples: Sequence[Sample], lags: Sequence[LagSample]) -> None:
    """One row per sample: each role's RSS, open files and threads, the lags (the
    per-second end-to-end lag nearest before the sample), WAL retained and log size."""
    roles = roles_of(samples)
    connectors = sorted({name for sample in samples for name in sample.connector_lag})
    header = ["t_s"]
    for role in roles:
        header += [f"{role}_rss_mb", f"{role}_fds", f"{role}_threads"]
    header += ["e2e_redis_lag_s", "e2e_opensearch_lag_s", "capture_lag_s",
               *(f"{name}_lag_events" for name in connectors), "wal_retained_mb", "log_mb"]
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(header)
        index = 0
        for sample in samples:
            while index + 1 < len(lags) and lags[index + 1].t <= sample.t:
                index += 1
            lag = lags[index] if lags and lags[index].t <= sample.t else None
            row: list[object] = [f"{sample.t:.1f}"]
            for role in roles:
                stats = sample.processes.get(role)
                row += ([f"{stats.rss_mb:.1f}", stats.fds, stats.threads] if stats
                        else ["", "", ""])
            row += [_number(lag.redis_s if lag else None),
                    _number(lag.opensearch_s if lag else None),
                    _number(sample.capture_lag_s),
                    *(sample.connector_lag.get(name, "") for name in connectors),
                    _number(sample.wal_retained_mb), f"{sample.log_mb:.1f}"]
            writer.writerow(row)


def _number(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def write_chart(path: Path, samples: Sequence[Sample], lags: Sequence[LagSample],
                faults: Sequence[Fault]) -> None:
    """Four panels over time, the faults shaded: RSS per process, open files and threads,
    end-to-end lag per sink, and WAL retained and log size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    minutes = [s.t / 60 for s in samples]
    figure, (rss, files, lag, disk) = plt.subplots(4, 1, figsize=(11, 13), sharex=True)
    for role in roles_of(samples):
        rss.plot(minutes, [_stat(s, role, "rss_mb") for s in samples], label=role)
        files.plot(minutes, [_stat(s, role, "fds") for s in samples], label=f"{role} files")
        files.plot(minutes, [_stat(s, role, "threads") for s in samples], linestyle="--",
                   label=f"{role} threads")
    lag_minutes = [sample.t / 60 for sample in lags]
    lag.plot(lag_minutes, [_nan(sample.redis_s) for sample in lags], label="Redis")
    lag.plot(lag_minutes, [_nan(sample.opensearch_s) for sample in lags], label="OpenSearch")
    lag.set_yscale("symlog", linthresh=1.0)
    disk.plot(minutes, [_nan(s.wal_retained_mb) for s in samples], label="WAL retained")
    disk.plot(minutes, [s.log_mb for s in samples], label="log on disk")
    titles = ("RSS (MB)", "open files, threads", "end-to-end lag (s)", "MB")
    for axes, title in zip((rss, files, lag, disk), titles, strict=True):
        axes.set_ylabel(title)
        axes.grid(alpha=0.3)
        for fault in faults:
            axes.axvspan(fault.start / 60, max(fault.end, fault.start + 5) / 60,
                         color="red", alpha=0.12)
        axes.legend(loc="upper left", fontsize="small", ncols=2)
    for fault in faults:
        rss.annotate(fault.kind, (fault.start / 60, 1), xycoords=("data", "axes fraction"),
                     rotation=90, va="top", fontsize="x-small")
    disk.set_xlabel("minutes")
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)


def _stat(sample: Sample, role: str, name: str) -> float:
    stats = sample.processes.get(role)
    return float("nan") if stats is None else float(getattr(stats, name))


def _nan(value: float | None) -> float:
    return float("nan") if value is None else value
