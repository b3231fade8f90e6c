"""The dead-letter topic ``<prefix>.dlq.<connector>``: events a sink refused for good.

Each record keeps the original key (so one key's letters stay in order) and source
position, and its JSON value says what failed and where the event was::

    {"connector": "search", "error": "mapper_parsing_exception: …", "error_type": "…",
     "failed_at": "2026-11-21T10:00:01.5Z",
     "source": {"topic": "app.public.orders", "partition": 2, "offset": 1207,
                "timestamp_ms": 1795000000000, "commit_lsn": 23803808, "seq": 3},
     "key": {"id": 42}, "event": {...the original event...}}

A key or value that is not JSON is kept as ``key_base64`` / ``value_base64`` instead.
The writer appends through ``Log.topic_producer``, so with the file backend it needs
no lock the capture holds.
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from cdc.log import Log, Message, Producer, Record


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One refused event and why."""

    message: Message
    reason: str
    error_type: str


def _embedded(name: str, fallback: str, raw: bytes) -> dict[str, Any]:
    """``{name: raw}`` when ``raw`` is JSON (embedded as is), else ``{fallback: base64}``."""
    try:
        orjson.loads(raw)
    except orjson.JSONDecodeError:
        return {fallback: base64.b64encode(raw).decode("ascii")}
    return {name: orjson.Fragment(raw)}


def encode_dead_letter(connector: str, letter: DeadLetter, now: float) -> bytes:
    """The JSON value of one dead-letter record."""
    message = letter.message
    failed_at = datetime.fromtimestamp(now, UTC).isoformat().replace("+00:00", "Z")
    value: dict[str, Any] = {
        "connector": connector, "error": letter.reason, "error_type": letter.error_type,
        "failed_at": failed_at,
        "source": {"topic": message.topic, "partition": message.partition,
                   "offset": message.offset, "timestamp_ms": message.timestamp_ms,
                   "commit_lsn": message.position.commit_lsn, "seq": message.position.seq},
        **_embedded("key", "key_base64", message.key),
        **_embedded("event", "value_base64", message.value),
    }
    return orjson.dumps(value)


class DeadLetterWriter:
    """Appends dead letters of one connector; shared by its workers (thread-safe)."""

    def __init__(self, log: Log, topic: str, connector: str) -> None:
        self.topic = topic
        self.connector = connector
        self._log = log
        self._producer: Producer | None = None
        self._lock = threading.Lock()

    def write(self, letters: Sequence[DeadLetter]) -> None:
        """Append ``letters``; durable when this returns."""
        if not letters:
            return
        now = time.time()
        records = [Record(self.topic, letter.message.key,
                          encode_dead_letter(self.connector, letter, now),
                          letter.message.position, timestamp_ms=int(now * 1000))
                   for letter in letters]
        with self._lock:
            if self._producer is None:
                self._producer = self._log.topic_producer(self.topic)
            self._producer.append(records)

    def close(self) -> None:
        """Release the producer."""
        with self._lock:
            if self._producer is not None:
                self._producer.close()
                self._producer = None
