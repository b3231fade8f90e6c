"""The change event's JSON Schema: the documented contract of what the capture writes
(docs/architecture.md, "The event"; README, "Events")."""

from __future__ import annotations

from typing import Any

_NAMES = {"type": "array", "items": {"type": "string"}, "uniqueItems": True}
_ROW = {"type": ["object", "null"], "description": "column name → typed JSON value"}


def _when(op: list[str], then: dict[str, Any]) -> dict[str, Any]:
    return {"if": {"properties": {"op": {"enum": op}}}, "then": then}


def _is(kind: str) -> dict[str, Any]:
    return {"type": kind}


# what each op holds (a reader may rely on these)
_BY_OP = [
    _when(["c", "r"], {"properties": {"before": _is("null"), "after": _is("object")}}),
    _when(["u"], {"properties": {"after": _is("object")}}),
    _when(["d"], {"properties": {"after": _is("null"), "unchanged": {"maxItems": 0}}}),
    _when(["t"], {"required": ["truncate"], "properties": {
        "key": {"maxProperties": 0}, "before": _is("null"), "after": _is("null")}}),
    _when(["m"], {"required": ["message"], "properties": {"before": _is("null"),
                                                          "after": _is("null")}}),
    _when(["c", "u", "d", "r", "m"], {"not": {"required": ["truncate"]}}),
    _when(["c", "u", "d", "r", "t"], {"not": {"required": ["message"]}}),
]

EVENT_JSON_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Distributary change event",
    "type": "object",
    "required": ["op", "key", "before", "after", "unchanged", "schema_version", "source"],
    "additionalProperties": False,
    "allOf": _BY_OP,
    "properties": {
        "op": {"enum": ["c", "u", "d", "t", "r", "m"],
               "description": "c insert, u update, d delete, t truncate, r snapshot read, "
               "m logical decoding message"},
        "key": {"type": "object", "description": "the primary key / replica identity "
                "columns ({} for t; {prefix} for m)"},
        "before": {**_ROW, "description": "the old row when REPLICA IDENTITY gives it"},
        "after": {**_ROW, "description": "the new row (c, u, r)"},
        "unchanged": {**_NAMES, "description": "TOASTed columns PostgreSQL did not resend "
                      "(absent from after; not NULL)"},
        "unparsed": {**_NAMES, "minItems": 1, "description": "columns whose value its "
                     "type's codec could not read: the value is PostgreSQL's text output, "
                     "unchanged; present only when there is such a column"},
        "truncate": {"type": "object", "description": "op t only",
                     "required": ["cascade", "restart_identity"],
                     "additionalProperties": False,
                     "properties": {"cascade": {"type": "boolean"},
                                    "restart_identity": {"type": "boolean"},
                                    "recreated": {"const": True, "description": "the table "
                                                  "was dropped and created again under the "
                                                  "same name: everything before is gone"},
                                    "dropped": {"const": True, "description": "the DDL "
                                                "capture (cdc ddl install) saw the table "
                                                "dropped: everything before is gone"}}},
        "message": {"type": "object", "description": "op m only",
                    "required": ["prefix", "content", "transactional"],
                    "additionalProperties": False,
                    "properties": {
                        "prefix": {"type": "string"},
                        "content": {"description": "the message as JSON when it is JSON, "
                                    "else its text"},
                        "transactional": {"type": "boolean"}}},
        "schema_version": {"type": "integer", "minimum": 1},
        "source": {
            "type": "object",
            "required": ["db", "schema", "table", "lsn", "commit_lsn", "seq", "txid",
                         "commit_ts", "snapshot"],
            "additionalProperties": False,
            "properties": {
                "db": {"type": "string"},
                "schema": {"type": ["string", "null"], "description": "the real name "
                           "(the topic may escape it: README, Events)"},
                "table": {"type": ["string", "null"], "description": "the real name"},
                "lsn": {"type": "string", "pattern": "^[0-9A-F]+/[0-9A-F]+$"},
                "commit_lsn": {"type": "string", "pattern": "^[0-9A-F]+/[0-9A-F]+$"},
                "seq": {"type": "integer", "minimum": 0},
                "txid": {"type": "integer"},
                "commit_ts": {"type": "string"},
                "snapshot": {"type": "boolean"},
            },
        },
    },
}
