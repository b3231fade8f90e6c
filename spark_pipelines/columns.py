"""A table's columns from the capture's schema topic, and what Spark does with each type.

The capture records every table's columns (name, PostgreSQL type, type modifier, key
flag) on ``<prefix>._schemas`` whenever they change. A job reads the newest version of
each table, so a row written before ``ALTER TABLE … ADD COLUMN`` simply has ``NULL`` in
the new column (as PostgreSQL shows it unless the column has a default).

Materialization runs on the events' JSON text (every column read as a string, exactly as
the event holds it); ``spark_type`` says what a column becomes in the Parquet output:

- ``int2/int4/int8/oid/xid`` → long; ``float4/float8`` → double; ``bool`` → boolean
- ``numeric(p, s)`` with ``p <= 38`` → ``decimal(p, s)`` (exact); unconstrained
  ``numeric`` (or wider) → its exact text
- ``timestamptz`` → timestamp (an instant, microseconds); ``timestamp`` → timestamp_ntz;
  ``date`` → date; ``bytea`` → binary
- everything else (text, uuid, json/jsonb, arrays, intervals, enums …) → the event's text
  (JSON text for structured values)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import orjson
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

_INTEGERS = frozenset({"int2", "int4", "int8", "oid", "xid", "cid", "xid8"})
_STRUCTURED = frozenset({"json", "jsonb"})
MAX_DECIMAL_PRECISION = 38


@dataclass(frozen=True, slots=True)
class Column:
    """One column: name, type (``pg_catalog.int4``), type modifier, part of the key."""

    name: str
    type: str
    type_modifier: int = -1
    key: bool = False

    @property
    def base_type(self) -> tuple[str, str]:
        """``(namespace, name)`` of the type (namespace ``""`` if not given)."""
        namespace, _, name = self.type.rpartition(".")
        return namespace, name


@dataclass(frozen=True, slots=True)
class TableColumns:
    """The columns of ``schema.table`` at its newest schema version."""

    schema: str
    table: str
    version: int
    columns: tuple[Column, ...]

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}"

    def text_schema(self) -> StructType:
        """Every column as a string: the event's JSON text of the value."""
        return StructType([StructField(c.name, StringType()) for c in self.columns])

    def typed_schema(self) -> StructType:
        """Every column as ``spark_type`` gives it (the Parquet output's schema)."""
        return StructType([StructField(c.name, spark_type(c)) for c in self.columns])


def quoted(name: str) -> str:
    """A column name as Spark SQL reads it: in backticks, a backtick in it doubled (a
    PostgreSQL name may hold dots, spaces and backticks)."""
    return "`" + name.replace("`", "``") + "`"


def spark_type(column: Column) -> DataType:
    """The Spark type a column's values keep (see the module docstring)."""
    namespace, name = column.base_type
    if namespace not in ("", "pg_catalog"):
        return StringType()
    if name in _INTEGERS:
        return LongType()
    if name in ("float4", "float8"):
        return DoubleType()
    if name == "bool":
        return BooleanType()
    if name == "numeric":
        precision, scale = numeric_precision(column.type_modifier)
        if precision is not None and precision <= MAX_DECIMAL_PRECISION and 0 <= scale <= precision:
            return DecimalType(precision, scale)
        return StringType()
    if name == "timestamptz":
        return TimestampType()
    if name == "timestamp":
        return TimestampNTZType()
    if name == "date":
        return DateType()
    if name == "bytea":
        return BinaryType()
    return StringType()


def numeric_precision(type_modifier: int) -> tuple[int | None, int]:
    """``(precision, scale)`` of a ``numeric`` type modifier; ``(None, 0)`` unconstrained."""
    if type_modifier < 4:
        return None, 0
    packed = type_modifier - 4
    return (packed >> 16) & 0xFFFF, packed & 0xFFFF


def json_value(column: Column, text: str | None) -> Any:
    """The event's JSON value of a column from its text (the inverse of reading it as a
    string): integers, floats and booleans get their JSON type back; json, arrays,
    ranges and composites are parsed; everything else is the text itself."""
    if text is None:
        return None
    namespace, name = column.base_type
    if namespace in ("", "pg_catalog"):
        if name in _INTEGERS:
            return int(text)
        if name in ("float4", "float8"):
            return text if text in ("NaN", "Infinity", "-Infinity") else float(text)
        if name == "bool":
            return text == "true"
        if not (name in _STRUCTURED or name.startswith("_") or name.endswith("range")):
            return text
    if text[:1] in ("{", "[") or name in _STRUCTURED:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            return text
    return text


def json_converter(column: Column) -> Callable[[str | None], Any]:
    """``json_value`` for one column, its type looked at once: a rebuild converts every
    value of every row, and the common types then cost one call (or none: text)."""
    namespace, name = column.base_type
    if namespace in ("", "pg_catalog"):
        if name in _INTEGERS:
            return _integer
        if name == "bool":
            return _boolean
        if not (name in _STRUCTURED or name.startswith("_") or name.endswith("range")
                or name in ("float4", "float8")):
            return _text
    return partial(json_value, column)


def passes_text(column: Column) -> bool:
    """Whether a column's JSON value is its text itself (``json_converter`` is the
    identity): a rebuild then takes the text as it is, with no call per value."""
    return json_converter(column) is _text


def _integer(text: str | None) -> int | None:
    return None if text is None else int(text)


def _boolean(text: str | None) -> bool | None:
    return None if text is None else text == "true"


def _text(text: str | None) -> str | None:
    return text


def table_columns(record: dict[str, Any]) -> TableColumns:
    """A schema-topic record as ``TableColumns``."""
    return TableColumns(
        str(record["schema"]), str(record["table"]), int(record["schema_version"]),
        tuple(Column(str(c["name"]), str(c.get("type", "")), int(c.get("type_modifier", -1)),
                     bool(c.get("key", False))) for c in record["columns"]))


def newest_versions(values: list[bytes | str]) -> dict[str, TableColumns]:
    """``schema.table`` → its newest columns, from the schema topic's record values."""
    newest: dict[str, TableColumns] = {}
    for value in values:
        columns = table_columns(orjson.loads(value))
        known = newest.get(columns.name)
        if known is None or columns.version >= known.version:
            newest[columns.name] = columns
    return newest
