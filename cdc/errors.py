"""The errors Distributary raises, one tree rooted at ``DistributaryError``.

    DistributaryError
    ├── ConfigError            bad pipeline.yaml (each problem names its YAML path)
    ├── DecodeError            malformed pgoutput bytes (message type, byte offset)
    ├── LogError
    │   └── LogCorruptionError a checksum failure (topic, partition, offset)
    ├── SourceError            PostgreSQL refused or lost the replication stream
    └── SinkError
        ├── SinkRejectedError  terminal: the event goes to the dead-letter topic
        └── ...

``TransientError`` and ``TerminalError`` are markers mixed into concrete errors: the
runtime retries the first with backoff and dead-letters (or fails on) the second.
"""

from __future__ import annotations

from typing import TypeVar

E = TypeVar("E", bound=BaseException)


class DistributaryError(Exception):
    """Root of every error this package raises on purpose."""


class TransientError(DistributaryError):
    """Marker: retrying the same operation later may succeed."""


class TerminalError(DistributaryError):
    """Marker: retrying the same operation will fail the same way."""


class ConfigProblem:
    """One problem in a configuration file: where, what was found, what is expected."""

    __slots__ = ("message", "path")

    def __init__(self, path: str, message: str) -> None:
        self.path = path
        self.message = message

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message

    def __repr__(self) -> str:
        return f"ConfigProblem({self.path!r}, {self.message!r})"


class ConfigError(TerminalError):
    """The configuration is invalid; ``problems`` lists every problem found."""

    def __init__(self, problems: list[ConfigProblem]) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class DecodeError(TerminalError):
    """Malformed pgoutput bytes: names the message type and the byte offset."""

    def __init__(self, message_type: str, offset: int, reason: str) -> None:
        self.message_type = message_type
        self.offset = offset
        self.reason = reason
        super().__init__(f"cannot decode pgoutput {message_type!r} message at byte "
                         f"{offset}: {reason}")


class LogError(DistributaryError):
    """A problem in the event log."""


class LogFencedError(LogError):
    """Another replica of the capture took the log over (a newer producer with the same
    identity): this one's batch was not written, and it writes nothing more until it
    claims the log again."""


class LogCorruptionError(LogError, TerminalError):
    """A record failed its checksum or framing check; never skipped silently."""

    def __init__(self, topic: str, partition: int, offset: int, reason: str,
                 *, file: str | None = None, position: int | None = None) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.reason = reason
        self.file = file
        self.position = position
        where = f" ({file} byte {position})" if file is not None else ""
        super().__init__(f"corrupt log record in {topic}[{partition}] at offset {offset}"
                         f"{where}: {reason}")


class SourceError(DistributaryError):
    """PostgreSQL refused, or the replication stream failed."""


class SlotInUseError(SourceError):
    """Another session (another replica of the capture) holds the replication slot."""


class SinkError(DistributaryError):
    """A sink could not write."""


def behind(error: BaseException, kind: type[E]) -> E | None:
    """The first ``kind`` behind ``error``: itself, or one it was raised from or during
    (following ``__cause__``, else ``__context__``), else None."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, kind):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def config_error_in(error: BaseException) -> ConfigError | None:
    """The ``ConfigError`` behind ``error`` (a sink's refused login inside the worker's
    failure), else None."""
    return behind(error, ConfigError)
