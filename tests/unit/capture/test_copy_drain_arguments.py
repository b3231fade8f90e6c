"""``CopyDrain`` takes no address: a wrong object, a library path the process has not
loaded, a library that is not libpq or another libpq version is an error, never a crash."""

from __future__ import annotations

import ctypes.util
from collections.abc import Iterator

import pytest
from psycopg import pq

from cdc.capture.snapshot.libpq import _loaded_libpq
from cdc.native import CORE


@pytest.fixture
def pgconn() -> Iterator[pq.abc.PGconn]:
    """A psycopg ``PGconn`` (its connection attempt to a closed port never completes)."""
    conn = pq.PGconn.connect_start(b"host=127.0.0.1 port=1 connect_timeout=1")
    yield conn
    conn.finish()


def test_psycopgs_libpq_is_found() -> None:
    path = _loaded_libpq()
    assert path is not None and "libpq" in path


def test_anything_but_psycopgs_pgconn_is_refused() -> None:
    path = _loaded_libpq()
    assert path is not None
    for wrong in (object(), 12345, "pgconn"):
        with pytest.raises(TypeError, match="CopyDrain takes psycopg's PGconn"):
            CORE.CopyDrain(wrong, path, pq.version())


def test_a_library_path_or_version_that_does_not_fit_is_refused(
        pgconn: pq.abc.PGconn) -> None:
    path = _loaded_libpq()
    assert path is not None
    with pytest.raises(ValueError, match="is not a library this process has loaded"):
        CORE.CopyDrain(pgconn, "/nonexistent/libpq.so.5", pq.version())
    libc = ctypes.util.find_library("c")
    assert libc is not None
    with pytest.raises(ValueError, match="has no PQlibVersion: it is not libpq"):
        CORE.CopyDrain(pgconn, libc, pq.version())
    with pytest.raises(ValueError, match=f"is libpq {pq.version()}, not psycopg's 1"):
        CORE.CopyDrain(pgconn, path, 1)
    assert CORE.CopyDrain(pgconn, path, pq.version()) is not None


def test_a_closed_connection_is_refused(pgconn: pq.abc.PGconn) -> None:
    path = _loaded_libpq()
    assert path is not None
    pgconn.finish()
    with pytest.raises(ValueError, match="the connection is closed"):
        CORE.CopyDrain(pgconn, path, pq.version())


def test_a_connection_closed_under_a_drain_is_refused(pgconn: pq.abc.PGconn) -> None:
    path = _loaded_libpq()
    assert path is not None
    drain = CORE.CopyDrain(pgconn, path, pq.version())
    state, chunk = drain.drain(1024)  # not in a COPY: libpq says so, nothing is read
    assert (state, chunk) == (CORE.CopyDrain.FAILED, None)
    pgconn.finish()
    with pytest.raises(ValueError, match="the connection was closed during the COPY"):
        drain.drain(1024)
