"""Table shapes from Relation messages: codecs, keys, schema versions, schema records."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import psycopg

from cdc.log import Record

from .codecs import TypeCatalog
from .events import TableShape
from .pgoutput import Relation
from .slot import primary_key

log = logging.getLogger(__name__)

Signature = tuple[tuple[str, int, int, bool], ...]


class ShapeRegistry:
    """Relation oid → TableShape, with a schema version per table that grows whenever
    a Relation message brings different columns. Changes become records on the schema
    topic, so a reader of an old segment knows its columns."""

    def __init__(self, catalog_conn: psycopg.Connection[Any], topic_prefix: str,
                 known_versions: dict[str, tuple[int, Signature]] | None = None) -> None:
        self._conn = catalog_conn
        self._prefix = topic_prefix
        self.catalog = TypeCatalog()
        self._shapes: dict[int, TableShape] = {}
        self._versions: dict[str, tuple[int, Signature]] = dict(known_versions or {})
        self.schema_topic = f"{topic_prefix}._schemas"

    def get(self, oid: int) -> TableShape:
        """The shape of a relation announced earlier in this session."""
        return self._shapes[oid]

    def learn(self, relation: Relation) -> Record | None:
        """Remember ``relation``; return a schema record when its columns changed."""
        oids = [c.type_oid for c in relation.columns]
        self.catalog.ensure(self._conn, oids)
        key_override = None
        if relation.replica_identity in ("f", "n"):
            key_override = primary_key(self._conn, relation.oid) or None
        table = f"{relation.namespace}.{relation.name}"
        signature: Signature = tuple((c.name, c.type_oid, c.type_modifier, c.key)
                                     for c in relation.columns)
        version, known = self._versions.get(table, (0, ()))
        record = None
        if signature != known:
            version += 1
            self._versions[table] = (version, signature)
            record = self._schema_record(relation, table, version, key_override)
            log.info("schema version %d of %s", version, table)
        topic = f"{self._prefix}.{relation.namespace}.{relation.name}"
        self._shapes[relation.oid] = TableShape.of(
            relation, topic, self.catalog.codecs_for(oids), key_override, version)
        return record

    def reload_type(self, oid: int) -> None:
        """A Type message: read the type again and rebuild codecs on the next Relation."""
        self.catalog.reload(self._conn, oid)

    def _schema_record(self, relation: Relation, table: str, version: int,
                       key_override: list[str] | None) -> Record:
        columns = [{"name": c.name, "type_oid": c.type_oid, "type_modifier": c.type_modifier,
                    "type": self._type_name(c.type_oid),
                    "key": (c.name in key_override) if key_override else c.key,
                    "flag_key": c.key}
                   for c in relation.columns]
        value = orjson.dumps({"schema": relation.namespace, "table": relation.name,
                              "schema_version": version, "columns": columns,
                              "replica_identity": relation.replica_identity})
        return Record(self.schema_topic, orjson.dumps(table), value)

    def _type_name(self, oid: int) -> str:
        info = self.catalog.get(oid)
        return f"{info.namespace}.{info.name}" if info is not None else str(oid)


def versions_from_log(records: list[tuple[bytes, bytes]]) -> dict[str, tuple[int, Signature]]:
    """Rebuild the latest version and signature per table from schema-topic records."""
    versions: dict[str, tuple[int, Signature]] = {}
    for key, value in records:
        data = orjson.loads(value)
        signature: Signature = tuple((c["name"], c["type_oid"], c["type_modifier"],
                                      bool(c.get("flag_key", c["key"])))
                                     for c in data["columns"])
        versions[orjson.loads(key)] = (data["schema_version"], signature)
    return versions
