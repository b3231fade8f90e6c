"""The snapshot's COPY drained from libpq by the native core (``copy_chunks_ahead`` with
``copy_out.copy_drain``): the same lines as psycopg's own COPY, errors raised, an abandoned
COPY stopped."""

from __future__ import annotations

import threading

import psycopg
import pytest
from psycopg import sql

from cdc.capture.snapshot.copy import copy_chunks, copy_chunks_ahead
from cdc.capture.snapshot.copy_out import copy_drain

QUERY = sql.SQL("SELECT g, CASE WHEN g % 7 = 0 THEN NULL ELSE "
                "'tab\tnew\nline\\back é ' || repeat('x', g % 300) END, "
                "CASE WHEN g = 1234 THEN repeat('y', 300000) END "
                "FROM generate_series(1, 5000) g")


def test_the_drain_is_used_for_psycopgs_connection(fresh_database: str) -> None:
    with psycopg.connect(fresh_database) as conn:
        assert copy_drain(conn.pgconn) is not None, "psycopg's libpq was not found"


@pytest.mark.parametrize("chunk_bytes", [1, 4_096, 256 << 10])
def test_the_drained_lines_are_psycopgs(fresh_database: str, chunk_bytes: int) -> None:
    with psycopg.connect(fresh_database) as conn:
        expected = b"".join(copy_chunks(conn, QUERY))
        conn.rollback()
        chunks = list(copy_chunks_ahead(conn, QUERY, chunk_bytes))
    assert b"".join(chunks) == expected
    assert expected.count(b"\n") == 5_000
    assert all(chunk.endswith(b"\n") for chunk in chunks), "whole lines only"
    if chunk_bytes == 4_096:
        assert max(map(len, chunks)) >= 300_000, "a row longer than a chunk comes whole"
        assert len(chunks) > 10


def test_an_error_in_the_middle_of_the_copy_is_raised(fresh_database: str) -> None:
    failing = sql.SQL("SELECT 1 / (g - 3000) FROM generate_series(1, 5000) g")
    with (psycopg.connect(fresh_database) as conn,
          pytest.raises(psycopg.errors.DivisionByZero)):
        for _chunk in copy_chunks_ahead(conn, failing, 1_000):
            pass


def test_an_abandoned_copy_stops_its_reader(fresh_database: str) -> None:
    endless = sql.SQL("SELECT g, pg_sleep(0.001) FROM generate_series(1, 10000000) g")
    with psycopg.connect(fresh_database) as conn:
        chunks = copy_chunks_ahead(conn, endless, 64, stop_check_s=0.05)
        assert next(chunks).endswith(b"\n")
        chunks.close()  # the caller stops: the reader thread ends
        assert not [t for t in threading.enumerate() if t.name == "snapshot-copy"]
        conn.close()  # an abandoned COPY leaves the connection unusable
