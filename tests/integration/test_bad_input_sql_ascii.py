"""A database in SQL_ASCII holding bytes that are not UTF-8: the capture refuses it at
start-up with a clear error naming the field and the fix — no traceback, no slot left
behind, no endless reconnect loop."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

pytestmark = pytest.mark.integration


@pytest.fixture
def sql_ascii_database(postgres_dsn: str, unique_name: str) -> Iterator[str]:
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} ENCODING 'SQL_ASCII' LC_COLLATE 'C' "
                             "LC_CTYPE 'C' TEMPLATE template0").format(
                                 sql.Identifier(unique_name)))
    yield postgres_dsn.rsplit("/", 1)[0] + f"/{unique_name}"
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                     "WHERE slot_name = %s AND NOT active", (unique_name,))
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
            sql.Identifier(unique_name)))


def test_capture_refuses_a_sql_ascii_database_with_the_fix(
        sql_ascii_database: str, unique_name: str, tmp_path: Path, postgres_dsn: str) -> None:
    with psycopg.connect(sql_ascii_database, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        conn.execute("INSERT INTO t VALUES (1, E'caf\\xe9 \\xff')")
        stored = conn.execute("SELECT v::bytea FROM t").fetchone()
    assert stored is not None and bytes(stored[0]) == b"caf\xe9 \xff"  # really not UTF-8
    config = tmp_path / "pipeline.yaml"
    config.write_text(f"""
source:
  dsn: {sql_ascii_database}
  slot: {unique_name}
  publication: {unique_name}
log:
  backend: file
  path: {tmp_path / 'log'}
""")
    done = subprocess.run([sys.executable, "-m", "cdc.cli", "capture", "-c", str(config)],
                          capture_output=True, text=True, timeout=60, check=False)
    output = done.stdout + done.stderr
    assert done.returncode != 0, output
    assert "source.dsn" in output and f"database '{unique_name}' has encoding SQL_ASCII" \
        in output, output
    assert "ENCODING 'UTF8'" in output  # the fix
    assert "Traceback" not in output, output
    with psycopg.connect(postgres_dsn) as conn:
        slots = conn.execute("SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s",
                             (unique_name,)).fetchone()
    assert slots == (0,), "nothing was created before the refusal"
