"""``OpenSearchSink``: one document per row and view, written with external versions.

A batch becomes at most one bulk request (more only past ``bulk_size``/``bulk_max_bytes``):

1. events become changes (``connectors.changes``) and each change an alias: the view's
   target, else the ``alias`` (or ``index``) template of the event's table;
2. a truncate empties its alias by a swap (``indices``) before the batch's other writes;
   writes older than the alias's last truncate are skipped;
3. updates that left unchanged TOAST columns out read the stored documents (one
   ``mget``) and keep those fields (see "Unchanged TOAST columns" below);
4. fields never seen before are mapped (``mapping``), then the bulk request is sent.

A plain batch (rows written as they are: no truncate, view or unchanged TOAST column) is
rendered by the native core where it is installed (``native_actions``), straight from
the events' raw JSON: the same actions as the Python path, which stays the reference and
takes every other batch.

Document ``_id`` is the key (``derived.encode_key``: the value of a one-column key, else
the columns' values escaped and joined by ``:``).

Unchanged TOAST columns: external versioning works only with whole-document ``index``
and ``delete`` actions (not with partial updates or scripts, whose internal version
would then fall out of step with the source positions). So the sink reads the stored
document and writes a complete one: read-modify-write, guarded by the version — if the
stored document is newer the write is a 409 and changes nothing. Values come, in order,
from an earlier event of the batch, from ``before`` (REPLICA IDENTITY FULL), from the
stored document; a view field that mixes such a column with resent ones cannot be
derived, and the event is rejected with the reason.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from opensearchpy import OpenSearch
from opensearchpy.exceptions import TransportError

from cdc.errors import ConfigError, ConfigProblem
from connectors.changes import (
    Change,
    ChangeReader,
    Delete,
    Truncate,
    Upsert,
    passing_views,
    upsert_record,
)
from connectors.contract import (
    Rejection,
    SinkContext,
    SinkEvent,
    SinkUnavailableError,
    WriteResult,
)
from connectors.placeholders import NameTemplate, TableNames
from derived import encode_key

from .bulk import BulkAction, delete_action, index_action, send
from .client import make_client
from .columns import NEWEST, ColumnTypes, SchemaTopicColumns
from .config import OpenSearchSinkConfig
from .errors import login_refusal, translate, unavailable
from .indices import IndexCatalog, IndexState
from .mapping import (
    ColumnType,
    FieldMapping,
    is_object,
    joined_mappings,
    new_fields,
    new_subfields,
)
from .names import index_name
from .native_actions import (
    KIND_ARRAY,
    KIND_NULL,
    KIND_OBJECT,
    PATH_SEPARATOR,
    NativeActions,
    NativeBatch,
    deep_vouched,
    vouched,
)
from .unindexed import UnindexedValues, always_fitting

MAX_ID_BYTES = 512


class Planned(NamedTuple):
    """One bulk action, the index it writes, its change, and the document it indexes (a
    named tuple: one is made per event)."""

    action: BulkAction
    state: IndexState
    change: Upsert | Delete
    document: dict[str, Any] | None


class OpenSearchSink:
    """The OpenSearch sink (see the module docstring)."""

    def __init__(self, config: OpenSearchSinkConfig, *, topic_prefix: str = "",
                 column_types: ColumnTypes | None = None, native: bool = True) -> None:
        """``native``: render plain batches with the native core where it is installed
        (False: only the Python path, the reference)."""
        self.config = config
        self._reader = ChangeReader(config.views, topic_prefix)
        self._column_types = column_types
        self._index = NameTemplate(config.index)
        self._alias = NameTemplate(config.alias) if config.alias is not None else None
        self._names: dict[TableNames, tuple[str, str]] = {}
        self._client: OpenSearch | None = None
        self._catalog: IndexCatalog | None = None
        self._unindexed = UnindexedValues()
        # tables whose one view writes each row as it is, only to its own target (a joined
        # view's records: ``connectors.joins.inner_config``): plain rows of that alias
        self._passing = {table: view.target
                         for table, view in passing_views(config.views).items()}
        self._native = NativeActions(
            {view.table for view in config.views if view.table not in self._passing},
            topic_prefix, MAX_ID_BYTES) if native else None
        self._opened = False  # once connected, a refused login is retried
        self._sending: ThreadPoolExecutor | None = None  # bulk requests sent at once
        self._joined = {join.target: join for join in config.joins}

    def open(self) -> None:
        """Connect and check the cluster answers."""
        config = self.config
        client = make_client(config)
        try:
            client.info()
        except TransportError as exc:
            client.close()
            refused = None if self._opened else login_refusal(exc)
            if refused is not None:  # before the first write: fix the setting, not retry
                field, why = refused
                raise ConfigError([ConfigProblem(
                    field, f"OpenSearch at {_addresses(config.hosts)}: {why}")]) from exc
            raise translate(exc, f"connecting to {_addresses(config.hosts)} "
                                 "(config.hosts)") from exc
        self._client = client
        self._opened = True  # from now on, a refusal (credentials rotated) is retried
        if config.bulk_concurrency > 1 and self._sending is None:
            self._sending = ThreadPoolExecutor(config.bulk_concurrency,
                                               thread_name_prefix="opensearch-bulk")
        self._catalog = IndexCatalog(client, int(config.tombstone_retention.total_seconds()),
                                     replicas=config.replicas)

    def write(self, batch: Sequence[SinkEvent]) -> WriteResult:
        """Apply ``batch``: truncates first, then one versioned bulk request."""
        client, catalog = self._connected()
        if self._native is not None:
            rendered = self._native.render(batch, lambda names: self._names_of(names)[0])
            written = None if rendered is None else self._write_plain(batch, rendered)
            if written is not None:
                return written
        changes, rejected = self._reader.read(batch)
        routed = [(self._alias_and_base(change), change) for change in changes]
        try:
            states = {alias: catalog.state(alias, base) for (alias, base), _ in routed}
            writes = self._after_truncates(routed, states, catalog)
            planned = self._actions(client, writes, rejected)
            self._map_new_fields(planned, catalog)
            rejected.extend(self._send(client, [item.action for item in planned]))
        except SinkUnavailableError:
            catalog.forget()
            raise
        self._count_unindexed(planned, rejected)
        return WriteResult(rejected)

    def flush(self) -> None:
        """Nothing to do: a bulk request returns once its writes are durable (translog)."""

    def close(self) -> None:
        """Close the connections."""
        if self._sending is not None:
            self._sending.shutdown()
            self._sending = None
        if self._client is not None:
            self._client.close()
            self._client = None

    def _send(self, client: OpenSearch, actions: Sequence[BulkAction]) -> list[Rejection]:
        """``bulk.send`` with this sink's bounds and concurrency."""
        config = self.config
        return send(client, actions, config.bulk_size, config.bulk_max_bytes, self._sending,
                    config.bulk_concurrency)

    def _connected(self) -> tuple[OpenSearch, IndexCatalog]:
        if self._client is None or self._catalog is None:
            raise RuntimeError("OpenSearchSink.write before open")
        return self._client, self._catalog

    def _write_plain(self, batch: Sequence[SinkEvent],
                     rendered: NativeBatch) -> WriteResult | None:
        """Write a natively rendered plain batch; ``None`` (nothing written) when the
        Python path must: a table's documents bring new fields, or an event is older than
        its alias's last truncate."""
        client, catalog = self._connected()
        try:
            states = [catalog.state(*self._names_of(names)) for names in rendered.tables]
            if any(self._maps_new_fields(state, fields) or _unmapped_below(state, deep, fields)
                   for state, fields, deep in zip(states, rendered.fields, rendered.deep,
                                                  strict=True)):
                return None  # mapped by the Python path
            newest_truncate = max((state.truncate_version for state in states), default=0)
            if newest_truncate and min(item.version for item in batch) < newest_truncate:
                return None  # the Python path skips what the truncate emptied
            actions = [BulkAction(item, kind, payload) for item, kind, payload
                       in zip(batch, rendered.kinds, rendered.payloads, strict=True)]
            rejected = self._send(client, actions)
        except SinkUnavailableError:
            catalog.forget()
            raise
        self._count_unindexed_plain(batch, rendered, states, rejected)
        return WriteResult(rejected)

    def _maps_new_fields(self, state: IndexState, kinds: Mapping[str, int]) -> bool:
        """True when the Python path would map fields of documents with these fields'
        ``kinds``: a field not mapped yet, unless only ever null and typed by nothing
        (``mapping.new_fields`` then maps nothing)."""
        if state.fields.issuperset(kinds):
            return False
        typed = self._column_types is not None
        return any(name not in state.fields and (bits != KIND_NULL or typed)
                   for name, bits in kinds.items())

    def _count_unindexed_plain(self, batch: Sequence[SinkEvent], rendered: NativeBatch,
                               states: list[IndexState], rejected: list[Rejection]) -> None:
        """``_count_unindexed`` for a plain batch: its documents are looked at only when
        the kinds of their values (by path, objects' and lists' included; else of their
        top-level fields) may not all be indexable."""
        refused = {id(rejection.event) for rejection in rejected}
        for number, (state, kinds, deep) in enumerate(zip(states, rendered.fields,
                                                          rendered.deep, strict=True)):
            if (deep_vouched(deep, state.mappings) if deep is not None
                    else vouched(kinds, state.mappings, always_fitting(state.mappings))):
                continue
            documents = [item.event["after"] for item, kind, table
                         in zip(batch, rendered.kinds, rendered.table_of, strict=True)
                         if table == number and kind == "index" and id(item) not in refused]
            self._unindexed.observe(state.alias, state.mappings, documents)

    def _alias_and_base(self, change: Change) -> tuple[str, str]:
        """The alias the change writes through, and its concrete indices' base name."""
        if change.view is not None:
            return change.view.target, change.view.target
        return self._names_of(change.names)

    def _names_of(self, names: TableNames) -> tuple[str, str]:
        """The alias a table's rows (without a view) are written through, and its
        concrete indices' base name."""
        known = self._names.get(names)
        if known is None:
            target = self._passing.get((names.schema, names.table))
            if target is not None:  # as ``_alias_and_base`` routes its view's changes
                known = self._names[names] = (target, target)
                return known
            base = index_name(self._index.render(names))
            alias = index_name(self._alias.render(names)) if self._alias else base
            known = self._names[names] = (alias, base)
        return known

    def _after_truncates(self, routed: list[tuple[tuple[str, str], Change]],
                         states: dict[str, IndexState],
                         catalog: IndexCatalog) -> list[tuple[IndexState, Upsert | Delete]]:
        """Run the truncates; the other changes not older than their alias's truncate."""
        truncated_at: dict[str, int] = {}
        for position, ((alias, _), change) in enumerate(routed):
            if isinstance(change, Truncate):
                if change.event.version > states[alias].truncate_version:
                    states[alias] = catalog.truncate(states[alias], change.event.version)
                if states[alias].truncate_version == change.event.version:
                    truncated_at[alias] = position
        writes: list[tuple[IndexState, Upsert | Delete]] = []
        for position, ((alias, _), change) in enumerate(routed):
            if isinstance(change, Truncate):
                continue
            state, version = states[alias], change.event.version
            if version < state.truncate_version or (
                    version == state.truncate_version and position < truncated_at.get(alias, -1)):
                continue
            writes.append((state, change))
        return writes

    def _actions(self, client: OpenSearch, writes: list[tuple[IndexState, Upsert | Delete]],
                 rejected: list[Rejection]) -> list[Planned]:
        """The bulk actions of ``writes``, each with its index and document."""
        stored = self._stored_documents(client, writes)
        planned: list[Planned] = []
        for state, change in writes:
            doc_id = encode_key(change.key)
            # at most 4 bytes a character: only a long id needs encoding to be measured
            if len(doc_id) > MAX_ID_BYTES // 4 and len(doc_id.encode()) > MAX_ID_BYTES:
                rejected.append(Rejection(change.event, f"the key is longer than OpenSearch's "
                                          f"{MAX_ID_BYTES}-byte _id limit"))
                continue
            document = None if isinstance(change, Delete) else self._document(
                change, stored.get((state.alias, doc_id)))
            if isinstance(document, Rejection):
                rejected.append(document)
            elif document is None:  # a delete, or a row the view's filter drops
                planned.append(Planned(delete_action(change.event, state.alias, doc_id), state,
                                       change, None))
            else:
                planned.append(Planned(index_action(change.event, state.alias, doc_id, document),
                                       state, change, document))
        return planned

    def _document(self, change: Upsert,
                  stored: Mapping[str, Any] | None) -> dict[str, Any] | Rejection | None:
        """The document of ``change``; ``None`` when the view's filter drops the row."""
        return upsert_record(change, stored, "document")

    def _stored_documents(self, client: OpenSearch,
                          writes: list[tuple[IndexState, Upsert | Delete]]
                          ) -> dict[tuple[str, str], Mapping[str, Any]]:
        wanted = {(state.alias, encode_key(change.key)) for state, change in writes
                  if isinstance(change, Upsert) and change.missing}
        if not wanted:
            return {}
        docs = [{"_index": alias, "_id": doc_id} for alias, doc_id in sorted(wanted)]
        try:
            found = client.mget(body={"docs": docs}, realtime=True)
        except TransportError as exc:
            raise unavailable(exc, f"reading {len(docs)} stored documents") from exc
        failed = [doc for doc in found["docs"] if doc.get("error")]
        if failed:  # e.g. a shard not yet recovered after a restart: not "not found"
            error = failed[0]["error"]
            kind = error.get("type") if isinstance(error, dict) else error
            raise SinkUnavailableError(f"OpenSearch could not read {len(failed)} of {len(docs)} "
                                       f"stored documents ({kind})")
        return {(alias, doc["_id"]): doc["_source"]
                for (alias, _), doc in zip(sorted(wanted), found["docs"], strict=True)
                if doc.get("found")}

    def _map_new_fields(self, planned: list[Planned], catalog: IndexCatalog) -> None:
        """Map the fields of this batch's documents that their index does not have yet,
        and the values below its objects that their properties lack (``new_subfields``),
        by the types of the newest schema version among them."""
        pending: dict[str, tuple[IndexState, Upsert, list[Mapping[str, Any]]]] = {}
        has_objects: dict[str, bool] = {}
        for item in planned:
            document, state, change = item.document, item.state, item.change
            if document is None or not isinstance(change, Upsert):
                continue
            objects = has_objects.get(state.alias)
            if objects is None:
                objects = has_objects[state.alias] = any(map(is_object,
                                                             state.mappings.values()))
            if objects or not state.fields.issuperset(document):
                known = pending.get(state.alias)
                if known is None:
                    pending[state.alias] = (state, change, [document])
                    continue
                if _schema_version(change) > _schema_version(known[1]):
                    pending[state.alias] = (state, change, known[2])
                known[2].append(document)
        for state, change, documents in pending.values():
            # whether anything is new first (by value alone), then by the types
            below = new_subfields(documents, state.mappings, {})
            if not below and all(map(state.fields.issuperset, documents)):
                continue
            types, given = self._types(change), self._joined_fields(change)
            if below and given:  # a joined table's new column: its type is the newest
                given = self._joined_fields(change, newest=True)
            below = new_subfields(documents, state.mappings, types, given)
            fields = new_fields(documents, state.fields, types, given)
            if fields or below:
                catalog.add_fields(state, {**below, **fields})

    def _count_unindexed(self, planned: list[Planned], rejected: list[Rejection]) -> None:
        """Count the values of the written documents their fields cannot index."""
        refused = {id(rejection.event) for rejection in rejected}
        by_alias: dict[str, tuple[IndexState, list[Mapping[str, Any]]]] = {}
        for item in planned:
            if item.document is not None and id(item.action.event) not in refused:
                by_alias.setdefault(item.state.alias, (item.state, []))[1].append(item.document)
        for alias, (state, documents) in by_alias.items():
            self._unindexed.observe(alias, state.mappings, documents)

    def _joined_fields(self, change: Upsert, *, newest: bool = False
                       ) -> Mapping[str, FieldMapping]:
        """The mappings of a joined view's record (``{}`` for other changes), by the
        column types known, or with ``newest`` those of the schema topic's newest
        records (read again: a record's joined rows carry no schema version)."""
        join = self._joined.get(change.view.target) if change.view is not None else None
        column_types = self._column_types
        if join is None or column_types is None:
            return {}
        version = NEWEST if newest else 0
        return joined_mappings(join, lambda table: column_types(*table, version))

    def _types(self, change: Upsert) -> Mapping[str, ColumnType]:
        """Field → column type, where the schema topic tells the column's type."""
        if self._column_types is None:
            return {}
        version = _schema_version(change)
        columns = self._column_types(change.names.schema, change.names.table, version) or {}
        if change.view is None:
            return columns
        return {name: type_name for column, type_name in columns.items()
                if (name := change.view.field_of(column)) is not None}


