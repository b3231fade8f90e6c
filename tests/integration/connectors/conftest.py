"""A fresh database and log per pipeline test, and a ``PipelineHarness`` over them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from .harness import PipelineHarness

MakeHarness = Callable[[str, str], PipelineHarness]


@pytest.fixture
def make_harness(fresh_database: str, unique_name: str,
                 tmp_path: Path) -> Iterator[MakeHarness]:
    """``make_harness(schema_sql, connectors_yaml)``: create the tables in a new database,
    write a pipeline file whose ``connectors:`` section is ``connectors_yaml``."""
    made: list[PipelineHarness] = []
    dsn = fresh_database

    def make(schema_sql: str, connectors_yaml: str) -> PipelineHarness:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(schema_sql.encode())
        config_path = tmp_path / "pipeline.yaml"
        config_path.write_text(f"""
source:
  dsn: {dsn}
  slot: {unique_name}
  publication: {unique_name}
  heartbeat_interval: 1s
log:
  backend: file
  path: {tmp_path / 'log'}
  partitions: 3
connectors:
{connectors_yaml}
""")
        harness = PipelineHarness(dsn, config_path, tmp_path / "log", unique_name)
        made.append(harness)
        return harness

    yield make
    for harness in made:
        harness.close()
