"""The sink contract: what a sink implements; the connector runtime does everything else.

It lives in the core because the plugin index (``cdc.plugins.index``) and config
validation name it; ``connectors.contract`` re-exports it for sinks.

A sink is opened once, receives batches of ``SinkEvent`` (already coalesced to the last
event per key within the batch, in log order), makes them durable on ``flush`` and is
closed on shutdown. It raises an error marked ``TransientError`` for what may succeed
later (the runtime retries the batch with backoff) and reports terminal per-event
failures in ``WriteResult.rejected`` (the runtime sends those to the dead-letter topic).
A sink that cannot tell which event is at fault raises a ``TerminalError`` (such as
``SinkRejectedError``) for the whole batch: the runtime then splits the batch to isolate
the event(s) and dead-letters only those. Sinks are built by a ``SinkFactory`` from their
validated config and a ``SinkContext``, one per worker thread.
Every write must be idempotent and monotonic: it carries ``SinkEvent.version``, and a
write with a version not newer than what the target holds must change nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol, TypeAlias

import orjson

from cdc.errors import SinkError, TerminalError, TransientError
from cdc.log import Log, Message

__all__ = [
    "SEQ_BITS",
    "SEQ_MAX",
    "PreparingSink",
    "Rejection",
    "Sink",
    "SinkContext",
    "SinkEvent",
    "SinkFactory",
    "SinkRejectedError",
    "SinkStateLostError",
    "SinkUnavailableError",
    "Undecoded",
    "WriteResult",
    "version_of",
]

SEQ_BITS = 10
SEQ_MAX = (1 << SEQ_BITS) - 1


def version_of(commit_lsn: int, seq: int) -> int:
    """A sink version from a source position: ``commit_lsn << 10 | min(seq, 1023)``.

    Strictly increasing in commit order for events of one key, and within 63 bits for
    8 PiB of WAL. (Events past the 1023rd of one transaction share a version: the
    runtime coalesces a key's events within a batch, so only the last is written.)
    """
    return (commit_lsn << SEQ_BITS) | min(seq, SEQ_MAX)


class Undecoded:
    """Where a ``SinkEvent`` made by ``SinkEvent.undecoded`` keeps its event once decoded.

    The connector runtime checks in bulk that a message's value is a JSON object
    (``connectors.runtime.events``) and leaves decoding it to the first reader of
    ``SinkEvent.event``: a sink working from the raw bytes (``message.value``) never
    pays for it."""

    __slots__ = ("event",)
    event: dict[str, Any]

    def __repr__(self) -> str:
        return "Undecoded()"


class _SinkEventFields(NamedTuple):
    message: Message
    event: Any  # the decoded event, or an Undecoded until it is read
    version: int


class SinkEvent(_SinkEventFields):
    """One change event as a sink sees it: ``message`` (where it is in the log: topic,
    partition, offset; its raw JSON ``value``), ``event`` (the decoded event,
    docs/architecture.md "The event") and ``version`` (``version_of(commit_lsn, seq)``).

    A named tuple (one is made per event read, and a tuple is made four times faster
    than a frozen dataclass) with the fields in that order: the native core reads
    ``message`` and ``version`` by position. ``SinkEvent(message, event, version)`` holds
    a decoded event; ``SinkEvent.undecoded(message, version)`` one decoded from
    ``message.value`` when ``event`` is first read (the value must be a JSON object)."""

    __slots__ = ()

    @classmethod
    def undecoded(cls, message: Message, version: int) -> SinkEvent:
        """The event of ``message`` (a JSON object), decoded on first use."""
        return cls(message, Undecoded(), version)

    @property
    def event(self) -> dict[str, Any]:
        """The decoded event (docs/architecture.md "The event")."""
        held = tuple.__getitem__(self, 1)
        if type(held) is not Undecoded:
            return held  # type: ignore[no-any-return]
        try:
            return held.event
        except AttributeError:
            event: dict[str, Any] = orjson.loads(self.message.value)
            held.event = event
            return event

    @property
    def op(self) -> str:
        return str(self.event["op"])

    @property
    def key(self) -> dict[str, Any]:
        return dict(self.event.get("key") or {})

    def __eq__(self, other: object) -> bool:
        """Equal when message, decoded event and version are (decoded or not yet)."""
        if not isinstance(other, SinkEvent):
            return NotImplemented
        return (self.message == other.message and self.version == other.version
                and self.event == other.event)

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # type: ignore[assignment]  # holds a dict, as before


@dataclass(frozen=True, slots=True)
class Rejection:
    """A terminal failure of one event: it goes to the dead-letter topic with ``reason``."""

    event: SinkEvent
    reason: str


@dataclass(slots=True)
class WriteResult:
    """What ``write`` could not do (terminal, per event)."""

    rejected: list[Rejection] = field(default_factory=list)


class Sink(Protocol):
    """Implemented by every sink (see the module docstring)."""

    def open(self) -> None:
        """Connect; raise a TransientError if the target is not reachable yet."""

    def write(self, batch: Sequence[SinkEvent]) -> WriteResult:
        """Apply ``batch``; raise a TransientError to have the whole batch retried, or a
        TerminalError when the batch is refused for good (the runtime isolates the cause)."""

    def flush(self) -> None:
        """Make everything written so far durable in the target."""

    def close(self) -> None:
        """Release connections."""


class PreparingSink(Sink, Protocol):
    """A sink that can do part of a batch's work ahead (optional: the runtime calls
    ``prepare`` when a sink has it).

    The runtime calls ``prepare`` in its reading thread as soon as a batch is decoded,
    possibly while ``write`` runs on an earlier batch in the sender thread (so it must
    not disturb that), and hands what it returned to ``write``. ``write`` must still
    accept any batch (the runtime splits refused batches into plain lists)."""

    def prepare(self, batch: list[SinkEvent]) -> list[SinkEvent]:
        """``batch``, or the same events with work done ahead (a list subclass, say)."""


@dataclass(frozen=True, slots=True)
class SinkContext:
    """What a sink factory gets besides its validated config: where the sink runs."""

    connector: str            # the connector's name (also its consumer group)
    topic_prefix: str         # PipelineConfig.topic_prefix: topics are <prefix>.<schema>.<table>
    worker: int = 0           # which of the connector's workers (0 .. workers-1) owns the sink
    log: Log | None = field(default=None, compare=False)  # the event log, to read side topics


SinkFactory: TypeAlias = Callable[[Any, SinkContext], Sink]
"""Builds one sink: ``factory(config, context)`` where ``config`` is an instance of the
sink's ``SinkSpec.config_model``. Called once per worker; the sink is not shared between
threads, and ``open`` is called by the runtime (not by the factory)."""


class SinkUnavailableError(SinkError, TransientError):
    """The target is down, timed out, or asked to slow down (HTTP 429/5xx)."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        self.retry_after = retry_after
        super().__init__(message)


class SinkRejectedError(SinkError, TerminalError):
    """The target refused an event for good (mapping conflict, HTTP 4xx, too large)."""


class SinkStateLostError(SinkError):
    """The sink's own state lost changes it had applied (a failed commit of its store):
    the worker stops, never retried or split into dead letters, and the connector starts
    again from the sink's durable state."""
