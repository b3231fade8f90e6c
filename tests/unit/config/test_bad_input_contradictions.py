"""More settings that contradict each other, each reported on the field to change."""

from __future__ import annotations

from collections.abc import Callable

from cdc.config import PipelineConfig
from tests.unit.config.conftest import LoadProblems, problem_at, variant

FILE_LOG = "  backend: file\n  path: ./.data/log"


def test_retention_size_below_one_segment(load_problems: LoadProblems) -> None:
    text = variant(FILE_LOG, FILE_LOG + "\n  segment_bytes: 64MiB\n  retention: {size: 10MiB}")
    problem = problem_at(load_problems(text), "log.retention.size")
    assert "smaller than segment_bytes (67108864 bytes)" in problem
    assert "raise it or lower segment_bytes" in problem


def test_retention_size_of_one_segment_or_more_is_fine(
        load_valid: Callable[[str], PipelineConfig]) -> None:
    text = variant(FILE_LOG, FILE_LOG + "\n  segment_bytes: 8MiB\n  retention: {size: 8MiB}")
    assert load_valid(text).log.retention.size == 8 * 1024**2


def test_redis_ttl_with_invalidate_mode(load_problems: LoadProblems) -> None:
    text = variant("""  - name: search
    type: opensearch
    topics: [distributary.public.orders]
    config:
      hosts: [http://127.0.0.1:9200]""", """  - name: cache
    type: redis
    topics: [distributary.public.orders]
    config:
      url: redis://127.0.0.1:6379/0
      mode: invalidate
      ttl: 1h""")
    problem = problem_at(load_problems(text), "connectors[0].config.ttl")
    assert "only used when mode is 'upsert'" in problem
