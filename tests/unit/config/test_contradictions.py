"""Settings that contradict each other are reported on the field to change."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from cdc.config import PipelineConfig, load_config
from tests.unit.config.conftest import VALID, LoadProblems, WriteConfig, problem_at, variant

FILE_LOG = "  backend: file\n  path: ./.data/log"


@pytest.mark.parametrize(("log", "path", "words"), [
    ("  backend: kafka", "log.bootstrap_servers", "required when backend is 'kafka'"),
    ("  backend: file", "log.path", "required when backend is 'file'"),
    ("  backend: kafka\n  path: x\n  bootstrap_servers: [k:9092]", "log.path",
     "only used when backend is 'file'"),
    (FILE_LOG + "\n  bootstrap_servers: [k:9092]", "log.bootstrap_servers",
     "only used when backend is 'kafka'"),
    ("  backend: kafka\n  bootstrap_servers: [kafka]", "log.bootstrap_servers[0]",
     "expected 'host:port'"),
])
def test_log_backend_settings(load_problems: LoadProblems, log: str, path: str,
                              words: str) -> None:
    assert words in problem_at(load_problems(variant(FILE_LOG, log)), path)


def test_topics_and_topic_pattern_together(load_problems: LoadProblems) -> None:
    text = variant("    topics: [distributary.public.orders]",
                   "    topics: [distributary.public.orders]\n    topic_pattern: '.*'")
    assert "give either topics or topic_pattern, not both" in problem_at(
        load_problems(text), "connectors[0].topic_pattern")


def test_neither_topics_nor_topic_pattern(load_problems: LoadProblems) -> None:
    text = variant("    topics: [distributary.public.orders]\n", "")
    assert "give topics (a list) or topic_pattern (a regex)" in problem_at(
        load_problems(text), "connectors[0].topics")


@pytest.mark.parametrize(("backpressure", "words"), [
    ("{policy: drop}", "required when policy is 'drop'"),
    ("{policy: block}", "required when policy is 'block'"),
    ("{policy: buffer, max_lag: 10}", "only used when policy is 'drop' or 'block'"),
])
def test_backpressure_max_lag(load_problems: LoadProblems, backpressure: str,
                              words: str) -> None:
    text = variant("    type: opensearch", f"    type: opensearch\n    backpressure: "
                                           f"{backpressure}")
    assert words in problem_at(load_problems(text), "connectors[0].backpressure.max_lag")


def test_password_in_dsn_and_in_password_field(load_problems: LoadProblems) -> None:
    text = variant("postgresql://app@", "postgresql://app:pw@")
    text = variant("  slot:", "  password: other\n  slot:", text)
    assert "the DSN already contains a password" in problem_at(load_problems(text),
                                                               "source.password")


def test_opensearch_username_without_password(load_problems: LoadProblems) -> None:
    text = variant("      hosts:", "      username: admin\n      hosts:")
    assert "required when username is set" in problem_at(
        load_problems(text), "connectors[0].config.password")


def test_table_listed_twice(load_problems: LoadProblems) -> None:
    text = variant("[public.orders]", "[public.orders, public.items, public.orders]")
    assert "'public.orders' is already listed at tables[0]" in problem_at(
        load_problems(text), "source.tables[2]")


def test_topic_pattern_must_compile(load_problems: LoadProblems) -> None:
    text = variant("    topics: [distributary.public.orders]", "    topic_pattern: '(orders'")
    assert "expected a valid regular expression" in problem_at(
        load_problems(text), "connectors[0].topic_pattern")



def test_table_patterns_are_accepted(write_config: WriteConfig) -> None:
    entries = ("public.*", "!public.audit_*", "sales.order_?", '"Sales Dept"."Q1.2025"')
    text = variant("[public.orders]", "[" + ", ".join(f"'{e}'" for e in entries) + "]")
    assert load_config(write_config(text)).source.tables == entries


@pytest.mark.parametrize(("entry", "words"), [
    ("public.my table", "write it in double quotes"),
    ("orders", "expected exactly one '.' between schema and table"),
    ("public.[ab", "'[' opens a character class that is never closed"),
])
def test_a_bad_table_pattern_says_how_to_write_it(load_problems: LoadProblems, entry: str,
                                                  words: str) -> None:
    text = variant("[public.orders]", f"[public.orders, '{entry}']")
    assert words in problem_at(load_problems(text), "source.tables[1]")


@pytest.mark.parametrize("topic", ["distributary.messages", "distributary._schemas",
                                   "distributary.dlq.search", "__consumer_offsets"])
def test_a_table_topic_cannot_be_an_internal_topic(load_problems: LoadProblems,
                                                   topic: str) -> None:
    text = variant(FILE_LOG, FILE_LOG + f"\n  topic_names:\n    public.orders: {topic}")
    assert "a topic the pipeline itself uses" in problem_at(
        load_problems(text), "log.topic_names['public.orders']")


def test_columnar_companions_need_a_directory(load_problems: LoadProblems,
                                              load_valid: Callable[[str], PipelineConfig]
                                              ) -> None:
    kafka = variant(FILE_LOG, "  backend: kafka\n  bootstrap_servers: [k:9092]")
    problem = problem_at(load_problems(kafka + "spark:\n  columnar_every: 60s\n"),
                         "spark.columnar_every")
    assert "set log.columnar_path" in problem
    with_path = variant(FILE_LOG, "  backend: kafka\n  bootstrap_servers: [k:9092]\n"
                        "  columnar_path: /data/columnar")
    on_kafka = load_valid(with_path + "spark:\n  columnar_every: 60s\n")
    assert on_kafka.log.columnar_path is not None
    file_problem = problem_at(load_problems(variant(FILE_LOG, FILE_LOG + "\n  columnar_path: /c")),
                              "log.columnar_path")
    assert "only used when backend is 'kafka'" in file_problem
    config = load_valid(VALID + "spark:\n  columnar_every: 90s\n")
    assert config.spark.columnar_every is not None
    assert config.spark.columnar_every.total_seconds() == 90
