"""Every type family with its edge values: one column per family, one row per value.

``columns(latin1=…)`` gives (name, SQL type, SQL literals, oracle converter, oracle SQL
kind); rows are built column-wise (row ``n`` takes each column's ``n``-th literal, NULL
past the end), so one table covers everything. ``TYPES_SQL`` creates the user-defined
types and extensions (``{p}`` is replaced by nothing: one database per scenario).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from . import oracle as o

Kind = Literal["value", "text", "range", "multirange", "rangearray"]

TYPES_SQL = (
    "CREATE EXTENSION citext", "CREATE EXTENSION hstore", "CREATE EXTENSION ltree",
    "CREATE EXTENSION cube",
    "CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy', 'quote\"d', ' with, {comma} ')",
    "CREATE DOMAIN price AS numeric CHECK (VALUE >= 0)",
    "CREATE DOMAIN pos_float AS float8",
    "CREATE TYPE address AS (street text, zip int, tags text[], amount numeric, "
    "at timestamptz, score float8)",
    "CREATE TYPE floatrange AS RANGE (subtype = float8)",
    "CREATE TYPE wrapper AS (inside address, m mood, doc jsonb, raw bytea, many address[])",
)


@dataclass(frozen=True)
class Column:
    name: str
    sql_type: str
    literals: tuple[str, ...]
    convert: o.Convert
    kind: Kind = "value"


def _c(name: str, sql_type: str, literals: list[str], convert: o.Convert,
       kind: Kind = "value") -> Column:
    return Column(name, sql_type, tuple(literals), convert, kind)


_BIG_NUMERIC = "(repeat('9', 600) || '.' || repeat('0123456789', 40))::numeric"
_ADDRESS = o.composite(street=o.same, zip=o.integer, tags=o.array(o.same), amount=o.numeric,
                       at=o.timestamptz, score=o.floating)
_WRAPPER = o.composite(inside=_ADDRESS, m=o.same, doc=o.json_value, raw=o.bytea,
                       many=o.array(_ADDRESS))


def columns(latin1: bool = False, server_major: int | None = None) -> list[Column]:
    """The catalogue (text values limited to LATIN1 characters when ``latin1``; the types a
    server of major version ``server_major`` has, when given: multiranges came in 14)."""
    every = _catalogue(latin1)
    if server_major is None or server_major >= 14:
        return every
    # PostgreSQL 13: no multiranges, no numeric infinities
    return [replace(c, literals=tuple(v for v in c.literals if "Infinity" not in v))
            if c.sql_type == "numeric" else c for c in every if c.kind != "multirange"]


def _catalogue(latin1: bool) -> list[Column]:
    texts = ["'héllo wörld ÿ £'", """'quote " back\\ , (p) {b} [s]'""", "''", "'NULL'",
             "E'tab\\tnl\\ncr\\r'", "repeat('long ', 400)", "'\\N'", "'\\\\N \\.'"]
    if not latin1:
        texts += ["'✓ 😀 日本'"]
    return [
        _c("i2", "int2", ["32767", "-32768", "0"], o.integer),
        _c("i4", "int4", ["2147483647", "-2147483648", "0"], o.integer),
        _c("i8", "int8", ["9223372036854775807", "-9223372036854775808", "0"], o.integer),
        _c("oi", "oid", ["4294967295", "0"], o.integer),
        _c("num", "numeric", [_BIG_NUMERIC, "'NaN'", "'Infinity'", "'-Infinity'",
                              "'-0.000100'", "'0'", "'-1e-130'", "'1e300'"], o.numeric),
        _c("f4", "float4", ["3.14", "'NaN'", "'Infinity'", "'-Infinity'", "'-0'", "'1e-40'",
                            "'3.4028235e38'"], o.floating),
        _c("f8", "float8", ["0.1::float8 + 0.2::float8", "'NaN'", "'-Infinity'", "'Infinity'",
                            "'-0'", "'5e-324'", "'1.7976931348623157e308'", "1"], o.floating),
        _c("b", "bool", ["true", "false"], o.same),
        _c("t", "text", texts, o.same),
        _c("vc", "varchar(20)", ["'abc'", "' spaced '"], o.same),
        _c("bp", "char(5)", ["'ab'", "'abcde'", "''"], o.same),
        _c("nm", "name", ["'Mixed Case'", "repeat('n', 63)"], o.same),
        _c("ch", '"char"', ["'a'", "'\"'"], o.same),
        _c("ba", "bytea", ["'\\x00ff10'", "'\\x'", "'\\x5c22'", "decode(repeat('ab', 200), 'hex')"],
           o.bytea),
        _c("u", "uuid", ["'00000000-0000-0000-0000-000000000001'",
                         "'ffffffff-ffff-ffff-ffff-ffffffffffff'"], o.same),
        _c("j", "json", ["""'{"a": [1, 2.5, null], "b": "ü"}'""",
                         """'{"big": 123456789012345678901234567890}'""", "'[1e400, -0.5]'",
                         "'\"just a string\"'", "'42'", "'[[1], {\"x\": []}]'", "'true'",
                         """'{"d": 0.1, "e": 1E+2, "f": -0.0}'""",
                         """'["\\u0000 \\ud83d\\ude00 \\"q\\" \\\\", {"a": 1, "a": 2}]'"""],
           o.json_value),
        _c("jb", "jsonb", ["""'{"n": 0.1234567890123456789, "x": {"y": [true, false]}}'""",
                           "'[]'", "'12'", """'"str"'""", "'[1, [2, 3]]'",
                           """'{"k": "v", "i": -9223372036854775809}'""", "'{}'",
                           "'[1e400, 0.1e-5, -0, 18446744073709551615, 1.5e300]'"],
           o.json_value),
        _c("jba", "jsonb[]", ["""ARRAY['[1, 2]'::jsonb, '{"a": 1}', '"s"', '3']""",
                              "ARRAY[]::jsonb[]", "ARRAY[NULL, '[]'::jsonb]"],
           o.array(o.json_value)),
        _c("d", "date", ["'2024-02-29'", "'0044-03-15 BC'", "'infinity'", "'-infinity'",
                         "'10000-01-01'", "'0001-01-01'", "'4713-01-01 BC'",
                         "'5874897-12-31'"], o.date),
        _c("tm", "time", ["'04:05:06.789'", "'00:00:00'", "'23:59:59.999999'", "'24:00:00'"],
           o.same),
        _c("ttz", "timetz", ["'04:05:06+05:30'", "'23:59:59.5-08'", "'00:00:00+00'",
                             "'12:00:00-03:30'", "'10:00:00+05:53:28'", "'24:00:00-15:59'"],
           o.timetz),
        _c("ts", "timestamp", ["'2024-02-29 12:34:56.5'", "'0044-03-15 12:00:00 BC'",
                               "'-infinity'", "'infinity'", "'10000-01-01 00:00:00'",
                               "'294276-12-31 23:59:59.999999'", "'2000-01-01 00:00:00.000001'",
                               "'4713-11-24 00:00:00 BC'"],
           o.timestamp),
        _c("tstz", "timestamptz", ["'2024-02-29 12:34:56.123456+00'",
                                   "'1850-06-01 12:00:00+00'", "'infinity'", "'-infinity'",
                                   "'0044-03-15 12:00:00+00 BC'", "'12000-06-01 00:00:00+00'",
                                   "'2024-06-01 00:00:00+05:45'"], o.timestamptz),
        _c("iv", "interval", ["'1 year 2 mons 3 days 04:05:06.5'",
                              "'-1 years -2 mons +3 days -04:05:06.5'", "'0'",
                              "'-00:00:00.000001'", "'1 day -1 second'", "'178000000 years'",
                              "'-3 mons 30 days'", "'-178000000 years'",
                              "'1 mon -1 day 00:00:00.000001'"], o.same),
        _c("ia", "int[]", ["'{1,NULL,3}'", "'{}'", "'[0:1]={7,8}'", "'{{1,2},{3,4}}'",
                           "'[-2:-1]={5,6}'", "'{NULL}'", "'[1:1][3:4]={{1,2}}'"],
           o.array(o.integer)),
        _c("ta", "text[]", ["""'{"a b","NULL",NULL,"q\\"x","back\\\\s",""}'""", "'{}'",
                            "'{{a,b},{c,NULL}}'", """'{"{brace}","a,b","ü"}'""",
                            """'{" lead","trail ","\\\\N","é\\"x"}'"""],
           o.array(o.same)),
        _c("fa", "float8[]", ["'{NaN,1.5,-Infinity,-0}'", "'{Infinity}'"], o.array(o.floating)),
        _c("na", "numeric[]", ["'{1.50,NaN,-0.0}'"], o.array(o.numeric)),
        _c("tsa", "timestamptz[]", ["ARRAY['infinity'::timestamptz, '0001-01-01 00:00:00+00 BC']"],
           o.array(o.timestamptz)),
        _c("baa", "bytea[]", ["ARRAY['\\x00'::bytea, NULL, '\\x']"], o.array(o.bytea)),
        _c("mo", "mood", ["'happy'", "'quote\"d'"], o.same),
        _c("moa", "mood[]", ["ARRAY['sad', 'quote\"d', ' with, {comma} ']::mood[]"],
           o.array(o.same)),
        _c("pr", "price", ["'0.1'", "'12345678901234567890.123456789'", "'0'"], o.numeric),
        _c("pf", "pos_float", ["'NaN'", "1.5"], o.floating),
        _c("ad", "address", ["ROW('1 Main St', 12345, ARRAY['a', 'b c'], 1.50, "
                             "'2024-01-01 00:00:00+00', 'NaN')",
                             """ROW(',quoted" (x)', NULL, '{}', 'NaN', 'infinity', '-0')""",
                             "ROW(NULL, NULL, NULL, NULL, NULL, NULL)"], _ADDRESS),
        _c("wr", "wrapper", ["ROW(ROW('s', 1, '{x}', 0, NULL, 1)::address, 'ok', "
                             """'{"j": [1]}', '\\x00ff', ARRAY[ROW(NULL, NULL, NULL, NULL, """
                             "NULL, 'Infinity')::address])"], _WRAPPER),
        _c("ada", "address[]", ["ARRAY[ROW('x', 1, NULL, 2, NULL, 1.5)::address, NULL]",
                                """ARRAY[ROW('a"b\\c (,)', 2, '{"x,y", "q\\"z"}', -0.5, """
                                "'0044-03-15 00:00:00+00 BC', '-0')::address]"],
           o.array(_ADDRESS)),
        _c("fr", "floatrange", ["'[0.5,2)'", "'empty'", "'(,3.25]'", "'(-1,)'"],
           o.range_of(o.floating), "range"),
        _c("ir", "int4range", ["'[1,10)'", "'empty'", "'(,5]'", "'(1,2]'", "'(,)'"],
           o.range_of(o.integer), "range"),
        _c("i8r", "int8range", ["'[-9223372036854775808,9223372036854775807)'"],
           o.range_of(o.integer), "range"),
        _c("nr", "numrange", ["'[1.50,2.000)'", "'(,-0.5]'", "'empty'"],
           o.range_of(o.numeric), "range"),
        _c("tsr", "tsrange", ["'[2024-01-01 00:00:00, infinity)'", "'(,\"0044-03-15 BC\")'"],
           o.range_of(o.timestamp), "range"),
        _c("tzr", "tstzrange", ["""'["2024-01-01 00:00:00+00","2024-02-01 00:30:00+01")'""",
                                "'empty'", """'(,"1900-01-01 00:00:00+00"]'"""],
           o.range_of(o.timestamptz), "range"),
        _c("dr", "daterange", ["'[2024-01-01,2024-02-01)'", "'[-infinity,infinity)'"],
           o.range_of(o.date), "range"),
        _c("mr", "int4multirange", ["'{[1,3),[5,7)}'", "'{}'", "'{(,0)}'"],
           o.range_of(o.integer), "multirange"),
        _c("nmr", "nummultirange", ["'{[1.5,2.5], (3,)}'"], o.range_of(o.numeric), "multirange"),
        _c("dmr", "datemultirange", ["'{[2024-01-01,2024-01-05)}'"], o.range_of(o.date),
           "multirange"),
        _c("ip", "inet", ["'10.0.0.1/8'", "'::1'", "'2001:db8::1/64'"], o.same),
        _c("cd", "cidr", ["'10.0.0.0/8'", "'2001:db8::/32'"], o.same),
        _c("mac", "macaddr", ["'08:00:2b:01:02:03'"], o.same),
        _c("mac8", "macaddr8", ["'08:00:2b:01:02:03:04:05'"], o.same),
        _c("mn", "money", ["'1.50'", "'-1234.56'"], o.same),
        _c("bits", "bit(4)", ["B'1010'"], o.same),
        _c("vbits", "varbit", ["B'1'", "B''"], o.same),
        _c("pt", "point", ["'(1.5,-2)'"], o.same),
        _c("bx", "box", ["'(1,1),(0,0)'"], o.same),
        _c("tv", "tsvector", ["'a fat:2 cat'"], o.same),
        _c("xm", "xml", ["'<a x=\"1\">t</a>'"], o.same),
        _c("lsn", "pg_lsn", ["'16/B374D848'"], o.same),
        _c("ln", "line", ["'{1,2,3}'"], o.same),
        _c("ls", "lseg", ["'[(0,0),(1,1)]'"], o.same),
        _c("pa", "path", ["'[(0,0),(1,1),(2,0)]'"], o.same),
        _c("pg", "polygon", ["'((0,0),(1,1),(1,0))'"], o.same),
        _c("cc", "circle", ["'<(1,2),3>'"], o.same),
        _c("tq", "tsquery", ["'fat & (rat | cat)'"], o.same),
        _c("jp", "jsonpath", ["'$.a[*] ? (@ > 1)'"], o.same),
        _c("x8", "xid8", ["'18446744073709551615'", "'0'"], o.integer),
        _c("xi", "xid", ["'4294967295'"], o.integer),
        _c("rc", "regclass", ["'pg_class'"], o.same),
        _c("rt", "regtype", ["'integer'"], o.same),
        _c("i2v", "int2vector", ["'1 2'"], o.same, "text"),
        _c("oiv", "oidvector", ["'1 2'"], o.same, "text"),
        _c("sn", "pg_snapshot", ["'10:20:10,14,15'"], o.same),
        _c("bxa", "box[]", ["'{(1,1),(0,0);(2,2),(1,1)}'"], o.array(o.same)),
        _c("iva", "interval[]", ["ARRAY['1 day'::interval, NULL, '-1 mons']"],
           o.array(o.same)),
        _c("jsa", "json[]", ["""ARRAY['{"a": 1}'::json, '[1e400]', 'null']"""],
           o.array(o.json_value)),
        _c("da", "date[]", ["ARRAY['infinity'::date, '0044-03-15 BC']"], o.array(o.date)),
        _c("tma", "time[]", ["'{04:05:06,24:00:00}'"], o.array(o.same)),
        _c("tta", "timetz[]", ["'{04:05:06+05:30}'"], o.array(o.timetz)),
        _c("tsaa", "timestamp[]", ["ARRAY['10000-01-01 00:00:00'::timestamp, '-infinity']"],
           o.array(o.timestamp)),
        _c("ua", "uuid[]", ["'{00000000-0000-0000-0000-000000000001}'"], o.array(o.same)),
        _c("bla", "bool[]", ["'{t,f,NULL}'"], o.array(o.same)),
        _c("bpa", "char(3)[]", ["ARRAY['ab'::char(3), 'a,b']"], o.array(o.same)),
        _c("ipa", "inet[]", ["'{10.0.0.1/8,::1}'"], o.array(o.same)),
        _c("mna", "money[]", ["ARRAY['1.50'::money]"], o.array(o.same)),
        _c("bta", "bit(2)[]", ["ARRAY[B'10', B'01']"], o.array(o.same)),
        _c("nma", "name[]", ["ARRAY['a b'::name, 'c']"], o.array(o.same)),
        _c("f4a", "float4[]", ["'{NaN,-0,1e-40}'"], o.array(o.floating)),
        _c("i8a", "int8[]", ["'{9223372036854775807,-9223372036854775808}'"],
           o.array(o.integer)),
        _c("ira", "int4range[]", ["ARRAY['[1,2)'::int4range, 'empty', NULL]"],
           o.range_of(o.integer), "rangearray"),
        _c("ci", "citext", ["'MiXeD'"], o.same),
        _c("hs", "hstore", ["'a=>1, \"b c\"=>NULL'"], o.same, "text"),
        _c("lt", "ltree", ["'top.science.astronomy'"], o.same),
        _c("cu", "cube", ["'(1, 2), (3, 4)'"], o.same),
    ]


def row_count(cols: list[Column]) -> int:
    """Rows needed for every literal of every column, plus one all-NULL row."""
    return max(len(c.literals) for c in cols) + 1
