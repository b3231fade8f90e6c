"""``TypeCatalog``: which codec decodes a column of a given type OID.

Built-in types are known statically (``builtins``). User-defined types — enums, domains,
composites, ranges, multiranges and arrays of any of them — and built-ins this release
does not list are loaded from pg_catalog, together with every type they are built from.
The capture loads the column types of each Relation message it sees (``ensure``) and
reloads a type named by a pgoutput Type message (``reload``): the catalog is read as of
*now*, which matches the stream unless a type was altered since the change was made.
PostgreSQL sends no message when a composite type gains or loses an attribute (``ALTER
TYPE … ADD ATTRIBUTE``): a value whose attribute count its codec refuses makes the caller
read the composites again (``refresh_composites``).

``codec_for`` caches one codec per OID, so a relation's converters are built once.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import psycopg

from .arrays import array_codec
from .base import Codec, decode_text
from .builtins import (
    ARRAY_ELEMENTS,
    BASE_TYPES,
    FIRST_NON_BUILTIN_OID,
    MULTIRANGES,
    RANGES,
    SEMICOLON_DELIMITED,
    base_codec,
)
from .records import composite_codec, multirange_codec, range_codec

TypeKind = Literal["base", "array", "enum", "domain", "composite", "range", "multirange"]

_TYPES_SQL_14 = """
SELECT t.oid, n.nspname, t.typname, t.typtype, t.typcategory, t.typelem, t.typbasetype,
       t.typrelid, coalesce(e.typdelim, ','), r.rngsubtype, m.rngtypid
FROM pg_catalog.pg_type t
JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
LEFT JOIN pg_catalog.pg_type e ON e.oid = t.typelem
LEFT JOIN pg_catalog.pg_range r ON r.rngtypid = t.oid
LEFT JOIN pg_catalog.pg_range m ON m.rngmultitypid = t.oid
WHERE t.oid = ANY(%s::pg_catalog.oid[])
"""
_TYPES_SQL_13 = """
SELECT t.oid, n.nspname, t.typname, t.typtype, t.typcategory, t.typelem, t.typbasetype,
       t.typrelid, coalesce(e.typdelim, ','), r.rngsubtype, NULL::pg_catalog.oid
