"""Optional DDL capture: an event trigger that writes each DDL command into the WAL.

``install`` creates a ``ddl_command_end`` event trigger whose function emits a
*transactional* logical decoding message (``pg_logical_emit_message(true,
'distributary.ddl', …)``) holding the command text and what it touched. The capture
routes messages with that prefix to ``<prefix>._ddl``, in commit order with the
transaction's row changes: a DDL that is rolled back leaves no trace, and a reader sees
the ``ALTER TABLE`` just before the events of the new schema version.

The message content is JSON: ``{"event": "ddl_command_end", "tag": "ALTER TABLE",
"command": "<the statement as sent>", "objects": [{"type": "table", "identity":
"public.orders", "schema": "public"}], "user": "app", "database": "app"}``. ``command``
is ``current_query()``: the whole statement string the client sent (several statements,
if it sent several at once).

``DROP`` reports no objects there, so a second trigger, ``distributary_ddl_drop`` on
``sql_drop``, emits a message naming the dropped tables (``ddl_drops``); the capture
then writes a truncate event on each captured table's topic. ``install`` creates both
(run it again to add the second to a database that has only the first).

The functions are ``SECURITY DEFINER`` (owned by the superuser who installs them), so a
migration run by a role without the REPLICATION attribute can still emit the message;
``search_path`` is pinned. Creating an event trigger needs a superuser.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from cdc.errors import SourceError

from ..findings import Finding
from .ddl_drops import DROP_FUNCTION_BODY, DROP_FUNCTION_NAME, DROP_TRIGGER_NAME

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
    'event', 'ddl_command_end', 'tag', tg_tag, 'command', pg_catalog.current_query(),
    'objects', touched,
    'user', session_user, 'database', pg_catalog.current_database())::text);
END
"""


# (trigger, event, function, its body): every trigger ``install`` creates
_TRIGGERS = ((TRIGGER_NAME, "ddl_command_end", FUNCTION_NAME, _FUNCTION_BODY),
             (DROP_TRIGGER_NAME, "sql_drop", DROP_FUNCTION_NAME, DROP_FUNCTION_BODY))


def function_name(name: str = FUNCTION_NAME) -> sql.Composed:
    """A trigger function's qualified name (the DDL trigger's by default)."""
    return sql.SQL("{}.{}").format(sql.Identifier(FUNCTION_SCHEMA), sql.Identifier(name))


def install_statements() -> list[sql.Composed]:
    """The statements ``install`` runs, in order (also what ``--sql`` prints)."""
    statements: list[sql.Composed] = []
    for trigger, event, function, body_sql in _TRIGGERS:
        body = sql.SQL(body_sql).format(prefix=sql.Literal(DDL_PREFIX))
        statements += [
            sql.SQL("CREATE OR REPLACE FUNCTION {}() RETURNS event_trigger "
                    "LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp "
                    "AS {}").format(function_name(function), sql.Literal(body.as_string(None))),
            sql.SQL("REVOKE ALL ON FUNCTION {}() FROM PUBLIC").format(function_name(function)),
            sql.SQL("DROP EVENT TRIGGER IF EXISTS {}").format(sql.Identifier(trigger)),
            sql.SQL("CREATE EVENT TRIGGER {} ON {} EXECUTE FUNCTION {}()").format(
                sql.Identifier(trigger), sql.SQL(event), function_name(function)),
        ]
    return statements


def uninstall_statements() -> list[sql.Composed]:
    """The statements ``uninstall`` runs, in order."""
    statements: list[sql.Composed] = []
    for trigger, _, function, _ in _TRIGGERS:
        statements += [
            sql.SQL("DROP EVENT TRIGGER IF EXISTS {}").format(sql.Identifier(trigger)),
            sql.SQL("DROP FUNCTION IF EXISTS {}()").format(function_name(function)),
        ]
    return statements


def install(conn: psycopg.Connection[Any]) -> None:
    """Create (or replace) the event triggers and their functions, in one transaction."""
    _run(conn, install_statements(), "install the DDL event trigger")


def uninstall(conn: psycopg.Connection[Any]) -> None:
    """Drop the event triggers and their functions (nothing happens if they are absent)."""
    _run(conn, uninstall_statements(), "remove the DDL event trigger")


@dataclass(frozen=True, slots=True)
class TriggerState:
    """The installed trigger: ``enabled`` is pg_event_trigger.evtenabled (``O``: on,
    ``D``: disabled, ``R``/``A``: replica/always)."""

    enabled: str
    function: str
    event: str


def trigger_state(conn: psycopg.Connection[Any],
                  name: str = TRIGGER_NAME) -> TriggerState | None:
    """An event trigger (the DDL one by default) as the catalog has it, or None when it
    is not installed."""
    row = conn.execute(
        "SELECT evtenabled, evtfoid::regprocedure::text, evtevent FROM pg_event_trigger "
        "WHERE evtname = %s", (name,)).fetchone()
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
    """``cdc doctor``: is the optional DDL capture installed (both triggers), and enabled?"""
    state = trigger_state(conn)
    drop_state = trigger_state(conn, DROP_TRIGGER_NAME)
    install_again = "cdc ddl install -c pipeline.yaml  # needs a superuser"
    if state is None and drop_state is None:
        return [Finding("ok", "ddl capture", f"event trigger {TRIGGER_NAME} not installed "
                        "(optional: DDL text is not recorded on <prefix>._ddl, and a "
                        "dropped table keeps its rows downstream)", install_again)]
    return [_trigger_finding(TRIGGER_NAME, state, f"DDL goes to <prefix>._ddl (message "
                             f"prefix {DDL_PREFIX})", install_again),
            _trigger_finding(DROP_TRIGGER_NAME, drop_state, "a dropped table gets a "
                             "truncate event on its topic", install_again)]


def _trigger_finding(name: str, state: TriggerState | None, effect: str,
                     install_again: str) -> Finding:
    if state is None:
        return Finding("warn", "ddl capture", f"event trigger {name} is missing (installed "
                       "by an older version, or dropped by hand)", install_again)
    detail = f"event trigger {name} on {state.event} runs {state.function}"
    if state.enabled == "D":
        return Finding("warn", "ddl capture", detail + ", but it is disabled",
                       f"ALTER EVENT TRIGGER {name} ENABLE;")
    return Finding("ok", "ddl capture", f"{detail}; {effect}")
