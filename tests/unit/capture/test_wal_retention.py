"""Levels and wording of a slot's WAL retention (pure logic)."""

from __future__ import annotations

from cdc.capture.source.wal_safety import RECREATE_FLAG, SlotLostError, WalRetention

MB = 1024 * 1024


def test_levels_against_the_limit() -> None:
    assert WalRetention("s", "reserved", 7 * MB, 10 * MB, 3 * MB).level == "ok"
    near = WalRetention("s", "extended", 8 * MB, 10 * MB, 2 * MB)
    assert near.level == "warn" and near.fraction == 0.8
    assert "80% of max_slot_wal_keep_size=10485760 bytes" in near.describe()
    assert "lost after 2097152 bytes" in near.describe()
    assert WalRetention("s", "unreserved", 1 * MB, None, None).level == "warn"
    assert WalRetention("s", "lost", 0, 10 * MB, None).level == "error"
    assert "no limit" in WalRetention("s", "reserved", 5 * MB, None, None).describe()


def test_lost_error_names_the_slot_and_the_recovery() -> None:
    message = str(SlotLostError("orders_slot"))
    assert "'orders_slot' is lost" in message and RECREATE_FLAG in message
