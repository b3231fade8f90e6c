"""Values a field's mapping cannot index: kept in ``_source``, counted and reported.

Indices are created with ``index.mapping.ignore_malformed`` (``mapping``), so OpenSearch
stores such a document whole and leaves the value out of the field's index; the bulk
response does not say so. ``UnindexedValues`` finds those values from the mappings the
sink knows — a string (``"NaN"``, ``"Infinity"``) or an out-of-range integer in a number
field, an object in a ``text``/``keyword``/``date`` field, ``infinity`` in a ``date``,
a JSON scalar or array of scalars in a ``flat_object``, one of these in an attribute of
an object — counts them in ``distributary_opensearch_unindexed_values_total{alias,field}``
and warns once per alias and field.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from typing import Any

from prometheus_client import Counter

log = logging.getLogger(__name__)

UNINDEXED = Counter("distributary_opensearch_unindexed_values",
                    "Values kept in _source that their field's mapping could not index.",
                    ("alias", "field"))

_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1
_NUMBERS = frozenset({"long", "integer", "short", "byte", "double", "float", "half_float",
                      "scaled_float", "unsigned_long"})
_SCALARS = frozenset({"text", "keyword", "binary", "boolean", "match_only_text", "wildcard"})
_DATE_INFINITIES = frozenset({"infinity", "-infinity"})
_SCALAR_TYPES = frozenset({str, int, float, bool})  # a list goes through _collect
_NUMBER_TYPES = frozenset({int, float})  # not bool, which is an int subclass
_FLOAT_ONLY = frozenset({float})
_DICT_ONLY = frozenset({dict})


def unindexed_fields(document: Mapping[str, Any],
                     mappings: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The (dotted) fields of ``document`` whose value ``mappings`` cannot index."""
    found: list[str] = []
    for name, value in document.items():
        mapping = mappings.get(name)
        if value is not None and mapping is not None:
            _collect(name, value, mapping, found, None)
    return found


def mapping_kind(mapping: Mapping[str, Any]) -> Any:
    """A field mapping's type (``object`` for one with properties and no type)."""
    return mapping.get("type", "object" if "properties" in mapping else None)


def fitting_types(mapping: Mapping[str, Any]) -> frozenset[type]:
    """The Python types whose every value ``mapping`` indexes (``_fits`` without looking
    at the value); empty when every value needs a look."""
    kind = mapping_kind(mapping)
    if kind in _SCALARS:
        return _SCALAR_TYPES
    if kind in _NUMBERS:
        return _FLOAT_ONLY if kind == "long" else _NUMBER_TYPES
    if kind == "flat_object":
        return _DICT_ONLY
    return frozenset()


def always_fitting(mappings: Mapping[str, Mapping[str, Any]]) -> dict[str, frozenset[type]]:
    """Field → ``fitting_types`` of its mapping: the per-document check skips those
    values."""
    return {name: types for name, mapping in mappings.items()
            if (types := fitting_types(mapping))}


# ``always_fitting`` of the mappings met in one batch, by their identity (the properties
# of an object field: a joined record's customer, each of its items)
_Fitting = dict[int, dict[str, frozenset[type]]]


def _unindexed_quickly(document: Mapping[str, Any], mappings: Mapping[str, Mapping[str, Any]],
                       fitting: Mapping[str, frozenset[type]],
                       objects: _Fitting | None = None) -> list[str]:
    """``unindexed_fields``, skipping the values ``fitting`` (``always_fitting``) vouches
    for, and so those of objects' properties (``objects``: theirs, kept for a batch), and
    in-range integers of ``long`` fields."""
    found: list[str] = []
    _collect_fields("", document, mappings, fitting, found, {} if objects is None else objects)
    return found


def _collect_fields(prefix: str, document: Mapping[str, Any],
                    mappings: Mapping[str, Mapping[str, Any]],
                    fits: Mapping[str, frozenset[type]], found: list[str],
                    objects: _Fitting | None) -> None:
    for name, value in document.items():
        kind = type(value)
        if kind in fits.get(name, ()) or value is None:
            continue
        mapping = mappings.get(name)
        if mapping is None:
            continue
        if kind is int and _LONG_MIN <= value <= _LONG_MAX and mapping.get("type") == "long":
            continue
        _collect(prefix + name, value, mapping, found, objects)


def _collect(path: str, value: Any, mapping: Mapping[str, Any], found: list[str],
             objects: _Fitting | None) -> None:
    """Add to ``found`` the paths in ``value`` that ``mapping`` cannot index; with
    ``objects``, objects' properties are vouched for as ``_unindexed_quickly`` does
    (without, every value is looked at: the reference)."""
    kind = mapping_kind(mapping)
    if isinstance(value, list) and kind != "flat_object":
        for item in value:
            if item is not None:
                _collect(path, item, mapping, found, objects)
                if found and found[-1] == path:
                    return
        return
    if kind == "object":
        if not isinstance(value, dict):
            found.append(path)
            return
        properties = mapping.get("properties") or {}
        fits: Mapping[str, frozenset[type]] = {}
        if objects is not None:
            known = objects.get(id(properties))
            if known is None:
                known = objects[id(properties)] = always_fitting(properties)
            fits = known
        _collect_fields(path + ".", value, properties, fits, found, objects)
    elif not _fits(value, kind):
        found.append(path)


def _fits(value: Any, kind: Any) -> bool:
    if kind in _NUMBERS:
        if isinstance(value, str):  # numeric text is coerced; "NaN", "Infinity" are not
            try:
                return math.isfinite(float(value))
            except ValueError:
                return False
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        return kind != "long" or not isinstance(value, int) or _LONG_MIN <= value <= _LONG_MAX
    if kind == "date":
        return isinstance(value, str) and value not in _DATE_INFINITIES
    if kind == "flat_object":
        return isinstance(value, dict) or (isinstance(value, list) and all(
            isinstance(item, dict) or item is None for item in value))
    if kind in _SCALARS:
        return not isinstance(value, dict)
    return True


class UnindexedValues:
    """Counts and reports (once per alias and field) the values ``unindexed_fields`` finds."""

    def __init__(self) -> None:
        self._warned: set[tuple[str, str]] = set()

    def observe(self, alias: str, mappings: Mapping[str, Mapping[str, Any]],
                documents: Iterable[Mapping[str, Any]]) -> int:
        """Count the unindexable values of ``documents`` written through ``alias``."""
        total = 0
        fitting = always_fitting(mappings)
        objects: _Fitting = {}  # the batch's mappings do not change while it is checked
        for document in documents:
            for field in _unindexed_quickly(document, mappings, fitting, objects):
                total += 1
                UNINDEXED.labels(alias, field).inc()
                if (alias, field) not in self._warned:
                    self._warned.add((alias, field))
                    log.warning("%s: a value of field %s cannot be indexed by its mapping; "
                                "the document is stored with the value in _source only "
                                "(counted in distributary_opensearch_unindexed_values_total)",
                                alias, field, extra={"sink": "opensearch"})
        return total