FROM pg_catalog.pg_type t
JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
LEFT JOIN pg_catalog.pg_type e ON e.oid = t.typelem
LEFT JOIN pg_catalog.pg_range r ON r.rngtypid = t.oid
WHERE t.oid = ANY(%s::pg_catalog.oid[])
"""
_ATTRIBUTES_SQL = """
SELECT a.attrelid, a.attname, a.atttypid
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = ANY(%s::pg_catalog.oid[]) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attrelid, a.attnum
"""
_MAX_DEPTH = 32


@dataclass(frozen=True, slots=True)
class TypeInfo:
    """What a codec needs to know about one type.

    ``inner`` is the element type (array), base type (domain), subtype (range) or range
    type (multirange); ``attributes`` the (name, type OID) pairs of a composite.
    """

    oid: int
    namespace: str
    name: str
    kind: TypeKind
    inner: int = 0
    delimiter: str = ","
    attributes: tuple[tuple[str, int], ...] = ()


def builtin_types() -> dict[int, TypeInfo]:
    """The statically known built-in types by OID."""
    types = {oid: TypeInfo(oid, "pg_catalog", name, "base") for oid, name in BASE_TYPES.items()}
    for oid, (name, subtype) in RANGES.items():
        types[oid] = TypeInfo(oid, "pg_catalog", name, "range", subtype)
    for oid, (name, range_oid) in MULTIRANGES.items():
        types[oid] = TypeInfo(oid, "pg_catalog", name, "multirange", range_oid)
    for oid, element in ARRAY_ELEMENTS.items():
        delimiter = ";" if element in SEMICOLON_DELIMITED else ","
        element_name = types[element].name if element in types else str(element)
        types[oid] = TypeInfo(oid, "pg_catalog", f"_{element_name}", "array", element,
                              delimiter)
    return types


class TypeCatalog:
    """Type OIDs → codecs; built-ins known, the others loaded from pg_catalog."""

    def __init__(self) -> None:
        self._builtins = builtin_types()
        self._types = dict(self._builtins)
        self._codecs: dict[int, Codec] = {}

    def get(self, oid: int) -> TypeInfo | None:
        """The type's description, or None if it is neither built in nor loaded."""
        return self._types.get(oid)

    def add(self, *types: TypeInfo) -> None:
        """Learn (or replace) types; forgets every cached codec."""
        for info in types:
            self._types[info.oid] = info
        self._codecs.clear()

    def missing(self, oids: Iterable[int]) -> set[int]:
        """The OIDs among ``oids`` this catalog does not know."""
        return {oid for oid in oids if oid not in self._types}

    def ensure(self, conn: psycopg.Connection[Any], oids: Iterable[int]) -> None:
        """Load from pg_catalog whichever of ``oids`` (and their parts) are not known."""
        self.load(conn, self.missing(oids))

    def reload(self, conn: psycopg.Connection[Any], oid: int) -> None:
        """Read one type again (after a pgoutput Type message), with its parts.

        A Type message for a domain column names the domain's base type, often a
        built-in one: built-ins never change, so those are not read again.
        """
        if oid < FIRST_NON_BUILTIN_OID and oid in self._builtins:
            return
        self.load(conn, [oid], refresh=True)

    def refresh_composites(self, conn: psycopg.Connection[Any]) -> set[int]:
        """Read every known composite type again; return the OIDs whose attributes changed
        (their codecs, and those of the types built from them, are rebuilt on demand)."""
        before = {oid: info for oid, info in self._types.items() if info.kind == "composite"}
        if not before:
            return set()
        self.load(conn, before, refresh=True)
        return {oid for oid, info in before.items() if self._types.get(oid) != info}

    def depends_on(self, oid: int, changed: set[int]) -> bool:
        """Whether type ``oid`` is one of ``changed`` or built from one (an array, domain,
        range or composite of it, at any depth)."""
        pending, seen = [oid], set()
        while pending:
            current = pending.pop()
            if current in changed:
                return True
            info = self._types.get(current)
            if current in seen or info is None:
                continue
            seen.add(current)
            pending.extend(type_oid for _, type_oid in info.attributes)
            if info.inner:
                pending.append(info.inner)
        return False

    def load(self, conn: psycopg.Connection[Any], oids: Iterable[int], *,
             refresh: bool = False) -> None:
        """Load ``oids`` from pg_catalog, then every type they are built from."""
        wanted = set(oids)
        query = _TYPES_SQL_14 if conn.info.server_version >= 140000 else _TYPES_SQL_13
        loaded: list[TypeInfo] = []
        seen: set[int] = set()
        for _ in range(_MAX_DEPTH):
            wanted -= seen
            if not wanted:
                break
            seen |= wanted
            rows = conn.execute(query, (sorted(wanted),)).fetchall()
            composites = [row[7] for row in rows if row[3] == "c"]
            attributes = _attributes(conn, composites) if composites else {}
            infos = [_type_info(row, attributes) for row in rows]
            loaded.extend(infos)
            parts = {info.inner for info in infos if info.inner}
            parts |= {oid for info in infos for _, oid in info.attributes}
            known = {info.oid for info in loaded}
            wanted = {oid for oid in parts if oid not in known and oid not in self._types}
        if loaded or refresh:
            self.add(*loaded)

    def codec_for(self, oid: int) -> Codec:
        """The codec of values of type ``oid`` (cached); unknown types keep their text."""
        codec = self._codecs.get(oid)
        if codec is None:
            codec = self._build(oid, ())
            self._codecs[oid] = codec
        return codec

    def codecs_for(self, oids: Sequence[int]) -> tuple[Codec, ...]:
        """One codec per column type, e.g. for a Relation's columns."""
        return tuple(self.codec_for(oid) for oid in oids)

    def _build(self, oid: int, building: tuple[int, ...]) -> Codec:
        info = self._types.get(oid)
        if info is None or oid in building or len(building) >= _MAX_DEPTH:
            return decode_text
        building = (*building, oid)
        if info.kind == "base":
            return base_codec(info.namespace, info.name)
        if info.kind == "domain":
            return self._build(info.inner, building)
        if info.kind == "array":
            return array_codec(self._build(info.inner, building), info.delimiter)
        if info.kind == "range":
            return range_codec(self._build(info.inner, building))
        if info.kind == "multirange":
            range_info = self._types.get(info.inner)
            subtype = range_info.inner if range_info is not None else 0
            return multirange_codec(self._build(subtype, (*building, info.inner)))
        if info.kind == "composite":
            return composite_codec([(name, self._build(type_oid, building))
                                    for name, type_oid in info.attributes])
        return decode_text  # enum


def _attributes(conn: psycopg.Connection[Any],
                relids: list[int]) -> dict[int, list[tuple[str, int]]]:
    found: dict[int, list[tuple[str, int]]] = {}
    for relid, name, type_oid in conn.execute(_ATTRIBUTES_SQL, (relids,)):
        found.setdefault(int(relid), []).append((str(name), int(type_oid)))
    return found


def _type_info(row: tuple[Any, ...], attributes: dict[int, list[tuple[str, int]]]) -> TypeInfo:
    (oid, namespace, name, typtype, category, element, base, relid, delimiter, subtype,
     multirange_of) = row
    oid, namespace, name = int(oid), str(namespace), str(name)
    if typtype == "d":
        return TypeInfo(oid, namespace, name, "domain", int(base))
    if typtype == "e":
        return TypeInfo(oid, namespace, name, "enum")
    if typtype == "c":
        return TypeInfo(oid, namespace, name, "composite",
                        attributes=tuple(attributes.get(int(relid), ())))
    if typtype == "r" and subtype is not None:
        return TypeInfo(oid, namespace, name, "range", int(subtype))
    if typtype == "m" and multirange_of is not None:
        return TypeInfo(oid, namespace, name, "multirange", int(multirange_of))
    if category == "A" and int(element) != 0 and name.startswith("_"):
        return TypeInfo(oid, namespace, name, "array", int(element), str(delimiter))
    return TypeInfo(oid, namespace, name, "base")
