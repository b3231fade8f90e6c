"""``copy_out`` and ``copy_out_between`` against a real PostgreSQL: the COPY's bytes as
psycopg's own ``Copy`` reads them, the queries around it in the same round trip, and
server errors raised as psycopg raises them, the connection left usable."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from connectors.reconcile.copy_out import copy_out, copy_out_between
from connectors.reconcile.source import current_lsn

LSN = b"SELECT pg_current_wal_lsn() - '0/0'::pg_lsn"
COPY = b"COPY (SELECT i, 'row ' || i FROM t ORDER BY i) TO STDOUT"


@pytest.fixture
def conn(fresh_database: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute("CREATE TABLE t AS SELECT i FROM generate_series(1, 20000) AS i")
        yield conn


def _plain_copy(conn: psycopg.Connection[tuple[object, ...]]) -> bytes:
    with conn.cursor() as cursor, cursor.copy(COPY.decode()) as copy:
        return b"".join(bytes(block) for block in copy)


def test_copy_out_reads_what_psycopg_reads(conn: psycopg.Connection[tuple[object, ...]]) -> None:
    expected = _plain_copy(conn)
    assert expected.count(b"\n") == 20000
    assert copy_out(conn, COPY) == expected


def test_copy_out_between_reads_the_positions_around_the_copy(
        conn: psycopg.Connection[tuple[object, ...]]) -> None:
    start = current_lsn(conn)
    conn.execute("INSERT INTO t VALUES (0)")  # moves the WAL past start
    before, data, after = copy_out_between(conn, LSN, COPY, LSN)
    assert before is not None and after is not None
    assert start < int(before) <= int(after) <= current_lsn(conn)
    assert data == _plain_copy(conn)
    assert data.startswith(b"0\trow 0\n")  # the insert before the COPY is seen


def test_copy_out_between_raises_the_server_error_and_leaves_the_connection_usable(
        conn: psycopg.Connection[tuple[object, ...]]) -> None:
    with pytest.raises(psycopg.errors.UndefinedTable):
        copy_out_between(conn, LSN, b"COPY (SELECT * FROM no_such_table) TO STDOUT", LSN)
    with pytest.raises(psycopg.errors.DivisionByZero):
        copy_out_between(conn, b"SELECT 1 / 0", COPY, LSN)
    with pytest.raises(psycopg.OperationalError, match="before COPY"):
        copy_out_between(conn, b"SELECT 1 WHERE false", COPY, LSN)
    assert conn.execute("SELECT count(*) FROM t").fetchone() == (20000,)
    assert copy_out_between(conn, b"SELECT 1", COPY, b"SELECT 2")[::2] == (b"1", b"2")
