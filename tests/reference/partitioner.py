"""The readable definition of Kafka's murmur2 and partitioner, which the native core
(``cdc.log.partitioner``) computes."""

from __future__ import annotations

import struct
from functools import lru_cache

_SEED = 0x9747B28C
_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2_reference(data: bytes) -> int:
    """Kafka's ``Utils.murmur2``: a signed 32-bit hash of ``data``."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - (length & 3)
    for k in _words(length >> 2).unpack_from(data):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    rest = length & 3
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_reference(key: bytes, partitions: int) -> int:
    """``toPositive(murmur2(key)) % partitions``, as Kafka's ``BuiltInPartitioner``."""
    return (murmur2_reference(key) & 0x7FFFFFFF) % partitions


@lru_cache(maxsize=256)
def _words(count: int) -> struct.Struct:
    return struct.Struct(f"<{count}I")
