"""Dropped tables, as the optional DDL capture records them (``cdc ddl install``).

``ddl_command_end`` reports no objects for ``DROP``, so a second event trigger, on
``sql_drop``, emits one more *transactional* ``distributary.ddl`` message per command
that dropped tables (directly, or through ``DROP SCHEMA … CASCADE``): ``{"event":
"sql_drop", "tag": "DROP TABLE", "command": "<the statement as sent>", "dropped":
[{"schema": "public", "name": "orders", "oid": 16384}], "user": "app", "database":
"app"}``. Temporary tables are left out (they are never published); a command that
dropped no table (``DROP INDEX``, ``ALTER TABLE … DROP COLUMN``) emits nothing here.

The capture reads it with ``dropped_tables`` and writes a truncate event
(``"dropped": true``) on the topic of every dropped table it captured, in the dropping
transaction's place in the log, so every reader drops the table's rows.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import orjson

DROP_EVENT = "sql_drop"
DROP_TRIGGER_NAME = "distributary_ddl_drop"
DROP_FUNCTION_NAME = "distributary_emit_ddl_drop"

# {prefix}: the message prefix, a literal. pg_event_trigger_dropped_objects() names a
# partitioned table "table" too; its partitions come as tables of their own.
DROP_FUNCTION_BODY = """
DECLARE
  dropped json;
BEGIN
  SELECT json_agg(json_build_object('schema', schema_name, 'name', object_name,
                                    'oid', objid::bigint) ORDER BY objid)
    INTO dropped FROM pg_catalog.pg_event_trigger_dropped_objects()
   WHERE object_type = 'table' AND NOT is_temporary;
  IF dropped IS NOT NULL THEN
    PERFORM pg_catalog.pg_logical_emit_message(true, {prefix}, json_build_object(
      'event', 'sql_drop', 'tag', tg_tag, 'command', pg_catalog.current_query(),
      'dropped', dropped, 'user', session_user,
      'database', pg_catalog.current_database())::text);
  END IF;
END
"""

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DroppedTable:
    """One table a ``DROP`` removed: its real names and its relation oid."""

    schema: str
    name: str
    oid: int


def dropped_tables(content: bytes) -> list[DroppedTable]:
    """The tables a DDL message says were dropped ([] for any other DDL message).

    A message that is not what the trigger writes (hand-made, or of another version)
    is logged and yields nothing: it never stops the capture."""
    try:
        message = orjson.loads(content)
    except orjson.JSONDecodeError:
        return []
    if not isinstance(message, dict) or message.get("event") != DROP_EVENT:
        return []
    tables: list[DroppedTable] = []
    for entry in message.get("dropped") or ():
        schema, name, oid = (entry.get(k) if isinstance(entry, dict) else None
                             for k in ("schema", "name", "oid"))
        if isinstance(schema, str) and isinstance(name, str) and type(oid) is int:
            tables.append(DroppedTable(schema, name, oid))
        else:
            log.warning("a %s DDL message names a dropped table without schema, name and "
                        "oid (%r): no truncate event for it", DROP_EVENT, entry)
    return tables
