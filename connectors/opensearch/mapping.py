"""Index mappings derived from a table's columns (by type when known, else by value).

With the column types of the capture's schema records:

- ``int2/int4/int8/oid`` → ``long``; ``float4/float8`` → ``double``; ``bool`` → ``boolean``
  (numbers with ``ignore_malformed``: ``"NaN"``/``"Infinity"`` stay in ``_source``)
- ``numeric`` → ``keyword`` with a ``double`` sub-field (``price.double``): the keyword
  keeps every digit for exact matches (and ``_source`` returns the exact text), the
  sub-field serves ranges, sorting and aggregations. ``scaled_float`` or ``double``
  alone would round the value a query matches against.
- ``date/timestamp/timestamptz`` → ``date`` (``ignore_malformed``: ``infinity`` and BC
  dates stay in ``_source`` without failing the document)
- text types, enums and anything unknown → ``text`` with a ``keyword`` sub-field
- ``json/jsonb`` → ``flat_object`` (any shape, no mapping explosion or conflicts);
  ``bytea`` → ``binary``; ``uuid``, ``time``, ``interval``, ``money`` … → ``keyword``;
  arrays map as their element type, domains as their base type.
- ranges and multiranges → an object ``{lower, upper, lower_inc, upper_inc, empty}``
  (``typed_fields``), bounds mapped as the subtype; composites → an object whose
  properties are the attributes, each mapped by its own type (the schema record's
  ``type_detail`` tells them).

Without types the first non-null value decides: booleans, integers (``long``), floats
(``double``), objects and lists of objects (``flat_object``), ISO-8601 dates and
timestamps (``date``), other text (``text`` + ``keyword``; numeric text is not guessed).

A joined view's records (``joined_mappings``): each level's columns by their types under
their field names, and each lookup and nested list as an ``object`` of its own table's
fields, to any depth, so ``customer.name`` is text and ``items.price`` a number as in a
plain view's documents.

A value below a field mapped as an object that its properties lack — an attribute added
to a composite type (``ALTER TYPE … ADD ATTRIBUTE``), a column added to a joined table —
is mapped the same way when it first appears (``new_subfields``): by its type where the
schema records tell it, else by its value; never by OpenSearch's dynamic mapping.

Every index is created with ``index.mapping.ignore_malformed``: a value a field cannot
index (a JSON scalar in a ``flat_object``, an object in a ``text`` field, ``"NaN"`` in a
``double``) is left out of the index and kept in ``_source``, so the document is never
refused for one column (``unindexed`` counts and reports such values).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from derived import JoinLevel

FieldMapping = dict[str, Any]
ColumnType = str | Mapping[str, Any]  # a type name, or a schema record's type_detail

TEXT: FieldMapping = {"type": "text",
                      "fields": {"keyword": {"type": "keyword", "ignore_above": 256}}}
NUMERIC: FieldMapping = {"type": "keyword",
                         "fields": {"double": {"type": "double", "ignore_malformed": True}}}
DATE: FieldMapping = {"type": "date", "ignore_malformed": True}
LONG: FieldMapping = {"type": "long", "ignore_malformed": True}
DOUBLE: FieldMapping = {"type": "double", "ignore_malformed": True}
BOOLEAN: FieldMapping = {"type": "boolean"}
KEYWORD: FieldMapping = {"type": "keyword", "ignore_above": 1024}
OBJECT: FieldMapping = {"type": "flat_object"}
BINARY: FieldMapping = {"type": "binary"}

_BY_TYPE: dict[str, FieldMapping] = {
    **dict.fromkeys(("int2", "int4", "int8", "oid", "xid", "xid8", "cid"), LONG),
    "float4": DOUBLE, "float8": DOUBLE, "numeric": NUMERIC, "bool": BOOLEAN,
    **dict.fromkeys(("date", "timestamp", "timestamptz"), DATE),
    **dict.fromkeys(("json", "jsonb"), OBJECT),
    "bytea": BINARY,
    **dict.fromkeys(("uuid", "time", "timetz", "interval", "money", "pg_lsn", "inet", "cidr",
                     "macaddr", "macaddr8", "bit", "varbit"), KEYWORD),
}
_RANGE_SUBTYPES = {"int4range": "int4", "int8range": "int8", "numrange": "numeric",
                   "tsrange": "timestamp", "tstzrange": "timestamptz", "daterange": "date",
                   "int4multirange": "int4", "int8multirange": "int8",
                   "nummultirange": "numeric", "tsmultirange": "timestamp",
                   "tstzmultirange": "timestamptz", "datemultirange": "date"}
_MAX_DEPTH = 16
_TIMESTAMP = re.compile(
    r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}(:?\d{2})?)?)?")


def mapping_for_type(type_name: str) -> FieldMapping:
    """The field mapping of a PostgreSQL type named ``namespace.name`` (or just ``name``)."""
    namespace, _, name = type_name.rpartition(".")
    if namespace not in ("", "pg_catalog"):
        return TEXT  # enums, extension types: their text (see ``mapping_for_column``)
    if name.startswith("_"):
        name = name[1:]  # an array maps as its element
    if name in _RANGE_SUBTYPES:
        return range_mapping(mapping_for_type(_RANGE_SUBTYPES[name]))
    return _BY_TYPE.get(name, TEXT)


def mapping_for_column(column_type: ColumnType) -> FieldMapping:
    """The field mapping of a column type: a type name, or a schema record's
    ``type_detail`` (``cdc.capture.schema.type_details``) that also tells what a composite,
    domain, array or range is made of."""
    return mapping_for_detail(column_type, 0) if isinstance(column_type, Mapping) \
        else mapping_for_type(column_type)


def range_mapping(bound: FieldMapping) -> FieldMapping:
    """A range (or multirange: a list of ranges) as the codecs write it, bounds as ``bound``."""
    return {"properties": {"lower": bound, "upper": bound, "lower_inc": BOOLEAN,
                           "upper_inc": BOOLEAN, "empty": BOOLEAN}}


def mapping_for_detail(detail: Mapping[str, Any], depth: int) -> FieldMapping:
    """The field mapping of a ``type_detail`` (nested at most ``_MAX_DEPTH`` deep)."""
    kind, inner = detail.get("kind"), detail.get("of")
    if depth >= _MAX_DEPTH:
        return TEXT
    if kind in ("array", "domain") and isinstance(inner, Mapping):
        return mapping_for_detail(inner, depth + 1)
    if kind in ("range", "multirange") and isinstance(inner, Mapping):
        return range_mapping(mapping_for_detail(inner, depth + 1))
    if kind == "composite":
        attributes = detail.get("attributes") or []
        return {"properties": {str(a["name"]): mapping_for_detail(a, depth + 1)
                               for a in attributes if isinstance(a, Mapping) and "name" in a}}
    return mapping_for_type(str(detail.get("type", "")))


def mapping_for_value(value: Any) -> FieldMapping | None:
    """The field mapping a value suggests, or ``None`` (null, empty list: decide later)."""
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int):
        return LONG
    if isinstance(value, float):
        return DOUBLE
    if isinstance(value, dict):
        return OBJECT
    if isinstance(value, list):
        first = next((item for item in value if item is not None), None)
        return mapping_for_value(first)
    if isinstance(value, str):
        return DATE if _TIMESTAMP.fullmatch(value) else TEXT
    return None


def new_fields(documents: Iterable[Mapping[str, Any]], known: Iterable[str],
               types: Mapping[str, ColumnType],
               given: Mapping[str, FieldMapping] | None = None) -> dict[str, FieldMapping]:
    """Mappings of the fields of ``documents`` not in ``known``; ``types`` gives the column
    type of a field where one is known, ``given`` a field's whole mapping (a joined
    view's objects)."""
    seen = set(known)
    found: dict[str, FieldMapping] = {}
    given = given or {}
    for document in documents:
        for field, value in document.items():
            if field in seen:
                continue
            type_name = types.get(field)
            mapping = (given[field] if field in given else mapping_for_column(type_name)
                       if type_name else mapping_for_value(value))
            if mapping is not None:
                found[field] = mapping
                seen.add(field)
    return found


