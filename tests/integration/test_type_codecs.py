"""Type codecs against a real PostgreSQL: a column of every type family, streamed over
pgoutput with ``ReplicationConnection`` + ``PgOutputDecoder`` + ``TypeCatalog``, each value
checked against an independent reading of the same row.

The oracle never goes through our codecs: psycopg's own Python values from ``SELECT``
(registered composite and range types, JSON numbers as ``Decimal``), ``extract(epoch …)``
for dates and timestamps (BC and infinite ones included, which Python cannot hold), and
PostgreSQL's own ISO-8601 interval output (``IntervalStyle=iso_8601``). The replication
session runs in the America/St_Johns time zone (offsets of -03:30, and -03:30:52 before
1935) so timestamptz values arrive with offsets the codec has to normalise to UTC.
"""

from __future__ import annotations

import base64
import json
import math
import re
import time
import uuid
from collections.abc import Generator, Iterator
from datetime import date, datetime
from datetime import time as dtime
from decimal import Decimal
from ipaddress import IPv4Address, IPv4Interface, IPv4Network, IPv6Address, IPv6Interface
from typing import Any

import orjson
import psycopg
import pytest
from psycopg import conninfo, sql
from psycopg.types.composite import CompositeInfo, register_composite
from psycopg.types.json import set_json_loads
from psycopg.types.multirange import Multirange
from psycopg.types.range import Range, RangeInfo, register_range

from cdc.capture.codecs import JSONValue, TypeCatalog
from cdc.capture.pgoutput import (
    Commit,
    Insert,
    PgOutputDecoder,
    Relation,
    StreamCommit,
    StreamStart,
    TypeMsg,
)
from cdc.capture.stream.replication import Keepalive, ReplicationConnection, XLogData

