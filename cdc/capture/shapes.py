"""Table shapes from Relation messages: codecs, keys, schema versions, schema records."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, NamedTuple

import orjson
import psycopg

from cdc.log import Record

from .codecs import TypeCatalog
from .events import TableShape
from .pgoutput import Relation
from .slot import primary_key

log = logging.getLogger(__name__)

Signature = tuple[tuple[str, int, int, bool], ...]


class KnownSchema(NamedTuple):
    """The latest schema version recorded for a table name, and the relation it was of."""

    version: int
    signature: Signature
    relation_oid: int | None = None  # None: recorded before schema records carried it


class ShapeRegistry:
    """Relation oid → TableShape, with a schema version per table that grows whenever
    a Relation message brings different columns. Changes become records on the schema
    topic, so a reader of an old segment knows its columns.

    Events are routed by name (``<prefix>.<schema>.<table>``), as the Relation message
    names the table *now*: after ``ALTER TABLE … RENAME TO`` the same relation's events
    go to the new name's topic. Its first schema record there says ``renamed_from`` and
    goes on with the old name's numbering, so versions of one relation only grow. A table
    dropped and created again under the same name is a new relation: a new version.
    """

    def __init__(self, catalog_conn: psycopg.Connection[Any], topic_prefix: str,
                 known_versions: Mapping[str, KnownSchema] | None = None) -> None:
        self._conn = catalog_conn
        self._prefix = topic_prefix
        self.catalog = TypeCatalog()
        self._shapes: dict[int, TableShape] = {}
        self._versions: dict[str, KnownSchema] = dict(known_versions or {})
        self._names: dict[int, str] = {}  # relation oid → the name it had last
        for table, known in sorted(self._versions.items(), key=lambda item: item[1].version):
            if known.relation_oid is not None:
                self._names[known.relation_oid] = table
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
        known = self._versions.get(table, KnownSchema(0, ()))
        previous_name = self._names.get(relation.oid)
        renamed_from = previous_name if previous_name not in (None, table) else None
        record = None
        if signature != known.signature or renamed_from is not None \
                or known.relation_oid not in (None, relation.oid):
            version = known.version + 1
            if renamed_from is not None:
                version = max(version, self._versions[renamed_from].version + 1)
                log.info("%s was renamed to %s: its events go to the new name's topic",
                         renamed_from, table)
            self._versions[table] = KnownSchema(version, signature, relation.oid)
            record = self._schema_record(relation, table, version, key_override, renamed_from)
            log.info("schema version %d of %s", version, table)
        else:
            version = known.version
        self._names[relation.oid] = table
        topic = f"{self._prefix}.{relation.namespace}.{relation.name}"
        self._shapes[relation.oid] = TableShape.of(
            relation, topic, self.catalog.codecs_for(oids), key_override, version)
        return record

    def reload_type(self, oid: int) -> None:
        """A Type message: read the type again and rebuild codecs on the next Relation."""
        self.catalog.reload(self._conn, oid)

    def _schema_record(self, relation: Relation, table: str, version: int,
                       key_override: list[str] | None, renamed_from: str | None) -> Record:
        columns = [{"name": c.name, "type_oid": c.type_oid, "type_modifier": c.type_modifier,
                    "type": self._type_name(c.type_oid),
                    "key": (c.name in key_override) if key_override else c.key,
                    "flag_key": c.key}
                   for c in relation.columns]
        value = orjson.dumps({"schema": relation.namespace, "table": relation.name,
                              "schema_version": version, "columns": columns,
                              "replica_identity": relation.replica_identity,
                              "relation_oid": relation.oid, "renamed_from": renamed_from})
        return Record(self.schema_topic, orjson.dumps(table), value)

    def _type_name(self, oid: int) -> str:
        info = self.catalog.get(oid)
        return f"{info.namespace}.{info.name}" if info is not None else str(oid)


def versions_from_log(records: list[tuple[bytes, bytes]]) -> dict[str, KnownSchema]:
    """Rebuild the latest version, signature and relation per table from schema-topic
    records (in log order)."""
    versions: dict[str, KnownSchema] = {}
    for key, value in records:
        data = orjson.loads(value)
        signature: Signature = tuple((c["name"], c["type_oid"], c["type_modifier"],
                                      bool(c.get("flag_key", c["key"])))
                                     for c in data["columns"])
        table = orjson.loads(key)
        if data["schema_version"] >= versions.get(table, KnownSchema(0, ())).version:
            versions[table] = KnownSchema(data["schema_version"], signature,
                                          data.get("relation_oid"))
    return versions
