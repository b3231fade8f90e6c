"""Durations and sizes: what people write, and what it means."""

from __future__ import annotations

from datetime import timedelta

import pytest

from cdc.config.units import (
    format_duration,
    format_size,
    parse_duration,
    parse_retention_size,
    parse_retention_time,
    parse_size,
)


@pytest.mark.parametrize(("text", "expected"), [
    ("500ms", timedelta(milliseconds=500)),
    ("30s", timedelta(seconds=30)),
    ("5m", timedelta(minutes=5)),
    ("12h", timedelta(hours=12)),
    ("7d", timedelta(days=7)),
    ("2w", timedelta(weeks=2)),
    ("1h30m", timedelta(hours=1, minutes=30)),
    ("1.5h", timedelta(minutes=90)),
    (" 10 s ", timedelta(seconds=10)),
    ("0s", timedelta(0)),
])
def test_parse_duration(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text", ["", "10", "7 days", "-5m", "5 minutes", "h", "1h x", "forever", "10M"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="expected a duration like"):
        parse_duration(text)


@pytest.mark.parametrize(("value", "expected"), [
    ("500MB", 500_000_000),
    ("10GiB", 10 * 1024**3),
    ("512KiB", 512 * 1024),
    ("64mib", 64 * 1024**2),
    ("1.5KB", 1500),
    ("100B", 100),
    ("4096", 4096),
    (4096, 4096),
    (0, 0),
])
def test_parse_size(value: str | int, expected: int) -> None:
    assert parse_size(value) == expected


@pytest.mark.parametrize("value", ["", "10 gigs", "10G", "MB", "-1MB", "1.2.3GB"])
def test_parse_size_rejects(value: str) -> None:
    with pytest.raises(ValueError, match="expected a size like"):
        parse_size(value)


def test_negative_byte_count_is_rejected() -> None:
    with pytest.raises(ValueError, match="zero bytes or more"):
        parse_size(-1)


def test_forever_means_no_limit() -> None:
    assert parse_retention_time("forever") is None
    assert parse_retention_size("Forever") is None
    assert parse_retention_time("7d") == timedelta(days=7)
    assert parse_retention_size("10GiB") == 10 * 1024**3


@pytest.mark.parametrize("text", ["250ms", "30s", "1h30m", "7d", "1d2h3m4s5ms"])
def test_format_duration_round_trips(text: str) -> None:
    assert format_duration(parse_duration(text)) == text


def test_format_duration_of_zero() -> None:
    assert format_duration(timedelta(0)) == "0s"


@pytest.mark.parametrize(("value", "text"), [
    (64 * 1024**2, "64MiB"), (10 * 1024**3, "10GiB"), (1000, "1000B"), (2048, "2KiB")])
def test_format_size(value: int, text: str) -> None:
    assert format_size(value) == text
    assert parse_size(text) == value
