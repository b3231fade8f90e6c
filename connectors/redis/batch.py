"""The arguments of ``scripts.BATCH`` for a batch of rows, and running it.

Rows are added in the batch's order into flat lists of keys and arguments, and run as
calls of at most ``CHUNK_ROWS`` rows and about ``CHUNK_BYTES`` of values each, so one
call never holds Redis (or its query buffer) for long; a batch of the usual size is one
call. Every call carries all the batch's truncate markers (a
batch spans few tables). The calls go through redis-py's ``Script`` (``EVALSHA``,
loading the script again after a Redis restart or ``SCRIPT FLUSH``).
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
CHUNK_BYTES = 32 * 1024**2
Arg = str | bytes | int


class ScriptBatch:
    """The rows of one batch, as ``scripts.BATCH`` calls (see ``scripts`` for the kinds
    of row and their arguments)."""

    def __init__(self, ttls: tuple[int, int, int]) -> None:
        self._ttls = ttls
        self._markers: dict[str, int] = {}
        self._keys: list[str] = []
        self._args: list[Arg] = []
        self._events: list[SinkEvent] = []
        self._cuts: list[tuple[int, int]] = []  # where each call after the first starts
        self._call_rows = self._call_bytes = 0  # in the last call so far

    @classmethod
    def rendered(cls, ttls: tuple[int, int, int], events: list[SinkEvent], markers: list[str],
                 keys: list[str], args: list[Arg], cuts: list[tuple[int, int]]) -> ScriptBatch:
        """A complete batch from rows rendered elsewhere (``native_rows``): ``markers`` in
        order of their numbers, two ``keys`` per event, ``args`` and ``cuts`` as ``row``
        would have made them. Add no rows to it."""
        batch = cls(ttls)
        batch._markers = {marker: number for number, marker in enumerate(markers, 1)}
        batch._events, batch._keys, batch._args, batch._cuts = events, keys, args, cuts
        return batch

    def row(self, event: SinkEvent, key: str, marker: str, kind: str,
            extra: Sequence[Arg] = (), size: int = 0) -> None:
        """Add the row of ``event``: its value ``key``, its table's truncate ``marker``,
        its ``kind`` and the kind's own arguments ``extra`` (``size`` bytes of values)."""
        number = self._markers.get(marker)
        if number is None:
            number = self._markers[marker] = len(self._markers) + 1
        if self._call_rows and (self._call_rows == CHUNK_ROWS
                                or self._call_bytes + size > CHUNK_BYTES):
            self._cuts.append((len(self._keys), len(self._args)))
            self._call_rows = self._call_bytes = 0
        self._call_rows += 1
        self._call_bytes += size
        self._events.append(event)
        self._keys += (key, VERSION_PREFIX + key)
        self._args += (kind, number, version_text(event.version))
        self._args += extra

    def __len__(self) -> int:
        return len(self._events)

    def run(self, script: Script) -> list[Rejection]:
        """Run the calls in order; the rows Redis refused. Raises ``SinkUnavailableError``
        for what may pass (the batch is retried) and ``SinkRejectedError`` when a whole
        call is refused for good (the runtime then isolates the row at fault)."""
        if not self._events:
            return []
        markers = list(self._markers)
        head: list[Arg] = [*self._ttls, len(markers)]
        starts = [(0, 0), *self._cuts]
        ends = [*self._cuts, (len(self._keys), len(self._args))]
        rejected: list[Rejection] = []
        for (key_start, arg_start), (key_end, arg_end) in zip(starts, ends, strict=True):
            events = self._events[key_start // 2:key_end // 2]
            reply = _call(script, markers + self._keys[key_start:key_end],
                          head + self._args[arg_start:arg_end], len(events))
            rejected += _rejections(events, reply)
        return rejected


def _call(script: Script, keys: list[str], args: list[Arg], rows: int) -> list[Any]:
    try:
        return list(script(keys=keys, args=args))
    except ResponseError as exc:
        if is_transient(exc):
            raise unavailable(exc, f"writing {rows} rows") from exc
        raise SinkRejectedError(f"Redis refused a call writing {rows} rows: "
                                f"{str(exc)[:500]}") from exc
    except RedisError as exc:
        raise unavailable(exc, f"writing {rows} rows") from exc


def _rejections(events: Sequence[SinkEvent], reply: Sequence[Any]) -> list[Rejection]:
    """The rows the reply names (``scripts``: pairs of row number and outcome)."""
    rejected: list[Rejection] = []
    for row, outcome in zip(reply[::2], reply[1::2], strict=True):
        if outcome == MOVED:
            raise SinkUnavailableError("a value changed between reading and writing it "
                                       "(another writer); retrying the batch")
        text = outcome.decode(errors="replace") if isinstance(outcome, bytes) else str(outcome)
        rejected.append(Rejection(events[int(row) - 1], rejection_reason(ResponseError(text))))
    return rejected