# column → (SQL type, one literal per row); {} in a type is the test's type-name prefix
COLUMNS: dict[str, tuple[str, list[str]]] = {
    "i2": ("int2", ["32767", "-32768", "0", "1"]),
    "i4": ("int4", ["2147483647", "-2147483648", "0", "1"]),
    "i8": ("int8", ["9223372036854775807", "-9223372036854775808", "0", "1"]),
    "o": ("oid", ["4294967295", "0", "1", "16384"]),
    "num": ("numeric", ["'1234567890123456789012345678901234567890.0123456789'", "'NaN'",
                        "'-Infinity'", "'-0.000100'"]),
    "f4": ("float4", ["3.14", "'NaN'", "'-Infinity'", "'1e-40'"]),
    "f8": ("float8", ["'1e308'", "'Infinity'", "0.1", "'-1.7976931348623157e308'"]),
    "b": ("bool", ["true", "false", "true", "false"]),
    "t": ("text", ["'héllo wörld ✓'", """'quote " back\\ , (p) {b} [s]'""", "''", "'NULL'"]),
    "vc": ("varchar(20)", ["'abc'", "' spaced '", "'tab\tchar'", "'nl\nchar'"]),
    "bp": ("char(5)", ["'ab'", "'abcde'", "''", "'ü'"]),
    "nm": ("name", ["'some_name'", "'Mixed Case'", "'x'", "'y'"]),
    "ch": ('"char"', ["'a'", "'Z'", "'q'", "'\"'"]),
    "ba": ("bytea", ["'\\x00ff10'", "'\\x'", "'\\x5c22'", "'hello'"]),
    "u": ("uuid", [f"'{uuid.UUID(int=n)}'" for n in (1, 2**128 - 1, 3, 4)]),
    "j": ("json", ["""'{"a": [1, 2.5, null], "b": "ü"}'""",
                   """'{"big": 123456789012345678901234567890}'""", "'[1e400, -0.5]'",
                   "'\"just a string\"'"]),
    "jb": ("jsonb", ["""'{"n": 0.1234567890123456789, "x": {"y": [true, false]}}'""",
                     "'[]'", """'{"k": "v", "i": -9223372036854775809}'""", "'12'"]),
    "d": ("date", ["'2024-02-29'", "'0044-03-15 BC'", "'infinity'", "'10000-01-01'"]),
    "tm": ("time", ["'04:05:06.789'", "'00:00:00'", "'23:59:59.999999'", "'12:00'"]),
    "ttz": ("timetz", ["'04:05:06+05:30'", "'23:59:59.5-08'", "'00:00:00+00'",
                       "'12:00:00-03:30'"]),
    "ts": ("timestamp", ["'2024-02-29 12:34:56.5'", "'0044-03-15 12:00:00 BC'",
                         "'-infinity'", "'10000-01-01 00:00:00'"]),
    "tstz": ("timestamptz", ["'2024-02-29 12:34:56.123456+00'", "'1850-06-01 12:00:00+00'",
                             "'infinity'", "'0044-03-15 12:00:00+00 BC'"]),
    "iv": ("interval", ["'1 year 2 mons 3 days 04:05:06.5'",
                        "'-1 years -2 mons +3 days -04:05:06.5'", "'0'",
                        "'-00:00:00.000001'"]),
    "ia": ("int[]", ["'{1,NULL,3}'", "'{}'", "'[0:1]={7,8}'", "'{{1,2},{3,4}}'"]),
    "ta": ("text[]", ["""'{"a b","NULL",NULL,"q\\"x","back\\\\s",""}'""", "'{}'",
                      "'{{a,b},{c,NULL}}'", """'{"{brace}","a,b","ü"}'"""]),
    "mo": ("{}_mood", ["'happy'", "'sad'", "'ok'", "'sad'"]),
    "pr": ("{}_price", ["'0.1'", "'12345678901234567890.123456789'", "'0'", "'1e3'"]),
    "ad": ("{}_address", ["ROW('1 Main St', 12345, ARRAY['a', 'b c'])",
                          """ROW(',quoted" (x)', NULL, '{}')""", "ROW(NULL, NULL, NULL)",
                          "ROW('', 0, ARRAY[NULL])"]),
    "fr": ("{}_floatrange", ["'[0.5,2)'", "'empty'", "'(,3.25]'", "'(-1,)'"]),
    "ir": ("int4range", ["'[1,10)'", "'empty'", "'(,5]'", "'(1,2]'"]),
    "tsr": ("tstzrange", ["""'["2024-01-01 00:00:00+00","2024-02-01 00:30:00+01")'""",
                          "'empty'", """'(,"1900-01-01 00:00:00+00"]'""", "'(,)'"]),
    "mr": ("int4multirange", ["'{[1,3),[5,7)}'", "'{}'", "'{(,0)}'", "'{[1,2]}'"]),
    "ip": ("inet", ["'10.0.0.1/8'", "'::1'", "'192.168.0.1'", "'2001:db8::1/64'"]),
    "net": ("cidr", ["'10.0.0.0/8'", "'2001:db8::/32'", "'192.168.1.0/24'", "'0.0.0.0/0'"]),
    "mac": ("macaddr", ["'08:00:2b:01:02:03'"] * 4),
    "mac8": ("macaddr8", ["'08:00:2b:01:02:03:04:05'"] * 4),
    "mn": ("money", ["'1.50'", "'-1234.56'", "'0'", "'1000000'"]),
    "bits": ("bit(4)", ["B'1010'", "B'0000'", "B'1111'", "B'0101'"]),
    "vbits": ("varbit", ["B'1'", "B''", "B'10101010101'", "B'0'"]),
}
TEMPORAL_AS_EPOCH = {"d", "ts", "tstz"}
PG14 = 140000  # multirange types and numeric ±Infinity


def columns_of(conn: psycopg.Connection[Any]) -> dict[str, tuple[str, list[str]]]:
    """``COLUMNS`` as the server has them: before 14, no multirange column and a finite
    numeric in place of '-Infinity'."""
    if conn.info.server_version >= PG14:
        return COLUMNS
    return {column: (kind, [("'-9.5e-3'" if kind == "numeric" and v == "'-Infinity'" else v)
                            for v in values])
            for column, (kind, values) in COLUMNS.items() if "multirange" not in kind}
