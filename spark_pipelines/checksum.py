"""A content checksum of a table that Spark and plain Python compute alike.

Each row becomes a canonical text: its columns sorted by name, each ``name US value``
(unit separator ``\\x1f``), joined by the record separator ``\\x1e``; ``NULL`` is ``\\N``.
Values in canonical form: integers and decimals as their digits (a decimal keeps its
scale: ``12.50``), booleans ``true``/``false``, a timestamp with time zone as
microseconds since the Unix epoch, a timestamp without one as
``YYYY-MM-DDTHH:MM:SS.ffffff``, a date ``YYYY-MM-DD``, bytes in base64, JSON values as
compact JSON, text as it is. (Floating-point columns use Spark's text of a double, which
Python's ``repr`` matches only for ordinary magnitudes.)

The row's hash is the first 60 bits of the SHA-256 of its text; the table's checksum is
the sum of the hashes modulo 2^64 as 16 hex digits: independent of row order, so the
PostgreSQL side computes it from ``SELECT *`` without sorting.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import orjson
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    DataType,
    DateType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from .columns import quoted

NULL_TEXT = "\\N"
FIELD_SEPARATOR = "\x1f"
ROW_SEPARATOR = "\x1e"
HASH_HEX_DIGITS = 15
MODULUS = 1 << 64
_PART_DIGITS = 5  # HASH_HEX_DIGITS in three parts
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _spark_text(column: Column, data_type: DataType) -> Column:
    if isinstance(data_type, TimestampType):
        text = F.unix_micros(column).cast("string")
    elif isinstance(data_type, TimestampNTZType):
        text = F.date_format(column, "yyyy-MM-dd'T'HH:mm:ss.SSSSSS")
    elif isinstance(data_type, DateType):
        text = F.date_format(column, "yyyy-MM-dd")
    elif isinstance(data_type, BinaryType):
        text = F.base64(column)
    else:
        text = column.cast("string")
    return F.coalesce(text, F.lit(NULL_TEXT))


def row_text(schema: StructType) -> Column:
    """The canonical text of a row of ``schema`` (see the module docstring)."""
    fields = sorted(schema.fields, key=lambda f: f.name)
    return F.concat_ws(ROW_SEPARATOR, *[
        F.concat(F.lit(f.name + FIELD_SEPARATOR), _spark_text(F.col(quoted(f.name)), f.dataType))
        for f in fields])


def spark_checksum(frame: DataFrame) -> tuple[int, str]:
    """``(row count, checksum)`` of ``frame``'s rows (every column counts).

    The 60-bit hashes are summed as three 20-bit parts in longs (no overflow below 2^43
    rows), then put together: the same sum as one of 60-bit numbers, without the decimal
    arithmetic such a sum needs in Spark (measured: 1.74 -> 0.95 s for 1 M rows)."""
    digest = F.sha2(row_text(frame.schema), 256)
    return _summed(frame, [F.conv(F.substring(digest, 1 + start, _PART_DIGITS), 16, 10)
                           .cast("long") for start in range(0, HASH_HEX_DIGITS, _PART_DIGITS)])


def row_hash(schema: StructType) -> Column:
    """A row's 60-bit hash (the one ``spark_checksum`` sums) as a long: kept beside the
    row, it gives the checksum of many rows from that one column."""
    digest = F.sha2(row_text(schema), 256)
    return F.conv(F.substring(digest, 1, HASH_HEX_DIGITS), 16, 10).cast("long")


def hash_checksum(frame: DataFrame, column: str) -> tuple[int, str]:
    """``(row count, checksum)`` of ``frame``'s rows from their ``row_hash`` in
    ``column``: the same as ``spark_checksum`` of the columns hashed, reading one."""
    hashed = F.col(quoted(column))
    bits = 4 * _PART_DIGITS
    mask = (1 << bits) - 1
    return _summed(frame, [F.shiftright(hashed, 2 * bits), F.shiftright(hashed, bits)
                           .bitwiseAND(F.lit(mask)), hashed.bitwiseAND(F.lit(mask))])


def _summed(frame: DataFrame, parts: list[Column]) -> tuple[int, str]:
    """The row count and the checksum from each row's hash in 20-bit ``parts``, the
    most significant first (summed apart: no long overflows below 2^43 rows)."""
    row = frame.agg(F.count(F.lit(1)).alias("rows"),
                    *[F.sum(part).alias(f"part{i}") for i, part in enumerate(parts)]).collect()[0]
    total = 0
    for i in range(len(parts)):
        total = (total << (4 * _PART_DIGITS)) + int(row[f"part{i}"] or 0)
    return int(row["rows"]), f"{total % MODULUS:016x}"


def value_text(value: Any) -> str:
    """The canonical text of a Python value as psycopg returns it."""
    if value is None:
        return NULL_TEXT
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | Decimal | str):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            return str((value - _EPOCH) // _MICROSECOND)
        return value.isoformat(timespec="microseconds")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode()
    return orjson.dumps(value).decode()


def python_checksum(rows: Iterable[Mapping[str, Any]]) -> tuple[int, str]:
    """``(row count, checksum)`` of rows as dicts (for example from ``SELECT *``)."""
    count, total = 0, 0
    for row in rows:
        text = ROW_SEPARATOR.join(f"{name}{FIELD_SEPARATOR}{value_text(row[name])}"
                                  for name in sorted(row))
        total += int(hashlib.sha256(text.encode()).hexdigest()[:HASH_HEX_DIGITS], 16)
        count += 1
    return count, f"{total % MODULUS:016x}"


_MICROSECOND = datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC) - _EPOCH
