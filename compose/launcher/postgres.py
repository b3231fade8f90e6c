"""PostgreSQL from the machine's packages, as a throwaway cluster for logical replication."""

from __future__ import annotations

import os
import pwd
import shutil
from pathlib import Path

import psycopg
from psycopg import sql

from .base import LOOPBACK, LocalServer, ServerError, free_port, run_checked, wait_until

_SERVER_USER = "postgres"


def postgres_bin_dir() -> Path:
    """Directory holding ``initdb``/``pg_ctl``/``postgres``: ``DISTRIBUTARY_PG_BIN`` or the
    newest ``/usr/lib/postgresql/<major>/bin``."""
    override = os.environ.get("DISTRIBUTARY_PG_BIN")
    if override:
        return Path(override)
    root = Path("/usr/lib/postgresql")
    majors = sorted((p for p in root.glob("*/bin") if (p / "initdb").exists()),
                    key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0)
    if majors:
        return majors[-1]
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    raise ServerError("PostgreSQL server binaries not found: install the Debian package "
                      "'postgresql' (make setup does) or set DISTRIBUTARY_PG_BIN")


class PostgresServer(LocalServer):
    """A PostgreSQL cluster with ``wal_level=logical`` on a free loopback port.

    Run as root, the cluster belongs to (and the server runs as) the ``postgres`` user.
    ``durable=False`` turns fsync off: right for tests, wrong for benchmarks.
    """

    name = "postgres"

    def __init__(self, *, durable: bool = False, settings: dict[str, str] | None = None) -> None:
        super().__init__()
        self.port = free_port()
        self.durable = durable
        self.extra_settings = settings or {}
        self.bin = postgres_bin_dir()
        self._user = _SERVER_USER if os.geteuid() == 0 else None

    @property
    def datadir(self) -> Path:
        return self.workdir / "data"

    def dsn(self, dbname: str = "postgres") -> str:
        """A libpq URL for a superuser connection to ``dbname``."""
        return f"postgresql://postgres@{LOOPBACK}:{self.port}/{dbname}"

    def _start(self) -> None:
        if self._user is not None:
            entry = pwd.getpwnam(self._user)
            os.chown(self.workdir, entry.pw_uid, entry.pw_gid)
        run_checked([str(self.bin / "initdb"), "-D", str(self.datadir), "-U", "postgres",
                     "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync"],
                    what="initdb", user=self._user)
        self._write_settings()
        self._spawn([str(self.bin / "postgres"), "-D", str(self.datadir)], user=self._user)
        wait_until(self._accepts_connections, timeout=60, what="postgres", alive=self._alive)

    def _write_settings(self) -> None:
        settings = {
            "listen_addresses": f"'{LOOPBACK}'",
            "port": str(self.port),
            "unix_socket_directories": f"'{self.workdir}'",
            "wal_level": "logical",
            "max_replication_slots": "32",
            "max_wal_senders": "32",
            "max_connections": "200",
            "shared_buffers": "128MB",
            "logging_collector": "off",
            "fsync": "on" if self.durable else "off",
            # commits reach the WAL sender at once (off would delay logical decoding by up
            # to wal_writer_delay); with fsync off this costs nothing in tests
            "synchronous_commit": "on",
            "full_page_writes": "on" if self.durable else "off",
        }
        settings.update(self.extra_settings)
        conf = self.datadir / "postgresql.conf"
        with conf.open("a") as out:
            out.write("\n# distributary launcher\n")
            for key, value in settings.items():
                out.write(f"{key} = {value}\n")
        hba = self.datadir / "pg_hba.conf"
        hba.write_text(
            "local all all trust\nlocal replication all trust\n"
            f"host all all {LOOPBACK}/32 trust\nhost replication all {LOOPBACK}/32 trust\n"
        )

    def _accepts_connections(self) -> bool:
        try:
            with psycopg.connect(self.dsn(), connect_timeout=2) as conn:
                conn.execute("SELECT 1")
        except psycopg.OperationalError:
            return False
        return True

    def _stop_gracefully(self) -> None:
        run_checked([str(self.bin / "pg_ctl"), "-D", str(self.datadir), "-m", "fast", "-w",
                     "-t", "30", "stop"], what="pg_ctl stop", user=self._user, timeout=60)

    def restart(self, mode: str = "fast") -> None:
        """Stop the server (``fast`` or ``immediate``) and start it again on the same port."""
        run_checked([str(self.bin / "pg_ctl"), "-D", str(self.datadir), "-m", mode, "-w",
                     "stop"], what="pg_ctl stop", user=self._user, timeout=60)
        for proc in self._procs:
            proc.wait(timeout=30)
        self._procs.clear()
        self._spawn([str(self.bin / "postgres"), "-D", str(self.datadir)], user=self._user)
        wait_until(self._accepts_connections, timeout=60, what="postgres", alive=self._alive)

    def create_database(self, name: str) -> str:
        """Create database ``name`` and return its DSN."""
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.dsn(name)
