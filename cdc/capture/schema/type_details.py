"""A column type's structure, for readers that type what they store (the OpenSearch sink).

Schema records name each column's type (``public.address``); ``describe_type`` adds what
the name alone does not tell: a composite's attributes with their own types, the element
of an array, the base type of a domain, the subtype of a range or multirange::

    {"type": "public.address", "kind": "composite",
     "attributes": [{"name": "street", "type": "pg_catalog.text", "kind": "base"}, …]}
    {"type": "pg_catalog._int4", "kind": "array", "of": {"type": "pg_catalog.int4", …}}
"""

from __future__ import annotations

from typing import Any

from ..codecs import TypeCatalog

_MAX_DEPTH = 8


def describe_type(catalog: TypeCatalog, oid: int, depth: int = 0) -> dict[str, Any]:
    """The structure of type ``oid`` as far as ``catalog`` knows it (see the docstring)."""
    info = catalog.get(oid)
    if info is None:
        return {"type": str(oid), "kind": "unknown"}
    detail: dict[str, Any] = {"type": f"{info.namespace}.{info.name}", "kind": info.kind}
    if depth >= _MAX_DEPTH:
        return detail
    if info.kind == "multirange":
        range_info = catalog.get(info.inner)
        inner = range_info.inner if range_info is not None else 0
        detail["of"] = describe_type(catalog, inner, depth + 1)
    elif info.kind in ("array", "domain", "range"):
        detail["of"] = describe_type(catalog, info.inner, depth + 1)
    elif info.kind == "composite":
        detail["attributes"] = [{"name": name, **describe_type(catalog, type_oid, depth + 1)}
                                for name, type_oid in info.attributes]
    return detail