_ISO = re.compile(r"([+-]?[0-9]{4,})-([0-9]{2})-([0-9]{2})"
                  r"(?:T([0-9]{2}):([0-9]{2}):([0-9]{2})(\.[0-9]+)?)?(Z)?")


def create_schema(conn: psycopg.Connection[Any], name: str) -> None:
    def ident(suffix: str) -> sql.Identifier:
        return sql.Identifier(f"{name}_{suffix}")

    conn.execute(sql.SQL("CREATE TYPE {} AS ENUM ('sad', 'ok', 'happy')").format(ident("mood")))
    conn.execute(sql.SQL("CREATE DOMAIN {} AS numeric CHECK (VALUE >= 0)")
                 .format(ident("price")))
    conn.execute(sql.SQL("CREATE TYPE {} AS (street text, zip int, tags text[])")
                 .format(ident("address")))
    conn.execute(sql.SQL("CREATE TYPE {} AS RANGE (subtype = float8)")
                 .format(ident("floatrange")))
    columns = sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(column), sql.SQL(kind.format(name)))
        for column, (kind, _) in columns_of(conn).items())
    conn.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, {})")
                 .format(sql.Identifier(name), columns))
    conn.execute(sql.SQL("CREATE PUBLICATION {} FOR TABLE {}")
                 .format(sql.Identifier(name), sql.Identifier(name)))


def insert_rows(conn: psycopg.Connection[Any], name: str) -> int:
    columns = columns_of(conn)
    rows = len(next(iter(columns.values()))[1])
    names = sql.SQL(", ").join(sql.Identifier(column) for column in columns)
    with conn.transaction():
        for row in range(rows):
            values = sql.SQL(", ").join(sql.SQL(literals[row]) for _, literals in columns.values())
            conn.execute(sql.SQL("INSERT INTO {} (id, {}) VALUES ({}, {})").format(
                sql.Identifier(name), names, sql.Literal(row + 1), values))
        conn.execute(sql.SQL("INSERT INTO {} (id) VALUES ({})").format(
            sql.Identifier(name), sql.Literal(rows + 1)))
    return rows + 1


def closing(messages: Generator[Any, None, None]) -> Iterator[Any]:
    """Iterate ``messages`` and close the generator (and its connection) when done."""
    try:
        yield from messages
    finally:
        messages.close()


def stream(dsn: str, slot: str, *, options: str) -> Generator[Any, None, None]:
    """Decoded pgoutput messages of the slot, with the replication session's ``options``."""
    repl = ReplicationConnection(conninfo.make_conninfo(dsn, options=options))
    try:
        consistent_point, _ = repl.create_slot(slot, temporary=True)
        decoder = PgOutputDecoder(2 if repl.server_version >= 140000 else 1)
        yield consistent_point
        repl.start(slot, [slot], start_lsn=consistent_point)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            message = repl.read(timeout=1.0)
            if isinstance(message, XLogData):
                yield decoder.decode(message.payload)
            elif isinstance(message, Keepalive) and message.reply_requested:
                repl.send_status(write=0, flush=0)
        raise AssertionError("the stream did not deliver the transaction within 60 s")
    finally:
        repl.close()


def oracle_rows(conn: psycopg.Connection[Any], name: str) -> dict[int, dict[str, Any]]:
    """Each row as psycopg reads it, with epochs for dates/timestamps and ISO intervals."""
    composite_info = CompositeInfo.fetch(conn, f"{name}_address")
    assert composite_info is not None
    register_composite(composite_info, conn)
    range_info = RangeInfo.fetch(conn, f"{name}_floatrange")
    assert range_info is not None
    register_range(range_info, conn)
    set_json_loads(lambda text: json.loads(text, parse_float=Decimal), conn)
    conn.execute("SET IntervalStyle = iso_8601")
    columns = columns_of(conn)
    selected = [sql.SQL("extract(epoch FROM {})").format(sql.Identifier(c))
                if c in TEMPORAL_AS_EPOCH else sql.SQL("{}::text").format(sql.Identifier(c))
                if c == "iv" else sql.Identifier(c) for c in columns]
    query = sql.SQL("SELECT id, {} FROM {} ORDER BY id").format(
        sql.SQL(", ").join(selected), sql.Identifier(name))
    return {row[0]: dict(zip(columns, row[1:], strict=True)) for row in conn.execute(query)}


