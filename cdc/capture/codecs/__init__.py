"""Type codecs: pgoutput's text-format column values → the event's typed JSON values.

``TypeCatalog().codec_for(type_oid)`` gives a ``Codec`` (``str`` → ``JSONValue``) per
type: integers stay integers, ``numeric`` keeps its digits as a string, timestamps
become ISO-8601, ``bytea`` base64, arrays/json/jsonb/composites/ranges nested JSON, and
any type without a codec keeps its text. Each module's docstring states its
representation choices; ``CodecError`` reports a value its codec cannot read.
"""

from .arrays import array_codec, parse_array
from .base import Codec, CodecError, JSONValue, decode_text
from .catalog import TypeCatalog, TypeInfo, TypeKind, builtin_types
from .interval import decode_interval, iso_duration
from .records import (
    AttributeCountError,
    composite_codec,
    multirange_codec,
    parse_range,
    range_codec,
)
from .scalars import (
    decode_bool,
    decode_bytea,
    decode_float,
    decode_int,
    decode_json,
    decode_numeric,
)
from .temporal import (
    decode_date,
    decode_timestamp,
    decode_timestamptz,
    decode_timetz,
    pg_micros_to_iso,
)

__all__ = [
    "AttributeCountError",
    "Codec",
    "CodecError",
    "JSONValue",
    "TypeCatalog",
    "TypeInfo",
    "TypeKind",
    "array_codec",
    "builtin_types",
    "composite_codec",
    "decode_bool",
    "decode_bytea",
    "decode_date",
    "decode_float",
    "decode_int",
    "decode_interval",
    "decode_json",
    "decode_numeric",
    "decode_text",
    "decode_timestamp",
    "decode_timestamptz",
    "decode_timetz",
    "iso_duration",
    "multirange_codec",
    "parse_array",
    "parse_range",
    "pg_micros_to_iso",
    "range_codec",
]
