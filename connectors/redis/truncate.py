"""Truncate: delete a table's keys by pattern (SCAN + UNLINK in batches), once per version.

The keys of a table are those its key template gives with every key placeholder as
``*`` (``orders:*`` for ``{table}:{key}``); keep a separator after the table's part, or
another table's keys may match (``{table}{key}`` of ``order`` matches ``orders1``).
Version keys go too: the truncate marker ``_cdc_truncated:<pattern>`` (a hash:
``version``, ``done``) now refuses every older write. A key whose version is newer than the
truncate stays: its event sits in another partition of the topic than the truncate's and
was applied first. The marker is written *before*
the scan, so no older write lands during it, and marked ``done`` after: a truncate
replayed once done does nothing, one interrupted mid-scan runs again. On a Redis Cluster
the marker's version goes into a copy in every hash slot too (``slots``: a script call
reads the copy in its rows' slot), and the scan covers every master.
"""

from __future__ import annotations

import logging
from itertools import islice
from typing import TYPE_CHECKING, cast

from redis.crc import REDIS_CLUSTER_HASH_SLOTS
from redis.exceptions import RedisClusterException, RedisError

from .errors import unavailable
from .scripts import UNLINK_NOT_NEWER, version_text
from .slots import TRUNCATE_PREFIX as TRUNCATE_PREFIX
from .slots import VERSION_PREFIX as VERSION_PREFIX
from .slots import KeyNames, slot_marker, slot_of

if TYPE_CHECKING:
    from .client import Client

log = logging.getLogger(__name__)

SCAN_COUNT = 1000


def marker_key(pattern: str) -> str:
    """The truncate marker of the table whose keys match ``pattern``."""
    return TRUNCATE_PREFIX + pattern


def truncate(client: Client, pattern: str, version: int | None,
             names: KeyNames | None = None) -> bool:
    """Delete the keys matching ``pattern`` (and their version keys); with a ``version``,
    only if no truncate at least as new completed. True if it ran."""
    names = names or KeyNames(cluster=False)
    marker = marker_key(pattern)
    try:
        if version is not None:
            current = cast(list[bytes | None], client.hmget(marker, ["version", "done"]))
            if current[0] is not None:
                done_before = int(current[0]) > version or (
                    int(current[0]) == version and current[1] == b"1")
                if done_before:
                    return False
            client.hset(marker, mapping={"version": version_text(version), "done": "0"})
            if names.cluster:
                _mark_every_slot(client, marker, version_text(version))
        deleted = _unlink_matching(client, pattern, version, names)
        if version is not None:
            deleted += _unlink_matching(client, names.version_pattern(pattern), version, names)
            client.hset(marker, "done", "1")
    except (RedisError, RedisClusterException) as exc:
        raise unavailable(exc, f"truncating the keys {pattern}") from exc
    log.info("truncated %s: %d keys deleted", pattern, deleted, extra={"sink": "redis"})
    return True


def _mark_every_slot(client: Client, marker: str, version: str) -> None:
    """The truncate's version in the marker of every slot of a cluster (``slots``)."""
    pipe = client.pipeline(transaction=False)
    for slot in range(REDIS_CLUSTER_HASH_SLOTS):
        pipe.hset(slot_marker(marker, slot), "version", version)
    pipe.execute()


def _unlink_matching(client: Client, pattern: str, version: int | None,
                     names: KeyNames) -> int:
    """Unlink the keys matching ``pattern`` (on every master of a cluster); with a
    ``version``, only those whose row version is not newer: a row written after the
    truncate (its event came from another partition, so it may be applied before the
    truncate) stays."""
    deleted = 0
    skip = TRUNCATE_PREFIX.encode()
    keys = (key for key in client.scan_iter(match=pattern, count=SCAN_COUNT)
            if not key.startswith(skip))
    while doomed := list(islice(keys, SCAN_COUNT)):
        if version is None:
            deleted += cast(int, client.unlink(*doomed))
            continue
        by_slot: dict[int, list[bytes]] = {}
        for key in doomed:
            by_slot.setdefault(slot_of(key.decode()) if names.cluster else 0, []).append(key)
        for slot, slot_keys in by_slot.items():
            prefix = names.version_prefix(slot)
            declared = _with_version_keys(slot_keys, prefix) if names.cluster else slot_keys
            deleted += cast(int, client.eval(UNLINK_NOT_NEWER, len(declared), *declared,
                                             version_text(version), prefix,
                                             str(len(slot_keys))))
    return deleted


def _with_version_keys(keys: list[bytes], prefix: str) -> list[bytes]:
    """``keys`` followed by the version keys of those that are value keys: a script call
    on a cluster declares every key it reads, so a slot being migrated with a row's two
    keys on different masters refuses the call (``TRYAGAIN``: retried) rather than run
    it where the version key is missing (a newer row would then be deleted)."""
    head = prefix.encode()
    return keys + [head + key for key in keys if not key.startswith(head)]
