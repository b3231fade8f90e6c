"""Topic patterns on Kafka with the file log's semantics.

The file log matches a pattern with Python's ``re.fullmatch`` against every topic name.
librdkafka has its own, smaller regex dialect (no ``(?:…)``, for one), so the pattern is
resolved here, in Python, against the cluster's topics; the consumer subscribes to the
names found and looks again every ``REFRESH_S`` seconds to follow new topics.
"""

from __future__ import annotations

import re
import time
from typing import Any

from confluent_kafka import KafkaException

from cdc.errors import LogError

REFRESH_S = 2.0
TIMEOUT_S = 30.0


class TopicPattern:
    """The topics of a cluster that fully match a regular expression, kept current."""

    def __init__(self, pattern: str) -> None:
        try:
            self._regex = re.compile(pattern)
        except re.error as exc:
            raise LogError(f"topic_pattern {pattern!r} is not a valid regular expression: "
                           f"{exc}") from exc
        self.pattern = pattern
        self.next_refresh = 0.0

    def matching(self, client: Any) -> list[str]:
        """The matching topics (Kafka's internal ``__`` topics never match), sorted."""
        self.next_refresh = time.monotonic() + REFRESH_S
        try:
            names = client.list_topics(timeout=TIMEOUT_S).topics
        except KafkaException as exc:
            raise LogError(f"cannot list Kafka topics for pattern {self.pattern!r}: "
                           f"{exc}") from exc
        return sorted(t for t in names
                      if not t.startswith("__") and self._regex.fullmatch(t))

    def due(self) -> bool:
        """True when the topics should be listed again."""
        return time.monotonic() >= self.next_refresh
