"""Key → partition, with the function Kafka's default Java partitioner uses (murmur2),
so a key lands in the same partition number on the file and the Kafka backends.

Both run in the native core (``cdc.native``); ``tests/reference/partitioner.py`` is their
readable definition.
"""

from __future__ import annotations

from ..native import CORE

murmur2 = CORE.murmur2
"""Kafka's ``Utils.murmur2``: a signed 32-bit hash of ``data``."""
partition_for = CORE.partition_for
"""``toPositive(murmur2(key)) % partitions``, as Kafka's ``BuiltInPartitioner``."""
