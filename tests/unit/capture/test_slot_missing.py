"""Wording of the missing-slot error (pure logic; the behaviour is tested against real
servers in tests/integration/versions/test_failover_without_slots.py)."""

from __future__ import annotations

from cdc.capture.source.wal_safety import RECREATE_FLAG, SlotMissingError
from cdc.errors import TerminalError


def test_missing_error_names_slot_position_cause_and_recovery() -> None:
    error = SlotMissingError("orders_slot", "0/16B3748")
    message = str(error)
    assert "'orders_slot' is missing" in message
    assert "since position 0/16B3748 may be missing" in message
    assert "failover" in message and "dropped" in message
    assert RECREATE_FLAG in message and "truncate event" in message
    assert isinstance(error, TerminalError), "the supervisor stops, never restarts, on it"


def test_missing_error_without_a_logged_position() -> None:
    message = str(SlotMissingError("s", None))
    assert "so changes may be missing" in message and "since position" not in message
