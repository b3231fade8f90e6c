"""``CopyDrain`` takes no address and finds psycopg's libpq through the dynamic loader: a
wrong object, another libpq version or a closed connection is an error, never a crash."""

from __future__ import annotations

import ctypes.util
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from psycopg import pq

from cdc.capture.snapshot.copy_out import copy_drain
from cdc.native import CORE


@pytest.fixture
def pgconn() -> Iterator[pq.abc.PGconn]:
    """A psycopg ``PGconn`` (its connection attempt to a closed port never completes)."""
    conn = pq.PGconn.connect_start(b"host=127.0.0.1 port=1 connect_timeout=1")
    yield conn
    conn.finish()


def test_psycopgs_libpq_is_found(pgconn: pq.abc.PGconn) -> None:
    assert CORE.CopyDrain(pgconn, pq.version()) is not None
    assert copy_drain(pgconn) is not None


def test_anything_but_psycopgs_pgconn_is_refused() -> None:
    for wrong in (object(), 12345, "pgconn"):
        with pytest.raises(TypeError, match="CopyDrain takes psycopg's PGconn"):
            CORE.CopyDrain(wrong, pq.version())
        assert copy_drain(wrong) is None  # type: ignore[arg-type]


def test_another_libpq_version_is_refused(pgconn: pq.abc.PGconn) -> None:
    with pytest.raises(ValueError, match=rf"libpq\S*\.so\S* is libpq "
                                         rf"{pq.version()}, not psycopg's 1$"):
        CORE.CopyDrain(pgconn, 1)


SEVERAL = """
import ctypes
from psycopg import pq
from cdc.native import CORE
ctypes.CDLL(%r)  # a second libpq, besides psycopg's own
conn = pq.PGconn.connect_start(b"host=127.0.0.1 port=1 connect_timeout=1")
try:
    CORE.CopyDrain(conn, pq.version())
except ValueError as exc:
    print(exc)
"""


@pytest.mark.skipif(pq.__impl__ != "binary" or not ctypes.util.find_library("pq"),
                    reason="needs psycopg's own libpq (psycopg-binary) and a system libpq")
def test_several_loaded_libpq_are_refused_and_named() -> None:
    system = ctypes.util.find_library("pq")
    assert system is not None
    found = subprocess.run([sys.executable, "-c", SEVERAL % system], check=True,
                           capture_output=True, text=True, timeout=60,
                           cwd=Path(__file__).resolve().parents[3]).stdout
    assert found.startswith("2 libpq are loaded in this process, not one: "), found
    assert "psycopg_binary.libs/libpq" in found and system in found, found


def test_a_closed_connection_is_refused(pgconn: pq.abc.PGconn) -> None:
    pgconn.finish()
    with pytest.raises(ValueError, match="the connection is closed"):
        CORE.CopyDrain(pgconn, pq.version())


def test_a_connection_closed_under_a_drain_is_refused(pgconn: pq.abc.PGconn) -> None:
    drain = CORE.CopyDrain(pgconn, pq.version())
    state, chunk = drain.drain(1024)  # not in a COPY: libpq says so, nothing is read
    assert (state, chunk) == (CORE.CopyDrain.FAILED, None)
    pgconn.finish()
    with pytest.raises(ValueError, match="the connection was closed during the COPY"):
        drain.drain(1024)
