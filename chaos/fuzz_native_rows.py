"""Fuzz target of the native snapshot path against the Python reference.

``copy``: a chunk of ``COPY … TO STDOUT`` text lines (values of every native kind, odd
ones, escapes, wrong field counts, raw bytes) of a table, converted four ways: the
events (``snapshot_rows``), the records (``snapshot_batch``'s) and the encoded lines of
each partition (``snapshot_batch``, twice ``extend``-ed in two halves, then ``parts``
and ``encode``). Each must be what ``read_event`` and ``complete`` make of every row
(through ``encode_batch_reference`` for the lines), or the same error.
"""

from __future__ import annotations

from cdc.capture.events import CommitInfo, TableShape, complete, read_event
from cdc.capture.snapshot.copy import copy_row
from cdc.capture.snapshot.native import NativeTable
from cdc.log import Position, Record
from tests.reference.log_codec import encode_batch_reference
from tests.reference.partitioner import partition_for_reference

from .fuzz_input import Choices
from .fuzz_native_changes import TABLES, relation, session
from .fuzz_native_checks import Core, NativeFault, calling, native_call

LSN = (5 << 32) + 0x1234
COMMIT = CommitInfo(b'"app"', LSN, 0, "2024-02-29T10:11:12Z", snapshot=True)
NOW_MS = 1_700_000_000_000


def _escape(raw: bytes) -> bytes:
    return (raw.replace(b"\\", b"\\\\").replace(b"\t", b"\\t").replace(b"\n", b"\\n")
            .replace(b"\r", b"\\r"))


def chunk_of(choices: Choices, types: list[int]) -> bytes:
    """Whole COPY text lines, each ending with a newline."""
    if choices.chance(6):
        raw = choices.rest()
        return raw if raw.endswith(b"\n") else raw + b"\n"
    lines = []
    for _ in range(choices.below(12) + 1):
        count = len(types) if not choices.chance(12) else choices.below(len(types) + 2)
        fields = []
        for index in range(count):
            kind = choices.below(16)
            value = choices.value_of(types[index] if index < len(types) else 25)
            fields.append(b"\\N" if kind == 15 else value if kind == 14 else _escape(value))
        lines.append(choices.mutate(b"\t".join(fields), 8).replace(b"\n", b""))
    return b"".join(line + b"\n" for line in lines)


def _shape(oid: int) -> TableShape:
    state = session("rows")
    state.assembler.feed(state.decoder.decode(relation(oid)), 0)
    shape = state.assembler.shapes.get(oid)
    state.assembler.spool.close()
    return shape


def _outcome(convert: object, *args: object) -> object:
    """What ``convert(*args)`` returns, or its error's type (a panic is a fault)."""
    try:
        return native_call("convert", convert, *args)  # type: ignore[arg-type]
    except NativeFault:
        raise
    except Exception as error:  # compared with the reference's
        return type(error)


def _reference_records(shape: TableShape, chunk: bytes, first_seq: int) -> list[Record]:
    out = []
    for index, line in enumerate(chunk.split(b"\n")[:-1]):
        event = read_event(shape, copy_row(line), LSN)
        seq = first_seq + index
        out.append(Record(shape.topic, event.key, complete(event, COMMIT, seq),
                          Position(LSN, seq)))
    return out


def _reference_bodies(shape: TableShape, chunk: bytes) -> list[tuple[bytes, bytes]]:
    out = []
    for line in chunk.split(b"\n")[:-1]:
        event = read_event(shape, copy_row(line), LSN)
        out.append((event.key, event.body))
    return out


def _reference_lines(shape: TableShape, chunk: bytes, first_seq: int, partitions: int
                     ) -> list[tuple[int, int, bytes]]:
    """``(partition, count, lines)`` of each partition, in order of first appearance."""
    groups: dict[int, list[Record]] = {}
    for record in _reference_records(shape, chunk, first_seq):
        partition = partition_for_reference(record.key, partitions) if partitions > 1 else 0
        groups.setdefault(partition, []).append(record)
    return [(partition, len(records),
             encode_batch_reference(records, 100, NOW_MS, 4096, 0, 512)[0])
            for partition, records in groups.items()]


def _native_lines(table: NativeTable, chunk: bytes, first_seq: int, partitions: int
                  ) -> list[tuple[int, int, bytes]]:
    lines = chunk.split(b"\n")[:-1]
    half = b"".join(line + b"\n" for line in lines[:len(lines) // 2])
    rest = chunk[len(half):]
    rows = table.rows(half, COMMIT, first_seq)
    rows = table.rows(rest, COMMIT, first_seq + len(rows), into=rows)
    return [(part.partition, part.count, part.encode(100, NOW_MS, 4096, 0, 512)[0])
            for part in rows.parts(partitions)]


def fuzz_copy(core: Core, data: bytes) -> None:
    """A COPY chunk through every native snapshot entry point, against the reference."""
    choices = Choices(data)
    oid = choices.pick([16401, 16402, 16404])
    partitions = choices.pick([1, 3, 7])
    shape = _shape(oid)
    table = NativeTable.of(shape)
    assert table is not None, f"the native core refuses the plan of {shape!r}"
    chunk = chunk_of(choices, [type_oid for _, _, type_oid in TABLES[oid]])
    with calling(core):
        checks = [
            ("snapshot_rows", _outcome(_reference_bodies, shape, chunk),
             _outcome(table.bodies, chunk, LSN)),
            ("records", _outcome(_reference_records, shape, chunk, 3),
             _outcome(table.records, chunk, COMMIT, 3)),
            ("snapshot_batch", _outcome(_reference_lines, shape, chunk, 3, partitions),
             _outcome(_native_lines, table, chunk, 3, partitions)),
        ]
    for name, expected, actual in checks:
        assert actual == expected, f"{name} differs from the reference for {chunk!r}:\n" \
                                   f"{actual!r}\nvs\n{expected!r}"
