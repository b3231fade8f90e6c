"""A physical streaming standby of a launched ``PostgresServer``, for failover tests.

The standby's data directory is a copy of the primary's taken between
``pg_backup_start``/``pg_backup_stop`` (the Maven builds have no ``pg_basebackup``); it
streams from the primary through a physical slot, with ``hot_standby_feedback`` on (and,
on PostgreSQL 17+, ``sync_replication_slots``, so the primary's failover slots are
synchronised to it; the setting does not exist before 17).
"""

from __future__ import annotations

import os
import pwd
import shutil
from pathlib import Path

import psycopg

from .base import LOOPBACK, run_checked, wait_until
from .postgres import PostgresServer

__all__ = ["StandbyServer"]

SYNC_SLOTS_MIN_VERSION = 170000  # sync_replication_slots: PostgreSQL 17
_NOT_COPIED = {"postmaster.pid", "postmaster.opts", "backup_label", "tablespace_map"}
_EMPTIED = {"pg_replslot", "pg_wal", "pg_stat_tmp"}  # emptied in the copy


class StandbyServer(PostgresServer):
    """A standby of ``primary`` reading through physical slot ``slot`` (created here);
    ``dbname`` goes into ``primary_conninfo`` (slot synchronisation needs one). ``settings``
    override the standby defaults (``hot_standby_feedback = off`` for a doctor test)."""

    name = "postgres-standby"

    def __init__(self, primary: PostgresServer, *, slot: str = "standby",
                 dbname: str = "postgres", settings: dict[str, str] | None = None) -> None:
        super().__init__(settings=settings)
        self.bin = primary.bin
        self.primary = primary
        self.slot = slot
        self.dbname = dbname

    def _start(self) -> None:
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            os.chown(self.workdir, entry.pw_uid, entry.pw_gid)
        with psycopg.connect(self.primary.dsn(), autocommit=True) as conn:
            version = conn.info.server_version
            conn.execute("SELECT pg_create_physical_replication_slot(%s, true)", (self.slot,))
            conn.execute("SELECT pg_backup_start('standby', true)")
            _copy_datadir(self.primary.datadir, self.datadir)
            row = conn.execute("SELECT labelfile FROM pg_backup_stop(true)").fetchone()
        assert row is not None
        (self.datadir / "backup_label").write_text(row[0])
        self._write_settings()
        conninfo = (f"host={LOOPBACK} port={self.primary.port} user=postgres "
                    f"dbname={self.dbname} application_name={self.slot}")
        standby = {"primary_conninfo": f"'{conninfo}'", "primary_slot_name": f"'{self.slot}'",
                   "hot_standby": "on", "hot_standby_feedback": "on"}
        if version >= SYNC_SLOTS_MIN_VERSION:
            standby["sync_replication_slots"] = "on"
        with (self.datadir / "postgresql.conf").open("a") as out:
            for key, value in standby.items():  # ``settings`` given win (written before)
                if key not in self.extra_settings:
                    out.write(f"{key} = {value}\n")
        (self.datadir / "standby.signal").touch()
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            for path in [self.datadir, *self.datadir.rglob("*")]:
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self.datadir.chmod(0o700)
        self._spawn([str(self.bin / "postgres"), "-D", str(self.datadir)], user=self._user)
        wait_until(self._accepts_connections, timeout=60, what="postgres standby",
                   alive=self._alive)

    def promote(self) -> None:
        """``pg_ctl promote``: end recovery, the standby becomes a primary."""
        run_checked([str(self.bin / "pg_ctl"), "-D", str(self.datadir), "-w", "promote"],
                    what="pg_ctl promote", user=self._user, timeout=60)


def _copy_datadir(source: Path, target: Path) -> None:
    """Copy a running server's data directory, skipping what a base backup leaves out;
    files that vanish while copying (temporary ones) are skipped."""
    for directory, subdirs, files in os.walk(source):
        relative = Path(directory).relative_to(source)
        (target / relative).mkdir(parents=True, exist_ok=True)
        if relative.parts and relative.parts[0] in _EMPTIED:
            subdirs[:] = [d for d in subdirs if d in ("archive_status", "summaries")]
            continue
        for name in files:
            if relative == Path(".") and name in _NOT_COPIED:
                continue
            try:
                shutil.copy2(Path(directory) / name, target / relative / name)
            except FileNotFoundError:
                continue
