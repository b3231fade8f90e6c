"""Valid pipeline files: defaults, interpolation, secret files and the example config."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

from cdc.config import PipelineConfig, load_config, parse_config
from connectors.opensearch import OpenSearchSinkConfig
from connectors.redis import RedisSinkConfig
from tests.unit.config.conftest import REPO_ROOT, VALID, variant

LoadValid = Callable[[str], PipelineConfig]


def test_defaults(load_valid: LoadValid) -> None:
    config = load_valid(VALID)
    assert config.source.snapshot == "initial"
    assert config.source.heartbeat_interval == timedelta(seconds=10)
    assert config.log.partitions == 3
    assert config.log.retention.time == timedelta(days=7)
    assert config.log.retention.size is None
    assert config.log.fsync is True
    assert config.log.segment_bytes == 64 * 1024**2
    assert config.spark.master == "local[*]"
    assert config.metrics is None
    assert config.topic_prefix == "distributary"
    assert config.topic_for("public", "orders") == "distributary.public.orders"
    connector = config.connectors[0]
    assert (connector.workers, connector.batch_size) == (1, 500)
    assert connector.backpressure.policy == "buffer"
    assert isinstance(connector.config, OpenSearchSinkConfig)
    assert connector.config.hosts == ("http://127.0.0.1:9200",)


def test_models_are_frozen(load_valid: LoadValid) -> None:
    config = load_valid(VALID)
    with pytest.raises(ValueError, match="frozen"):
        config.log.partitions = 5


def test_typed_units(load_valid: LoadValid) -> None:
    text = variant("  backend: file", "  backend: file\n  retention: {time: 12h, size: 10GiB}\n"
                                      "  segment_bytes: 500MB")
    config = load_valid(text)
    assert config.log.retention.time == timedelta(hours=12)
    assert config.log.retention.size == 10 * 1024**3
    assert config.log.segment_bytes == 500_000_000


def test_variable_with_default(load_valid: LoadValid, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISTRIBUTARY_TEST_SLOT", raising=False)
    monkeypatch.setenv("DISTRIBUTARY_TEST_HOST", "db.internal")
    text = variant("slot: distributary", "slot: ${DISTRIBUTARY_TEST_SLOT:-from_default}")
    text = variant("127.0.0.1:5432", "${DISTRIBUTARY_TEST_HOST}:5432", text)
    config = load_valid(text)
    assert config.source.slot == "from_default"
    assert config.source.dsn == "postgresql://app@db.internal:5432/app"


def test_empty_variable_takes_the_default() -> None:
    text = variant("slot: distributary", "slot: ${SLOT:-fallback}")
    assert parse_config(text, env={"SLOT": ""}).source.slot == "fallback"
    assert parse_config(text, env={"SLOT": "set"}).source.slot == "set"


def test_escaped_dollar_is_literal() -> None:
    text = variant("./.data/log", "'./$${HOME}/log'")
    assert str(parse_config(text, env={}).log.path) == "${HOME}/log"


def test_numbers_from_variables() -> None:
    text = variant("  backend: file", "  backend: file\n  partitions: ${PARTITIONS:-6}")
    assert parse_config(text, env={}).log.partitions == 6


def test_password_file_strips_the_trailing_newline(load_valid: LoadValid, tmp_path: Path) -> None:
    secret = tmp_path / "pg-password"
    secret.write_text("correct horse battery staple\n", encoding="utf-8")
    config = load_valid(variant("  slot:", f"  password_file: {secret}\n  slot:"))
    assert config.source.password is not None
    assert config.source.password.get_secret_value() == "correct horse battery staple"
    assert "correct horse" not in repr(config)
    assert config.source.conninfo() == (
        "user=app dbname=app host=127.0.0.1 port=5432 password='correct horse battery staple'")


def test_password_file_inside_a_sink_config(load_valid: LoadValid, tmp_path: Path) -> None:
    secret = tmp_path / "redis"
    secret.write_text("r3dis\r\n", encoding="utf-8")
    text = VALID + ("  - name: cache\n    type: redis\n    topic_pattern: '^distributary\\.'\n"
                    f"    config: {{url: 'redis://127.0.0.1:6379/0', password_file: {secret}}}\n")
    config = load_valid(text)
    redis = config.connectors[1].config
    assert isinstance(redis, RedisSinkConfig)
    assert redis.password is not None and redis.password.get_secret_value() == "r3dis"


def test_kafka_backend(load_valid: LoadValid) -> None:
    text = variant("  backend: file\n  path: ./.data/log",
                   "  backend: kafka\n  bootstrap_servers: 'k1:9092,k2:9092'")
    assert load_valid(text).log.bootstrap_servers == ("k1:9092", "k2:9092")


def test_yaml_anchors_and_merge_keys(load_valid: LoadValid) -> None:
    text = VALID + ("  - &base\n    name: cache\n    type: redis\n    topics: [a]\n"
                    "    config: {url: 'redis://h:6379/0'}\n"
                    "  - <<: *base\n    name: cache2\n")
    config = load_valid(text)
    assert [c.name for c in config.connectors] == ["search", "cache", "cache2"]


def test_example_compose_pipeline_validates(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PG_DSN", "OPENSEARCH_URL", "REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    config = load_config(REPO_ROOT / "compose" / "pipeline.yaml")
    assert config.source.tables == ("public.customers", "public.products", "public.orders",
                                    "public.order_items")
    assert config.source.dsn == "postgresql://postgres@127.0.0.1:5432/app"
    assert config.log.backend == "file"
    assert str(config.log.path) == ".data/log"
    assert {c.type for c in config.connectors} == {"opensearch", "redis"}


def test_json_dump_writes_units_back(load_valid: LoadValid) -> None:
    dumped = load_valid(VALID).model_dump(mode="json")
    assert dumped["log"]["retention"] == {"time": "7d", "size": "forever"}
    assert dumped["log"]["segment_bytes"] == "64MiB"
    assert dumped["connectors"][0]["batch_timeout"] == "1s"
