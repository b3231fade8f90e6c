"""The native log codec against the Python reference: the same bytes, records and errors.

Random records (JSON-ish and arbitrary keys and values, small and huge numbers,
tombstones) are encoded by both; chunks of lines, also mutated, truncated, reordered or
with numbers past 64 bits, are decoded by both. murmur2 and partition_for agree for any
bytes. The references live in ``tests/reference``.
"""

from __future__ import annotations

import json
import types
import zlib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc.errors import LogCorruptionError
from cdc.log import Position, Record
from cdc.log.file import codec
from cdc.log.file.codec import encode_record
from cdc.log.file.reader import PartitionReader
from cdc.log.file.segments import segment_name
from cdc.log.records import Message
from cdc.native import CORE
from tests.reference.log_codec import decode_lines_reference, encode_batch_reference
from tests.reference.partitioner import murmur2_reference, partition_for_reference

U64 = 2**64 - 1
CHECKS = settings(max_examples=150, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def test_record_fields_are_where_the_native_encoder_reads_them() -> None:
    # native/src/python/encode.rs reads a Record by position
    assert Record._fields[:6] == ("topic", "key", "value", "position", "tombstone",
                                  "timestamp_ms")


# -- values ----------------------------------------------------------------------------
numbers = st.one_of(st.integers(0, 300), st.integers(0, U64), st.integers(-2**63, 2**63),
                    st.integers(-2**90, 2**90))
json_values = st.recursive(
    st.none() | st.booleans() | numbers | st.floats(allow_nan=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12)
payloads = st.one_of(json_values.map(lambda v: json.dumps(v, ensure_ascii=False).encode()),
                     st.binary(max_size=80))
records = st.builds(
    Record, topic=st.just("app.public.t"), key=payloads, value=payloads,
    position=st.builds(Position, numbers, numbers), tombstone=st.booleans(),
    timestamp_ms=st.none() | st.just(0) | numbers)


@CHECKS
@given(batch=st.lists(records, max_size=30), first_offset=st.integers(0, 2**40),
       now_ms=numbers, size=st.integers(0, 2**40), back=st.integers(-8192, 8192),
       interval=st.integers(1, 2048))
def test_encode_batch_is_byte_identical(batch: list[Record],
                                        first_offset: int, now_ms: int, size: int, back: int,
                                        interval: int) -> None:
    args = (batch, first_offset, now_ms, size, size - back, interval)
    native = CORE.encode_batch(*args)
    assert native == encode_batch_reference(*args)
    lines, entries, _ = native
    assert type(lines) is bytes and all(type(e) is tuple for e in entries)
    assert lines == b"".join(
        encode_record(first_offset + i, r.timestamp_ms or now_ms, r.position, r.tombstone,
                      r.key, r.value) for i, r in enumerate(batch))


def test_encode_batch_names_the_bad_record() -> None:
    good = Record("t", b"1", b"2", Position(1, 2))
    spoilt: dict[str, Any] = {"key": "k", "value": None, "position": 7, "timestamp_ms": "soon"}
    for field, value in spoilt.items():
        with pytest.raises(TypeError, match=f"record 1: .*{field}"):
            CORE.encode_batch([good, good._replace(**{field: value})], 0, 1, 0, 0, 4096)
    with pytest.raises(TypeError, match=r"record 0 is not a cdc\.log\.Record"):
        CORE.encode_batch([("t", b"1")], 0, 1, 0, 0, 4096)  # type: ignore[list-item]
    with pytest.raises(OverflowError):
        CORE.encode_batch([good, good], U64, 1, 0, 0, 4096)


# -- decoding --------------------------------------------------------------------------
line_payloads = payloads.map(lambda p: p.replace(b"\n", b" "))
unsigned = st.integers(0, 300) | st.integers(0, U64) | st.sampled_from([U64, U64 + 1, 2**80])


@st.composite
def chunks(draw: st.DrawFn) -> bytes:
    """Lines as the writer makes them, then perhaps spoilt."""
    offset = draw(st.sampled_from([0, 7, 2**64 - 3, 2**70]) | st.integers(0, 2**70))
    lines = []
    for _ in range(draw(st.integers(0, 12))):
        offset += draw(st.sampled_from([1, 1, 1, 0, 2, -1]))
        lines.append(encode_record(max(offset, 0), draw(unsigned),
                                   Position(draw(unsigned), draw(unsigned | numbers)),
                                   draw(st.booleans()), draw(line_payloads),
                                   draw(line_payloads)))
    chunk = bytearray(b"".join(lines))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(chunk)))
        spoil = draw(st.sampled_from(["flip", "cut", "insert", "none", "none"]))
        if spoil == "flip" and at < len(chunk):
            chunk[at] ^= 1 << draw(st.integers(0, 7))
        elif spoil == "cut":
            del chunk[at:]
        elif spoil == "insert":
            chunk[at:at] = draw(st.binary(min_size=1, max_size=4))
    return bytes(chunk)