def _schema_version(change: Upsert) -> int:
    return int(change.event.event.get("schema_version") or 0)


def _unmapped_below(state: IndexState, deep: Mapping[str, int] | None,
                    kinds: Mapping[str, int]) -> bool:
    """True when a value of a natively rendered batch (its ``deep`` paths, else its
    top-level ``kinds``) may lie below an object of ``state``'s mappings that lacks it
    (``new_subfields`` then maps it): a path holding more than nulls and empty lists
    (which nothing maps by value: else every such batch would come back), whose parents
    are all mapped objects and whose last name is not among their properties."""
    mappings = state.mappings
    if deep is None:  # paths not told: any object value in an object field may
        return any(bits & (KIND_OBJECT | KIND_ARRAY) and is_object(mappings.get(name) or {})
                   for name, bits in kinds.items())
    for path, bits in deep.items():
        if not bits & ~(KIND_NULL | KIND_ARRAY) or PATH_SEPARATOR not in path:
            continue
        names = path.split(PATH_SEPARATOR)
        mapping = mappings.get(names[0])
        for name in names[1:]:
            if mapping is None or not is_object(mapping):
                break
            mapping = mapping["properties"].get(name)
            if mapping is None:
                return True
    return False


def _addresses(hosts: Sequence[Any]) -> str:
    """The hosts as ``host:port``, without credentials or paths."""
    parts = [urlsplit(str(host)) for host in hosts]
    return ", ".join(f"{part.hostname}:{part.port or 9200}" for part in parts)


def create(config: OpenSearchSinkConfig, context: SinkContext) -> OpenSearchSink:
    """The sink for one worker (``SinkSpec.factory``); the runtime opens it.

    Column types come from the schema topic when the context carries the log.
    """
    prefix = context.topic_prefix
    column_types: ColumnTypes | None = None
    if context.log is not None and prefix:
        group = f"{context.connector or 'opensearch'}-schemas-{context.worker}"
        column_types = SchemaTopicColumns(context.log, f"{prefix}._schemas", group)
    return OpenSearchSink(config, topic_prefix=prefix, column_types=column_types)
