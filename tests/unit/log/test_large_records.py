"""A record larger than the reader's 1 MiB chunk comes back from a single poll; a read
of a few records reads about their size."""

from __future__ import annotations

from pathlib import Path
from typing import IO, Any

import pytest

from cdc.log import Position, Record, StartAt
from cdc.log.file import FileLog, FileLogSettings
from cdc.log.file.segments import SEGMENT_SUFFIX

from .conftest import TOPIC


def test_a_3_mib_record_is_read_in_one_poll(log_dir: Path) -> None:
    log = FileLog(log_dir, FileLogSettings(default_partitions=1))
    big = b'{"op":"c","after":{"body":"%s"}}' % (b"x" * (3 << 20))
    log.producer().append([Record(TOPIC, b'{"id":1}', big, Position(10, 0)),
                           Record(TOPIC, b'{"id":2}', b'{"op":"c"}', Position(11, 0))])
    consumer = log.consumer("g", topics=[TOPIC], start=StartAt.earliest())
    first = consumer.poll(10, timeout=1.0)
    assert [m.value for m in first] == [big, b'{"op":"c"}']
    consumer.close()
    log.close()


def test_a_few_records_at_a_time_read_about_their_size(
        log_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A consumer sharing a small batch among many partitions takes a few records of each
    per read: each read is sized to them (not a whole 1 MiB chunk read again and again),
    and every record still comes back once, in order, across segments, long ones whole."""
    log = FileLog(log_dir, FileLogSettings(default_partitions=1, segment_bytes=256 << 10))
    values = [b'{"op":"c","after":{"n":%d,"pad":"%s"}}' % (n, b"y" * (n * 37 % 900))
              for n in range(3_000)]
    values[1_234] = b'{"op":"c","after":{"long":"%s"}}' % (b"z" * (200 << 10))
    log.producer().append([Record(TOPIC, b'{"id":%d}' % n, value, Position(10 + n, 0))
                           for n, value in enumerate(values)])
    taken: list[int] = []
    opened = Path.open

    class Counting:
        """A segment file opened by a reader, counting the bytes read from it."""

        def __init__(self, file: IO[bytes]) -> None:
            self.file = file

        def read(self, size: int = -1) -> bytes:
            data = self.file.read(size) or b""
            taken.append(len(data))
            return data

        def __getattr__(self, name: str) -> Any:
            return getattr(self.file, name)

    def counting(path: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        file = opened(path, mode, *args, **kwargs)
        return Counting(file) if mode == "rb" and path.suffix == SEGMENT_SUFFIX else file

    monkeypatch.setattr(Path, "open", counting)
    consumer = log.consumer("g", topics=[TOPIC], start=StartAt.earliest())
    got: list[bytes] = []
    while len(got) < len(values):
        batch = consumer.poll(7, timeout=1.0)
        assert batch, f"stopped after {len(got)} records"
        got.extend(m.value for m in batch)
    assert got == values
    total = sum(len(v) for v in values)
    assert total <= sum(taken) < 4 * total, (sum(taken), total)  # 1 MiB reads: ~100 times the log
    consumer.close()
    log.close()
