"""Fuzz targets of the native log and spool readers against the Python reference.

``log``: a chunk of a segment (well-formed records, then mutated: a byte changed, a line
cut, offsets out of order, raw bytes) read by ``decode_lines`` from a random start, with
a random limit, cursor and skipping flag: the same messages, end, cursor and error
(reason and position) as ``decode_lines_reference``; ``murmur2``, ``partition_for`` and
``crc32`` of the same bytes as their references.

``spool``: a file of stream spool frames (as ``StreamSpool.add`` writes them, mutated
or cut) read by ``spool_records`` in batches: the records ``CommittedSpool`` and
``complete`` make of its frames, or an error when a frame is damaged or cut short.
"""

from __future__ import annotations

import io
import struct
import zlib

from cdc.capture.events import CommitInfo, PendingEvent, complete
from cdc.log import Position, Record
from cdc.log.file.codec import encode_record
from tests.reference.log_codec import decode_lines_reference
from tests.reference.partitioner import murmur2_reference, partition_for_reference

from .fuzz_input import Choices
from .fuzz_native_checks import Core, NativeFault, native_call

_FRAME = struct.Struct(">IIIIIQ?")  # cdc/capture/stream/spool.py


def segment_chunk(choices: Choices) -> bytes:
    """Record lines as the log writes them, some mutated; or raw bytes."""
    if choices.chance(8):
        return choices.rest()
    out = b""
    offset = choices.below(4)
    for _ in range(choices.below(8) + 1):
        key = choices.pick([b'{"id":1}', b"{}", b'{"k":"\\u00e9\\n"}', choices.value()])
        value = choices.pick([b'{"op":"c"}', b"null", choices.value()])
        line = encode_record(offset, choices.below(3) << 40, Position(choices.byte() << 32,
                                                                      choices.byte()),
                             choices.chance(2), key, value)
        out += choices.mutate(line)
        offset += choices.pick([1, 1, 1, 1, 0, 2, -1])
    return out


def fuzz_log(core: Core, data: bytes) -> None:
    """``decode_lines`` of a segment chunk, against ``decode_lines_reference``."""
    choices = Choices(data)
    start = choices.below(4)
    limit = choices.pick([1, 2, 5, 1000])
    next_offset = choices.below(4)
    skipping = choices.chance(2)
    chunk = segment_chunk(choices)
    args = (chunk, start, limit, "t\u00e9", 3, next_offset, skipping)
    expected = decode_lines_reference(*args)
    actual = native_call("decode_lines", core.decode_lines, *args)
    assert actual == expected, f"decode_lines differs from the reference for {args!r}:\n" \
                               f"{actual!r}\nvs\n{expected!r}"
    error = actual[4]
    if error is not None:
        reason, position = error
        assert reason and start <= position <= len(chunk), f"an error without its place: {error}"
    assert native_call("murmur2", core.murmur2, chunk) == murmur2_reference(chunk)
    partitions = choices.pick([1, 2, 12, 1 << 31])
    assert native_call("partition_for", core.partition_for, chunk, partitions) == \
        partition_for_reference(chunk, partitions)
    assert native_call("crc32", core.crc32, chunk, start) == zlib.crc32(chunk, start)


def spool_chunk(choices: Choices) -> bytes:
    """Spool frames as ``StreamSpool.add`` writes them, some mutated; or raw bytes."""
    if choices.chance(8):
        return choices.rest()
    out = b""
    for _ in range(choices.below(8) + 1):
        topic = choices.pick([b"app.public.t", "app.\u00e9".encode(), b"\xff", b""])
        key = choices.pick([b'{"id":1}', choices.value()])
        body = choices.pick([b'{"op":"c","key":{"id":1}}', b"{}", choices.value() + b"}"])
        names = b'"schema":"public","table":"t"'
        frame = _FRAME.pack(choices.below(3), len(topic), len(key), len(body), len(names),
                            choices.byte() << 32 | choices.byte(), choices.chance(2))
        out += choices.mutate(frame + topic + key + body + names)
    return out


def _reference_spool(chunk: bytes, aborted: frozenset[int], commit: CommitInfo,
                     first_seq: int) -> tuple[list[Record], int]:
    """The records of the whole frames of ``chunk`` (as ``CommittedSpool`` reads them)
    and where the first frame not whole starts."""
    records: list[Record] = []
    at = 0
    seq = first_seq
    while at + _FRAME.size <= len(chunk):
        subxid, tl, kl, bl, nl, lsn, _ = _FRAME.unpack_from(chunk, at)
        tombstone = chunk[at + _FRAME.size - 1] != 0
        data = chunk[at + _FRAME.size:at + _FRAME.size + tl + kl + bl + nl]
        if len(data) < tl + kl + bl + nl:
            break
        at += _FRAME.size + len(data)
        if subxid in aborted:
            continue
        event = PendingEvent(data[:tl].decode(), data[tl:tl + kl], data[tl + kl:tl + kl + bl],
                             lsn, tombstone, data[tl + kl + bl:])
        records.append(Record(event.topic, event.key, complete(event, commit, seq),
                              Position(commit.commit_lsn, seq), event.tombstone))
        seq += 1
    return records, at


def _native_spool(core: Core, chunk: bytes, aborted: frozenset[int], commit: CommitInfo,
                  first_seq: int, limit: int) -> list[Record]:
    """The records ``spool_records`` reads from ``chunk`` as a file, ``limit`` a call and
    small reads (frames cut across reads), until it says the file is done."""
    file = io.BytesIO(chunk)
    records: list[Record] = []
    leftover, seq = b"", first_seq
    for _ in range(len(chunk) + 2):  # each call takes a record, reads or ends
        leftover, seq, done = native_call(
            "spool_records", core.spool_records, file, leftover, records, limit, 300, aborted,
            (commit.db, commit.commit_lsn, commit.commit_lsn_text, commit.tail), seq, 64)
        assert seq == first_seq + len(records), f"spool_records' next seq {seq}"
        if done:
            return records
    raise AssertionError(f"spool_records never ended over {chunk!r}")


def fuzz_spool(core: Core, data: bytes) -> None:
    """``spool_records`` over a chunk of spool frames, against the reference."""
    choices = Choices(data)
    aborted = frozenset(choices.pick([(), (1,), (0, 2)]))
    limit = choices.pick([1, 2, 1000])
    commit = CommitInfo(b'"app"', (9 << 32) + 0x900, 731, "2024-02-29T10:11:12Z")
    chunk = spool_chunk(choices)
    expected: object = ValueError  # a topic that is not UTF-8, a file cut inside a frame
    try:
        records, end = _reference_spool(chunk, aborted, commit, 4)
        if end == len(chunk):
            expected = records
    except UnicodeDecodeError:
        pass
    try:
        actual: object = _native_spool(core, chunk, aborted, commit, 4, limit)
    except NativeFault:
        raise
    except ValueError as error:
        assert "at byte" in str(error) and "damaged" in str(error), \
            f"spool_records' error says why and where: {error!r}"
        actual = ValueError
    assert actual == expected, f"spool_records differs from the reference for {chunk!r}:\n" \
                               f"{actual!r}\nvs\n{expected!r}"
