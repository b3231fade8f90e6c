"""History topics: the capture's own records that must outlive any retention.

``<prefix>._schemas`` holds every version of every table's shape (events are read with the
version they were written with) and ``<prefix>._snapshots`` the progress of snapshots. Both
are kept forever and never compacted by a log-wide setting: the file backend's retention
and ``compact_all_topics`` skip them, and the Kafka backend creates them with
``retention.ms=-1`` and ``retention.bytes=-1`` (setting that on ones that exist).
"""

from __future__ import annotations

HISTORY_SUFFIXES = ("._schemas", "._snapshots")


def keeps_history(topic: str) -> bool:
    """True for a topic whose records are kept forever."""
    return topic.endswith(HISTORY_SUFFIXES)
