"""Truncate: delete a table's keys by pattern (SCAN + UNLINK in batches), once per version.

The keys of a table are those its key template gives with every key placeholder as
``*`` (``orders:*`` for ``{table}:{key}``); keep a separator after the table's part, or
another table's keys may match (``{table}{key}`` of ``order`` matches ``orders1``).
Version keys go too: the truncate marker ``_cdc_truncated:<pattern>`` (a hash:
``version``, ``done``) now refuses every older write. A key whose version is newer than the
truncate stays: its event sits in another partition of the topic than the truncate's and
was applied first. The marker is written *before*
the scan, so no older write lands during it, and marked ``done`` after: a truncate
replayed once done does nothing, one interrupted mid-scan runs again.
"""

from __future__ import annotations

import logging
from typing import cast

from redis import Redis
from redis.exceptions import RedisError

from .errors import unavailable
from .scripts import UNLINK_NOT_NEWER, version_text

log = logging.getLogger(__name__)

VERSION_PREFIX = "_cdc_version:"
TRUNCATE_PREFIX = "_cdc_truncated:"
SCAN_COUNT = 1000


def marker_key(pattern: str) -> str:
    """The truncate marker of the table whose keys match ``pattern``."""
    return TRUNCATE_PREFIX + pattern


def truncate(client: Redis, pattern: str, version: int | None) -> bool:
    """Delete the keys matching ``pattern`` (and their version keys); with a ``version``,
    only if no truncate at least as new completed. True if it ran."""
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
        deleted = _unlink_matching(client, pattern, version)
        if version is not None:
            deleted += _unlink_matching(client, VERSION_PREFIX + pattern, version)
            client.hset(marker, "done", "1")
    except RedisError as exc:
        raise unavailable(exc, f"truncating the keys {pattern}") from exc
    log.info("truncated %s: %d keys deleted", pattern, deleted, extra={"sink": "redis"})
    return True


def _unlink_matching(client: Redis, pattern: str, version: int | None) -> int:
    """Unlink the keys matching ``pattern``; with a ``version``, only those whose row
    version is not newer: a row written after the truncate (its event came from another
    partition, so it may be applied before the truncate) stays."""
    deleted = 0
    cursor = 0
    while True:
        cursor, keys = cast(tuple[int, list[bytes]],
                            client.scan(cursor, match=pattern, count=SCAN_COUNT))
        doomed = [key for key in keys if not key.startswith(TRUNCATE_PREFIX.encode())]
        if doomed and version is None:
            deleted += cast(int, client.unlink(*doomed))
        elif doomed and version is not None:
            deleted += cast(int, client.eval(UNLINK_NOT_NEWER, len(doomed), *doomed,
                                             version_text(version), VERSION_PREFIX))
        if cursor == 0:
            return deleted
