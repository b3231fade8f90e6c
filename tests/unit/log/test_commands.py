"""``cdc log dump`` and ``cdc log verify`` on a real log directory."""

from __future__ import annotations

from pathlib import Path

import orjson
from click.testing import CliRunner

from cdc.cli import main
from cdc.log.file import FileLog

from .conftest import TOPIC, records


def test_dump_prints_events_in_commit_order(log_dir: Path) -> None:
    log = FileLog(log_dir)
    log.producer().append(records(range(30)))
    log.close()
    result = CliRunner().invoke(main, ["log", "dump", TOPIC, "--path", str(log_dir)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert [orjson.loads(line)["after"]["id"] for line in lines] == list(range(30))


def test_verify_reports_every_flipped_bit_with_its_place(log_dir: Path) -> None:
    log = FileLog(log_dir)
    log.producer().append(records(range(30)))
    log.close()
    clean = CliRunner().invoke(main, ["log", "verify", "--path", str(log_dir)])
    assert clean.exit_code == 0
    assert "verified 30 records in 3 segments: 0 problems" in clean.output
    segment = sorted((log_dir / TOPIC / "partition=1").glob("*.jsonl"))[0]
    data = bytearray(segment.read_bytes())
    second_line = data.index(b"\n") + 1
    data[second_line + 50] ^= 0x10
    data[len(data) - 5] ^= 0x10
    segment.write_bytes(bytes(data))
    result = CliRunner().invoke(main, ["log", "verify", "--path", str(log_dir)])
    assert result.exit_code == 1
    problems = [line for line in result.output.splitlines() if line.startswith(TOPIC)]
    assert len(problems) == 2
    assert problems[0].startswith(f"{TOPIC}[1] offset 1: not a record line")
    assert "checksum mismatch" in problems[1]
    assert f"byte {second_line})" in problems[0]
    assert "2 problems" in result.output


def test_repair_keeps_valid_records_and_quarantines_the_original(log_dir: Path) -> None:
    log = FileLog(log_dir)
    log.producer().append(records(range(30)))
    log.close()
    segment = sorted((log_dir / TOPIC / "partition=0").glob("*.jsonl"))[0]
    original = segment.read_bytes()
    data = bytearray(original)
    data[data.index(b"\n") + 60] ^= 0x01
    segment.write_bytes(bytes(data))
    result = CliRunner().invoke(main, ["log", "repair", "--path", str(log_dir), "--yes"])
    assert result.exit_code == 0, result.output
    lines = original.count(b"\n")
    assert f"kept {lines - 1}, dropped 1" in result.output
    quarantined = log_dir / "_quarantine" / TOPIC / "partition=0" / segment.name
    assert quarantined.read_bytes() == bytes(data)
    after = CliRunner().invoke(main, ["log", "verify", "--path", str(log_dir)])
    assert after.exit_code == 0 and "29 records" in after.output