def new_subfields(documents: Iterable[Mapping[str, Any]],
                  mapped: Mapping[str, FieldMapping], types: Mapping[str, ColumnType],
                  given: Mapping[str, FieldMapping] | None = None) -> dict[str, FieldMapping]:
    """Mappings of the values of ``documents`` below fields ``mapped`` as objects that
    their properties lack, as ``put_mapping`` properties (each new one under its
    parents): by the field's whole mapping from ``given`` or its column's type in
    ``types`` where that names it, else by the value (a null, unless typed: later)."""
    objects = {name: mapping for name, mapping in mapped.items() if is_object(mapping)}
    found: dict[str, FieldMapping] = {}
    if not objects:
        return found
    given = given or {}
    expected: dict[str, FieldMapping | None] = {}
    for document in documents:
        for name, mapping in objects.items():
            value = document.get(name)
            if value is None:
                continue
            if name not in expected:
                column_type = types.get(name)
                expected[name] = given.get(name) or (
                    mapping_for_column(column_type) if column_type else None)
            below = found.get(name) or {}
            _add_unmapped(value, mapping, expected[name], below, 0)
            if below:
                found[name] = below
    return found


def _add_unmapped(value: Any, mapped: Mapping[str, Any], expected: Mapping[str, Any] | None,
                  found: dict[str, Any], depth: int) -> None:
    """Into ``found`` (``{"properties": …}`` of what is new below ``mapped``, an object
    mapping): the keys of ``value`` (an object, or a list of them) ``mapped`` lacks."""
    if depth >= _MAX_DEPTH:
        return
    items = value if isinstance(value, list) else (value,)
    properties = mapped.get("properties") or {}
    wanted = (expected or {}).get("properties") or {}
    for item in items:
        if not isinstance(item, dict):
            continue
        for key, sub in item.items():
            have = properties.get(key)
            if have is None:
                if key not in found.get("properties", {}):
                    mapping = wanted.get(key) or mapping_for_value(sub)
                    if mapping is not None:  # a null untyped: nothing to map yet
                        found.setdefault("properties", {})[key] = mapping
            elif sub is not None and is_object(have):
                below = found.get("properties", {}).get(key) or {}
                _add_unmapped(sub, have, wanted.get(key), below, depth + 1)
                if below:
                    found.setdefault("properties", {})[key] = below


