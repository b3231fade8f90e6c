"""The producer's one-pass path for the common batch (every record of one topic of one
partition, none with a partition of its own): the native ``encode_topic_batch`` against
its Python reference, the grouping that hands a one-partition batch over whole, and the
producer writing the same lines whichever way a batch goes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc.log import Position, Record
from cdc.log.file import FileLog, FileLogSettings, codec
from cdc.log.file.producer import FileProducer
from cdc.log.file.segments import INDEX_ENTRY
from cdc.native import CORE
from tests.reference.log_codec import encode_batch_reference, encode_topic_batch_reference

CHECKS = settings(max_examples=150, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                         HealthCheck.function_scoped_fixture])
U64 = 2**64 - 1
TOPIC = "app.public.one"

encode_topic: Any = CORE.encode_topic_batch  # untyped: the tests hand it odd records


def test_record_fields_are_where_the_one_pass_reads_them() -> None:
    # native/src/python/encode.rs reads a Record by position
    assert Record._fields == ("topic", "key", "value", "position", "tombstone",
                              "timestamp_ms", "partition")


numbers = st.one_of(st.integers(0, 300), st.integers(0, U64), st.integers(-2**63, 2**63),
                    st.integers(-2**90, 2**90))
one_topic_records = st.builds(
    Record,
    # an equal topic as another str object too: compared by value, not identity
    topic=st.sampled_from([TOPIC, "".join(list(TOPIC))]),
    key=st.binary(max_size=30), value=st.binary(max_size=60),
    position=st.builds(Position, numbers, numbers),
    tombstone=st.booleans() | st.integers(0, 2),
    timestamp_ms=st.none() | st.just(0) | numbers, partition=st.none())
strays = st.builds(  # records that do not belong to the one-pass batch
    Record, topic=st.sampled_from(["app.public.other", TOPIC]), key=st.binary(max_size=8),
    value=st.just(b"{}"), partition=st.sampled_from([None, 0, 1]))


@CHECKS
@given(batch=st.lists(one_topic_records, max_size=30),
       stray=st.none() | st.tuples(st.integers(0, 30), strays),
       first_offset=st.integers(0, 2**40), now_ms=numbers, size=st.integers(0, 2**40),
       back=st.integers(-8192, 8192), interval=st.integers(1, 2048))
def test_encode_topic_batch_is_the_reference(
        batch: list[Record], stray: tuple[int, Record] | None,
        first_offset: int, now_ms: int, size: int, back: int, interval: int) -> None:
    if stray is not None:
        batch.insert(min(stray[0], len(batch)), stray[1])
    args = (first_offset, now_ms, size, size - back, interval)
    native = encode_topic(batch, TOPIC, *args)
    expected = encode_topic_batch_reference(batch, TOPIC, *args)
    assert native == expected
    one_pass = all(r.topic == TOPIC and r.partition is None for r in batch)
    assert (expected is not None) == one_pass
    if expected is not None:
        lines, entries, last_indexed = encode_batch_reference(batch, *args)
        assert expected == (lines, b"".join(INDEX_ENTRY.pack(o, p) for o, p in entries),
                            last_indexed)
        assert type(native) is tuple and type(native[1]) is bytes


def test_encode_topic_batch_leaves_what_is_no_record_to_the_grouping() -> None:
    good = Record(TOPIC, b"1", b"2", Position(1, 2))
    for odd in [("t", b"1"), 7, good._replace(partition=0), good._replace(topic="other")]:
        assert encode_topic([good, odd], TOPIC, 0, 1, 0, 0, 4096) is None
    assert encode_topic([], TOPIC, 0, 1, 0, 0, 4096) == (b"", b"", 0)
    with pytest.raises(OverflowError):  # a segment has no negative size
        encode_topic([good], TOPIC, 0, 1, -1, 0, 4096)


def test_the_index_entry_is_the_index_files() -> None:
    assert codec.INDEX_ENTRY.format == INDEX_ENTRY.format == ">QQ"


def test_encode_topic_batch_names_the_bad_record() -> None:
    good = Record(TOPIC, b"1", b"2", Position(1, 2))
    spoilt: dict[str, Any] = {"key": "k", "value": None, "position": 7, "timestamp_ms": "soon"}
    for field, value in spoilt.items():
        with pytest.raises(TypeError, match=f"record 1: .*{field}"):
            encode_topic([good, good._replace(**{field: value})], TOPIC, 0, 1, 0, 0, 4096)


def test_a_one_partition_batch_is_grouped_as_itself() -> None:
    batch = [Record(TOPIC, b"%d" % i, b"{}") for i in range(5)]
    grouped = CORE.group_records(batch, {TOPIC: 1})
    assert grouped == {(TOPIC, 0): batch}
    assert grouped is not None and grouped[TOPIC, 0] is batch, "no copy of the batch"
    # a run of one partition, then others: the run becomes its partition's own list
    mixed = [*batch, Record("app.public.other", b"x", b"{}"), *batch]
    grouped = CORE.group_records(mixed, {TOPIC: 1, "app.public.other": 1})
    assert grouped == {(TOPIC, 0): batch + batch, ("app.public.other", 0): [mixed[5]]}
    assert grouped is not None and grouped[TOPIC, 0] is not mixed


runs = st.lists(st.tuples(st.sampled_from(["app.public.a", "app.public.b"]),
                          st.integers(1, 6)), min_size=1, max_size=5)


@CHECKS
@given(runs=runs)
def test_runs_of_one_partition_group_as_the_reference(tmp_path: Path,
                                                      runs: list[tuple[str, int]]) -> None:
    batch = [Record(topic, b"%d" % i, b"{}", Position(0, i))
             for topic, length in runs for i in range(length)]
    log = FileLog(tmp_path / f"log{len(list(tmp_path.iterdir()))}",
                  FileLogSettings(fsync=False))
    log.admin().create_topic("app.public.a", 1)
    log.admin().create_topic("app.public.b", 2)
    producer = log.producer()
    assert isinstance(producer, FileProducer)
    try:
        expected = producer._group(batch)
        grouped = CORE.group_records(batch, producer._partitions)
        assert grouped is not None
        assert list(grouped.items()) == list(expected.items())
    finally:
        log.close()


def _segments(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.jsonl"))}


def test_the_producer_appends_the_same_lines_either_way(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def batch(n: int, topic: str = TOPIC, **changes: Any) -> list[Record]:
        return [Record(topic, b'{"id":%d}' % i, b'{"v":%d}' % i, Position(5, i),
                       timestamp_ms=1)._replace(**changes) for i in range(n)]

    stray = batch(40)
    stray.insert(25, Record("app.public.other", b"k", b"{}", timestamp_ms=1))
    batches = [batch(40), batch(1), stray, batch(40, partition=0), batch(30), []]

    taken: list[bool] = []
    whole = FileProducer._append_whole

    def recording(self: FileProducer, records: list[Record]) -> bool:
        taken.append(whole(self, records))
        return taken[-1]

    def never(self: FileProducer, records: list[Record]) -> bool:
        return False

    def segments(one_pass: bool) -> dict[str, bytes]:
        root = tmp_path / ("one-pass" if one_pass else "grouped")
        log = FileLog(root, FileLogSettings(default_partitions=1))
        producer = log.producer()
        with monkeypatch.context() as patched:
            patched.setattr(FileProducer, "_append_whole", recording if one_pass else never)
            for records in batches:
                producer.append(records)
        log.close()
        return _segments(root)

    assert segments(True) == segments(False)
    # the first batch finds the partition count unknown; the stray and the explicit
    # partitions are grouped; an empty batch never gets there
    assert taken == [False, True, False, False, True]


def test_a_one_pass_batch_that_fails_to_encode_writes_nothing(tmp_path: Path) -> None:
    log = FileLog(tmp_path / "log", FileLogSettings(default_partitions=1))
    producer = log.producer()
    good = [Record(TOPIC, b"1", b"{}", Position(1, i)) for i in range(3)]
    producer.append(good)  # the topic's partition count is known from here on
    with pytest.raises(TypeError, match="record 1: key"):
        spoilt: dict[str, Any] = {"key": "not bytes"}
        producer.append([good[0], good[1]._replace(**spoilt)])
    producer.append(good)
    log.close()
    (segment,) = _segments(tmp_path / "log").values()
    assert [line[line.index(b'"offset"'):].split(b",")[0] for line in segment.splitlines()
            ] == [b'"offset":%d' % i for i in range(6)]
