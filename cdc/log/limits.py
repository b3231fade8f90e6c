"""The largest record the log takes (``log.max_record_bytes``) and the error for one over it."""

from __future__ import annotations

from cdc.errors import LogError, TerminalError

from .records import NO_POSITION, Record

DEFAULT_MAX_RECORD_BYTES = 16 * 1024 * 1024
SETTING = "log.max_record_bytes"
_KEY_SHOWN = 200


def record_size(record: Record) -> int:
    """Bytes a record takes on the wire: key, value and the position headers."""
    return len(record.key) + len(record.value) + 64


def _lsn_text(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


class RecordTooLargeError(LogError, TerminalError):
    """A record is larger than the log accepts; the capture stops rather than lose it."""

    def __init__(self, record: Record, size: int, limit: int, *, where: str = SETTING) -> None:
        self.topic = record.topic
        self.size = size
        self.limit = limit
        key = record.key.decode("utf-8", "replace")
        if len(key) > _KEY_SHOWN:
            key = key[:_KEY_SHOWN] + "…"
        lsn = ("none" if record.position == NO_POSITION
               else _lsn_text(record.position.commit_lsn))
        super().__init__(
            f"record too large for the log: topic {record.topic}, key {key}, LSN {lsn}, "
            f"{size} bytes > {limit} bytes ({where}); nothing was acknowledged to "
            f"PostgreSQL: raise {SETTING} (and the Kafka topic's max.message.bytes if it "
            "was created by hand) and start the capture again")