def test_every_type_family_decodes_like_postgres_reads_it(postgres_dsn: str,
                                                          unique_name: str) -> None:
    name = unique_name
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        create_schema(conn, name)
        messages = stream(postgres_dsn, name, options="-c TimeZone=America/St_Johns")
        next(messages)  # the slot exists: what is inserted now is streamed
        expected_rows = insert_rows(conn, name)
        catalog = TypeCatalog()
        events: dict[int, dict[str, JSONValue]] = {}
        codecs: tuple[Any, ...] = ()
        columns: list[str] = []
        type_messages: list[str] = []
        for message in closing(messages):
            if isinstance(message, TypeMsg):
                type_messages.append(message.name)
                catalog.reload(conn, message.oid)
            elif isinstance(message, Relation):
                catalog.ensure(conn, [c.type_oid for c in message.columns])
                codecs = catalog.codecs_for([c.type_oid for c in message.columns])
                columns = [c.name for c in message.columns]
            elif isinstance(message, Insert):
                values = [None if v is None else codec(v)
                          for codec, v in zip(codecs, message.new, strict=True)]
                event = dict(zip(columns, values, strict=True))
                events[int(event["id"])] = event  # type: ignore[arg-type]
            elif isinstance(message, Commit) and events:
                break
        oracle = oracle_rows(conn, name)
        columns_checked = columns_of(conn)
    # pgoutput names a domain's base type in its Type message (here numeric)
    assert {f"{name}_mood", f"{name}_address", f"{name}_floatrange"} <= set(type_messages)
    assert sorted(events) == list(range(1, expected_rows + 1))
    orjson.dumps(events, option=orjson.OPT_NON_STR_KEYS)  # every value is plain JSON
    for row_id, event in events.items():
        for column in columns_checked:
            ours, theirs = event[column], oracle[row_id][column]
            assert same(ours, theirs, column), (
                f"row {row_id} column {column}: decoded {ours!r}, PostgreSQL has {theirs!r}")
    assert all(value is None for column, value in events[expected_rows].items()
               if column != "id")


def same(ours: JSONValue, theirs: Any, column: str) -> bool:
    """Whether our JSON value represents psycopg's value ``theirs`` exactly."""
    if theirs is None or ours is None:
        return ours is theirs
    if column in TEMPORAL_AS_EPOCH:  # extract(epoch …) is numeric from 14, a double before
        if not isinstance(ours, str):
            return False
        if isinstance(theirs, float):  # the double nearest the exact epoch (a µs apart: no)
            return float(iso_epoch(ours)) == theirs
        return bool(iso_epoch(ours) == theirs)
    if isinstance(theirs, bool):
        return ours is theirs
    if isinstance(theirs, float):
        if math.isnan(theirs):
            return ours == "NaN"
        if math.isinf(theirs):
            return ours == ("Infinity" if theirs > 0 else "-Infinity")
        return isinstance(ours, float) and ours == theirs
    if isinstance(theirs, Decimal | int) and column in ("j", "jb"):  # a JSON number
        if isinstance(ours, bool) or not isinstance(ours, int | float | str):
            return False  # a string only for what a double or an int64 cannot hold
        return Decimal(ours if isinstance(ours, str) else repr(ours)) == Decimal(theirs)
    if isinstance(theirs, Decimal):  # numeric: the very digits, as a string
        return isinstance(ours, str) and ours == format(theirs, "f")
    if isinstance(theirs, int):
        return isinstance(ours, int) and not isinstance(ours, bool) and ours == theirs
    if isinstance(theirs, bytes):
        return ours == base64.b64encode(theirs).decode()
    if isinstance(theirs, uuid.UUID | IPv4Address | IPv4Interface | IPv4Network
                  | IPv6Address | IPv6Interface) or type(theirs).__name__ == "IPv6Network":
        return ours == str(theirs)
    if isinstance(theirs, datetime):
        return isinstance(ours, str) and datetime.fromisoformat(ours) == theirs
    if isinstance(theirs, dtime):
        if not isinstance(ours, str):
            return False
        parsed = dtime.fromisoformat(ours)
        return parsed == theirs and parsed.utcoffset() == theirs.utcoffset()
    if isinstance(theirs, Range):
        return (isinstance(ours, dict) and len(ours) == 5
                and same(ours["lower"], theirs.lower, "") and same(ours["upper"], theirs.upper, "")
                and ours["lower_inc"] is theirs.lower_inc and ours["upper_inc"] is theirs.upper_inc
                and ours["empty"] is theirs.isempty)
    if isinstance(theirs, list | Multirange):
        return (isinstance(ours, list) and len(ours) == len(theirs)
                and all(same(a, b, column) for a, b in zip(ours, theirs, strict=True)))
    if isinstance(theirs, dict):
        return (isinstance(ours, dict) and ours.keys() == theirs.keys()
                and all(same(ours[k], theirs[k], column) for k in theirs))
    if hasattr(theirs, "_asdict"):  # a registered composite
        return same(ours, theirs._asdict(), column)
    return bool(ours == theirs)  # str: text, enum, money, bits, macaddr, interval (ISO)


