"""Tables an ``ALTER TABLE`` changed, as the optional DDL capture records them.

The ``ddl_command_end`` message (``ddl``) names the objects a command touched. After an
``ALTER TABLE`` the rows of such a table may hold values nobody wrote (``rewrites``);
with the message the capture compares the table's columns in the catalog with the
schema version the log recorded at once, instead of at the table's next row change
(whose Relation message shows the new columns too). An ``ALTER TYPE`` message makes it
read the composite types again at once (``alters_a_type``).
"""

from __future__ import annotations

import logging

import orjson

log = logging.getLogger(__name__)

COMMAND_EVENT = "ddl_command_end"
ALTER_TAG = "ALTER TABLE"
ALTER_TYPE_TAG = "ALTER TYPE"


def alters_a_type(content: bytes) -> bool:
    """Whether a DDL message is an ``ALTER TYPE`` (a composite's attributes may have
    changed: PostgreSQL sends no message of its own for that); False for anything else."""
    try:
        message = orjson.loads(content)
    except orjson.JSONDecodeError:
        return False
    return (isinstance(message, dict) and message.get("event") == COMMAND_EVENT
            and message.get("tag") == ALTER_TYPE_TAG)


def altered_tables(content: bytes) -> list[str]:
    """The tables an ``ALTER TABLE`` DDL message names, as PostgreSQL quotes them
    (``public."Orders"``: ``to_regclass`` reads them back); [] for any other message,
    and for one that is not what the trigger writes (it never stops the capture)."""
    try:
        message = orjson.loads(content)
    except orjson.JSONDecodeError:
        return []
    if not isinstance(message, dict) or message.get("event") != COMMAND_EVENT \
            or message.get("tag") != ALTER_TAG:
        return []
    tables = []
    for entry in message.get("objects") or ():
        if not isinstance(entry, dict) or entry.get("type") != "table":
            continue
        identity = entry.get("identity")
        if isinstance(identity, str):
            tables.append(identity)
        else:
            log.warning("an %s DDL message names a table without its identity (%r): its "
                        "rows are compared at its next row change instead", ALTER_TAG, entry)
    return tables
