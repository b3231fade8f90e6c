"""Reconciling a Redis connector: keys from the connector's template, versions in their
``_cdc_version:`` keys, deletes through the sink's own compare-and-set script; on a
Redis Cluster the version keys and markers are named into each key's slot (``slots``)
and the listing scans every master."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any, cast

import orjson
import redis
from redis.cluster import RedisCluster
from redis.commands.core import Script

from connectors.placeholders import TableNames
from connectors.redis import scripts
from connectors.redis.client import Client, make_client
from connectors.redis.config import RedisSinkConfig
from connectors.redis.keys import KeyTemplates, key_parts
from connectors.redis.slots import KeyNames
from connectors.redis.truncate import TRUNCATE_PREFIX, VERSION_PREFIX
from derived import ViewDefinition, apply_view
from derived.values import text_of

from .compare import Record, StoredRecord
from .rows import after_jsons, id_texts
from .source import SourceRow
from .target import Encoded

SCAN_COUNT = 10_000  # keys per SCAN step


def redis_client(config: RedisSinkConfig) -> Client:
    """A client for the connector's Redis (or Redis Cluster: ``RedisCluster``)."""
    if config.cluster:
        return make_client(config, retries=3)
    timeout = config.timeout.total_seconds()
    password = config.password.get_secret_value() if config.password else None
    return redis.Redis.from_url(cast(str, config.url), password=password,
                                socket_timeout=timeout, socket_connect_timeout=timeout)


def _ms(duration: timedelta | None) -> int:
    return int(duration.total_seconds() * 1000) if duration is not None else 0


