"""``--as-of`` is checked before Spark starts: a typo fails at once, with the reason."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from spark_pipelines import commands
from spark_pipelines.commands import as_of_time, replay
from spark_pipelines.state import ReplayError

PIPELINE = Path(__file__).resolve().parents[3] / "compose" / "pipeline.yaml"


def test_an_lsn_or_a_time_with_a_zone() -> None:
    assert as_of_time("0/16B37A0") is None
    assert as_of_time("2026-11-21T10:00:00Z") == datetime(2026, 11, 21, 10, tzinfo=UTC)
    with pytest.raises(ReplayError, match="neither an LSN nor an ISO time"):
        as_of_time("not-a-time")
    with pytest.raises(ReplayError, match="has no time zone"):
        as_of_time("2026-11-21T10:00:00")


@pytest.mark.parametrize("job", ["materialize", "state-as-of", "aggregates"])
def test_a_bad_as_of_fails_before_spark_starts(job: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    def no_spark(*_: object, **__: object) -> None:
        raise AssertionError("Spark was started")

    monkeypatch.setattr(commands, "spark_session", no_spark)
    result = CliRunner().invoke(replay, [job, "-c", str(PIPELINE), "--as-of", "not-a-time"])
    assert result.exit_code == 1, result.output
    assert "'not-a-time' is neither an LSN nor an ISO time" in result.output
