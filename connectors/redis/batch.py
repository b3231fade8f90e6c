"""The arguments of ``scripts.BATCH`` for a batch of rows, and running it.

Rows are added in the batch's order into flat lists of keys and arguments, and run as
calls of at most ``CHUNK_ROWS`` rows and about ``CHUNK_BYTES`` of values each, so one
call never holds Redis (or its query buffer) for long; a batch of the usual size is one
call. A call never holds a key twice (two events of a batch may write one key: tables
whose key templates meet, or a key's events past the 1023rd of a transaction): a row
whose value or version key the call holds already starts the next call, so the script
may gather its writes (``scripts``). Every call carries all the batch's truncate markers
(a batch spans few tables). The calls go through redis-py's ``Script`` (``EVALSHA``,
loading the script again after a Redis restart or ``SCRIPT FLUSH``).

``PackedBatch`` holds the calls of a plain batch the native core rendered straight into
Redis's wire format (``native_rows``): each call is sent as packed bytes on one of the
client's connections, the same command redis-py would pack from ``ScriptBatch``'s lists
(``tests/unit/connectors/test_redis_native_rows.py`` holds them to it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol, cast

from redis.commands.core import Script
from redis.exceptions import NoScriptError, RedisError, ResponseError

from connectors.contract import Rejection, SinkEvent, SinkRejectedError, SinkUnavailableError

from .errors import is_transient, rejection_reason, unavailable
from .scripts import MOVED, version_text
from .truncate import VERSION_PREFIX

CHUNK_ROWS = 1000
CHUNK_BYTES = 32 * 1024**2
Arg = str | bytes | int


class RowBatch(Protocol):
    """Rows to write (``ScriptBatch``; ``cluster_batch.ClusterRows`` on a cluster)."""

    def row(self, event: SinkEvent, key: str, marker: str, kind: str,
            extra: Sequence[Arg] = (), size: int = 0) -> None: ...

    def __len__(self) -> int: ...

    def run(self, script: Script) -> list[Rejection]: ...


class ScriptBatch:
    """The rows of one batch, as ``scripts.BATCH`` calls (see ``scripts`` for the kinds
    of row and their arguments)."""

    def __init__(self, ttls: tuple[int, int, int], *, chunk_rows: int = CHUNK_ROWS,
                 chunk_bytes: int = CHUNK_BYTES) -> None:
        """``chunk_rows``, ``chunk_bytes``: the most rows and about the most bytes of
        values of one call."""
        self._ttls = ttls
        self._chunk_rows = chunk_rows
        self._chunk_bytes = chunk_bytes
        self._markers: dict[str, int] = {}
        self._keys: list[str] = []
        self._args: list[Arg] = []
        self._events: list[SinkEvent] = []
        self._cuts: list[tuple[int, int]] = []  # where each call after the first starts
        self._call_rows = self._call_bytes = 0  # in the last call so far
        self._held: set[str] = set()  # the value and version keys of the last call

    def row(self, event: SinkEvent, key: str, marker: str, kind: str,
            extra: Sequence[Arg] = (), size: int = 0, version_key: str = "") -> None:
        """Add the row of ``event``: its value ``key``, its table's truncate ``marker``,
        its ``kind`` and the kind's own arguments ``extra`` (``size`` bytes of values);
        its ``version_key`` (default: ``_cdc_version:<key>``)."""
        number = self._markers.get(marker)
        if number is None:
            number = self._markers[marker] = len(self._markers) + 1
        version_key = version_key or VERSION_PREFIX + key
        held = self._held
        if self._call_rows and (self._call_rows == self._chunk_rows
                                or self._call_bytes + size > self._chunk_bytes
                                or key in held or version_key in held):
            self._cuts.append((len(self._keys), len(self._args)))
            self._call_rows = self._call_bytes = 0
            held.clear()
        self._call_rows += 1
        self._call_bytes += size
        held.add(key)
        held.add(version_key)
        self._events.append(event)
        self._keys += (key, version_key)
        self._args += (kind, number, version_text(event.version))
        self._args += extra

    def __len__(self) -> int:
        return len(self._events)

    def calls(self) -> list[tuple[list[str], list[Arg]]]:
        """The ``(keys, args)`` of each call, in order."""
        if not self._events:
            return []
        markers = list(self._markers)
        head: list[Arg] = [*self._ttls, len(markers)]
        starts = [(0, 0), *self._cuts]
        ends = [*self._cuts, (len(self._keys), len(self._args))]
        return [(markers + self._keys[key_start:key_end], head + self._args[arg_start:arg_end])
                for (key_start, arg_start), (key_end, arg_end) in zip(starts, ends, strict=True)]

    def call_rows(self) -> list[tuple[list[str], list[Arg], list[SinkEvent]]]:
        """The ``(keys, args)`` of each call with the events of its rows, in order."""
        made = []
        first = 0
        for keys, args in self.calls():
            rows = (len(keys) - len(self._markers)) // 2
            made.append((keys, args, self._events[first:first + rows]))
            first += rows
        return made

    def run(self, script: Script) -> list[Rejection]:
        """Run the calls in order; the rows Redis refused. Raises ``SinkUnavailableError``
        for what may pass (the batch is retried) and ``SinkRejectedError`` when a whole
        call is refused for good (the runtime then isolates the row at fault)."""
        rejected: list[Rejection] = []
        for keys, args, events in self.call_rows():
            reply = _call(len(events), _run_script, script, keys, args)
            rejected += rejections(events, reply)
        return rejected


class PackedCall(NamedTuple):
    """One call of a ``PackedBatch``: its rows' value and version keys (``keys`` of them)
    and its rows' arguments (``args``), each as RESP bulk strings."""

    rows: int
    keys: int
    key_bytes: bytes
    args: int
    arg_bytes: bytes


