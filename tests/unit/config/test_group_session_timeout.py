"""``log.group_session_timeout``: how long a silent consumer group member keeps its
partitions, on either backend."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from cdc.config.event_log import LogConfig
from cdc.log.open import file_settings


def test_the_default_is_ten_seconds_and_reaches_the_file_backend(tmp_path: Path) -> None:
    default = LogConfig.model_validate({"path": str(tmp_path)})
    longer = LogConfig.model_validate({"path": str(tmp_path), "group_session_timeout": "45s"})

    assert default.group_session_timeout == timedelta(seconds=10)
    assert file_settings(default).session_timeout_s == 10.0
    assert file_settings(longer).session_timeout_s == 45.0


@pytest.mark.parametrize("value", ["5s", "31m"])
def test_outside_what_a_kafka_broker_takes_is_refused(tmp_path: Path, value: str) -> None:
    with pytest.raises(ValidationError, match=r"group_session_timeout[\s\S]*expected 6s to "
                       r"30m \(a Kafka broker refuses"):
        LogConfig.model_validate({"path": str(tmp_path), "group_session_timeout": value})
