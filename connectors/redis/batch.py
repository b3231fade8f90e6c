"""The arguments of ``scripts.BATCH`` for a batch of rows, and running it.

Rows are added in the batch's order and split into calls of at most ``CHUNK_ROWS`` rows,
so one call never holds Redis for long; a batch of the usual size is one call. The
calls go through redis-py's ``Script`` (``EVALSHA``, loading the script again after a
Redis restart or ``SCRIPT FLUSH``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.commands.core import Script
from redis.exceptions import RedisError, ResponseError

from connectors.contract import Rejection, SinkEvent, SinkRejectedError, SinkUnavailableError

from .errors import is_transient, rejection_reason, unavailable
from .scripts import MOVED, version_text
from .truncate import VERSION_PREFIX

CHUNK_ROWS = 1000
Arg = str | bytes | int


class _Call:
    """One script call being built: its markers, keys, arguments and rows' events."""

    __slots__ = ("args", "events", "keys", "markers")

    def __init__(self) -> None:
        self.markers: dict[str, int] = {}
        self.keys: list[str] = []
        self.args: list[Arg] = []
        self.events: list[SinkEvent] = []

    def row(self, event: SinkEvent, key: str, marker: str, kind: str, version: str,
            extra: Sequence[Arg]) -> None:
        number = self.markers.get(marker)
        if number is None:
            number = self.markers[marker] = len(self.markers) + 1
        self.events.append(event)
        self.keys += (key, VERSION_PREFIX + key)
        self.args += (kind, number, version)
        self.args += extra


class ScriptBatch:
    """The rows of one batch, as ``scripts.BATCH`` calls (see ``scripts``)."""

    def __init__(self, ttls: tuple[int, int, int]) -> None:
        self._ttls = ttls
        self._calls = [_Call()]

    def row(self, event: SinkEvent, key: str, marker: str, kind: str, version: int,
            extra: Sequence[Arg] = ()) -> None:
        """Add the row of ``event``: its value ``key``, its table's truncate ``marker``,
        its ``kind`` and the kind's own arguments ``extra`` (see ``scripts``)."""
        call = self._calls[-1]
        if len(call.events) >= CHUNK_ROWS:
            call = _Call()
            self._calls.append(call)
        call.row(event, key, marker, kind, version_text(version), extra)

    def __len__(self) -> int:
        return sum(len(call.events) for call in self._calls)

    def run(self, script: Script) -> list[Rejection]:
        """Run the calls in order; the rows Redis refused. Raises ``SinkUnavailableError``
        for what may pass (the batch is retried) and ``SinkRejectedError`` when a whole
        call is refused for good (the runtime then isolates the row at fault)."""
        rejected: list[Rejection] = []
        for call in self._calls:
            if call.events:
                rejected += _outcome(call, _execute(script, call, self._ttls))
        return rejected


def _execute(script: Script, call: _Call, ttls: tuple[int, int, int]) -> list[Any]:
    markers = list(call.markers)
    try:
        reply = script(keys=markers + call.keys, args=[*ttls, len(markers), *call.args])
    except ResponseError as exc:
        if is_transient(exc):
            raise unavailable(exc, f"writing {len(call.events)} rows") from exc
        raise SinkRejectedError(f"Redis refused a batch of {len(call.events)} rows: "
                                f"{str(exc)[:500]}") from exc
    except RedisError as exc:
        raise unavailable(exc, f"writing {len(call.events)} rows") from exc
    return list(reply)


def _outcome(call: _Call, reply: Sequence[Any]) -> list[Rejection]:
    rejected: list[Rejection] = []
    for row, result in zip(reply[::2], reply[1::2], strict=True):
        if result == MOVED:
            raise SinkUnavailableError("a value changed between reading and writing it "
                                       "(another writer); retrying the batch")
        reason = rejection_reason(ResponseError(_text(result)))
        rejected.append(Rejection(call.events[int(row) - 1], reason))
    return rejected


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
