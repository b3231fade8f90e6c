"""Small hand-written sinks for the runtime tests, registered as sink type ``fake``.

A test puts a sink builder under a name in ``SINKS``; a connector with
``type: fake, config: {script: <name>}`` then runs that sink (one per worker).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydantic import Field

from cdc.config import ConfigModel
from connectors.contract import (
    Rejection,
    Sink,
    SinkContext,
    SinkEvent,
    SinkRejectedError,
    WriteResult,
)
from connectors.registry import SinkSpec


class FakeSinkConfig(ConfigModel):
    """Which scripted sink to build."""

    script: str = Field(default="default", description="a key of tests' SINKS")


SINKS: dict[str, Callable[[SinkContext], Sink]] = {}


def make_fake(config: FakeSinkConfig, context: SinkContext) -> Sink:
    """The factory of the ``fake`` sink type."""
    return SINKS[config.script](context)


SPEC = SinkSpec(name="fake", config_model=FakeSinkConfig, factory=make_fake)
UNBUILT = SinkSpec(name="unbuilt", config_model=FakeSinkConfig, factory=None)
NOT_A_SINK = SinkSpec(name="notasink", config_model=FakeSinkConfig,
                      factory=lambda config, context: object())  # type: ignore[arg-type,return-value]


def key_of(event: SinkEvent) -> int:
    return int(event.key["id"])


@dataclass
class RecordingSink:
    """Keeps what was written (pending until flush, then ``durable``), with scripted
    failures: ``write_errors``/``flush_errors`` are raised one per call while they last;
    ``poison`` keys make a whole write fail terminally; ``refuse`` keys are rejected."""

    write_errors: list[Exception] = field(default_factory=list)
    flush_errors: list[Exception] = field(default_factory=list)
    open_errors: list[Exception] = field(default_factory=list)
    poison: set[int] = field(default_factory=set)
    refuse: set[int] = field(default_factory=set)
    gate: threading.Event | None = None
    entered: threading.Event = field(default_factory=threading.Event)
    batches: list[list[tuple[int, int]]] = field(default_factory=list)
    pending: dict[int, int] = field(default_factory=dict)
    durable: dict[int, int] = field(default_factory=dict)
    flushes: int = 0
    opened: bool = False
    closed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def open(self) -> None:
        if self.open_errors:
            raise self.open_errors.pop(0)
        self.opened = True

    def write(self, batch: Sequence[SinkEvent]) -> WriteResult:
        self.entered.set()
        if self.gate is not None:
            self.gate.wait(10)
        with self.lock:
            if self.write_errors:
                raise self.write_errors.pop(0)
            bad = self.poison.intersection(key_of(e) for e in batch)
            if bad:
                raise SinkRejectedError(f"poison keys {sorted(bad)}")
            self.batches.append([(key_of(e), e.version) for e in batch])
            result = WriteResult()
            for sink_event in batch:
                if key_of(sink_event) in self.refuse:
                    result.rejected.append(Rejection(sink_event, "refused by the test"))
                else:
                    self.pending[key_of(sink_event)] = sink_event.version
            return result

    def flush(self) -> None:
        with self.lock:
            if self.flush_errors:
                self.pending.clear()  # a failed flush loses what was not durable
                raise self.flush_errors.pop(0)
            self.durable.update(self.pending)
            self.pending.clear()
            self.flushes += 1

    def close(self) -> None:
        self.closed = True

    @property
    def written_keys(self) -> list[int]:
        return [key for batch in self.batches for key, _ in batch]
