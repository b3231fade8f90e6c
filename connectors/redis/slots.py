"""Redis Cluster: a key's hash slot, and the sink's own keys kept in the row's slot.

A script call may only touch keys of one hash slot, so on a cluster every row's own
keys live in its value key's slot: its version key is ``_cdc_version:{T}<key>`` and its
table's truncate marker ``_cdc_truncated:{T}<pattern>``, where ``{T}`` is a hash tag
(a short number) whose slot is the key's. A truncate writes its marker in every slot
(``truncate``). On one Redis node the names stay as they are (``KeyNames(False)``).
"""

from __future__ import annotations

from functools import cache

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

VERSION_PREFIX = "_cdc_version:"
TRUNCATE_PREFIX = "_cdc_truncated:"


def slot_of(key: str) -> int:
    """The hash slot of ``key`` (its hash tag's, if it has one)."""
    return key_slot(key.encode())


@cache
def slot_tags() -> tuple[str, ...]:
    """For each slot, the shortest decimal number whose slot it is (made once, ~0.2 s)."""
    tags: dict[int, str] = {}
    number = 0
    while len(tags) < REDIS_CLUSTER_HASH_SLOTS:
        text = str(number)
        tags.setdefault(key_slot(text.encode()), text)
        number += 1
    return tuple(tags[slot] for slot in range(REDIS_CLUSTER_HASH_SLOTS))


def tagged(prefix: str, slot: int, rest: str) -> str:
    """``prefix{T}rest``: a key in ``slot`` whatever braces ``rest`` holds."""
    return f"{prefix}{{{slot_tags()[slot]}}}{rest}"


def slot_marker(marker: str, slot: int) -> str:
    """The truncate marker ``marker`` (``_cdc_truncated:<pattern>``) in ``slot``."""
    return tagged(TRUNCATE_PREFIX, slot, marker.removeprefix(TRUNCATE_PREFIX))


class KeyNames:
    """The version key and truncate marker of a row's key, on a cluster or one node."""

    def __init__(self, cluster: bool) -> None:
        self.cluster = cluster

    def version_key(self, key: str) -> str:
        """The key holding the version of value key ``key``."""
        if not self.cluster:
            return VERSION_PREFIX + key
        return tagged(VERSION_PREFIX, slot_of(key), key)

    def version_prefix(self, slot: int) -> str:
        """What precedes a value key in its version key's name, for keys of ``slot``."""
        return tagged(VERSION_PREFIX, slot, "") if self.cluster else VERSION_PREFIX

    def version_pattern(self, pattern: str) -> str:
        """The ``SCAN`` pattern of the version keys of the value keys ``pattern`` matches."""
        return f"{VERSION_PREFIX}{{*}}{pattern}" if self.cluster else VERSION_PREFIX + pattern

    def marker(self, marker: str, key: str) -> str:
        """The truncate marker ``marker`` as a script call writing ``key`` reads it."""
        return slot_marker(marker, slot_of(key)) if self.cluster else marker
