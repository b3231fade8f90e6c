"""From a change to its row in the batch script: the key, the value, the kind of write.

Values are the record as a JSON string or as a hash (one field per non-null column; text
as is, booleans ``true``/``false``, lists and objects as JSON). A table without a view
is written from the event's own ``after`` object (no copy); a view makes a new record.
Deletes, and rows a view's filter drops, delete the value and keep a tombstone version.

Unchanged TOAST columns still missing after ``connectors.changes``
(``derived.complete_record`` says which fields keep their stored values): for hashes the
script copies those fields from the stored hash atomically; for JSON the sink reads the
stored value first (``StoredJson``) and the merge happens here, since Lua's cjson would
round integers past 2^53 and floats past 14 digits. That write then checks the version
it read is still the stored one (``J`` rows, see ``scripts``).
"""

from __future__ import annotations

from typing import Any

import orjson
from redis.exceptions import RedisError

from connectors.changes import Delete, Upsert, upsert_record
from connectors.contract import Rejection
from derived import complete_record
from derived.values import text_of

from .batch import RowBatch
from .config import RedisSinkConfig
from .errors import rejection_reason
from .keys import KeyTemplates

StoredJson = tuple[bytes | RedisError | None, bytes | RedisError | None]  # (value, version)


class RowRenderer:
    """Adds changes to a ``ScriptBatch`` as the config says."""

    def __init__(self, config: RedisSinkConfig, keys: KeyTemplates) -> None:
        self._max_bytes = config.max_value_bytes
        self._hash = config.value_format == "hash"
        self._keys = keys

    def add(self, batch: RowBatch, change: Upsert | Delete,
            stored: dict[str, StoredJson]) -> Rejection | None:
        """Add ``change``'s row; a ``Rejection`` if it cannot be written."""
        table = self._keys.of(change)
        key = table.render(change.key)
        if isinstance(change, Delete):
            batch.row(change.event, key, table.marker, "d")
            return None
        if self._hash:
            return self._hash_row(batch, change, key, table.marker)
        if change.view is None and not change.missing:  # the common case: no copy
            return self._json_row(batch, change, key, table.marker, change.row, "")
        return self._merged_json_row(batch, change, key, table.marker, stored.get(key))

    def _json_row(self, batch: RowBatch, change: Upsert, key: str, marker: str,
                  record: dict[str, Any], expect: str) -> Rejection | None:
        value = orjson.dumps(record)
        if len(value) > self._max_bytes:
            return self._too_large(change, key, len(value))
        if expect:
            batch.row(change.event, key, marker, "J", (expect, value), len(value))
        else:
            batch.row(change.event, key, marker, "j", (value,), len(value))
        return None

    def _merged_json_row(self, batch: RowBatch, change: Upsert, key: str, marker: str,
                         stored: StoredJson | None) -> Rejection | None:
        previous: dict[str, Any] | None = None
        expect = ""
        if change.missing:
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
        record = upsert_record(change, previous, "value")
        if isinstance(record, Rejection):
            return record
        if record is None:
            batch.row(change.event, key, marker, "d")
            return None
        return self._json_row(batch, change, key, marker, record, expect)

    def _hash_row(self, batch: RowBatch, change: Upsert, key: str,
                  marker: str) -> Rejection | None:
        if change.view is None and not change.missing:  # the common case: no copy
            record: dict[str, Any] | None = change.row
            kept: frozenset[str] = frozenset()
        else:  # the script copies the kept fields from the stored hash
            done = complete_record(change.view, change.row, change.missing, None)
            if done.problem is not None:
                return Rejection(change.event, done.problem)
            record, kept = done.record, done.unfilled
        if record is None:
            batch.row(change.event, key, marker, "d")
            return None
        pairs: list[str] = []
        for name, value in record.items():
            if value is not None and name not in kept:
                pairs += (name, text_of(value))
        sizes = [len(text.encode()) for text in pairs[1::2]]
        if max(sizes, default=0) > self._max_bytes:
            return self._too_large(change, key, max(sizes))
        keep = sorted(kept)
        batch.row(change.event, key, marker, "h", (len(keep), *keep, len(pairs), *pairs),
                  sum(sizes))
        return None

    def _too_large(self, change: Upsert, key: str, size: int) -> Rejection:
        return Rejection(change.event, f"the value of {key!r} is {size} bytes, over "
                         f"max_value_bytes ({self._max_bytes}); raise it (and Redis's "
                         "proto-max-bulk-len), or leave the large column out with a view")
