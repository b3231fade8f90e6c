"""Catalog reads that outlast a concurrent ``DROP``, ``ALTER`` or ``CREATE``.

A catalog query can fail while a user's migration runs: PostgreSQL finds a table in the
catalog, then opens it after a ``DROP TABLE`` committed (``could not open relation with
OID …``, raised by ``pg_publication_tables`` on PostgreSQL 15+), looks up a row that a
concurrent DDL just removed (``cache lookup failed for relation …``), updates a catalog
row that another session updated (``tuple concurrently updated``), or names a table that
is gone by the time the statement runs (``ALTER PUBLICATION … ADD TABLE``). None of these
says anything is wrong with the source: the next statement sees the catalog after the
DDL. ``outlast_ddl`` asks again with a short backoff; after ``budget_s`` of failures it
raises ``CatalogRaceError`` (a ``SourceError``), which ends the session — the capture
reconnects — never the process.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

import psycopg
from psycopg import errors

from cdc.backoff import ExponentialBackoff
from cdc.errors import SourceError, TransientError

log = logging.getLogger(__name__)

T = TypeVar("T")

# PostgreSQL's internal errors (XX000) that mean "the catalog changed under this query"
_RACE_MESSAGES = (
    "could not open relation with oid",
    "cache lookup failed for",
    "tuple concurrently updated",
    "tuple concurrently deleted",
    "could not find tuple for",
)
# SQLSTATEs of a name or object that went away, or of a lock-order clash with the DDL
_RACE_ERRORS: tuple[type[psycopg.Error], ...] = (
    errors.UndefinedTable,  # 42P01
    errors.UndefinedObject,  # 42704
    errors.DeadlockDetected,  # 40P01
    errors.SerializationFailure,  # 40001
)
BUDGET_S = 30.0
FIRST_DELAY_S = 0.01
MAX_DELAY_S = 0.5
_BACKOFF = ExponentialBackoff(FIRST_DELAY_S, MAX_DELAY_S)


class CatalogRaceError(SourceError, TransientError):
    """A catalog read kept failing against concurrent DDL for its whole budget."""


def raced_ddl(exc: BaseException) -> bool:
    """Whether ``exc`` is a catalog query losing a race with concurrent DDL (the same
    query, asked again, sees the catalog after it)."""
    if isinstance(exc, _RACE_ERRORS):
        return True
    if isinstance(exc, errors.InternalError_):
        primary = (exc.diag.message_primary or str(exc)).lower()
        return primary.startswith(_RACE_MESSAGES)
    return False


def outlast_ddl(read: Callable[[], T], *, what: str, budget_s: float = BUDGET_S,
                sleep: Callable[[float], None] = time.sleep) -> T:
    """``read()``, asked again while it fails by racing DDL (``raced_ddl``), for up to
    ``budget_s``. ``read`` must run on an autocommit connection (or start and end its own
    transaction): a failed statement then leaves nothing to roll back. ``what`` names the
    read in the log line and the error."""
    deadline = time.monotonic() + budget_s
    attempts = 0
    while True:
        try:
            return read()
        except psycopg.Error as exc:
            if not raced_ddl(exc):
                raise
            attempts += 1
            delay = _BACKOFF.delay(attempts)
            reason = f"{type(exc).__name__}: {(exc.diag.message_primary or str(exc)).strip()}"
            if time.monotonic() + delay > deadline:
                raise CatalogRaceError(
                    f"{what} kept failing against concurrent DDL for {budget_s:g} s "
                    f"({attempts} attempts; last: {reason}); the capture reconnects and "
                    "reads it again") from exc
            log.debug("%s raced concurrent DDL (%s); asking again in %.2f s", what, reason,
                      delay)
            sleep(delay)
