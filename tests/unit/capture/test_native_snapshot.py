"""The native snapshot converter against the Python reference: the same key and event
bytes for every row of COPY text, or the row handed back for Python to convert.

Random tables of the natively supported codecs (integers, bool, text, numeric, floats,
dates, timestamps) get random values as PostgreSQL writes them and also odd ones (BC
years, offsets, infinities, NaN, numbers past 64 bits or a double's range, non-UTF-8
bytes, control characters and COPY escapes, a wrong field count), rendered as COPY text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc.capture.codecs import (
    decode_bool,
    decode_bytea,
    decode_date,
    decode_float,
    decode_int,
    decode_interval,
    decode_json,
    decode_numeric,
    decode_text,
    decode_timestamp,
    decode_timestamptz,
    decode_timetz,
)
from cdc.capture.codecs.arrays import array_codec
from cdc.capture.codecs.records import composite_codec, multirange_codec, range_codec
from cdc.capture.events import CommitInfo, TableShape, complete, read_event
from cdc.capture.snapshot.copy import copy_row
from cdc.capture.snapshot.native import NativeTable
from cdc.log import Position, Record
from cdc.native import CORE

CHECKS = settings(max_examples=150, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
LSN = (5 << 32) + 0x1234


def _copy_escape(raw: bytes) -> bytes:
    """A value as COPY text writes it."""
    return (raw.replace(b"\\", b"\\\\").replace(b"\t", b"\\t").replace(b"\n", b"\\n")
            .replace(b"\r", b"\\r").replace(b"\b", b"\\b").replace(b"\f", b"\\f")
            .replace(b"\v", b"\\v"))


def _text(s: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    return s.map(lambda t: _copy_escape(t.encode()))


_ODD = st.one_of(st.text(max_size=6).map(lambda t: _copy_escape(t.encode())),
                 st.binary(max_size=6).filter(lambda b: b"\n" not in b and b"\t" not in b))


def _pg_timestamp(moment: datetime) -> str:
    """As timestamp_out writes it: trailing zeros of the fraction dropped."""
    text = moment.replace(microsecond=0).isoformat(sep=" ")
    return text + f".{moment.microsecond:06d}".rstrip("0") if moment.microsecond else text


def _moment(bc: bool) -> st.SearchStrategy[str]:
    return st.datetimes().map(lambda d: _pg_timestamp(d) + (" BC" if bc else ""))


_OFFSET = st.sampled_from(["+00", "+00", "+00", "-05", "+05:30", "+00:53:28", "-11:15"])
_FLOAT_TEXT = st.from_regex(r"-?[0-9]{1,22}(\.[0-9]{1,22})?([eE][+-]?[0-9]{1,3})?",
                            fullmatch=True)

# codec → what PostgreSQL writes for it (and odd values now and then)
VALUES: dict[Any, st.SearchStrategy[bytes]] = {
    decode_int: st.one_of(st.integers(-2**63, 2**64 + 5).map(lambda i: str(i).encode()),
                          st.sampled_from([b"-0", b"007", b"+1", b" 1", b"1_0", b""])),
    decode_bool: st.sampled_from([b"t", b"f", b"true", b"x"]),
    decode_text: st.one_of(_text(st.text()), _text(st.text(st.characters(max_codepoint=127))),
                           st.just(b"a\\x\\"), st.binary(max_size=8).map(_copy_escape)),
    decode_numeric: st.one_of(
        st.decimals(allow_nan=False, allow_infinity=False).map(lambda d: str(d).encode()),
        st.sampled_from([b"NaN", b"Infinity", b"-Infinity"])),
    decode_float: st.one_of(
        st.floats(allow_nan=False, allow_infinity=False).map(lambda f: repr(f).encode()),
        st.floats(width=32, allow_nan=False, allow_infinity=False).map(
            lambda f: repr(f).encode()),
        _FLOAT_TEXT.map(str.encode),
        st.sampled_from([b"NaN", b"Infinity", b"-Infinity", b"inf", b"1e999", b"nan"])),
    decode_date: st.one_of(
        st.dates().map(lambda d: d.isoformat().encode()),
        st.dates().map(lambda d: f"{d.isoformat()} BC".encode()),
        st.sampled_from([b"infinity", b"-infinity", b"10000-01-01", b"01/02/2024"])),
    decode_timestamp: st.one_of(
        _moment(False).map(str.encode), _moment(True).map(str.encode),
        st.sampled_from([b"infinity", b"-infinity", b"12345-01-01 00:00:00"])),
    decode_timestamptz: st.one_of(
        st.tuples(_moment(False), _OFFSET).map(lambda m: (m[0] + m[1]).encode()),
        st.tuples(_moment(False), _OFFSET).map(lambda m: (m[0] + m[1] + " BC").encode()),
        st.sampled_from([b"infinity", b"-infinity"])),
}


def _special(f: float) -> bytes:
    return {"inf": b"Infinity", "-inf": b"-Infinity", "nan": b"NaN"}.get(repr(f),
                                                                      repr(f).encode())


# what PostgreSQL writes under the capture's session settings: always converted natively
CANONICAL: dict[Any, st.SearchStrategy[bytes]] = {
    decode_int: st.integers(-2**63, 2**63 - 1).map(lambda i: str(i).encode()),
    decode_bool: st.sampled_from([b"t", b"f"]),
    decode_text: _text(st.text()),
    decode_numeric: st.one_of(st.decimals(allow_nan=False, allow_infinity=False).map(
        lambda d: str(d).encode()), st.sampled_from([b"NaN", b"Infinity", b"-Infinity"])),
    decode_float: st.floats().map(_special),
    decode_date: st.one_of(st.dates().map(lambda d: d.isoformat().encode()),
                           st.sampled_from([b"infinity", b"-infinity"])),
    decode_timestamp: st.one_of(st.datetimes().map(lambda d: _pg_timestamp(d).encode()),
                                st.sampled_from([b"infinity", b"-infinity"])),
    decode_timestamptz: st.one_of(
        st.datetimes().map(lambda d: (_pg_timestamp(d) + "+00").encode()),
        st.sampled_from([b"infinity", b"-infinity"])),
}


_JSON_ANY = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner,
                                                                  max_size=4),
    max_leaves=12)
_JSON_PLAIN = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6)
    | st.text(st.characters(categories=["L", "Zs"]), max_size=8)
    | st.sampled_from([0.5, -2.25, 1e-7, 1e300]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text("abc", max_size=3),
                                                                  inner, max_size=4),
    max_leaves=12)


def _json_text(value: object, ascii_only: bool, spaced: bool) -> bytes:
    separators = (", ", ": ") if spaced else (",", ":")  # jsonb's spacing, or none
    return _copy_escape(json.dumps(value, ensure_ascii=ascii_only,
                                   separators=separators).encode())


CANONICAL[decode_json] = st.builds(_json_text, _JSON_PLAIN, st.booleans(), st.booleans())
# bytea as COPY writes it (its backslash doubled): hex output, escape output, odd text
_HEX = st.binary(max_size=40).map(lambda raw: b"\\\\x" + raw.hex().encode())
VALUES[decode_bytea] = st.one_of(
    _HEX, _HEX.map(bytes.upper).map(lambda text: text.replace(b"\\X", b"\\x")),
    st.sampled_from([b"\\\\x", b"\\\\x6", b"\\\\x6g", b"\\\\x66 6f",
                     b"abc\\\\000", b"", b"x66", b"\\\\X66"]))
CANONICAL[decode_bytea] = _HEX


@st.composite
def _interval(draw: st.DrawFn) -> bytes:
    """``IntervalStyle=postgres`` output: signed years, months, days, then a time."""
    parts = []
    for unit in ("year", "mon", "day"):
        value = draw(st.none() | st.integers(-10**6, 10**6))
        if value is not None:
            sign = "+" if value >= 0 and draw(st.booleans()) else ""
            parts.append(f"{sign}{value} {unit}{'s' if draw(st.booleans()) else ''}")
    if draw(st.booleans()) or not parts:
        fraction = draw(st.none() | st.text("0123456789", min_size=1, max_size=7))
        parts.append(f"{draw(st.sampled_from(['', '-', '+']))}"
                     f"{draw(st.integers(0, 10**9)):02d}:{draw(st.integers(0, 59)):02d}:"
                     f"{draw(st.integers(0, 59)):02d}{'' if fraction is None else '.' + fraction}")
    return " ".join(parts).encode()


_TIMETZ_TEXT = st.builds(
    lambda t, offset: (t.isoformat() + offset).encode(), st.times(),
    st.sampled_from(["+00", "-05", "+05:30", "+00:53:28", "-11:15"]))
VALUES[decode_interval] = st.one_of(_interval(), st.sampled_from(
    [b"P1Y2M", b"infinity", b"-infinity", b"@ 1 year", b"1-2", b"", b"1 year ago",
     b"1234567890123456789 days"]))
CANONICAL[decode_interval] = _interval()
VALUES[decode_timetz] = st.one_of(_TIMETZ_TEXT, st.sampled_from(
    [b"10:11:12", b"10:11:12+2", b"10:11+02", b"24:00:00+00"]))
CANONICAL[decode_timetz] = _TIMETZ_TEXT


def _array_element(item: str | None) -> str:
    """One element as ``array_out`` writes it: quoted when it must be."""
    if item is None:
        return "NULL"
    if item == "" or item.upper() == "NULL" or any(c in item for c in '{},"\\ \t\n\r\v\f'):
        return '"' + item.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return item


@st.composite
def _array(draw: st.DrawFn, element: st.SearchStrategy[str]) -> bytes:
    """A one- or two-dimensional array literal of ``element`` texts (and NULLs), some
    with a dimension decoration, as COPY writes it."""
    items = st.none() | element
    if draw(st.booleans()):
        rows = draw(st.integers(1, 3))
        width = draw(st.integers(1, 3))
        text = "{" + ",".join(
            "{" + ",".join(_array_element(draw(items)) for _ in range(width)) + "}"
            for _ in range(rows)) + "}"
        decoration = f"[0:{rows - 1}][1:{width}]="
    else:
        values = draw(st.lists(items, max_size=5))
        text = "{" + ",".join(_array_element(v) for v in values) + "}"
        decoration = f"[-1:{len(values) - 2}]=" if values else ""
    if decoration and draw(st.booleans()):
        text = decoration + text
    return _copy_escape(text.encode())


INT_ARRAY, TEXT_ARRAY = array_codec(decode_int), array_codec(decode_text)
_INT_TEXT = st.integers(-2**63, 2**63 - 1).map(str)
CANONICAL[INT_ARRAY] = _array(_INT_TEXT)
CANONICAL[TEXT_ARRAY] = _array(st.text(st.characters(exclude_categories=["Cs"])))
_ODD_ARRAYS = st.sampled_from([b"{1,,2}", b"{", b"{1 2}", b"[1:2]{1,2}", b"{{1},2}",
                               b"{1}{2}", b'{"a}', b"{x}", b'{"NULL"}', b"{ 1 , 2 }",
                               b"{{},{}}", b"[1:1]={NULL}"])
VALUES[INT_ARRAY] = st.one_of(CANONICAL[INT_ARRAY], _ODD_ARRAYS)
VALUES[TEXT_ARRAY] = st.one_of(CANONICAL[TEXT_ARRAY], _ODD_ARRAYS)


@st.composite
def _range(draw: st.DrawFn, bound: st.SearchStrategy[str]) -> bytes:
    """A range literal as ``range_out`` writes it (bounds quoted when they must be), or
    ``empty``, as COPY writes it."""
    if draw(st.integers(0, 9)) == 0:
        return b"empty"
    bounds = []
    for _ in range(2):
        value = draw(st.none() | bound)
        if value is None:
            bounds.append("")
        elif value == "" or any(c in value for c in ',()[]"\\ '):
            bounds.append('"' + value.replace("\\", "\\\\").replace('"', '""') + '"')
        else:
            bounds.append(value)
    text = f"{draw(st.sampled_from('[('))}{bounds[0]},{bounds[1]}{draw(st.sampled_from('])'))}"
    return _copy_escape(text.encode())


INT_RANGE, TS_RANGE = range_codec(decode_int), range_codec(decode_timestamp)
CANONICAL[INT_RANGE] = _range(_INT_TEXT)
CANONICAL[TS_RANGE] = _range(st.datetimes().map(_pg_timestamp))
_ODD_RANGES = st.sampled_from([b"[1)", b"[1,2,3)", b"[1]", b"[(1,2)", b'["1,2)', b"[x,2)",
                               b"Empty", b"[1,2"])
VALUES[INT_RANGE] = st.one_of(CANONICAL[INT_RANGE], _ODD_RANGES)
VALUES[TS_RANGE] = st.one_of(CANONICAL[TS_RANGE], _ODD_RANGES)
VALUES[decode_json] = st.one_of(
    st.builds(_json_text, _JSON_ANY, st.booleans(), st.booleans()),
    st.sampled_from([b'{"a": 1, "a": 2}', b'"\\ud800"', b'"\\ud83d\\ude00"', b"1e400",
                     b" [1 , 2] ", b"01", b"[1,]", b"NaN", b"-0", b"1E5", b"[" * 70 + b"]" * 70,
                     b'"\\/\\b\\u0001"', b"123456789012345", b"1234567890123456",
                     b"[1e400, 0.1, 1.10, 1e-400, 0e-5]", b"0.1000000000000000055511",
                     b"[18446744073709551615, 18446744073709551616, -9223372036854775809]",
                     b'{"id": 1234567890123456789, "x": 12345678901234567890.5}',
                     b"1e-400", b"-0.0", b"1e-12345678901234567"]))


def _value(codec: Any) -> st.SearchStrategy[bytes]:
    return st.one_of(VALUES[codec], VALUES[codec], VALUES[codec], st.just(b"\\N"), _ODD)


@st.composite
def tables(draw: st.DrawFn) -> tuple[TableShape, bytes, list[bool]]:
    """A table of supported codecs, its rows as one COPY chunk, and which rows hold only
    what PostgreSQL writes (those the native path must convert itself)."""
    names = draw(st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=6,
                          unique=True))
    codecs = tuple(draw(st.sampled_from(list(VALUES))) for _ in names)
    keys = tuple(draw(st.lists(st.sampled_from(range(len(names))), unique=True,
                               max_size=len(names))))
    shape = TableShape(16384, "public", "t", "db.public.t", tuple(names), codecs, keys,
                       draw(st.integers(1, 2**40)), b'"schema":"public","table":"t"')
    lines = []
    canonical = []
    for _ in range(draw(st.integers(1, 8))):
        clean = draw(st.booleans())
        if clean:
            fields = [draw(st.one_of(CANONICAL[codec], st.just(b"\\N"))) for codec in codecs]
        else:
            fields = [draw(_value(codec)) for codec in codecs]
            if draw(st.integers(0, 20)) == 0:  # a field too many or too few
                fields = fields[:-1] if draw(st.booleans()) else [*fields, b"1"]
        lines.append(b"\t".join(fields) + b"\n")
        canonical.append(clean)
    return shape, b"".join(lines), canonical


def _reference(shape: TableShape, line: bytes) -> tuple[bytes, bytes]:
    event = read_event(shape, copy_row(line), LSN)
    return event.key, event.body


def _references(shape: TableShape, lines: list[bytes]) -> list[tuple[bytes, bytes]]:
    return [_reference(shape, line) for line in lines]


def _outcome(convert: Callable[[], object]) -> object:
    """What ``convert`` returns, or the error it raises (the reference refuses some
    values, e.g. bytes that are not UTF-8 in a numeric: the native path must too)."""
    try:
        return convert()
    except Exception as exc:  # compared, not hidden
        return (type(exc), str(exc))


@CHECKS
@given(tables())
def test_native_rows_are_the_reference_bytes(
        table: tuple[TableShape, bytes, list[bool]]) -> None:
    shape, chunk, canonical = table
    native = NativeTable.of(shape)
    assert native is not None
    lines = chunk.split(b"\n")[:-1]
    items = CORE.snapshot_rows(chunk, native.plan)
    assert len(items) == len(lines)
    for line, item, clean in zip(lines, items, canonical, strict=True):
        if isinstance(item, tuple):
            assert item == _reference(shape, line), line
        else:
            assert not clean, f"PostgreSQL's own output fell back: {line!r}"
            assert item == line
        assert (_outcome(partial(native.bodies, line + b"\n", LSN))
                == _outcome(partial(_references, shape, [line])))


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(tables(), st.integers(0, 2**40))
def test_native_records_are_complete_events(table: tuple[TableShape, bytes, list[bool]],
                                            first_seq: int) -> None:
    shape, chunk, _ = table
    native = NativeTable.of(shape)
    assert native is not None
    commit = CommitInfo(b'"app"', LSN, 0, "2026-01-02T03:04:05.000006Z", snapshot=True)
    lines = chunk.split(b"\n")[:-1]
    expected = _outcome(lambda: [
        Record(shape.topic, *_completed(shape, line, commit, seq), Position(LSN, seq))
        for seq, line in enumerate(lines, first_seq)])
    records = _outcome(lambda: native.records(chunk, commit, first_seq))
    assert records == expected
    if isinstance(records, list):
        assert all(type(r) is Record and type(r.position) is Position for r in records)


def _completed(shape: TableShape, line: bytes, commit: CommitInfo,
               seq: int) -> tuple[bytes, bytes]:
    event = read_event(shape, copy_row(line), LSN)
    return event.key, complete(event, commit, seq)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(list(VALUES)), min_size=1, max_size=4),
       st.binary(max_size=200))
def test_any_bytes_give_the_reference_result_or_its_error(
        codecs: list[Any], noise: bytes) -> None:
    shape = _shape(tuple(codecs))
    native = NativeTable.of(shape)
    assert native is not None
    chunk = noise if noise.endswith(b"\n") else noise + b"\n"
    lines = chunk.split(b"\n")[:-1]
    assert len(CORE.snapshot_rows(chunk, native.plan)) == len(lines)
    for line in lines:
        assert (_outcome(partial(native.bodies, line + b"\n", LSN))
                == _outcome(partial(_references, shape, [line])))


def _shape(codecs: tuple[Any, ...]) -> TableShape:
    names = tuple(f"c{i}" for i in range(len(codecs)))
    return TableShape(1, "s", "t", "db.s.t", names, codecs, (0,), 1, b'"schema":"s"')


def test_common_rows_are_converted_natively() -> None:
    shape = _shape((decode_int, decode_text, decode_numeric, decode_float, decode_bool,
                    decode_date, decode_timestamp, decode_timestamptz))
    native = NativeTable.of(shape)
    assert native is not None
    chunk = (b"1\tsome \\\\ \\t text \xc3\xa9\t12.50\t1.5e-07\tt\t2024-02-29\t"
             b"2024-02-29 10:11:12.5\t2024-02-29 10:11:12+00\n"
             b"2\t\\N\tNaN\t-Infinity\tf\tinfinity\t-infinity\tinfinity\n")
    items = CORE.snapshot_rows(chunk, native.plan)
    assert all(isinstance(item, tuple) for item in items)
    assert items == _references(shape, chunk.split(b"\n")[:-1])


def test_values_python_must_decide_come_back_as_lines() -> None:
    shape = _shape((decode_int, decode_timestamptz))
    native = NativeTable.of(shape)
    assert native is not None
    chunk = b"1\t2024-01-01 00:00:00+2\nx\t\\N\n2\t0044-03-15 10:00:00+02 BC\n"
    lines = chunk.split(b"\n")[:-1]
    items = CORE.snapshot_rows(chunk, native.plan)
    assert items[:2] == lines[:2]  # an offset PostgreSQL never writes; not an integer
    assert items[2] == (b'{"c0":2}', _references(shape, lines[2:])[0][1])
    bodies = native.bodies(chunk, LSN)
    assert [k for k, _ in bodies] == [b'{"c0":1}', b'{"c0":"x"}', b'{"c0":2}']
    assert b'"unparsed":["c1"]' in bodies[0][1]
    assert b'"unparsed":["c0"]' in bodies[1][1]
    assert b'"c1":"-0043-03-15T08:00:00Z"' in bodies[2][1]


def test_tables_with_other_codecs_stay_on_the_python_path() -> None:
    for other in (composite_codec([("a", decode_int)]), multirange_codec(decode_int),
                  array_codec(decode_int, ";"), array_codec(range_codec(decode_int))):
        assert NativeTable.of(_shape((decode_int, other))) is None, other
    for native in (array_codec(decode_int), range_codec(decode_int)):
        assert NativeTable.of(_shape((decode_int, native))) is not None, native
    assert NativeTable.of(_shape((decode_int, decode_interval))) is not None
    assert NativeTable.of(_shape((decode_int, decode_bytea))) is not None
    assert NativeTable.of(_shape((decode_int, decode_text))) is not None


def test_dates_move_across_offsets_like_the_reference() -> None:
    # a sanity check of the reference the property test relies on (no native needed)
    moment = datetime(2024, 1, 1) - timedelta(hours=2)
    assert decode_timestamptz("2024-01-01 00:00:00+02") == moment.isoformat() + "Z"
