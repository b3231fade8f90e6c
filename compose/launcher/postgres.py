"""PostgreSQL from the machine's packages, as a throwaway cluster for logical replication."""

from __future__ import annotations

import os
import pwd
import shutil
from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg import sql

from . import postgres_versions
from .base import LOOPBACK, LocalServer, ServerError, free_port, run_checked, wait_until

_SERVER_USER = "postgres"


def postgres_bin_dir(version: int | None = None) -> Path:
    """Directory holding ``initdb``/``pg_ctl``/``postgres``: of major ``version`` when
    given (the system's when it is that version, else a build from Maven Central, see
    ``postgres_versions``); otherwise ``DISTRIBUTARY_PG_BIN`` or the newest
    ``/usr/lib/postgresql/<major>/bin``."""
    if version is not None:
        system = Path(f"/usr/lib/postgresql/{version}/bin")
        return system if (system / "initdb").exists() else postgres_versions.bin_dir(version)
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


@dataclass(frozen=True, slots=True)
class ServerTls:
    """PEM files for ``ssl = on``: the server's certificate and key (copied into the
    cluster, readable by the server only); with ``ca_file``, the roles in
    ``cert_auth_roles`` log in with a client certificate signed by that CA (CN = role)."""

    cert_file: Path
    key_file: Path
    ca_file: Path | None = None
    cert_auth_roles: tuple[str, ...] = ()


class PostgresServer(LocalServer):
    """A PostgreSQL cluster with ``wal_level=logical`` on a free loopback port.

    Run as root, the cluster belongs to (and the server runs as) the ``postgres`` user.
    ``durable=False`` turns fsync off: right for tests, wrong for benchmarks.
    ``wal_segment_mb`` sets initdb's WAL segment size (1 makes WAL limits testable);
    ``tls`` turns SSL on; ``password_auth`` makes every role but ``postgres`` log in over
    TCP with a SCRAM password (``postgres`` itself stays trusted, for ``dsn()``).
    """

    name = "postgres"

    def __init__(self, *, durable: bool = False, settings: dict[str, str] | None = None,
                 wal_segment_mb: int | None = None, tls: ServerTls | None = None,
                 password_auth: bool = False, version: int | None = None) -> None:
        super().__init__()
        self.port = free_port()
        self.durable = durable
        self.extra_settings = settings or {}
        self.wal_segment_mb = wal_segment_mb
        self.tls = tls
        self.password_auth = password_auth
        self.bin = postgres_bin_dir(version)
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
        segment = [f"--wal-segsize={self.wal_segment_mb}"] if self.wal_segment_mb else []
        run_checked([str(self.bin / "initdb"), "-D", str(self.datadir), "-U", "postgres",
                     "--auth=trust", "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync",
                     *segment], what="initdb", user=self._user)
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
        settings.update(self._tls_settings())
        settings.update(self.extra_settings)
        conf = self.datadir / "postgresql.conf"
        with conf.open("a") as out:
            out.write("\n# distributary launcher\n")
            for key, value in settings.items():
                out.write(f"{key} = {value}\n")
        hba = self.datadir / "pg_hba.conf"
        others = "scram-sha-256" if self.password_auth else "trust"
        by_cert = "".join(f"hostssl {db} {role} {LOOPBACK}/32 cert\n"
                          for role in (self.tls.cert_auth_roles if self.tls else ())
                          for db in ("all", "replication"))
        hba.write_text(
            by_cert + "local all all trust\nlocal replication all trust\n"
            f"host all postgres {LOOPBACK}/32 trust\n"
            f"host replication postgres {LOOPBACK}/32 trust\n"
            f"host all all {LOOPBACK}/32 {others}\nhost replication all {LOOPBACK}/32 {others}\n"
        )

    def _tls_settings(self) -> dict[str, str]:
        if self.tls is None:
            return {}
        copies = {}
        files = [("server.crt", self.tls.cert_file), ("server.key", self.tls.key_file)]
        if self.tls.ca_file is not None:
            files.append(("root.crt", self.tls.ca_file))
        for name, source in files:
            target = self.datadir / name
            shutil.copyfile(source, target)
            target.chmod(0o600)
            if self._user is not None:
                entry = pwd.getpwnam(self._user)
                os.chown(target, entry.pw_uid, entry.pw_gid)
            copies[name] = target
        settings = {"ssl": "on", "ssl_cert_file": f"'{copies['server.crt']}'",
                    "ssl_key_file": f"'{copies['server.key']}'"}
        if "root.crt" in copies:
            settings["ssl_ca_file"] = f"'{copies['root.crt']}'"
        return settings

    def _accepts_connections(self) -> bool:
        try:
            with psycopg.connect(self.dsn(), connect_timeout=2) as conn:
                conn.execute("SELECT 1")
        except psycopg.OperationalError:
            return False
        return True

    def _stop_gracefully(self) -> None:
        # immediate: the work directory is removed next, so a fast stop's checkpoint (all
        # dirty buffers written and synced: up to 15 s on a slow disk) would be thrown away
        run_checked([str(self.bin / "pg_ctl"), "-D", str(self.datadir), "-m", "immediate",
                     "-w", "-t", "30", "stop"], what="pg_ctl stop", user=self._user,
                    timeout=60)

    def restart(self, mode: str = "fast") -> None:
        """Stop the server (``fast`` or ``immediate``) and start it again on the same port."""
        run_checked([str(self.bin / "pg_ctl"), "-D", str(self.datadir), "-m", mode, "-w",
                     "stop"], what="pg_ctl stop", user=self._user, timeout=60)
        for proc in self._procs:
            proc.wait(timeout=30)
        self._procs.clear()
        self._spawn([str(self.bin / "postgres"), "-D", str(self.datadir)], user=self._user)
        wait_until(self._accepts_connections, timeout=60, what="postgres", alive=self._alive)

    def crash(self) -> None:
        """``pg_ctl stop -m immediate`` and leave it stopped (a failover's lost primary)."""
        run_checked([str(self.bin / "pg_ctl"), "-D", str(self.datadir), "-m", "immediate",
                     "-w", "stop"], what="pg_ctl stop", user=self._user, timeout=60)
        for proc in self._procs:
            proc.wait(timeout=30)
        self._procs.clear()

    def create_database(self, name: str) -> str:
        """Create database ``name`` and return its DSN."""
        with psycopg.connect(self.dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.dsn(name)
