"""The tables an ``ALTER TABLE`` DDL message names (``schema.ddl_alters``)."""

from __future__ import annotations

import orjson

from cdc.capture.schema.ddl_alters import altered_tables


def _message(tag: str, *objects: object, event: str = "ddl_command_end") -> bytes:
    return orjson.dumps({"event": event, "tag": tag, "command": "…",
                         "objects": list(objects), "user": "app", "database": "app"})


def test_the_tables_of_an_alter_table_in_their_quoted_form() -> None:
    content = _message("ALTER TABLE",
                       {"type": "table", "identity": 'public."Orders"', "schema": "public"},
                       {"type": "index", "identity": "public.orders_pkey"},
                       {"type": "table", "identity": "app.items", "schema": "app"})
    assert altered_tables(content) == ['public."Orders"', "app.items"]


def test_other_commands_and_other_messages_name_none() -> None:
    table = {"type": "table", "identity": "public.t", "schema": "public"}
    assert altered_tables(_message("CREATE TABLE", table)) == []
    assert altered_tables(_message("DROP TABLE", table, event="sql_drop")) == []
    assert altered_tables(b"not json") == []
    assert altered_tables(b"[1, 2]") == []


def test_an_entry_without_an_identity_is_passed_over() -> None:
    content = _message("ALTER TABLE", {"type": "table", "identity": None}, "odd",
                       {"type": "table", "identity": "public.t"})
    assert altered_tables(content) == ["public.t"]