def is_object(mapping: Mapping[str, Any]) -> bool:
    """Whether a field mapping is an object's (properties of its own, no other type)."""
    return "properties" in mapping and mapping.get("type", "object") == "object"


def merged(mappings: Mapping[str, FieldMapping], added: Mapping[str, FieldMapping]
           ) -> dict[str, FieldMapping]:
    """``mappings`` with ``added`` (``put_mapping`` properties) merged in, as OpenSearch
    merges them: an object's new properties join its others."""
    result = dict(mappings)
    for name, mapping in added.items():
        known = result.get(name)
        if known is not None and is_object(known) and "properties" in mapping:
            result[name] = {**known, "properties": merged(known["properties"],
                                                          mapping["properties"])}
        else:
            result[name] = mapping
    return result


def joined_mappings(level: JoinLevel, types_of: Callable[[tuple[str, str]],
                                                         Mapping[str, ColumnType] | None]
                    ) -> dict[str, FieldMapping]:
    """The mappings of a joined view's record at ``level`` (the view itself: the whole
    record): its table's columns (``types_of(table)``) under their field names, each
    lookup and nested list an object of its own."""
    found: dict[str, FieldMapping] = {}
    for column, column_type in (types_of(level.table) or {}).items():
        name = level.view.field_of(column)
        if name is not None:
            found[name] = mapping_for_column(column_type)
    for joined in level.joined():
        found[joined.name] = {"type": "object", "properties": joined_mappings(joined, types_of)}
    return found


def index_body(alias: str, truncate_version: int, tombstone_retention_s: int,
               properties: Mapping[str, FieldMapping] | None = None, *,
               replicas: int | None = None) -> dict[str, Any]:
    """The body creating a concrete index behind ``alias``.

    ``_meta.distributary.truncate_version`` is the version of the truncate that emptied
    the table: older writes are skipped. ``index.gc_deletes`` is how long a deleted
    document's version is remembered, so a replayed older write cannot bring it back.
    ``replicas`` sets ``index.number_of_replicas`` (``None``: the cluster's default).
    """
    settings: dict[str, Any] = {"gc_deletes": f"{tombstone_retention_s}s",
                                "mapping": {"ignore_malformed": True}}
    if replicas is not None:
        settings["number_of_replicas"] = replicas
    return {
        "settings": {"index": settings},
        "mappings": {
            "_meta": {"distributary": {"truncate_version": truncate_version}},
            "date_detection": False,
            "numeric_detection": False,
            "dynamic_templates": [{"floats_as_double": {"match_mapping_type": "double",
                                                        "mapping": DOUBLE}}],
            "properties": dict(properties or {}),
        },
        "aliases": {alias: {"is_write_index": True}},
    }
