"""Optional DDL capture: an event trigger that writes each DDL command into the WAL.

``install`` creates a ``ddl_command_end`` event trigger whose function emits a
*transactional* logical decoding message (``pg_logical_emit_message(true,
'distributary.ddl', …)``) holding the command text and what it touched. The capture
routes messages with that prefix to ``<prefix>._ddl``, in commit order with the
transaction's row changes: a DDL that is rolled back leaves no trace, and a reader sees
the ``ALTER TABLE`` just before the events of the new schema version.

The message content is JSON: ``{"tag": "ALTER TABLE", "command": "<the statement as
sent>", "objects": [{"type": "table", "identity": "public.orders", "schema": "public"}],
"user": "app", "database": "app"}``. ``command`` is ``current_query()``: the whole
statement string the client sent (several statements, if it sent several at once).

The function is ``SECURITY DEFINER`` (owned by the superuser who installs it), so a
migration run by a role without the REPLICATION attribute can still emit the message;
``search_path`` is pinned. Creating an event trigger needs a superuser.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from cdc.errors import SourceError

from .findings import Finding

DDL_PREFIX = "distributary.ddl"
TRIGGER_NAME = "distributary_ddl"
FUNCTION_SCHEMA = "public"
FUNCTION_NAME = "distributary_emit_ddl"

_FUNCTION_BODY = """
DECLARE
  touched json;
BEGIN
  SELECT coalesce(json_agg(json_build_object('type', object_type, 'identity',
                                             object_identity, 'schema', schema_name)),
                  '[]'::json)
    INTO touched FROM pg_catalog.pg_event_trigger_ddl_commands();
  PERFORM pg_catalog.pg_logical_emit_message(true, {prefix}, json_build_object(
    'tag', tg_tag, 'command', pg_catalog.current_query(), 'objects', touched,
    'user', session_user, 'database', pg_catalog.current_database())::text);
END
"""


def function_name() -> sql.Composed:
    """The trigger function's qualified name."""
    return sql.SQL("{}.{}").format(sql.Identifier(FUNCTION_SCHEMA), sql.Identifier(FUNCTION_NAME))


def install_statements() -> list[sql.Composed]:
    """The statements ``install`` runs, in order (also what ``--sql`` prints)."""
    body = sql.SQL(_FUNCTION_BODY).format(prefix=sql.Literal(DDL_PREFIX))
    return [
        sql.SQL("CREATE OR REPLACE FUNCTION {}() RETURNS event_trigger LANGUAGE plpgsql "
                "SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS {}").format(
            function_name(), sql.Literal(body.as_string(None))),
        sql.SQL("REVOKE ALL ON FUNCTION {}() FROM PUBLIC").format(function_name()),
        sql.SQL("DROP EVENT TRIGGER IF EXISTS {}").format(sql.Identifier(TRIGGER_NAME)),
        sql.SQL("CREATE EVENT TRIGGER {} ON ddl_command_end EXECUTE FUNCTION {}()").format(
            sql.Identifier(TRIGGER_NAME), function_name()),
    ]


def uninstall_statements() -> list[sql.Composed]:
    """The statements ``uninstall`` runs, in order."""
    return [
        sql.SQL("DROP EVENT TRIGGER IF EXISTS {}").format(sql.Identifier(TRIGGER_NAME)),
        sql.SQL("DROP FUNCTION IF EXISTS {}()").format(function_name()),
    ]


def install(conn: psycopg.Connection[Any]) -> None:
    """Create (or replace) the event trigger and its function, in one transaction."""
    _run(conn, install_statements(), "install the DDL event trigger")


def uninstall(conn: psycopg.Connection[Any]) -> None:
    """Drop the event trigger and its function (nothing happens if they are absent)."""
    _run(conn, uninstall_statements(), "remove the DDL event trigger")


@dataclass(frozen=True, slots=True)
class TriggerState:
    """The installed trigger: ``enabled`` is pg_event_trigger.evtenabled (``O``: on,
    ``D``: disabled, ``R``/``A``: replica/always)."""

    enabled: str
    function: str
    event: str


def trigger_state(conn: psycopg.Connection[Any]) -> TriggerState | None:
    """The DDL trigger as the catalog has it, or None when it is not installed."""
    row = conn.execute(
        "SELECT evtenabled, evtfoid::regprocedure::text, evtevent FROM pg_event_trigger "
        "WHERE evtname = %s", (TRIGGER_NAME,)).fetchone()
    if row is None:
        return None
    return TriggerState(str(row[0]), str(row[1]), str(row[2]))


def _run(conn: psycopg.Connection[Any], statements: list[sql.Composed], what: str) -> None:
    try:
        with conn.transaction():
            for statement in statements:
                conn.execute(statement)
    except psycopg.errors.InsufficientPrivilege as exc:
        raise SourceError(
            f"cannot {what}: event triggers need a superuser; run the command with a "
            "superuser's DSN, or have one run the SQL printed by `cdc ddl install --sql`"
        ) from exc


def ddl_trigger_findings(conn: psycopg.Connection[Any]) -> list[Finding]:
    """``cdc doctor``: is the optional DDL capture installed, and enabled?"""
    state = trigger_state(conn)
    if state is None:
        return [Finding("ok", "ddl capture", f"event trigger {TRIGGER_NAME} not installed "
                        "(optional: DDL text is not recorded on <prefix>._ddl)",
                        "cdc ddl install -c pipeline.yaml  # needs a superuser")]
    detail = f"event trigger {TRIGGER_NAME} on {state.event} runs {state.function}"
    if state.enabled == "D":
        return [Finding("warn", "ddl capture", detail + ", but it is disabled",
                        f"ALTER EVENT TRIGGER {TRIGGER_NAME} ENABLE;")]
    return [Finding("ok", "ddl capture", detail + f"; DDL goes to <prefix>._ddl "
                    f"(message prefix {DDL_PREFIX})")]
