"""A record larger than the reader's 1 MiB chunk comes back from a single poll."""

from __future__ import annotations

from pathlib import Path

from cdc.log import Position, Record, StartAt
from cdc.log.file import FileLog, FileLogSettings

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