class RedisTarget:
    """One table through one view in one Redis connector (``mode: upsert``)."""

    def __init__(self, connector: str, config: RedisSinkConfig, names: TableNames,
                 view: ViewDefinition | None, client: Client | None = None) -> None:
        self._keys = KeyTemplates(config.key_template).table(names, view)
        self._affix = _affix(self._keys.render,
                             (view.key_template if view is not None else None)
                             or config.key_template, names)
        self.label = f"{connector} redis"
        self.missing_is_drift = config.ttl is None  # an expired key is no drift
        self._view = view
        self._hash = config.value_format == "hash"
        ttl, tombstone = _ms(config.ttl), _ms(config.tombstone_retention)
        self._ttls = (ttl, ttl + tombstone if ttl and tombstone else 0, tombstone)
        self._client = client or redis_client(config)
        self._names = KeyNames(config.cluster)
        self._script = Script(cast(redis.Redis, self._client), scripts.BATCH)

    def sink_id(self, row: SourceRow) -> str | None:
        """The row's key."""
        return self._keys.render(row.key)

    def id_of(self, key: Mapping[str, Any]) -> str | None:
        """The Redis key of a record of event key ``key``."""
        return self._keys.render(key)

    def stored_form(self, record: Record) -> Record:
        """``record`` as ``read`` returns it (a hash: one text field per non-null value)."""
        if not self._hash:
            return record
        return {name: text_of(value) for name, value in record.items() if value is not None}

    def write(self, sink_id: str, record: Record, version: int) -> bool:
        """The sink's upsert row (``j`` or ``h``) of ``record`` as ``sink_id`` under
        ``version``: skipped when a newer version is stored or the table was truncated
        later. True when the key holds ``version`` afterwards."""
        ttl, value_version_ttl, tombstone_ttl = self._ttls
        if self._hash:
            pairs = [part for name, value in self.stored_form(record).items()
                     for part in (name, value)]
            row: list[Any] = ["h", 1, scripts.version_text(version), 0, len(pairs),
                              *pairs]
        else:
            row = ["j", 1, scripts.version_text(version), orjson.dumps(record)]
        reply = self._script(keys=[self._names.marker(self._keys.marker, sink_id), sink_id,
                                   self._names.version_key(sink_id)],
                             args=[ttl, value_version_ttl, tombstone_ttl, 1, *row])
        if reply:
            raise RuntimeError(f"Redis refused to write {sink_id!r}: {reply}")
        return self.versions([sink_id]).get(sink_id) == version

    def expected(self, rows: Sequence[SourceRow]) -> dict[str, Record | None]:
        """Key → value as the sink renders it (``None``: the view filters the row out)."""
        out: dict[str, Record | None] = {}
        render = self._keys.render
        for row in rows:
            record = apply_view(self._view, row.after)
            if record is not None and self._hash:
                record = {name: text_of(value) for name, value in record.items()
                          if value is not None}
            out[render(row.key)] = record
        return out

    def encoded(self, rows: Sequence[SourceRow]) -> Encoded | None:
        """Key → the JSON value the sink writes (``None`` for hash values: records are
        compared)."""
        if self._hash:
            return None
        if self._view is None and self._affix is not None:
            jsons = list(map(after_jsons, rows))
            if all(jsons):  # the whole chunk without a Python call per row
                head, tail = self._affix
                keys = [head + id_text + tail for id_text in map(id_texts, rows)]
                return dict(zip(keys, zip(jsons, rows, strict=True), strict=True))
        out: Encoded = {}
        render, view = self._keys.render, self._view
        for row in rows:
            if view is None and row.after_json:
                out[render(row.key)] = (row.after_json, row)  # the sink's orjson.dumps
            else:
                record = apply_view(view, row.after)
                out[render(row.key)] = (None if record is None else orjson.dumps(record), row)
        return out

    def held(self, ids: Sequence[str]) -> dict[str, bytes]:
        """The values of ``ids`` (one ``MGET``; JSON values only)."""
        if not ids:
            return {}
        values: list[Any] = (self._client.mget_nonatomic(ids)
                             if isinstance(self._client, RedisCluster)
                             else self._client.mget(ids))  # type: ignore[assignment]
        return {key: value for key, value in zip(ids, values, strict=True)
                if value is not None}

    def read(self, ids: Sequence[str]) -> dict[str, StoredRecord]:
        """The values and versions of ``ids`` (one round trip: ``MGET``s, or ``HGETALL``s
        and an ``MGET`` of the versions)."""
        if not ids:
            return {}
        pipe = self._client.pipeline(transaction=False)
        if self._hash:
            for key in ids:
                pipe.hgetall(key)
        else:
            self._mget(pipe, ids)
        self._mget(pipe, [self._names.version_key(key) for key in ids])
        replies = pipe.execute()
        if self._names.cluster:  # one GET per key
            values, versions = replies[:len(ids)], replies[len(ids):]
        else:
            values, versions = (replies[:-1] if self._hash else replies[0]), replies[-1]
        out: dict[str, StoredRecord] = {}
        for key, value, version in zip(ids, values, versions, strict=True):
            if value:
                out[key] = StoredRecord(self._record(value), _version(version))
        return out

    def read_now(self, ids: Sequence[str]) -> dict[str, StoredRecord]:
        """``read``: Redis has no refresh delay."""
        return self.read(ids)

    def scan(self) -> None:
        """``None``: one ``MGET`` per chunk costs less than a ``SCAN`` (in no key order)."""
        return None

    def versions(self, ids: Sequence[str]) -> Mapping[str, int | None]:
        """The versions of the keys of ``ids`` that hold a value."""
        if not ids:
            return {}
        pipe = self._client.pipeline(transaction=False)
        for key in ids:
            pipe.exists(key)
        self._mget(pipe, [self._names.version_key(key) for key in ids])
        replies = pipe.execute()
        versions = replies[len(ids):] if self._names.cluster else replies[-1]
        return {key: _version(version) for key, held, version in
                zip(ids, replies[:len(ids)], versions, strict=True) if held}

    def _mget(self, pipe: Any, keys: Sequence[str]) -> None:
        """Queue the values of ``keys``: one ``MGET`` on one node, a ``GET`` each on a
        cluster (its keys span slots; the pipeline sends each master its share)."""
        if not self._names.cluster:
            pipe.mget(keys)
            return
        for key in keys:
            pipe.get(key)

    def listing(self) -> Iterator[str]:
        """Every value key of the table (one ``SCAN``)."""
        skip = (VERSION_PREFIX.encode(), TRUNCATE_PREFIX.encode())
        for raw in self._client.scan_iter(match=self._keys.pattern, count=SCAN_COUNT):
            if isinstance(raw, bytes):
                if not raw.startswith(skip):
                    yield raw.decode()
            elif not str(raw).startswith((VERSION_PREFIX, TRUNCATE_PREFIX)):
                yield str(raw)

    def delete(self, sink_id: str, version: int) -> bool:
        """The sink's delete row (``d``) for ``sink_id``: skipped when a newer version is
        stored or the table was truncated later; leaves a tombstone version."""
        ttl, value_version_ttl, tombstone_ttl = self._ttls
        before = self._client.exists(sink_id)
        reply = self._script(keys=[self._names.marker(self._keys.marker, sink_id), sink_id,
                                   self._names.version_key(sink_id)],
                             args=[ttl, value_version_ttl, tombstone_ttl, 1, "d", 1,
                                   scripts.version_text(version)])
        if reply:
            raise RuntimeError(f"Redis refused to delete {sink_id!r}: {reply}")
        return bool(before) and not self._client.exists(sink_id)

    def close(self) -> None:
        """Close the connection."""
        self._client.close()

    def _record(self, value: Any) -> Record:
        if isinstance(value, dict):
            return {_text(k): _text(v) for k, v in value.items()}
        try:
            loaded = orjson.loads(value)
        except orjson.JSONDecodeError:
            return {"<not JSON>": _text(value)}
        return loaded if isinstance(loaded, dict) else {"<not an object>": loaded}


def _affix(render: Callable[[Mapping[str, Any]], str], template: str,
           names: TableNames) -> tuple[str, str] | None:
    """``(head, tail)`` when every key ``render`` makes is ``head + encode_key(key) +
    tail`` (a template with one ``{key}`` and no ``{key.<column>}``), else ``None``."""
    pieces, tail = key_parts(template, names)
    if [field for _, field in pieces] != ["key"]:
        return None
    head = pieces[0][0]
    probe = {"k": "\x00"}  # encode_key of one column is its text
    return (head, tail) if render(probe) == head + "\x00" + tail else None


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _version(raw: Any) -> int | None:
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None
