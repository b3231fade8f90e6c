"""A file log's group member that stops heartbeating (hung: it still holds its lease's
lock) stops counting as live after the session timeout the member judging it was given."""

from __future__ import annotations

import os
import time
from pathlib import Path

from cdc.log.file.groups import SESSION_TIMEOUT_S, GroupMember
from cdc.log.records import Backpressure


def test_a_silent_member_is_dead_after_the_configured_session(tmp_path: Path) -> None:
    hung = GroupMember(tmp_path, "g", Backpressure())
    hung._stop.set()  # its heartbeat thread ends: the process hangs, its lock stays
    hung._heartbeat.join(timeout=5)
    silent_since = time.time() - 5
    os.utime(hung._lease_path, (silent_since, silent_since))
    strict = GroupMember(tmp_path, "g", Backpressure(), session_timeout_s=3.0)
    lenient = GroupMember(tmp_path, "g", Backpressure())
    try:
        assert SESSION_TIMEOUT_S > 5
        assert hung.member_id not in strict.live_members()
        assert hung.member_id in lenient.live_members()
    finally:
        for member in (hung, strict, lenient):
            member.leave()