class PackedBatch:
    """The calls of a plain batch, packed by the native core (see the module docstring);
    ``ScriptBatch`` is its reference."""

    def __init__(self, ttls: tuple[int, int, int], events: list[SinkEvent],
                 markers: list[str], calls: list[PackedCall]) -> None:
        """``markers`` in order of their numbers; ``calls`` cover ``events`` in order."""
        self._events = events
        self._calls = calls
        self._markers = markers
        self._marker_bytes = b"".join(_bulk(marker.encode()) for marker in markers)
        self._head = b"".join(_bulk(b"%d" % number) for number in (*ttls, len(markers)))

    def __len__(self) -> int:
        return len(self._events)

    def commands(self, sha: str) -> list[list[bytes]]:
        """Each call's ``EVALSHA`` command of ``sha``, as parts to send in order."""
        markers = len(self._markers)
        made = []
        for call in self._calls:
            count = 3 + markers + call.keys + 4 + call.args
            made.append([b"*%d\r\n$7\r\nEVALSHA\r\n%s%s%s" % (
                count, _bulk(sha.encode()), _bulk(b"%d" % (markers + call.keys)),
                self._marker_bytes), call.key_bytes, self._head, call.arg_bytes])
        return made

    def run(self, script: Script) -> list[Rejection]:
        """As ``ScriptBatch.run``."""
        rejected: list[Rejection] = []
        first = 0
        for number, call in enumerate(self._calls):
            events = self._events[first:first + call.rows]
            first += call.rows
            reply = _call(call.rows, self._send, script, number)
            rejected += rejections(events, reply)
        return rejected

    def _send(self, script: Script, number: int) -> Any:
        """Send call ``number`` on one of the script's client's connections; its reply.
        Loads the script again when Redis lost it (as ``Script`` does)."""
        try:
            return _send_packed(script, self.commands(script.sha)[number])
        except NoScriptError:
            script.sha = cast(str, script.registered_client.script_load(script.script))
            return _send_packed(script, self.commands(script.sha)[number])


def _bulk(data: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(data), data)


def _send_packed(script: Script, parts: list[bytes]) -> Any:
    """Send a packed command and read its reply (raised when it is an error, as redis-py
    raises it). A connection left in doubt (anything but an error reply) is dropped."""
    pool = script.registered_client.connection_pool
    pooled = pool.get_connection()
    connection = cast(_Connection, pooled)
    try:
        connection.send_packed_command(parts)
        return connection.read_response()
    except ResponseError:
        raise  # the whole reply was read: the connection is fine
    except BaseException:
        connection.disconnect()
        raise
    finally:
        pool.release(pooled)


class _Connection(Protocol):
    """What ``_send_packed`` uses of a redis-py connection (untyped there)."""

    def send_packed_command(self, command: list[bytes]) -> None: ...

    def read_response(self) -> Any: ...

    def disconnect(self) -> None: ...


def _run_script(script: Script, keys: list[str], args: list[Arg]) -> Any:
    return script(keys=keys, args=args)


def _call(rows: int, send: Callable[..., Any], *send_args: Any) -> list[Any]:
    """``send(*send_args)``'s reply, its errors as the sink contract's."""
    try:
        return list(send(*send_args))
    except ResponseError as exc:
        if is_transient(exc):
            raise unavailable(exc, f"writing {rows} rows") from exc
        raise SinkRejectedError(f"Redis refused a call writing {rows} rows: "
                                f"{str(exc)[:500]}") from exc
    except RedisError as exc:
        raise unavailable(exc, f"writing {rows} rows") from exc


def rejections(events: Sequence[SinkEvent], reply: Sequence[Any]) -> list[Rejection]:
    """The rows the reply names (``scripts``: pairs of row number and outcome)."""
    rejected: list[Rejection] = []
    for row, outcome in zip(reply[::2], reply[1::2], strict=True):
        if outcome == MOVED:
            raise SinkUnavailableError("a value changed between reading and writing it "
                                       "(another writer); retrying the batch")
        text = outcome.decode(errors="replace") if isinstance(outcome, bytes) else str(outcome)
        rejected.append(Rejection(events[int(row) - 1], rejection_reason(ResponseError(text))))
    return rejected
