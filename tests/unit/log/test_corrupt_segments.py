"""Damaged segments: a truncated segment, a torn tail and a deleted index are reported
by ``cdc log verify`` with their place; a consumer stops at a gap with a located error
instead of skipping the missing records."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cdc.cli import main
from cdc.errors import LogCorruptionError
from cdc.log import StartAt
from cdc.log.file import FileLog, FileLogSettings

from .conftest import TOPIC, records

SMALL = FileLogSettings(default_partitions=1, segment_bytes=3_000)


def filled_log(log_dir: Path) -> list[Path]:
    """200 records in segments of about 40; the segment files in order."""
    log = FileLog(log_dir, SMALL)
    for start in range(0, 200, 20):
        log.producer().append(records(range(start, start + 20)))
    log.close()
    return sorted((log_dir / TOPIC / "partition=0").glob("*.jsonl"))


def verify(log_dir: Path) -> tuple[int, list[str]]:
    result = CliRunner().invoke(main, ["log", "verify", "--path", str(log_dir)])
    return result.exit_code, result.output.splitlines()


def test_a_segment_cut_short_in_the_middle_of_the_log(log_dir: Path) -> None:
    segments = filled_log(log_dir)
    assert segments[1].name == "00000000000000000040.jsonl"
    data = segments[1].read_bytes()
    cut = data.rfind(b"\n", 0, len(data) // 2) + 1
    segments[1].write_bytes(data[:cut])
    kept = data[:cut].count(b"\n")
    code, lines = verify(log_dir)
    assert code == 1
    gap = f"{TOPIC}[0] offset {40 + kept}: offsets {40 + kept}..79 missing"
    assert any(line.startswith(gap) and segments[2].name in line for line in lines), lines
    assert lines[-1].endswith("1 problems")

    log = FileLog(log_dir, SMALL)
    consumer = log.consumer("g", topics=[TOPIC], start=StartAt.earliest())
    read: list[int] = []
    with pytest.raises(LogCorruptionError) as caught:
        while batch := consumer.poll(500, timeout=0.3):
            read.extend(m.offset for m in batch)
    assert read == list(range(40 + kept)), "everything before the gap, nothing after it"
    error = caught.value
    assert (error.topic, error.partition, error.offset) == (TOPIC, 0, 40 + kept)
    assert error.file == str(segments[1])
    assert "missing" in error.reason and "cdc log verify" in error.reason
    consumer.close()
    log.close()


def test_a_torn_last_record_is_located(log_dir: Path) -> None:
    segments = filled_log(log_dir)
    data = segments[-1].read_bytes()
    segments[-1].write_bytes(data[:-7])  # the last record loses its end
    last_line = data.rstrip(b"\n").rfind(b"\n") + 1
    code, lines = verify(log_dir)
    assert code == 1
    assert f"{TOPIC}[0] offset 199: incomplete last record (torn write) " \
           f"({segments[-1]} byte {last_line})" in lines


def test_a_deleted_index_is_reported_and_rebuilt(log_dir: Path) -> None:
    segments = filled_log(log_dir)
    index = segments[2].with_suffix(".index")
    assert index.exists()
    index.unlink()
    code, lines = verify(log_dir)
    assert code == 1
    assert f"{TOPIC}[0] offset 80: index file missing (rebuilt on open) ({segments[2]} byte 0)" \
        in lines
    log = FileLog(log_dir, SMALL)
    consumer = log.consumer("g", topics=[TOPIC], start=StartAt.earliest())
    offsets: list[int] = []
    while batch := consumer.poll(500, timeout=0.3):
        offsets.extend(m.offset for m in batch)
    assert offsets == list(range(200))
    consumer.close()
    log.close()
