"""The file log's writer lock waits for a writer on its way out, and refuses one that stays."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from cdc.log.file.log_lock import LogTakenError, LogWriterLock


def test_a_writer_waits_for_the_one_before_it_to_let_go(tmp_path: Path) -> None:
    first = LogWriterLock(tmp_path)
    releaser = threading.Timer(0.5, first.release)  # a capture stopping meanwhile
    releaser.start()
    started = time.monotonic()
    second = LogWriterLock(tmp_path, wait_s=30)
    waited = time.monotonic() - started
    releaser.join()
    assert 0.4 <= waited < 30
    with pytest.raises(LogTakenError):  # the second holds it now
        LogWriterLock(tmp_path, wait_s=0)
    second.release()


def test_a_writer_that_stays_is_refused_after_the_wait(tmp_path: Path) -> None:
    first = LogWriterLock(tmp_path)
    started = time.monotonic()
    with pytest.raises(LogTakenError, match="need the Kafka backend"):
        LogWriterLock(tmp_path, wait_s=0.3)
    assert time.monotonic() - started >= 0.3
    first.release()
    LogWriterLock(tmp_path, wait_s=0).release()  # free again once released
