"""The partitioner matches Kafka's murmur2 (vectors from Kafka's own tests)."""

from __future__ import annotations

import pytest

from cdc.log import murmur2, partition_for


@pytest.mark.parametrize(("key", "expected"), [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
])
def test_murmur2_matches_kafka(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected


def test_partition_is_positive_modulo() -> None:
    assert partition_for(b"foobar", 7) == (-790332482 & 0x7FFFFFFF) % 7
    assert {partition_for(b"%d" % i, 3) for i in range(100)} == {0, 1, 2}
