"""The capture runs as a role with only LOGIN REPLICATION, SELECT on the published table and
a publication an admin created; ``cdc doctor`` names each missing privilege with the
statement that fixes it — and running that statement as an admin does fix it."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
from psycopg import sql

from cdc.log import StartAt
from cdc.log.file import FileLog
from compose.launcher import PostgresServer

from .cli import cdc, doctor_findings

PASSWORD = "least-Priv-5521"
ROLE = "cdc_reader"


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    with PostgresServer(password_auth=True) as pg:
        with psycopg.connect(pg.dsn(), autocommit=True) as conn:
            conn.execute("CREATE DATABASE shop")
            conn.execute(sql.SQL("CREATE ROLE {} LOGIN REPLICATION PASSWORD {}").format(
                sql.Identifier(ROLE), sql.Literal(PASSWORD)))
        with psycopg.connect(pg.dsn("shop"), autocommit=True) as conn:
            conn.execute("CREATE TABLE orders (id int PRIMARY KEY, status text)")
            conn.execute("CREATE TABLE payroll (id int PRIMARY KEY, salary int)")
            conn.execute("INSERT INTO orders VALUES (1, 'new'), (2, 'paid')")
            conn.execute(sql.SQL("GRANT SELECT ON orders TO {}").format(sql.Identifier(ROLE)))
            conn.execute("CREATE PUBLICATION shop_pub FOR TABLE orders")
        yield pg


def pipeline(tmp_path: Path, server: PostgresServer, *, publication: str = "shop_pub",
             slot: str = "least") -> Path:
    (tmp_path / "pg-password").write_text(PASSWORD)
    config = tmp_path / f"{slot}-{publication}.yaml"
    config.write_text(
        f"source:\n  dsn: postgresql://{ROLE}@127.0.0.1:{server.port}/shop\n"
        f"  password_file: {tmp_path / 'pg-password'}\n  slot: {slot}\n"
        f"  publication: {publication}\n  tables: [public.orders]\n"
        f"log:\n  backend: file\n  path: {tmp_path / 'log'}\n  partitions: 1\n")
    return config


def admin(server: PostgresServer, statement: str) -> None:
    with psycopg.connect(server.dsn("shop"), autocommit=True) as conn:
        conn.execute(statement.encode())


def order_events(log_dir: Path, slot: str) -> list[tuple[str, int]]:
    log = FileLog(log_dir)
    topic = f"{slot}.public.orders"
    try:
        if topic not in log.admin().topics():
            return []
        consumer = log.consumer(f"check-{time.monotonic_ns()}", topics=[topic],
                                start=StartAt.earliest())
        events: list[dict[str, Any]] = []
        while batch := consumer.poll(1000, timeout=0.3):
            events.extend(orjson.loads(m.value) for m in batch)
        consumer.close()
        return [(e["op"], e["key"]["id"]) for e in events]
    finally:
        log.close()


def test_the_service_runs_with_the_least_privileges(server: PostgresServer,
                                                    tmp_path: Path) -> None:
    config = pipeline(tmp_path, server)
    checked = cdc("doctor", "-c", str(config))
    findings = doctor_findings(checked)
    assert checked.returncode == 0, checked.output
    assert findings["privileges"][0] == "ok" and findings["publication"][0] == "ok", findings
    assert findings["select"][0] == "ok", findings

    proc = subprocess.Popen([sys.executable, "-m", "cdc.cli", "capture", "-c", str(config)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while sorted(order_events(tmp_path / "log", "least")) != [("r", 1), ("r", 2)]:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "no snapshot with the least privileges"
            time.sleep(0.2)
        admin(server, "INSERT INTO orders VALUES (3, 'new'); UPDATE orders SET status = 'x' "
                      "WHERE id = 1")
        while order_events(tmp_path / "log", "least")[-2:] != [("c", 3), ("u", 1)]:
            assert time.monotonic() < deadline, order_events(tmp_path / "log", "least")
            time.sleep(0.2)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "Traceback" not in err


def fix_for(server: PostgresServer, config: Path, check: str, expected_fix: str) -> None:
    """Doctor reports ``check`` as an error with exactly ``expected_fix``; running that
    fix as an admin makes doctor pass again."""
    broken = cdc("doctor", "-c", str(config))
    findings = doctor_findings(broken)
    assert broken.returncode == 1, broken.output
    level, _, fix = findings[check]
    assert level == "error", findings
    assert fix.startswith(expected_fix), fix
    assert [c for c, (lvl, _, _) in findings.items() if lvl == "error"] == [check], findings
    admin(server, fix)
    repaired = cdc("doctor", "-c", str(config))
    assert repaired.returncode == 0, repaired.output


def test_doctor_without_replication(server: PostgresServer, tmp_path: Path) -> None:
    admin(server, "ALTER ROLE cdc_reader NOREPLICATION")
    fix_for(server, pipeline(tmp_path, server), "privileges",
            f'ALTER ROLE "{ROLE}" WITH REPLICATION;')


def test_doctor_without_select(server: PostgresServer, tmp_path: Path) -> None:
    admin(server, "REVOKE SELECT ON orders FROM cdc_reader")
    config = pipeline(tmp_path, server)
    detail = doctor_findings(cdc("doctor", "-c", str(config)))["select public.orders"][1]
    assert detail == f"role {ROLE} lacks SELECT on public.orders (snapshots read it)"
    fix_for(server, config, "select public.orders", f'GRANT SELECT ON "public"."orders" TO '
            f'"{ROLE}";')


def test_doctor_without_publication_or_create(server: PostgresServer, tmp_path: Path) -> None:
    config = pipeline(tmp_path, server, publication="missing_pub", slot="nopub")
    detail = doctor_findings(cdc("doctor", "-c", str(config)))["publication"][1]
    assert detail == (f"missing_pub does not exist and role {ROLE} may not create it (lacks "
                      "CREATE on database shop; does not own public.orders)"), detail
    refused = cdc("capture", "-c", str(config), timeout=60)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr, refused.stderr
    assert "Ask an admin to run: CREATE PUBLICATION \"missing_pub\" FOR TABLE " \
        '"public"."orders"' in refused.stderr, refused.stderr
    fix_for(server, config, "publication", 'CREATE PUBLICATION "missing_pub" FOR TABLE '
            '"public"."orders" WITH (publish_via_partition_root = true);')


def test_doctor_when_the_publication_lacks_a_table(server: PostgresServer,
                                                   tmp_path: Path) -> None:
    admin(server, "CREATE PUBLICATION partial_pub FOR TABLE payroll")
    config = pipeline(tmp_path, server, publication="partial_pub", slot="partial")
    fix_for(server, config, "publication",
            'ALTER PUBLICATION "partial_pub" ADD TABLE "public"."orders";')