def same_decoding(*args: Any) -> None:
    native = CORE.decode_lines(*args)
    reference = decode_lines_reference(*args)
    assert native == reference
    for message in native[0]:
        assert type(message) is Message and type(message.position) is Position
        assert type(message.key) is bytes and type(message.tombstone) is bool


@CHECKS
@given(chunk=chunks(), start=st.integers(0, 400), limit=st.integers(-1, 15),
       next_offset=st.integers(0, 2**70) | st.integers(0, 20), skipping=st.booleans(),
       partition=st.integers(0, 7))
def test_decode_lines_matches_the_reference(chunk: bytes, start: int,
                                            limit: int, next_offset: int, skipping: bool,
                                            partition: int) -> None:
    same_decoding(chunk, min(start, len(chunk)), limit, "app.public.t", partition,
                  next_offset, skipping)
    same_decoding(chunk, 0, 1000, "t", partition, 0, True)


def test_decode_lines_reports_each_reason_where_the_line_starts() -> None:
    first = encode_record(5, 1, Position(1, 1), False, b'{"id":1}', b'{"op":"c"}')
    second = encode_record(6, 1, Position(1, 2), False, b'{"id":2}', b'{"op":"c"}')
    crc_broken = second.replace(b'"op"', b'"oq"')
    assert crc_broken != second
    body = second[18:-2].replace(b'"kl":8', b'"kl":7')
    wrong_length = b'{"crc":"%08x",%s}\n' % (zlib.crc32(body), body)
    cases = {
        first + b"garbage\n": "not a record line (bad framing or field order)",
        first + wrong_length: "key length does not match",
        first + crc_broken: "checksum mismatch",
        first + first: "offset 5 repeats or goes backwards",
    }
    for chunk, reason in cases.items():
        messages, end, next_offset, _, error = CORE.decode_lines(chunk, 0, 10, "t", 0, 0,
                                                                 False)
        assert [m.offset for m in messages] == [5] and next_offset == 6
        assert error == (reason, len(first)) and end == len(first)
        same_decoding(chunk, 0, 10, "t", 0, 0, False)
    with pytest.raises(TypeError):
        CORE.decode_lines("text", 0, 10, "t", 0, 0, False)  # type: ignore[arg-type]


# -- murmur2 ---------------------------------------------------------------------------
@CHECKS
@given(key=st.binary(max_size=70), partitions=st.integers(-3, 5000) | st.integers(2**31,
                                                                                  2**80))
def test_murmur2_and_partition_for_match(key: bytes,
                                         partitions: int) -> None:
    assert CORE.murmur2(key) == murmur2_reference(key)
    if partitions == 0:
        with pytest.raises(ZeroDivisionError):
            CORE.partition_for(key, partitions)
        return
    assert CORE.partition_for(key, partitions) == partition_for_reference(key, partitions)


# -- the reader ------------------------------------------------------------------------
def spoilt_segment(directory: Path, spoil: str) -> None:
    lines = [encode_record(i, 1, Position(10, i), False, b'{"id":%d}' % i, b'{"n":%d}' % i)
             for i in range(12)]
    if spoil == "flip":
        lines[5] = lines[5].replace(b'"n"', b'"m"')
    elif spoil == "repeat":
        lines.insert(6, lines[4])
    elif spoil == "garbage":
        lines.insert(8, b"{}\n")
    directory.mkdir(parents=True)
    (directory / segment_name(0)).write_bytes(b"".join(lines))


def corruption_report(directory: Path, start: int) -> tuple[object, ...]:
    reader = PartitionReader(directory, "app.public.t", 0)
    reader.seek(start)
    try:
        while reader.read(3):
            pass
    except LogCorruptionError as exc:
        return exc.offset, exc.reason, exc.file, exc.position, str(exc)
    finally:
        reader.close()
    raise AssertionError("the spoilt segment was read without an error")


@pytest.mark.parametrize("spoil", ["flip", "repeat", "garbage"])
@pytest.mark.parametrize("start", [0, 5])
def test_the_reader_reports_corruption_exactly_as_the_reference(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spoil: str,
        start: int) -> None:
    directory = tmp_path / "partition=0"
    spoilt_segment(directory, spoil)
    native = corruption_report(directory, start)
    monkeypatch.setattr(codec, "CORE", types.SimpleNamespace(decode_lines=decode_lines_reference))
    assert native == corruption_report(directory, start)
    assert native[2] == str(directory / segment_name(0))
