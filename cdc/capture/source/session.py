"""The session settings the capture pins on every connection it opens.

The codecs read PostgreSQL's text output, and that text depends on session settings a
database, a role or the server may change (``ALTER DATABASE app SET extra_float_digits =
0`` rounds every float). So every connection of the capture — replication, snapshot,
incremental snapshot, catalog, heartbeat — is opened with these settings as startup
options, which win over the database's, the role's and the server's defaults (and over
``options`` in ``source.dsn``: ours come last). On a replication connection they govern
the walsender, whose session formats the values in pgoutput's tuples.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import conninfo

# (setting, value): what the codecs in cdc.capture.codecs read
PINNED_SETTINGS: tuple[tuple[str, str], ...] = (
    ("extra_float_digits", "3"),  # shortest exact float text (PostgreSQL 12+)
    ("DateStyle", "ISO,MDY"),
    ("IntervalStyle", "postgres"),
    ("TimeZone", "UTC"),
    ("bytea_output", "hex"),
)
CLIENT_ENCODING = "UTF8"


def session_options() -> str:
    """The libpq ``options`` value that pins ``PINNED_SETTINGS``."""
    return " ".join(f"-c {name}={value}" for name, value in PINNED_SETTINGS)


def pinned_conninfo(dsn: str, **extra: str) -> str:
    """``dsn`` with the pinned settings and UTF-8 added (``extra``: more keywords, e.g.
    ``replication="database"``); the DSN's own ``options`` are kept before ours."""
    own = conninfo.conninfo_to_dict(dsn).get("options") or ""
    options = f"{own} {session_options()}".strip()
    return conninfo.make_conninfo(dsn, client_encoding=CLIENT_ENCODING, options=options,
                                  **extra)


def connect(dsn: str, *, autocommit: bool = True) -> psycopg.Connection[Any]:
    """A connection of the capture with its pinned session settings."""
    return psycopg.connect(pinned_conninfo(dsn), autocommit=autocommit)
