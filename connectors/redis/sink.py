"""``RedisSink``: one key per row and view, each write a versioned compare-and-set.

A batch is: its truncates first (``truncate``), then, for the JSON updates that left
unchanged TOAST columns out, one pipelined read of their stored values, then one call of
the batch script (``scripts.BATCH``; one per ``batch.CHUNK_ROWS`` rows) carrying every
row's key, version and value (``rows``), so the version check costs one round trip and
one script run per batch. Keys come from the view's or the sink's ``key_template``
(``keys``). A plain batch (rows and deletes of tables without views, JSON, no unchanged
TOAST columns: the common case) is rendered straight from the events (``plain``), ahead
of its write when the runtime asks (``prepare``, in the runtime's reading thread while
the previous batch is being written).

``mode: invalidate`` only deletes the key of every changed row (``UNLINK``).

On a Redis Cluster (``urls``) the client is redis-py's ``RedisCluster`` and the rows of a
batch are written one script call per master (``cluster_batch``, ``slots``), rendered
by the Python loop (the native renderer packs calls for one node); after a call refused
because a slot moved, the batch's retry goes one call per slot, by a new slot map.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import cast

from redis import Redis
from redis.commands.core import Script
from redis.exceptions import RedisClusterException, RedisError, ResponseError

from cdc.errors import ConfigError, ConfigProblem
from connectors.changes import ChangeReader, Delete, Truncate, Upsert
from connectors.contract import SinkContext, SinkEvent, SinkUnavailableError, WriteResult

from . import scripts
from .batch import PackedBatch, RowBatch, ScriptBatch
from .client import Client, address, make_client
from .cluster_batch import ClusterRows, SlotsMovedError
from .config import RedisSinkConfig
from .errors import is_transient, login_refusal, unavailable
from .keys import KeyTemplates
from .plain import PlainRows
from .rows import RowRenderer, StoredJson
from .slots import KeyNames, slot_tags
from .truncate import truncate


class PreparedEvents(list[SinkEvent]):
    """A batch with its plain rows rendered ahead (``RedisSink.prepare``); ``rows`` is
    None when the batch is not plain."""

    rows: RowBatch | PackedBatch | None = None


class RedisSink:
    """The Redis sink (see the module docstring)."""

    def __init__(self, config: RedisSinkConfig, *, topic_prefix: str = "") -> None:
        self.config = config
        self._reader = ChangeReader(config.views, topic_prefix)
        self._keys = KeyTemplates(config.key_template)
        self._rows = RowRenderer(config, self._keys)
        self._plain = PlainRows(config, self._keys, topic_prefix)
        self._names = KeyNames(config.cluster)
        ttl, tombstone = _ms(config.ttl), _ms(config.tombstone_retention)
        # a value's version key outlives the value by the tombstone retention
        self._ttls = (ttl, ttl + tombstone if ttl and tombstone else 0, tombstone)
        self._client: Client | None = None
        self._stale = False  # a cluster client that failed: make a new one
        self._by_slot = False  # a slot moved: the next write goes slot by slot
        self._script: Script | None = None
        self._opened = False  # once connected, a refused login is retried

    def open(self) -> None:
        """Connect, check Redis answers, and load the batch script (on every master of a
        cluster)."""
        if self.config.cluster:
            slot_tags()  # made once per process (~0.2 s), before the first batch
        field = "config.urls" if self.config.cluster else "config.url"
        doing = f"connecting to {address(self.config)} ({field})"
        try:
            client = make_client(self.config)  # a cluster's client reads its slots here
        except (RedisError, RedisClusterException) as exc:
            self._refused(exc, field)
            raise unavailable(exc, doing) from exc
        try:
            client.ping()
            if not self.config.cluster:
                _not_a_cluster(client)
            doing = "loading the batch script"
            script = scripts.BATCH_CLUSTER if self.config.cluster else scripts.BATCH
            client.script_load(script)
        except (RedisError, RedisClusterException) as exc:
            client.close()
            if (self.config.cluster and doing == "loading the batch script"
                    and isinstance(exc, ResponseError) and not is_transient(exc)):
                raise ConfigError([ConfigProblem("config.urls", "this Redis Cluster refused "
                                                 "the connector's script (it needs Redis 7.0 "
                                                 "or later: script flags): "
                                                 f"{str(exc)[:200]}")]) from exc
            self._refused(exc, field)
            raise unavailable(exc, doing) from exc
        except ConfigError:
            client.close()
            raise
        # a cluster client runs a ``Script`` as ``Redis`` does (EVALSHA, keys of one slot)
        self._client, self._script = client, Script(cast(Redis, client), script)
        self._opened = True

    def _refused(self, exc: RedisError | RedisClusterException, field: str) -> None:
        """Before the first write: a login refused for good is a configuration error
        (later, as after a password rotated mid-run, it is retried)."""
        why = None if self._opened else login_refusal(exc)
        if why is not None:
            if "password" in why and self.config.password is not None:
                field = "config.password"
            raise ConfigError([ConfigProblem(
                field, f"Redis at {address(self.config)}: {why}")]) from exc

    def prepare(self, batch: list[SinkEvent]) -> list[SinkEvent]:
        """``batch`` with its plain rows rendered (``PreparingSink``)."""
        prepared = PreparedEvents(batch)
        prepared.rows = self._plain.rows(prepared, self._ttls)
        return prepared

    def write(self, batch: Sequence[SinkEvent]) -> WriteResult:
        """Apply ``batch``: truncates first, then one batch script call. On a cluster, the
        write after a failed one starts with a new client, which reads the slot map from
        the seed nodes afresh (whatever the old one kept of a failed master)."""
        if self._stale:
            self.close()
            self.open()
            self._stale = False
        try:
            written = self._write(batch)
        except SinkUnavailableError as exc:
            self._stale = self.config.cluster
            self._by_slot = self._by_slot or isinstance(exc, SlotsMovedError)
            raise
        self._by_slot = False
        return written

    def _write(self, batch: Sequence[SinkEvent]) -> WriteResult:
        client, script = self._connected()
        if isinstance(batch, PreparedEvents):  # rendered ahead (or not plain)
            plain = batch.rows
        else:
            plain = self._plain.rows(batch, self._ttls)
        if isinstance(plain, ClusterRows):
            plain.by_slot = self._by_slot
        if plain is not None:
            return WriteResult(plain.run(script))
        changes, rejected = self._reader.read(batch)
        writes: list[Upsert | Delete] = []
        for change in changes:
            if isinstance(change, Truncate):
                version = None if self.config.mode == "invalidate" else change.event.version
                truncate(client, self._keys.of(change).pattern, version, self._names)
            else:
                writes.append(change)
        if self.config.mode == "invalidate":
            self._invalidate(client, writes)
            return WriteResult(rejected)
        stored = self._stored_json(client, writes)
        rows: RowBatch = ScriptBatch(self._ttls)
        if self.config.cluster:
            rows = ClusterRows(self._ttls)
            rows.by_slot = self._by_slot
        add = self._rows.add
        for change in writes:
            problem = add(rows, change, stored)
            if problem is not None:
                rejected.append(problem)
        rejected += rows.run(script)
        return WriteResult(rejected)

    def flush(self) -> None:
        """Nothing to do: every write was acknowledged by Redis when ``write`` returned."""

    def close(self) -> None:
        """Close the connections."""
        if self._client is not None:
            self._client.close()
            self._client = self._script = None

    def _connected(self) -> tuple[Client, Script]:
        if self._client is None or self._script is None:
            raise RuntimeError("RedisSink.write before open")
        return self._client, self._script

    def _stored_json(self, client: Client, writes: Sequence[Upsert | Delete]
                     ) -> dict[str, StoredJson]:
        """The stored value and version of each key an update must merge into (JSON)."""
        if self.config.value_format != "json":
            return {}
        keys = sorted({self._keys.key(c) for c in writes if isinstance(c, Upsert) and c.missing})
        if not keys:
            return {}
        pipe = client.pipeline(transaction=False)
        for key in keys:
            pipe.get(key)
            pipe.get(self._names.version_key(key))
        try:
            found = pipe.execute(raise_on_error=False)
        except (RedisError, RedisClusterException) as exc:
            raise unavailable(exc, f"reading {len(keys)} stored values") from exc
        for reply in found:
            if isinstance(reply, RedisError) and is_transient(reply):
                raise unavailable(reply, f"reading {len(keys)} stored values")
        return {key: (found[2 * i], found[2 * i + 1]) for i, key in enumerate(keys)}

    def _invalidate(self, client: Client, writes: Sequence[Upsert | Delete]) -> None:
        keys = sorted({self._keys.key(change) for change in writes})
        if not keys:
            return
        try:
            client.unlink(*keys)
        except (RedisError, RedisClusterException) as exc:
            raise unavailable(exc, f"invalidating {len(keys)} keys") from exc


def _ms(duration: timedelta | None) -> int:
    return int(duration.total_seconds() * 1000) if duration is not None else 0


def create(config: RedisSinkConfig, context: SinkContext) -> RedisSink:
    """The sink for one worker (``SinkSpec.factory``); the runtime opens it."""
    return RedisSink(config, topic_prefix=context.topic_prefix)


def _not_a_cluster(client: Client) -> None:
    """Refuse a Redis Cluster node named as one Redis (``url``): its ``MOVED`` replies
    would reject most writes."""
    try:
        info = cast(dict[str, object], client.info("cluster"))
    except ResponseError:  # INFO not allowed to this user: nothing to tell
        return
    if info.get("cluster_enabled") in (1, "1"):
        raise ConfigError([ConfigProblem("config.url", "this Redis is a node of a Redis "
                                         "Cluster: name its nodes under config.urls "
                                         "instead (urls: [redis://host:port, ...])")])
