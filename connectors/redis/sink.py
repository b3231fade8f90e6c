"""``RedisSink``: one key per row and view, each write a versioned compare-and-set.

A batch is one pipeline of ``EVALSHA`` calls (``scripts``, packed by ``resp``), after
the batch's truncates (``truncate``). Keys come from the view's or the sink's
``key_template``; values are the record as a JSON string or as a hash (one field per
non-null column; text as is, booleans ``true``/``false``, lists and objects as JSON).
Deletes, and rows a view's filter drops, delete the value and keep a tombstone version
for ``tombstone_retention``.

Unchanged TOAST columns (an update that did not resend them): first from the batch or
``before`` (``connectors.changes``); then from the stored value — for hashes inside the
script (the kept fields are copied from the stored hash atomically, exactly); for JSON
by reading the stored value first (one pipelined read) and merging in Python, since
Lua's cjson would round integers past 2^53 and floats past 14 digits. That write then
checks the version it read is still the stored one (else the batch is retried).

``mode: invalidate`` only deletes the key of every changed row (``UNLINK``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import urlsplit

import orjson
import redis
from redis.exceptions import NoScriptError, RedisError

from connectors.changes import ChangeReader, Delete, Truncate, Upsert
from connectors.contract import Rejection, SinkEvent, SinkUnavailableError, WriteResult
from connectors.placeholders import NameTemplate, TableNames
from connectors.sink_context import topic_prefix_of
from derived import apply_view_keeping, plan_unchanged, recover_columns
from derived.values import text_of

from . import scripts
from .config import RedisSinkConfig
from .errors import is_transient, rejection_reason, unavailable
from .resp import bulk_string, evalsha_head, run_commands
from .truncate import VERSION_PREFIX, marker_key, truncate

log = logging.getLogger(__name__)

VERSION_PREFIX_BYTES = VERSION_PREFIX.encode()
StoredJson = tuple[bytes | RedisError | None, bytes | RedisError | None]  # (value, version)


@dataclass(frozen=True, slots=True)
class ScriptCall:
    """One EVALSHA for one event, as RESP bytes."""

    event: SinkEvent
    command: bytes


class RedisSink:
    """The Redis sink (see the module docstring)."""

    def __init__(self, config: RedisSinkConfig, *, topic_prefix: str = "") -> None:
        self.config = config
        self._reader = ChangeReader(config.views, topic_prefix)
        self._templates: dict[str, NameTemplate] = {}
        self._patterns: dict[tuple[str, TableNames], str] = {}
        self._heads: dict[tuple[str, int], bytes] = {}
        self._constants: dict[tuple[str, int, str], tuple[bytes, bytes]] = {}
        self._ttl_ms = _ms(config.ttl)
        self._tombstone_ms = _ms(config.tombstone_retention)
        self._client: redis.Redis | None = None
        self._shas: dict[str, str] = {}

    def open(self) -> None:
        """Connect, check Redis answers, and load the scripts."""
        timeout = self.config.timeout.total_seconds()
        password = self.config.password.get_secret_value() if self.config.password else None
        client = redis.Redis.from_url(self.config.url, password=password,
                                      socket_timeout=timeout, socket_connect_timeout=timeout)
        try:
            client.ping()
        except RedisError as exc:
            client.close()
            raise unavailable(exc, f"connecting to {_address(self.config.url)} "
                                   "(config.url)") from exc
        self._client = client
        self._load_scripts()

    def write(self, batch: Sequence[SinkEvent]) -> WriteResult:
        """Apply ``batch``: truncates first, then one pipeline."""
        client = self._connected()
        changes, rejected = self._reader.read(batch)
        for change in changes:
            if isinstance(change, Truncate):
                version = None if self.config.mode == "invalidate" else change.event.version
                truncate(client, self._pattern(change), version)
        writes = [c for c in changes if not isinstance(c, Truncate)]
        if self.config.mode == "invalidate":
            self._invalidate(client, writes)
            return WriteResult(rejected)
        stored = self._stored_json(client, writes)
        calls: list[ScriptCall] = []
        for change in writes:
            call = self._call(change, stored)
            if isinstance(call, Rejection):
                rejected.append(call)
            else:
                calls.append(call)
        rejected.extend(self._run(calls))
        return WriteResult(rejected)

    def flush(self) -> None:
        """Nothing to do: every write was acknowledged by Redis when ``write`` returned."""

    def close(self) -> None:
        """Close the connections."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def _connected(self) -> redis.Redis:
        if self._client is None:
            raise RuntimeError("RedisSink.write before open")
        return self._client

    def _template(self, change: Upsert | Delete | Truncate) -> NameTemplate:
        source = (change.view.key_template if change.view is not None else None) \
            or self.config.key_template
        template = self._templates.get(source)
        if template is None:
            template = self._templates[source] = NameTemplate(source)
        return template

    def _key(self, change: Upsert | Delete) -> str:
        return self._template(change).render(change.names, change.key)

    def _call(self, change: Upsert | Delete,
              stored: dict[str, StoredJson]) -> ScriptCall | Rejection:
        key = self._key(change)
        if isinstance(change, Delete):
            return self._delete(change, key)
        if self.config.value_format == "hash":
            return self._set_hash(change, key)
        return self._set_json(change, key, stored.get(key))

    def _delete(self, change: Upsert | Delete, key: str) -> ScriptCall:
        return self._script_call(change, scripts.DELETE, key, self._tombstone_ms, "", ())

    def _set_hash(self, change: Upsert, key: str) -> ScriptCall | Rejection:
        plan = plan_unchanged(change.view, change.missing)
        if plan.problem is not None:
            return Rejection(change.event, plan.problem)
        record = apply_view_keeping(change.view, change.row, plan.keep)
        if record is None:
            return self._delete(change, key)
        pairs: list[str] = []
        for name, value in record.items():
            if value is not None and name not in plan.keep:
                pairs += (name, text_of(value))
        largest = max((len(text.encode()) for text in pairs[1::2]), default=0)
        if largest > self.config.max_value_bytes:
            return self._too_large(change, key, largest)
        keep = sorted(plan.keep)
        return self._script_call(change, scripts.SET_HASH, key, self._version_ttl_ms(), "",
                                 (len(keep), *keep, *pairs))

    def _set_json(self, change: Upsert, key: str,
                  stored: StoredJson | None) -> ScriptCall | Rejection:
        row, missing, expect = change.row, change.missing, ""
        previous: dict[str, Any] = {}
        if missing:
            value, version = stored or (None, None)
            if isinstance(value, RedisError):
                return Rejection(change.event, rejection_reason(value))
            if value is not None:
                try:
                    previous = orjson.loads(value)
                except orjson.JSONDecodeError:
                    return Rejection(change.event, f"the stored value of {key!r} is not JSON; "
                                     "cannot keep its unchanged TOAST columns")
            expect = version.decode() if isinstance(version, bytes) else "none"
            recovered = recover_columns(change.view, previous, missing)
            row, missing = {**row, **recovered}, missing - recovered.keys()
        plan = plan_unchanged(change.view, missing)
        if plan.problem is not None:
            return Rejection(change.event, plan.problem)
        record = apply_view_keeping(change.view, row, plan.keep)
        if record is None:
            return self._delete(change, key)
        if plan.keep and not previous:
            message = change.event.message
            log.warning("no stored value to take unchanged TOAST fields %s from; writing "
                        "without them", sorted(plan.keep),
                        extra={"topic": message.topic, "partition": message.partition,
                               "offset": message.offset})
        record.update((name, previous[name]) for name in plan.keep if name in previous)
        value = orjson.dumps(record)
        if len(value) > self.config.max_value_bytes:
            return self._too_large(change, key, len(value))
        return self._script_call(change, scripts.SET_JSON, key, self._version_ttl_ms(),
                                 expect, (value,))

    def _too_large(self, change: Upsert, key: str, size: int) -> Rejection:
        return Rejection(change.event, f"the value of {key!r} is {size} bytes, over "
                         f"max_value_bytes ({self.config.max_value_bytes}); raise it (and "
                         "Redis's proto-max-bulk-len), or leave the large column out with a "
                         "view")

    def _script_call(self, change: Upsert | Delete, script: str, key: str, version_ttl_ms: int,
                     expect: str, extra: tuple[str | bytes | int, ...]) -> ScriptCall:
        """The EVALSHA of ``script`` (KEYS and the first ARGV as ``scripts`` says); the
        parts every call of a batch shares are encoded once and reused."""
        head = self._heads.get((script, len(extra)))
        if head is None:
            head = self._heads[script, len(extra)] = evalsha_head(
                self._shas[script], 3, 4 + len(extra))
        constants = self._constants.get((self._pattern(change), version_ttl_ms, expect))
        if constants is None:
            marker = bulk_string(marker_key(self._pattern(change)).encode())
            ttls = bulk_string(b"%d" % self._ttl_ms) + bulk_string(b"%d" % version_ttl_ms)
            constants = (marker, ttls + bulk_string(expect.encode()))
            if not expect:  # an expected version is one event's: not worth keeping
                self._constants[self._pattern(change), version_ttl_ms, expect] = constants
        key_bytes = key.encode()
        parts = [head, bulk_string(key_bytes), bulk_string(VERSION_PREFIX_BYTES + key_bytes),
                 constants[0], bulk_string(scripts.version_text(change.event.version).encode()),
                 constants[1]]
        parts.extend(bulk_string(_bytes(arg)) for arg in extra)
        return ScriptCall(change.event, b"".join(parts))

    def _pattern(self, change: Upsert | Delete | Truncate) -> str:
        """The SCAN pattern of the change's table keys (also names its truncate marker)."""
        template = self._template(change)
        cache_key = (template.template, change.names)
        pattern = self._patterns.get(cache_key)
        if pattern is None:
            pattern = self._patterns[cache_key] = template.pattern(change.names)
        return pattern

    def _version_ttl_ms(self) -> int:
        """A value's version key outlives the value by the tombstone retention."""
        if not self._ttl_ms or not self._tombstone_ms:
            return 0
        return self._ttl_ms + self._tombstone_ms

    def _stored_json(self, client: redis.Redis, writes: Sequence[Upsert | Delete]
                     ) -> dict[str, StoredJson]:
        """The stored value and version of each key an update must merge into (JSON)."""
        if self.config.value_format != "json":
            return {}
        keys = sorted({self._key(c) for c in writes if isinstance(c, Upsert) and c.missing})
        if not keys:
            return {}
        pipe = client.pipeline(transaction=False)
        for key in keys:
            pipe.get(key)
            pipe.get(VERSION_PREFIX + key)
        try:
            found = pipe.execute(raise_on_error=False)
        except RedisError as exc:
            raise unavailable(exc, f"reading {len(keys)} stored values") from exc
        for reply in found:
            if isinstance(reply, RedisError) and is_transient(reply):
                raise unavailable(reply, f"reading {len(keys)} stored values")
        return {key: (found[2 * i], found[2 * i + 1]) for i, key in enumerate(keys)}

    def _run(self, calls: list[ScriptCall]) -> list[Rejection]:
        """Run ``calls`` in one pipeline; the events Redis refused."""
        if not calls:
            return []
        results = self._execute(calls)
        if any(isinstance(result, NoScriptError) for result in results):
            self._load_scripts()  # Redis restarted or SCRIPT FLUSH: load, run once more
            results = self._execute(calls)
        rejected: list[Rejection] = []
        for call, result in zip(calls, results, strict=True):
            if isinstance(result, RedisError):
                if is_transient(result) or isinstance(result, NoScriptError):
                    raise unavailable(result, "running the batch's scripts")
                rejected.append(Rejection(call.event, rejection_reason(result)))
            elif result == scripts.MOVED:
                raise SinkUnavailableError("a value changed between reading and writing it "
                                           "(another writer); retrying the batch")
        return rejected

    def _execute(self, calls: list[ScriptCall]) -> list[Any]:
        try:
            return run_commands(self._connected(), [call.command for call in calls])
        except RedisError as exc:
            if is_transient(exc):
                raise unavailable(exc, f"running a pipeline of {len(calls)} scripts") from exc
            raise

    def _invalidate(self, client: redis.Redis, writes: Sequence[Upsert | Delete]) -> None:
        keys = sorted({self._key(change) for change in writes})
        if not keys:
            return
        try:
            client.unlink(*keys)
        except RedisError as exc:
            raise unavailable(exc, f"invalidating {len(keys)} keys") from exc

    def _load_scripts(self) -> None:
        client = self._connected()
        self._heads.clear()
        try:
            self._shas = {source: cast(str, client.script_load(source))
                          for source in (scripts.SET_JSON, scripts.SET_HASH, scripts.DELETE)}
        except RedisError as exc:
            raise unavailable(exc, "loading the scripts") from exc


def _bytes(value: str | bytes | int) -> bytes:
    if isinstance(value, bytes):
        return value
    return value.encode() if isinstance(value, str) else b"%d" % value


def _ms(duration: Any) -> int:
    return int(duration.total_seconds() * 1000) if duration is not None else 0


def create(config: RedisSinkConfig, context: object) -> RedisSink:
    """The sink for one worker (``SinkSpec.factory``); the runtime opens it."""
    return RedisSink(config, topic_prefix=topic_prefix_of(context))


def _address(url: str) -> str:
    """Where ``url`` points (host:port, or the socket path), without credentials."""
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return parts.path
    return f"{parts.hostname}:{parts.port or 6379}"
