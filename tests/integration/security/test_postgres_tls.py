"""TLS to PostgreSQL: the capture verifies the server (sslmode=verify-full + sslrootcert),
logs in with a client certificate (sslcert/sslkey), and fails clearly with a wrong CA.

The test makes its own CAs with ``openssl`` and starts its own PostgreSQL with ``ssl=on``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import psycopg
import pytest
from psycopg import sql

from cdc.log import StartAt
from cdc.log.file import FileLog
from compose.launcher import PostgresServer
from compose.launcher.postgres import ServerTls

from .certs import CertificateAuthority
from .cli import cdc, doctor_findings

PASSWORD = "tls-Secret-8842"


@dataclass(frozen=True)
class TlsSetup:
    server: PostgresServer
    trusted: CertificateAuthority
    stranger: CertificateAuthority
    client_cert: Path
    client_key: Path

    def dsn(self, user: str, ca: CertificateAuthority, *, client_cert: bool = False) -> str:
        dsn = (f"host=127.0.0.1 port={self.server.port} dbname=tlsdb user={user} "
               f"sslmode=verify-full sslrootcert={ca.cert}")
        if client_cert:
            dsn += f" sslcert={self.client_cert} sslkey={self.client_key}"
        return dsn


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsSetup]:
    directory = tmp_path_factory.mktemp("pki")
    trusted = CertificateAuthority.create(directory, "trusted-ca")
    stranger = CertificateAuthority.create(directory, "stranger-ca")
    server_cert, server_key = trusted.issue("server", "127.0.0.1", server=True)
    client_cert, client_key = trusted.issue("client", "cdc_cert", server=False)
    server_tls = ServerTls(server_cert, server_key, ca_file=trusted.cert,
                           cert_auth_roles=("cdc_cert",))
    with PostgresServer(tls=server_tls, password_auth=True) as server:
        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE tlsdb")
            conn.execute(sql.SQL("CREATE ROLE cdc_tls LOGIN REPLICATION PASSWORD {}")
                         .format(sql.Literal(PASSWORD)))
            conn.execute("CREATE ROLE cdc_cert LOGIN REPLICATION")
        with psycopg.connect(server.dsn("tlsdb"), autocommit=True) as conn:
            conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
            conn.execute("INSERT INTO t VALUES (1, 'one'), (2, 'two')")
            conn.execute("GRANT SELECT ON t TO cdc_tls, cdc_cert")
            conn.execute("CREATE PUBLICATION tls_pub FOR TABLE t")
        yield TlsSetup(server, trusted, stranger, client_cert, client_key)


def pipeline(tmp_path: Path, dsn: str, slot: str, *, password: bool) -> Path:
    config = tmp_path / "pipeline.yaml"
    secret = ""
    if password:
        (tmp_path / "pg-password").write_text(PASSWORD + "\n")
        secret = f"  password_file: {tmp_path / 'pg-password'}\n"
    config.write_text(f"source:\n  dsn: '{dsn}'\n{secret}  slot: {slot}\n"
                      f"  publication: tls_pub\n  tables: [public.t]\n"
                      f"log:\n  backend: file\n  path: {tmp_path / 'log'}\n  partitions: 1\n")
    return config


def logged_ids(log_dir: Path, topic: str) -> list[int]:
    log = FileLog(log_dir)
    try:
        if topic not in log.admin().topics():
            return []
        consumer = log.consumer(f"check-{time.monotonic_ns()}", topics=[topic],
                                start=StartAt.earliest())
        ids: list[int] = []
        while batch := consumer.poll(1000, timeout=0.3):
            ids.extend(orjson.loads(m.key)["id"] for m in batch)
        consumer.close()
        return ids
    finally:
        log.close()


def capture_over_tls(tls: TlsSetup, config: Path, slot: str, user: str) -> None:
    """``cdc capture`` snapshots and streams over a verified TLS connection."""
    with psycopg.connect(tls.server.dsn("tlsdb"), autocommit=True) as conn:
        conn.execute("DELETE FROM t WHERE id > 2")
    proc = subprocess.Popen([sys.executable, "-m", "cdc.cli", "capture", "-c", str(config)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log_dir = config.parent / "log"
    try:
        deadline = time.monotonic() + 60
        while sorted(logged_ids(log_dir, f"{slot}.public.t")) != [1, 2]:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no snapshot over TLS"
            time.sleep(0.2)
        with psycopg.connect(tls.server.dsn("tlsdb"), autocommit=True) as conn:
            conn.execute("INSERT INTO t VALUES (3, 'three')")
            walsender_ssl = conn.execute(
                "SELECT s.ssl, s.version FROM pg_stat_ssl s JOIN pg_stat_activity a"
                " USING (pid) WHERE a.usename = %s AND a.backend_type = 'walsender'",
                (user,)).fetchall()
        assert walsender_ssl and all(row[0] for row in walsender_ssl), walsender_ssl
        while 3 not in logged_ids(log_dir, f"{slot}.public.t"):
            assert time.monotonic() < deadline, "the insert was not streamed over TLS"
            time.sleep(0.2)
    finally:
        proc.terminate()
        proc.communicate(timeout=60)
    assert proc.returncode == 0


def test_capture_verifies_the_server_and_logs_in_with_a_password(
        tls: TlsSetup, tmp_path: Path) -> None:
    config = pipeline(tmp_path, tls.dsn("cdc_tls", tls.trusted), "tls_pw", password=True)
    findings = doctor_findings(cdc("doctor", "-c", str(config)))
    assert findings["privileges"][0] == "ok", findings
    capture_over_tls(tls, config, "tls_pw", "cdc_tls")


def test_capture_logs_in_with_a_client_certificate(tls: TlsSetup, tmp_path: Path) -> None:
    config = pipeline(tmp_path, tls.dsn("cdc_cert", tls.trusted, client_cert=True),
                      "tls_cert", password=False)
    capture_over_tls(tls, config, "tls_cert", "cdc_cert")
    without = pipeline(tmp_path, tls.dsn("cdc_cert", tls.trusted), "tls_cert", password=False)
    refused = cdc("doctor", "-c", str(without))
    assert refused.returncode == 1
    assert 'certificate authentication failed for user "cdc_cert"' in refused.stderr \
        or "connection requires a valid client certificate" in refused.stderr, refused.stderr


def test_a_wrong_ca_fails_clearly(tls: TlsSetup, tmp_path: Path) -> None:
    config = pipeline(tmp_path, tls.dsn("cdc_tls", tls.stranger), "tls_wrong", password=True)
    doctor = cdc("doctor", "-c", str(config))
    assert doctor.returncode == 1
    assert "cannot check the database" in doctor.stderr
    assert "certificate verify failed" in doctor.stderr, doctor.stderr
    capture = cdc("capture", "-c", str(config), timeout=60)  # stops: no retrying
    assert capture.returncode == 2, capture.stderr
    assert f"source.dsn: PostgreSQL at 127.0.0.1:{tls.server.port}/tlsdb refused the " \
           "connection: the server's certificate did not verify: check sslrootcert" \
        in capture.stderr, capture.stderr
    assert logged_ids(tmp_path / "log", "tls_wrong.public.t") == []
    run = cdc("run", "-c", str(config), timeout=60)  # its capture stops the pipeline
    assert run.returncode == 2 and "check sslrootcert" in run.output, run.output
    for done in (doctor, capture, run):
        assert PASSWORD not in done.output


def test_an_expired_ca_certificate_stops_the_capture(tls: TlsSetup, tmp_path: Path) -> None:
    trusted = tls.dsn("cdc_tls", tls.trusted)
    expired = trusted.replace(f"sslrootcert={tls.trusted.cert}",
                              f"sslrootcert={tls.trusted.expired()}")
    config = pipeline(tmp_path, expired, "tls_expired", password=True)
    capture = cdc("capture", "-c", str(config), timeout=60)  # stops: no retrying
    assert capture.returncode == 2, capture.stderr
    assert f"source.dsn: PostgreSQL at 127.0.0.1:{tls.server.port}/tlsdb refused the " \
           "connection: the server's certificate did not verify: check sslrootcert" \
        in capture.stderr, capture.stderr
    assert PASSWORD not in capture.output


def test_a_refused_password_or_host_name_stops_the_capture(tls: TlsSetup,
                                                           tmp_path: Path) -> None:
    config = pipeline(tmp_path, tls.dsn("cdc_tls", tls.trusted), "tls_refused",
                      password=True)
    (tmp_path / "pg-password").write_text("not-the-password\n")
    refused = cdc("capture", "-c", str(config), timeout=60)
    assert refused.returncode == 2, refused.stderr
    assert "refused the connection: the server refused the password" in refused.stderr
    other_name = pipeline(tmp_path, tls.dsn("cdc_tls", tls.trusted).replace(
        "host=127.0.0.1", "host=db.example hostaddr=127.0.0.1"), "tls_refused", password=True)
    mismatch = cdc("capture", "-c", str(other_name), timeout=60)
    assert mismatch.returncode == 2, mismatch.stderr
    assert "the server's certificate is for another host name" in mismatch.stderr
    assert "not-the-password" not in refused.output + mismatch.output
