"""Table shapes from Relation messages: codecs, keys, schema versions, schema records."""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

import orjson
import psycopg

from cdc.config.topic_names import TopicClaims, TopicNamer
from cdc.log import Record

from ..codecs import TypeCatalog
from ..events import TableShape
from ..pgoutput import Relation
from ..source.ddl_race import CatalogRaceError, outlast_ddl
from ..source.slot import primary_key
from ..source.visibility import transaction_visible, wait_until_visible
from .rewrites import SchemaRewrite, Signature, signature_of, valued_columns
from .type_details import describe_type

log = logging.getLogger(__name__)

TYPES_RECHECK_EVERY_S = 1.0  # the least time between two reads of the composite types


class KnownSchema(NamedTuple):
    """The latest schema version recorded for a table name, and the relation it was of."""

    version: int
    signature: Signature
    relation_oid: int | None = None  # None: recorded before schema records carried it
    names: tuple[str, str] | None = None  # (schema, table) as PostgreSQL spells them


class RecheckedShape(NamedTuple):
    """A relation whose columns' composite types changed (``ShapeRegistry.recheck_shape``):
    its new schema record, its name and those columns. Their values changed in every row
    without a write (``ALTER TYPE … ADD/DROP ATTRIBUTE``): the table is read again."""

    record: Record
    table: str  # schema.table
    columns: tuple[str, ...]

    @property
    def reason(self) -> str:
        """Why the table is read again, as the capture's log line says it."""
        return f"altered the composite type of {', '.join(self.columns)}"


