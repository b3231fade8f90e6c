"""Start-up checks of the source database, with messages naming the fix.

``refuse_sql_ascii``: the capture refuses a database whose encoding is ``SQL_ASCII``.

Such a database stores whatever bytes a client sent. The capture reads UTF-8
(``client_encoding=UTF8`` on the replication and snapshot connections), and
PostgreSQL checks every value it converts: the first row holding bytes that are not
UTF-8 would stop the replication stream (``invalid byte sequence for encoding "UTF8"``)
again after every reconnect. So the capture stops at start-up and says what to do,
before creating a slot or reading a row.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict

from cdc.config.conninfo import dsn_secrets
from cdc.config.secrets import Redactor
from cdc.config.source import SourceConfig
from cdc.errors import ConfigError, ConfigProblem


def refuse_sql_ascii(conn: psycopg.Connection[Any]) -> None:
    """Raise ConfigError (on ``source.dsn``) when the connected database is SQL_ASCII."""
    if conn.info.parameter_status("server_encoding") != "SQL_ASCII":
        return
    database = conn.info.dbname
    raise ConfigError([ConfigProblem("source.dsn", (
        f"database {database!r} has encoding SQL_ASCII, so its text may hold bytes that are "
        "not UTF-8, which the capture cannot read (PostgreSQL stops the stream at the first "
        "such value). Fix: move the data into a UTF8 database (CREATE DATABASE … ENCODING "
        "'UTF8' TEMPLATE template0; pg_dump --encoding=<the encoding the bytes really are, "
        "like LATIN1> | psql) and point source.dsn at it"))])


def source_address(dsn: str) -> str:
    """``host:port/dbname`` of ``dsn``, without user or password (for messages)."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        return "the configured server"
    host = parts.get("host") or parts.get("hostaddr") or "localhost"
    return f"{host}:{parts.get('port') or 5432}/{parts.get('dbname') or ''}"


def without_secrets(text: str, source: SourceConfig) -> str:
    """``text`` (the first lines of a libpq error) with the source's secrets scrubbed, for
    messages shown outside the log (``/healthz``, the command's error line)."""
    redactor = Redactor(dsn_secrets(source.conninfo()))
    text = redactor.scrub(" ".join(text.strip().splitlines()[:3]))
    return "(details withheld: they contain a secret)" if redactor.leaks(text) else text
