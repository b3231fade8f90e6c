"""Capture throughput against pg_recvlogical on the same changes (``make bench-capture``).

Starts its own PostgreSQL, creates two slots at the same LSN, runs the workloads of
docs/performance.md ("bulk": one transaction inserting 1,000,000 rows then one updating
500,000; "oltp": 200,000 transactions of one update and one insert), then consumes the
same changes with ``pg_recvlogical`` (pgoutput, same publication and options) and with
``cdc capture`` into a durable file log. ``BENCH_SCALE`` (default 1) scales the row counts.
Prints ``name=value`` lines, the headline last.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

from cdc.log.file import FileLog
from compose.launcher import PostgresServer

SCALE = float(os.environ.get("BENCH_SCALE", "1"))
BULK_ROWS = int(1_000_000 * SCALE)
OLTP_TRANSACTIONS = int(200_000 * SCALE)


def create_schema(dsn: str) -> None:
    """The ``orders`` table and a publication for it."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE orders (id bigserial PRIMARY KEY, customer_id int,"
                     " status text, amount numeric(12,2), note text, created_at timestamptz)")
        conn.execute("CREATE PUBLICATION bench FOR TABLE orders")
        conn.execute("INSERT INTO orders (customer_id, status, amount, note, created_at)"
                     " SELECT g, 'new', 1.00, 'seed', now() FROM generate_series(1, 1000) g")


def create_slots(dsn: str, names: list[str]) -> None:
    """Slots created back to back before the workload: both see the same changes."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        for name in names:
            conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (name,))


def bulk_workload(dsn: str) -> int:
    """One big insert, one big update; returns the number of change events."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("INSERT INTO orders (customer_id, status, amount, note, created_at)"
                     " SELECT mod(g, 1000), 'new', mod(g, 10000) / 100.0, 'note ' || g, now()"
                     " FROM generate_series(1, %s) g", (BULK_ROWS,))
        conn.execute("UPDATE orders SET status = 'paid' WHERE id > 1000 AND id <= %s",
                     (1000 + BULK_ROWS // 2,))
    return BULK_ROWS + BULK_ROWS // 2


def oltp_workload(server: PostgresServer, dsn: str) -> int:
    """Many small transactions through pgbench; returns the number of change events."""
    script = Path(tempfile.mkstemp(suffix=".sql")[1])
    script.write_text(
        "\\set id random(1, 1000)\n"
        "BEGIN;\n"
        "UPDATE orders SET status = 'seen' WHERE id = :id;\n"
        "INSERT INTO orders (customer_id, status, amount, note, created_at)"
        " VALUES (:id, 'new', 1.50, 'oltp', now());\n"
        "COMMIT;\n")
    os.chmod(script, 0o644)
    per_client = OLTP_TRANSACTIONS // 2
    subprocess.run([str(server.bin / "pgbench"), "-n", "-c", "2", "-j", "2", "-t",
                    str(per_client), "-f", str(script), dsn], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    script.unlink()
    return per_client * 2 * 2


def end_lsn(dsn: str) -> str:
    """The current WAL position, then one more WAL record so readers see past it."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        conn.execute("SELECT pg_logical_emit_message(false, 'bench-end', 'x')")
    assert row is not None
    return str(row[0])


def run_pg_recvlogical(server: PostgresServer, dsn: str, slot: str, endpos: str,
                       out: Path) -> float:
    """Seconds pg_recvlogical takes to write the slot's changes up to ``endpos``."""
    started = time.perf_counter()
    subprocess.run([str(server.bin / "pg_recvlogical"), "-d", dsn, "--slot", slot, "--start",
                    "-o", "proto_version=2", "-o", "publication_names=bench",
                    "-o", "streaming=on", "--endpos", endpos, "--no-loop", "-f", str(out)],
                   check=True)
    return time.perf_counter() - started


def run_capture(dsn: str, slot: str, workdir: Path, events: int
                ) -> tuple[float, float, float]:
    """Seconds ``cdc capture`` takes to make ``events`` records durable, its peak RSS and
    the CPU seconds it used (user and system: steadier than the wall time on a busy
    machine)."""
    config = workdir / f"{slot}.yaml"
    log_dir = workdir / f"log-{slot}"
    config.write_text(f"source:\n  dsn: {dsn}\n  slot: {slot}\n  publication: bench\n"
                      f"  heartbeat_interval: null\nlog:\n  backend: file\n  path: {log_dir}\n"
                      f"  partitions: 3\n  fsync: true\n")
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "cdc.cli", "capture", "-c", str(config)],
                            stderr=subprocess.DEVNULL)
    peak_kb = 0
    try:
        while True:
            peak_kb = max(peak_kb, _hwm_kb(proc.pid))
            if proc.poll() is not None:
                raise RuntimeError(f"cdc capture exited with {proc.returncode}")
            if _logged(log_dir) >= events:
                break
            time.sleep(0.05)
        elapsed = time.perf_counter() - started
        cpu_s = _cpu_s(proc.pid)
    finally:
        peak_kb = max(peak_kb, _hwm_kb(proc.pid))
        proc.terminate()
        proc.wait(timeout=60)
    return elapsed, peak_kb / 1024, cpu_s


def _cpu_s(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _hwm_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except FileNotFoundError:
        pass
    return 0


def _logged(log_dir: Path) -> int:
    if not log_dir.exists():
        return 0
    admin = FileLog(log_dir).admin()
    return sum(i.end_offset for t in admin.topics() if t.endswith(".orders")
               for i in admin.partitions(t))


def measure(workload: str) -> tuple[float, float, float, float]:
    """(pg_recvlogical events/s, capture events/s, capture peak RSS MB, capture CPU µs an
    event) for a workload."""
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-capture-{workload}-"))
    os.chmod(workdir, 0o777)
    with PostgresServer(settings={"max_wal_size": "4GB"}) as server:
        dsn = server.dsn()
        create_schema(dsn)
        create_slots(dsn, ["recv", "cap"])
        events = bulk_workload(dsn) if workload == "bulk" else oltp_workload(server, dsn)
        endpos = end_lsn(dsn)
        recv_s = run_pg_recvlogical(server, dsn, "recv", endpos, workdir / "recv.out")
        cap_s, rss, cpu_s = run_capture(dsn, "cap", workdir, events)
    shutil.rmtree(workdir, ignore_errors=True)
    return events / recv_s, events / cap_s, rss, cpu_s / events * 1e6


def main() -> None:
    """Both workloads; print the figures."""
    recv_oltp, cap_oltp, _, cpu_oltp = measure("oltp")
    print(f"pg_recvlogical_oltp_events_per_s={recv_oltp:.0f}")
    print(f"capture_oltp_events_per_s={cap_oltp:.0f}")
    print(f"capture_oltp_cpu_us_per_event={cpu_oltp:.2f}")
    print(f"capture_oltp_ratio_vs_pg_recvlogical={cap_oltp / recv_oltp:.2f}")
    recv_bulk, cap_bulk, rss, cpu_bulk = measure("bulk")
    print(f"pg_recvlogical_bulk_events_per_s={recv_bulk:.0f}")
    print(f"capture_bulk_events_per_s={cap_bulk:.0f}")
    print(f"capture_bulk_cpu_us_per_event={cpu_bulk:.2f}")
    print(f"capture_bulk_peak_rss_mb={rss:.0f}")
    print(f"capture_bulk_ratio_vs_pg_recvlogical={cap_bulk / recv_bulk:.2f}")


if __name__ == "__main__":
    main()