class ShapeRegistry:
    """Relation oid → TableShape, with a schema version per table that grows whenever
    a Relation message brings different columns. Changes become records on the schema
    topic, so a reader of an old segment knows its columns.

    Events are routed by name (``cdc.config.topic_names``), as the Relation message
    names the table *now*: after ``ALTER TABLE … RENAME TO`` the same relation's events
    go to the new name's topic. Its first schema record there says ``renamed_from`` and
    goes on with the old name's numbering, so versions of one relation only grow. A table
    dropped and created again under the same name is a new relation: a new version.
    """

    def __init__(self, catalog_conn: psycopg.Connection[Any], topic_prefix: str | TopicNamer,
                 known_versions: Mapping[str, KnownSchema] | None = None) -> None:
        self._conn = catalog_conn
        self.topics = (topic_prefix if isinstance(topic_prefix, TopicNamer)
                       else TopicNamer(topic_prefix))
        topic_prefix = self.topics.prefix
        self._claims = TopicClaims(self.topics)  # topic → the table it is of
        self.catalog = TypeCatalog()
        self._shapes: dict[int, TableShape] = {}
        self.generation = 0  # counts the changes of ``_shapes`` (caches of shapes watch it)
        self._column_types: dict[int, tuple[int, ...]] = {}  # relation oid → type OIDs
        # relation oid → its last Relation message and primary-key override (a composite
        # type altered since: a new schema record of the same columns, ``take_rechecked``)
        self._relations: dict[int, tuple[Relation, list[str] | None]] = {}
        # relation oid → its columns whose composite types changed, not yet recorded
        self._rechecked: dict[int, tuple[str, ...]] = {}
        self._types_checked_at = -TYPES_RECHECK_EVERY_S
        self._visible_xid: int | None = None  # the last transaction seen visible
        self._versions: dict[str, KnownSchema] = dict(known_versions or {})
        self._names: dict[int, str] = {}  # relation oid → the name it had last
        for table, known in sorted(self._versions.items(), key=lambda item: item[1].version):
            if known.relation_oid is not None:
                self._names[known.relation_oid] = table
        self.schema_topic = f"{topic_prefix}._schemas"

    def get(self, oid: int) -> TableShape:
        """The shape of a relation announced earlier in this session."""
        return self._shapes[oid]

    def learn(self, relation: Relation, since_lsn: int | None = None) -> Record | None:
        """Remember ``relation``; return a schema record when its columns changed."""
        return self.learn_relation(relation, since_lsn)[0]

    def rows_rewritten(self, relation: Relation) -> str | None:
        """Before ``learn_relation``: why the rows of ``relation``'s table changed values
        nobody wrote since the schema version the log recorded (``rewrites``), or None —
        also for a table new to the log or created again (its truncate empties it)."""
        table = self._names.get(relation.oid, f"{relation.namespace}.{relation.name}")
        known = self._versions.get(table)
        if known is None or not known.signature or known.relation_oid not in (None,
                                                                             relation.oid):
            return None
        signature = signature_of(relation)
        if signature == known.signature:
            return None
        change = SchemaRewrite.between(known.signature, signature)
        try:
            valued = valued_columns(self._conn, relation.oid, change.added)
        except psycopg.OperationalError:
            raise
        except psycopg.Error as exc:  # e.g. dropped meanwhile: assume they hold values
            log.warning("cannot read the defaults of %s (%s): its added columns are taken "
                        "to hold values", table, str(exc).strip())
            valued = list(change.added)
        return change.reason(valued)

    def learn_relation(self, relation: Relation, since_lsn: int | None = None,
                       xid: int | None = None) -> tuple[Record | None, bool]:
        """``learn``, and whether the table name now belongs to another relation than
        the one last recorded under it (dropped and created again): the caller then
        writes a truncate event before the new relation's first event.

        ``since_lsn``: the commit LSN from which the table's events carry this shape (the
        transaction the Relation message came in), recorded in a new version's record so
        that ``cdc reconcile`` can tell a row written under an older shape. ``xid``: that
        transaction, committed (its types are read once a snapshot sees it)."""
        oids = [c.type_oid for c in relation.columns]
        key_override = None
        try:
            outlast_ddl(lambda: self._load_types(relation, oids, xid),
                        what=f"reading the column types of {relation.namespace}."
                             f"{relation.name}")
            if relation.replica_identity in ("f", "n"):
                key_override = outlast_ddl(
                    lambda: self._primary_key(relation, xid),
                    what=f"reading the primary key of {relation.namespace}."
                         f"{relation.name}") or None
        except (psycopg.OperationalError, CatalogRaceError):
            raise  # the server is gone, or DDL keeps racing: the session reconnects
        except psycopg.Error as exc:  # e.g. no privilege on a type's schema: keep the text
            log.warning("cannot read the types of %s.%s from the catalog (%s: %s): its "
                        "values whose types are unknown are kept as PostgreSQL's text",
                        relation.namespace, relation.name, type(exc).__name__,
                        str(exc).strip())
        table = f"{relation.namespace}.{relation.name}"
        signature = signature_of(relation)
        known = self._versions.get(table, KnownSchema(0, ()))
        recreated = known.relation_oid not in (None, relation.oid)
        if recreated:
            log.info("%s is a new relation (oid %d, was %s): the table was dropped and "
                     "created again; its topic gets a truncate event first", table,
                     relation.oid, known.relation_oid)
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
            self._versions[table] = KnownSchema(version, signature, relation.oid,
                                                (relation.namespace, relation.name))
            record = self._schema_record(relation, table, version, key_override, renamed_from,
                                         since_lsn)
            log.info("schema version %d of %s", version, table)
        else:
            version = known.version
        self._names[relation.oid] = table
        topic = self._topic(relation.namespace, relation.name)
        self._column_types[relation.oid] = tuple(oids)
        self._relations[relation.oid] = (relation, key_override)
        self._shapes[relation.oid] = TableShape.of(
            relation, topic, self.catalog.codecs_for(oids), key_override, version,
            functools.partial(self.recheck_shape, relation.oid))
        self.generation += 1
        return record, recreated

    def recheck_shape(self, relation_oid: int, index: int) -> TableShape | None:
        """A composite value did not fit its column's codec: read the composite types
        again (at most once a second) — PostgreSQL announces no ``ALTER TYPE … ADD
        ATTRIBUTE`` — and rebuild the shapes built from a changed one, each with a new
        schema version (their columns' ``type_detail`` changed; ``take_rechecked`` gives
        the records). Returns the relation's new shape when the column's type changed,
        else None."""
        now = time.monotonic()
        if now - self._types_checked_at < TYPES_RECHECK_EVERY_S:
            return None
        changed = self._recheck_types(now)
        if not changed:
            return None
        types = self._column_types.get(relation_oid, ())
        if index >= len(types) or not self.catalog.depends_on(types[index], changed):
            return None
        return self._shapes[relation_oid]

    def type_altered(self) -> None:
        """An ``ALTER TYPE`` the optional DDL capture reported (its transaction committed):
        ``recheck_shape``'s work at once, not at the first value that does not fit, so
        the tables holding a composite it changed get their new schema version (and are
        read again) even when nobody writes them."""
        self._recheck_types(time.monotonic())

    def _recheck_types(self, now: float) -> set[int]:
        """Read the composite types again; rebuild the shapes built from a changed one
        (a new schema version each, recorded by ``take_rechecked``). The changed types."""
        self._types_checked_at = now
        try:
            changed = outlast_ddl(lambda: self.catalog.refresh_composites(self._conn),
                                  what="reading the composite types again")
        except (psycopg.OperationalError, CatalogRaceError):
            raise  # the server is gone, or DDL keeps racing: the session reconnects
        except psycopg.Error as exc:
            log.warning("cannot read the composite types again (%s: %s): values that do "
                        "not fit them are kept as PostgreSQL's text", type(exc).__name__,
                        str(exc).strip())
            return set()
        if not changed:
            return changed
        for oid, shape in list(self._shapes.items()):
            types = self._column_types.get(oid, ())
            altered = tuple(name for name, type_oid in zip(shape.columns, types, strict=False)
                            if self.catalog.depends_on(type_oid, changed))
            if altered:
                version = self._new_version(oid, shape.schema_version, altered)
                self._shapes[oid] = dataclasses.replace(
                    shape, codecs=self.catalog.codecs_for(types), schema_version=version)
                self.generation += 1
                log.info("a composite type of %s.%s changed: its codecs were rebuilt, "
                         "schema version %d", shape.schema, shape.table, version)
        return changed

    def _new_version(self, oid: int, current: int, altered: tuple[str, ...]) -> int:
        """The next schema version of relation ``oid`` (the types of its ``altered``
        columns changed, not its columns), its record to come from ``take_rechecked``."""
        table = self._names.get(oid)
        known = self._versions.get(table) if table is not None else None
        if table is None or known is None or known.relation_oid not in (None, oid):
            return current  # not recorded under its name (a collision): nothing to record
        self._versions[table] = known._replace(version=known.version + 1)
        self._rechecked[oid] = tuple(dict.fromkeys((*self._rechecked.get(oid, ()), *altered)))
        return known.version + 1

    def take_rechecked(self, since_lsn: int | None) -> list[RecheckedShape]:
        """The relations whose composite types changed since the last call
        (``recheck_shape``), each with its schema record: the same columns, their
        ``type_detail`` now. ``since_lsn``: the commit LSN from which the table's events
        carry them."""
        found = []
        for oid, altered in self._rechecked.items():
            relation, key_override = self._relations[oid]
            table = self._names[oid]
            found.append(RecheckedShape(
                self._schema_record(relation, table, self._versions[table].version,
                                    key_override, None, since_lsn), table, altered))
        self._rechecked.clear()
        return found

    @property
    def has_rechecked(self) -> bool:
        """Whether ``take_rechecked`` has records to give."""
        return bool(self._rechecked)

    def _topic(self, schema: str, table: str) -> str:
        """The table's topic; a second table on one topic is a configuration error."""
        return self._claims.claim(schema, table)

    def claim_topics(self, tables: Iterable[tuple[str, str]]) -> None:
        """Reserve the topics of ``tables`` (the published ones, at session start), so a
        table joining the publication later cannot take one of them."""
        for schema, table in tables:
            self._claims.claim(schema, table)

    def dropped(self, oid: int, schema: str, table: str) -> TableShape | None:
        """What to write a dropped relation's truncate event under: the name the capture
        last recorded for it, while that name is still its own. None when the capture
        never recorded the table (the log holds nothing of it), or when its name already
        belongs to a newer relation (whose own truncate came first)."""
        name = self._names.get(oid, f"{schema}.{table}")
        known = self._versions.get(name)
        if known is None or known.relation_oid not in (oid, None):
            return None
        shape = self._shapes.get(oid)
        names = known.names or ((shape.schema, shape.table) if shape is not None
                                else (schema, table))
        if f"{names[0]}.{names[1]}" != name:
            return None  # recorded without names under another name: not ours to guess
        topic = self.topics.topic_for(*names)
        if not self._claims.owns(*names):
            return None  # another table's topic (a collision stopped that one's events)
        return TableShape.of(Relation(oid, names[0], names[1], "d", ()), topic, (), None,
                             known.version)

    def _load_types(self, relation: Relation, oids: list[int], xid: int | None) -> None:
        """Read the column types the catalog does not know. Types missing while
        transaction ``xid`` is not yet visible are read again once it is (the walsender
        can send a commit before the backend has ended it)."""
        self.catalog.ensure(self._conn, oids)
        if not self.catalog.missing(oids):
            return
        if xid is not None and not self._visible(xid):
            self.catalog.ensure(self._conn, oids)
        if missing := self.catalog.missing(oids):  # a streamed change's values degrade
            log.log(logging.WARNING if xid is not None else logging.DEBUG,
                    "the types %s of %s.%s are not in the catalog (dropped since?): their "
                    "values are kept as PostgreSQL's text",
                    ", ".join(map(str, sorted(missing))), relation.namespace, relation.name)

    def _primary_key(self, relation: Relation, xid: int | None) -> list[str]:
        """The relation's primary key columns, read again once transaction ``xid`` is
        visible if none were found before (it may have added the key)."""
        found = primary_key(self._conn, relation.oid)
        if not found and xid is not None and not self._visible(xid):
            found = primary_key(self._conn, relation.oid)
        return found

    def _visible(self, xid: int) -> bool:
        """Whether transaction ``xid`` was visible at once; if not, wait until it is."""
        if xid == self._visible_xid:
            return True
        visible = transaction_visible(self._conn, xid)
        if not visible:
            wait_until_visible(self._conn, xid)
        self._visible_xid = xid
        return visible

    def reload_type(self, oid: int, xid: int | None = None) -> None:
        """A Type message: read the type again and rebuild codecs on the next Relation;
        ``xid``, the committed transaction it came in, once a snapshot sees it (it may
        have altered the type)."""
        def read() -> None:
            if xid is not None:
                self._visible(xid)
            self.catalog.reload(self._conn, oid)

        outlast_ddl(read, what=f"reading type {oid} again")

    def _schema_record(self, relation: Relation, table: str, version: int,
                       key_override: list[str] | None, renamed_from: str | None,
                       since_lsn: int | None) -> Record:
        columns = [{"name": c.name, "type_oid": c.type_oid, "type_modifier": c.type_modifier,
                    "type": self._type_name(c.type_oid),
                    "type_detail": describe_type(self.catalog, c.type_oid),
                    "key": (c.name in key_override) if key_override else c.key,
                    "flag_key": c.key}
                   for c in relation.columns]
        value = orjson.dumps({"schema": relation.namespace, "table": relation.name,
                              "schema_version": version, "columns": columns,
                              "replica_identity": relation.replica_identity,
                              "relation_oid": relation.oid, "renamed_from": renamed_from,
                              "since_lsn": since_lsn})
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
                                          data.get("relation_oid"), _names_of(data))
    return versions


def _names_of(schema_record: dict[str, Any]) -> tuple[str, str] | None:
    schema, table = schema_record.get("schema"), schema_record.get("table")
    return (schema, table) if isinstance(schema, str) and isinstance(table, str) else None
