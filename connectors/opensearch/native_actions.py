"""Plain batches' bulk actions rendered by the native core (``distributary_native.
opensearch_actions``, ``native/src/python/opensearch.rs``) straight from the events' raw
JSON, without decoding them in Python.

A plain batch holds only inserts, updates (every column sent) and deletes, of tables no
view reads, with keys the native renderer reads (no float key column, ids within
OpenSearch's limit): for those the sink's Python path would write each row as it is,
``index_action``/``delete_action`` of ``encode_key(key)`` and ``after``. The renderer
gives those actions, and for each table the kinds of values its documents' fields hold
(``KIND_*`` bits) and those of every value by its path, objects' and arrays' included,
from which the sink tells whether the batch maps new fields and whether any value may be
unindexable, without a document in Python (``tests/reference/field_kinds.py`` is the
Python side of those bits). ``None`` leaves the
batch to the Python path (the reference, which decides everything else: truncates,
views, unchanged TOAST columns, bad events); ``tests/unit/connectors/
test_opensearch_native_actions.py`` holds both to the same bytes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, TypeAlias

from cdc.native import CORE
from connectors.contract import SinkEvent
from connectors.placeholders import TableNames

from .unindexed import fitting_types, mapping_kind

TableId: TypeAlias = tuple[str, str, str]  # (topic, schema, table)

KIND_STR = CORE.FIELD_KINDS["str"]
KIND_INT = CORE.FIELD_KINDS["int"]  # within a long
KIND_BIG_INT = CORE.FIELD_KINDS["big_int"]  # past a long
KIND_FLOAT = CORE.FIELD_KINDS["float"]
KIND_BOOL = CORE.FIELD_KINDS["bool"]
KIND_OBJECT = CORE.FIELD_KINDS["object"]
KIND_ARRAY = CORE.FIELD_KINDS["array"]
KIND_NULL = CORE.FIELD_KINDS["null"]
# reported with KIND_STR for "infinity" and "-infinity", which a date field cannot index
KIND_INFINITE_TEXT = CORE.FIELD_KINDS["infinite_text"]
KIND_TYPES: tuple[tuple[int, type], ...] = (
    (KIND_STR, str), (KIND_INT, int), (KIND_BIG_INT, int), (KIND_FLOAT, float),
    (KIND_BOOL, bool), (KIND_OBJECT, dict), (KIND_ARRAY, list))
PATH_SEPARATOR: str = CORE.PATH_SEPARATOR  # joins the names of a path in ``deep`` kinds
# a null is never looked at; a list's items are, one by one, under the list's mapping
_PASSED_OVER = KIND_NULL | KIND_ARRAY


class NativeBatch(NamedTuple):
    """A plain batch's actions: per event its payload, kind (``index``/``delete``) and
    table (a number into ``tables``); per table its names and its fields' kinds."""

    payloads: list[bytes]
    kinds: list[str]
    table_of: list[int]
    tables: list[TableNames]
    fields: list[dict[str, int]]
    deep: list[dict[str, int] | None]  # every value's path → its kinds; None: not read


class NativeActions:
    """Plain batches through the native renderer, with the aliases of the tables it met."""

    def __init__(self, viewed: set[tuple[str, str]], topic_prefix: str,
                 max_id_bytes: int) -> None:
        self._viewed = viewed
        self._prefix = topic_prefix
        self._max_id_bytes = max_id_bytes
        self._aliases: dict[TableId, str | None] = {}
        self._names: dict[TableId, TableNames] = {}

    def render(self, events: Sequence[SinkEvent], alias_of: Any) -> NativeBatch | None:
        """The actions of ``events``, or ``None``: Python decides. ``alias_of(names)``
        gives the alias a table's rows are written through."""
        batch = events if isinstance(events, list) else list(events)
        for _ in range(len(batch) + 1):  # each round adds a table: ends by then
            rendered, missing = CORE.opensearch_actions(batch, self._aliases,
                                                        self._max_id_bytes)
            if missing is None:
                if rendered is None:
                    return None
                payloads, kinds, table_of, tables, fields, deep = rendered
                return NativeBatch(payloads, kinds, table_of,
                                   [self._names[table] for table in tables], fields, deep)
            topic, schema, table = missing
            names = TableNames.of(topic, {"schema": schema, "table": table}, self._prefix)
            self._names[missing] = names
            viewed = (names.schema, names.table) in self._viewed
            self._aliases[missing] = None if viewed else str(alias_of(names))
        return None


def vouched(kinds: Mapping[str, int], mappings: Mapping[str, Mapping[str, Any]],
            fitting: Mapping[str, frozenset[type]]) -> bool:
    """True when no value of these kinds can be unindexable in these fields: every kind
    is one ``unindexed._unindexed_quickly`` skips without looking at the value (``fitting``
    is ``unindexed.always_fitting(mappings)``)."""
    for name, bits in kinds.items():
        mapping = mappings.get(name)
        if mapping is None:
            continue
        fit = fitting.get(name, frozenset())
        for bit, kind in KIND_TYPES:
            if bits & bit and kind not in fit and not (
                    bit == KIND_INT and mapping.get("type") == "long") and not (
                    bit == KIND_STR and _finite_date_text(bits, mapping)):
                return False
    return True


def _finite_date_text(bits: int, mapping: Mapping[str, Any]) -> bool:
    """True when a date field's strings are none of the infinities it cannot index
    (``unindexed._fits``: a date takes any other string)."""
    return not bits & KIND_INFINITE_TEXT and mapping_kind(mapping) == "date"


def deep_vouched(kinds: Mapping[str, int], mappings: Mapping[str, Mapping[str, Any]]) -> bool:
    """True when no value of these kinds at these paths (``NativeBatch.deep``: every value
    by its path, a list's items at the list's) can be unindexable in these mappings:
    each kind is one ``unindexed._unindexed_quickly`` skips without looking at the value,
    down objects' properties. A path below a field not mapped as an object is the
    field's to answer for (its own kinds then include an object or a list)."""
    for path, bits in kinds.items():
        mapping = _mapping_at(path.split(PATH_SEPARATOR), mappings)
        if mapping is not None and bits & ~_fitting_bits(mapping):
            return False
    return True


def _mapping_at(names: list[str], mappings: Mapping[str, Mapping[str, Any]]
                ) -> Mapping[str, Any] | None:
    mapping = mappings.get(names[0])
    for name in names[1:]:
        if mapping is None or mapping_kind(mapping) != "object":
            return None
        mapping = (mapping.get("properties") or {}).get(name)
    return mapping


def _fitting_bits(mapping: Mapping[str, Any]) -> int:
    """The kinds of values ``mapping`` indexes whatever the value."""
    kind = mapping_kind(mapping)
    if kind == "object":
        return KIND_OBJECT | _PASSED_OVER  # its properties are looked at by their paths
    if kind == "flat_object":
        return KIND_OBJECT | KIND_NULL  # a list must hold only objects: looked at
    types = fitting_types(mapping)
    bits = _PASSED_OVER | (KIND_INT if kind == "long" else 0) | (
        KIND_STR if kind == "date" else 0)  # not KIND_INFINITE_TEXT: looked at
    for bit, python_type in KIND_TYPES:
        if python_type in types:
            bits |= bit
    if types and str in types:  # every string fits, the infinities too
        bits |= KIND_INFINITE_TEXT
    return bits
