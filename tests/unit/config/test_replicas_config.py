"""``capture.takeover_after`` and the Kafka log's replication settings."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import ValidationError

from cdc.config.event_log import LogConfig
from cdc.config.models import CaptureConfig
from cdc.log.kafka.admin import Replication


def test_takeover_defaults_to_six_seconds_and_refuses_less_than_three() -> None:
    assert CaptureConfig().takeover_after == timedelta(seconds=6)
    with pytest.raises(ValidationError, match="too short: the streaming replica reports "
                       "every second; use at least 3s"):
        CaptureConfig.model_validate({"takeover_after": "2s"})


@pytest.mark.parametrize(("brokers", "expected"), [(1, (1, 1)), (2, (2, 1)), (3, (3, 2)),
                                                   (5, (3, 2))])
def test_replication_follows_the_cluster_unless_set(brokers: int,
                                                    expected: tuple[int, int]) -> None:
    assert Replication().resolve(brokers) == expected
    assert Replication(5, 3).resolve(brokers) == (5, 3)
    assert Replication(2).resolve(brokers) == (2, 1)


def test_more_in_sync_replicas_than_replicas_is_refused() -> None:
    with pytest.raises(ValidationError, match="larger than replication_factor"):
        LogConfig.model_validate({"backend": "kafka", "bootstrap_servers": ["k:9092"],
                                  "replication_factor": 2, "min_insync_replicas": 3})