def iso_epoch(text: str) -> Decimal:
    """Seconds since 1970-01-01 UTC of our ISO-8601 date/timestamp (astronomical years),
    through Python's own calendar: years are shifted by 400-year cycles into 1..9999."""
    if text in ("infinity", "-infinity"):
        return Decimal(text.replace("infinity", "Infinity"))
    match = _ISO.fullmatch(text)
    assert match is not None, text
    year, month, day, hour, minute, second, fraction, _ = match.groups()
    cycles = 0
    astronomical = int(year)
    while astronomical + cycles * 400 < 1:
        cycles += 1
    while astronomical + cycles * 400 > 9999:
        cycles -= 1
    days = (date(astronomical + cycles * 400, int(month), int(day)).toordinal()
            - cycles * 146097 - date(1970, 1, 1).toordinal())
    seconds = days * 86400 + int(hour or 0) * 3600 + int(minute or 0) * 60 + int(second or 0)
    return Decimal(seconds) + Decimal(fraction or "0")


def test_a_streamed_transaction_decodes_with_its_xid(postgres_dsn: str,
                                                     unique_name: str) -> None:
    name = unique_name
    with psycopg.connect(postgres_dsn, autocommit=True) as conn:
        if conn.info.server_version < PG14:  # README's version table
            pytest.skip("PostgreSQL 13: pgoutput protocol 1 has no streaming of large "
                        "transactions (protocol 2, PostgreSQL 14+): they are decoded at "
                        "their commit, as tests/integration/capture/test_capture_events.py "
                        "checks")
        conn.execute(sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, pad text)")
                     .format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE PUBLICATION {} FOR TABLE {}")
                     .format(sql.Identifier(name), sql.Identifier(name)))
        messages = stream(postgres_dsn, name, options="-c logical_decoding_work_mem=64kB")
        next(messages)
        conn.execute(sql.SQL("INSERT INTO {} SELECT g, repeat('x', 200) "
                             "FROM generate_series(1, 3000) g").format(sql.Identifier(name)))
        starts, inserts = 0, 0
        xids: set[int | None] = set()
        for message in closing(messages):
            if isinstance(message, StreamStart):
                starts += 1
                xids.add(message.xid)
            elif isinstance(message, Insert):
                inserts += 1
                xids.add(message.xid)
            elif isinstance(message, StreamCommit):
                xids.add(message.xid)
                break
    assert starts >= 2
    assert inserts == 3000
    assert len(xids) == 1 and None not in xids
