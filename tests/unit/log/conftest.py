"""Helpers for the log tests: a fresh log directory and records with known ids."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cdc.log import Position, Record
from cdc.log.file import FileLog, FileLogSettings

TOPIC = "app.public.orders"
REPO = Path(__file__).resolve().parents[3]


def records(ids: range, topic: str = TOPIC) -> list[Record]:
    """Records keyed by id, with source positions increasing with the id."""
    return [Record(topic, b'{"id":%d}' % i, b'{"op":"c","after":{"id":%d}}' % i,
                   Position(1000 + i, 0)) for i in ids]


def spawn(*args: str) -> subprocess.Popen[bytes]:
    """Start ``python -m tests.unit.log.procs ARGS`` from the repository root."""
    return subprocess.Popen([sys.executable, "-m", "tests.unit.log.procs", *args], cwd=REPO)


@pytest.fixture
def log_dir(tmp_path: Path) -> Path:
    return tmp_path / "log"


@pytest.fixture
def small_segments() -> FileLogSettings:
    return FileLogSettings(default_partitions=3, segment_bytes=2_000)


def open_log(path: Path, settings: FileLogSettings | None = None) -> FileLog:
    """A file log at ``path``."""
    return FileLog(path, settings)
