"""The native grouping of a batch per partition against the producer's Python loop: the
same partitions, in the same order, with the same records in the same order; whatever it
cannot group (a topic whose partition count is not known yet, an explicit partition)
it leaves to Python."""

from __future__ import annotations

import types
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cdc.log import Position, Record
from cdc.log.file import FileLog, FileLogSettings
from cdc.log.file import producer as producer_module
from cdc.log.file.producer import FileProducer
from cdc.native import CORE
from tests.reference.partitioner import partition_for_reference

CHECKS = settings(max_examples=150, deadline=None,
                  suppress_health_check=[HealthCheck.too_slow,
                                         HealthCheck.function_scoped_fixture])
COUNTS = {"app.public.a": 3, "app.public.b": 1, "app.public.c": 7}


@pytest.fixture
def producer(tmp_path: Path) -> Iterator[FileProducer]:
    log = FileLog(tmp_path / "log", FileLogSettings(fsync=False))
    made = log.producer()
    assert isinstance(made, FileProducer)
    for topic, count in COUNTS.items():
        log.admin().create_topic(topic, count)
    yield made
    log.close()


def test_record_fields_are_where_the_native_grouping_reads_them() -> None:
    # native/src/python/group.rs reads a Record by position
    assert Record._fields[:2] == ("topic", "key")
    assert Record._fields[6] == "partition"


records = st.lists(st.tuples(
    # equal topics as distinct str objects too: grouped by value, not identity
    st.sampled_from(sorted(COUNTS)).map(lambda t: "".join(list(t))),
    st.binary(max_size=24), st.integers(0, 2**40), st.integers(0, 9)).map(
        lambda t: Record(t[0], t[1], b"{}", Position(t[2], t[3]))), max_size=60)


@CHECKS
@given(batch=records)
def test_the_native_grouping_is_the_reference(producer: FileProducer,
                                              batch: list[Record]) -> None:
    expected = producer._group(batch)  # learns every topic's partition count
    grouped = CORE.group_records(batch, producer._partitions)
    assert grouped is not None
    assert list(grouped.items()) == list(expected.items())
    for (topic, partition), group in grouped.items():
        assert type(topic) is str and type(partition) is int
        assert all(r.topic == topic for r in group)


def test_what_it_cannot_group_is_left_to_python(
                                                 producer: FileProducer) -> None:
    counts = {"app.public.a": 3}
    plain = Record("app.public.a", b"k", b"{}")
    partition = partition_for_reference(b"k", 3)
    assert CORE.group_records([plain], counts) == {("app.public.a", partition): [plain]}
    assert CORE.group_records([plain, Record("app.public.b", b"k", b"{}")], counts) is None
    assert CORE.group_records([plain._replace(partition=0)], counts) is None
    assert CORE.group_records([plain], {"app.public.a": 0}) is None
    assert CORE.group_records([plain], {"app.public.a": "3"}) is None  # type: ignore[dict-item]
    assert CORE.group_records([("app.public.a", b"k")], counts) is None  # type: ignore[list-item]
    assert CORE.group_records([], counts) == {}


def test_the_producer_appends_the_same_lines_either_way(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    batches = [[Record(f"app.public.{t}", b'{"id":%d}' % i, b'{"v":%d}' % i, Position(5, i))
                for i in range(40) for t in "abc"] for _ in range(3)]
    grouped: list[bool] = []

    def group_records(records: list[Record], counts: dict[str, int]
                      ) -> dict[tuple[str, int], list[Record]] | None:
        found = CORE.group_records(records, counts)
        grouped.append(found is not None)
        return found

    def never(records: list[Record], counts: dict[str, int]) -> None:
        return None

    def segments(native: bool) -> dict[str, bytes]:
        root = tmp_path / ("native" if native else "python")
        log = FileLog(root, FileLogSettings(fsync=True))
        producer = log.producer()
        assert isinstance(producer, FileProducer)
        for topic, count in COUNTS.items():
            log.admin().create_topic(topic, count)
        with monkeypatch.context() as patched:  # None: the producer's Python loop groups
            patched.setattr(producer_module, "CORE", types.SimpleNamespace(
                group_records=group_records if native else never))
            for batch in batches:
                producer.append([r._replace(timestamp_ms=1) for r in batch])
        log.close()
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.jsonl"))}

    assert segments(True) == segments(False)
    # the first batch finds the partition counts unknown; the native grouping takes the rest
    assert grouped == [False, True, True]
