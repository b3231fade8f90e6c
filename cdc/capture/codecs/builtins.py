"""The built-in types, known without asking the server.

Built-in OIDs are fixed by PostgreSQL (below 10000, ``FirstGenbkiObjectId``; pgoutput
sends no Type message for them). The tables were taken from a PostgreSQL 15 catalog;
a built-in type missing here is looked up in pg_catalog like a user-defined one, and
its codec chosen by its name (``BASE_CODECS``), so newer servers still work.
"""

from __future__ import annotations

from . import scalars
from .base import Codec, decode_text
from .interval import decode_interval
from .temporal import decode_date, decode_timestamp, decode_timestamptz, decode_timetz

FIRST_NON_BUILTIN_OID = 10000

# oid → name of the scalar (base) types in pg_catalog
BASE_TYPES: dict[int, str] = {
    16: "bool", 17: "bytea", 18: "char", 19: "name", 20: "int8", 21: "int2",
    22: "int2vector", 23: "int4", 24: "regproc", 25: "text", 26: "oid", 27: "tid",
    28: "xid", 29: "cid", 30: "oidvector", 114: "json", 142: "xml", 600: "point",
    601: "lseg", 602: "path", 603: "box", 604: "polygon", 628: "line", 650: "cidr",
    700: "float4", 701: "float8", 718: "circle", 774: "macaddr8", 790: "money",
    829: "macaddr", 869: "inet", 1033: "aclitem", 1042: "bpchar", 1043: "varchar",
    1082: "date", 1083: "time", 1114: "timestamp", 1184: "timestamptz", 1186: "interval",
    1266: "timetz", 1560: "bit", 1562: "varbit", 1700: "numeric", 1790: "refcursor",
    2202: "regprocedure", 2203: "regoper", 2204: "regoperator", 2205: "regclass",
    2206: "regtype", 2950: "uuid", 2970: "txid_snapshot", 3220: "pg_lsn",
    3614: "tsvector", 3615: "tsquery", 3734: "regconfig", 3769: "regdictionary",
    3802: "jsonb", 4072: "jsonpath", 4089: "regnamespace", 4096: "regrole",
    4191: "regcollation", 5038: "pg_snapshot", 5069: "xid8",
}

# array oid → element oid (the element's typdelim is "," except box's ";")
ARRAY_ELEMENTS: dict[int, int] = {
    143: 142, 199: 114, 271: 5069, 629: 628, 651: 650, 719: 718, 775: 774, 791: 790,
    1000: 16, 1001: 17, 1002: 18, 1003: 19, 1005: 21, 1006: 22, 1007: 23, 1008: 24,
    1009: 25, 1010: 27, 1011: 28, 1012: 29, 1013: 30, 1014: 1042, 1015: 1043, 1016: 20,
    1017: 600, 1018: 601, 1019: 602, 1020: 603, 1021: 700, 1022: 701, 1027: 604,
    1028: 26, 1034: 1033, 1040: 829, 1041: 869, 1115: 1114, 1182: 1082, 1183: 1083,
    1185: 1184, 1187: 1186, 1231: 1700, 1270: 1266, 1561: 1560, 1563: 1562, 2201: 1790,
    2207: 2202, 2208: 2203, 2209: 2204, 2210: 2205, 2211: 2206, 2949: 2970, 2951: 2950,
    3221: 3220, 3643: 3614, 3645: 3615, 3735: 3734, 3770: 3769, 3807: 3802, 3905: 3904,
    3907: 3906, 3909: 3908, 3911: 3910, 3913: 3912, 3927: 3926, 4073: 4072, 4090: 4089,
    4097: 4096, 4192: 4191, 5039: 5038, 6150: 4451, 6151: 4532, 6152: 4533, 6153: 4534,
    6155: 4535, 6157: 4536,
}
SEMICOLON_DELIMITED = frozenset({603})  # box

# range oid → (name, subtype oid); multirange oid → (name, range oid)
RANGES: dict[int, tuple[str, int]] = {
    3904: ("int4range", 23), 3906: ("numrange", 1700), 3908: ("tsrange", 1114),
    3910: ("tstzrange", 1184), 3912: ("daterange", 1082), 3926: ("int8range", 20),
}
MULTIRANGES: dict[int, tuple[str, int]] = {
    4451: ("int4multirange", 3904), 4532: ("nummultirange", 3906),
    4533: ("tsmultirange", 3908), 4534: ("tstzmultirange", 3910),
    4535: ("datemultirange", 3912), 4536: ("int8multirange", 3926),
}

# codec of a pg_catalog base type by name; every other base type keeps its text
BASE_CODECS: dict[str, Codec] = {
    "bool": scalars.decode_bool,
    **dict.fromkeys(("int2", "int4", "int8", "oid", "xid", "cid", "xid8"), scalars.decode_int),
    "float4": scalars.decode_float, "float8": scalars.decode_float,
    "numeric": scalars.decode_numeric,
    "bytea": scalars.decode_bytea,
    "json": scalars.decode_json, "jsonb": scalars.decode_json,
    "date": decode_date, "timestamp": decode_timestamp, "timestamptz": decode_timestamptz,
    "timetz": decode_timetz, "interval": decode_interval,
}


def base_codec(namespace: str, name: str) -> Codec:
    """The codec of a base type: a known pg_catalog one, else its text unchanged."""
    if namespace == "pg_catalog":
        return BASE_CODECS.get(name, decode_text)
    return decode_text
