"""Bad pipeline files: each problem names its YAML path, what was found and what is expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdc.config import load_config
from cdc.errors import ConfigError
from tests.unit.config.conftest import VALID, LoadProblems, WriteConfig, problem_at, variant


def test_unknown_key_lists_keys_and_suggests_the_close_one(load_problems: LoadProblems) -> None:
    problems = load_problems(variant("  slot: distributary", "  slto: distributary"))
    message = problem_at(problems, "source.slto")
    assert "unknown key; expected one of: dsn, password, password_file, slot," in message
    assert "did you mean 'slot'?" in message
    assert message.endswith("(line 3)")
    assert "missing required field" in problem_at(problems, "source.slot")


def test_unknown_key_in_a_sink_config(load_problems: LoadProblems) -> None:
    problems = load_problems(variant("      hosts:", "      hots:"))
    message = problem_at(problems, "connectors[0].config.hots")
    assert "unknown key" in message
    assert "did you mean 'hosts'?" in message


def test_wrong_type(load_problems: LoadProblems) -> None:
    problems = load_problems(variant("  backend: file", "  backend: file\n  partitions: three"))
    assert problem_at(problems, "log.partitions") == (
        "log.partitions: expected an integer, got 'three' (line 8)")


def test_missing_required_field(load_problems: LoadProblems) -> None:
    problems = load_problems(variant("  publication: distributary\n", ""))
    assert problem_at(problems, "source.publication").startswith(
        "source.publication: missing required field")


def test_missing_section(load_problems: LoadProblems) -> None:
    text = VALID[:VALID.index("log:")]
    assert problem_at(load_problems(text), "log") == "log: missing required field"


def test_unknown_sink_type(load_problems: LoadProblems) -> None:
    problems = load_problems(variant("type: opensearch", "type: opensearh"))
    assert problem_at(problems, "connectors[0].type") == (
        "connectors[0].type: 'opensearh' is not a known sink; "
        "known: opensearch, redis, webhook (line 11)")


DUPLICATE = """\
  - name: search
    type: redis
    topics: [distributary.public.orders]
    config: {url: "redis://127.0.0.1:6379/0"}
"""


def test_duplicate_connector_names(load_problems: LoadProblems) -> None:
    problems = load_problems(VALID + DUPLICATE)
    assert problem_at(problems, "connectors[1].name") == (
        "connectors[1].name: 'search' is already the name of connectors[0]; "
        "names must be unique (line 15)")


def test_duplicate_names_reported_beside_other_connector_problems(
        load_problems: LoadProblems) -> None:
    problems = load_problems(VALID + DUPLICATE.replace('6379/0"', '6379/0", ttl: soon'))
    assert "already the name of connectors[0]" in problem_at(problems, "connectors[1].name")
    assert "expected a duration" in problem_at(problems, "connectors[1].config.ttl")


@pytest.mark.parametrize(("dsn", "words"), [
    ("postgresql://app@db:5432/app?foo=bar", "invalid URI query parameter"),
    ("'host=db port=abc'", "port 'abc'"),
    ("'dbname=app user'", "not a valid PostgreSQL connection string"),
    ("mysql://app@db/app", "expected a postgresql:// URL, got a mysql:// URL"),
    ("''", "expected a PostgreSQL connection string"),
    ("postgresql://db/app?replication=database", "remove 'replication'"),
])
def test_malformed_dsn(load_problems: LoadProblems, dsn: str, words: str) -> None:
    text = variant("postgresql://app@127.0.0.1:5432/app", dsn)
    message = problem_at(load_problems(text), "source.dsn")
    assert words in message
    assert message.endswith("(line 2)")


def test_undefined_variable(load_problems: LoadProblems, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISTRIBUTARY_TEST_DSN", raising=False)
    problems = load_problems(variant("postgresql://app@127.0.0.1:5432/app",
                                     "${DISTRIBUTARY_TEST_DSN}"))
    assert problems == [
        "source.dsn: environment variable 'DISTRIBUTARY_TEST_DSN' is not set; set it, or give "
        "a default: ${DISTRIBUTARY_TEST_DSN:-value} (line 2)"]


def test_unterminated_variable(load_problems: LoadProblems) -> None:
    problems = load_problems(variant("./.data/log", "${LOG_DIR"))
    assert "unterminated '${'" in problem_at(problems, "log.path")


def test_secret_file_missing(load_problems: LoadProblems, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-secret"
    problems = load_problems(variant("  slot:", f"  password_file: {missing}\n  slot:"))
    assert problem_at(problems, "source.password_file") == (
        f"source.password_file: cannot read secret file '{missing}': no such file (line 3)")


def test_secret_file_and_inline_secret_together(load_problems: LoadProblems,
                                                tmp_path: Path) -> None:
    secret = tmp_path / "pg"
    secret.write_text("pw\n")
    problems = load_problems(variant("  slot:", f"  password: x\n  password_file: {secret}\n"
                                                "  slot:"))
    assert "give either password or password_file" in problem_at(problems,
                                                                   "source.password_file")


@pytest.mark.parametrize("partitions", ["0", "-2"])
def test_zero_or_negative_partitions(load_problems: LoadProblems, partitions: str) -> None:
    problems = load_problems(variant("  backend: file", f"  backend: file\n  partitions: "
                                                        f"{partitions}"))
    assert problem_at(problems, "log.partitions") == (
        f"log.partitions: expected a value >= 1, got {partitions} (line 8)")


@pytest.mark.parametrize(("retention", "path", "words"), [
    ("{time: 7 days}", "log.retention.time", "expected 'forever' or a duration like"),
    ("{time: 10}", "log.retention.time", "expected 'forever' or a duration like"),
    ("{time: never}", "log.retention.time", "got 'never'"),
    ("{size: 10 gigs}", "log.retention.size", "expected 'forever' or a size like"),
    ("{size: 0}", "log.retention.size", "expected 'forever' or a size like"),
    ("7d", "log.retention", "expected a mapping, got '7d'"),
])
def test_bad_retention(load_problems: LoadProblems, retention: str, path: str,
                       words: str) -> None:
    problems = load_problems(variant("  backend: file", f"  backend: file\n  retention: "
                                                        f"{retention}"))
    message = problem_at(problems, path)
    assert words in message
    assert message.endswith("(line 8)")


def test_yaml_syntax_error_names_the_line(load_problems: LoadProblems) -> None:
    problems = load_problems(variant("  tables: [public.orders]", "  tables: [public.orders"))
    assert len(problems) == 1
    assert problems[0] == ("invalid YAML at line 6, column 4: expected ',' or ']', but got ':' "
                           "(while parsing a flow sequence at line 5)")


def test_yaml_duplicate_key(load_problems: LoadProblems) -> None:
    problems = load_problems(variant("  backend: file", "  backend: file\n  backend: kafka"))
    assert problem_at(problems, "log.backend") == (
        "log.backend: duplicate key (lines 7 and 8); keep one (line 8)")


@pytest.mark.parametrize("text", ["", "\n\n", "# only a comment\n", "---\n"])
def test_empty_file(load_problems: LoadProblems, text: str) -> None:
    assert load_problems(text) == [
        "the file is empty; expected a mapping with the sections "
        "source, log, connectors, spark, metrics, reconcile, capture"]


def test_top_level_must_be_a_mapping(load_problems: LoadProblems) -> None:
    assert load_problems("- source\n- log\n") == [
        "expected a mapping with the sections source, log, connectors, spark, metrics, "
        "reconcile, capture at the top, got a list"]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(tmp_path / "nope.yaml")
    assert str(caught.value) == f"cannot read '{tmp_path / 'nope.yaml'}': no such file"


def test_directory_instead_of_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="it is a directory"):
        load_config(tmp_path)


def test_not_utf8(write_config: WriteConfig) -> None:
    path = write_config("")
    path.write_bytes(b"source: \xff\n")
    with pytest.raises(ConfigError, match=r"not UTF-8 text \(byte 8\)"):
        load_config(path)


def test_several_problems_are_reported_at_once(load_problems: LoadProblems) -> None:
    text = variant("  slot: distributary", "  slot: Bad-Slot")
    text = variant("  backend: file", "  backend: file\n  partitions: 0", text)
    text = variant("type: opensearch", "type: elastic", text)
    text += "metrics: {port: 70000}\n"
    problems = load_problems(text)
    assert [line.split(":")[0] for line in problems] == [
        "source.slot", "log.partitions", "connectors[0].type", "metrics.port"]


def test_key_of_a_mapping_is_checked(load_problems: LoadProblems) -> None:
    problems = load_problems(VALID + "spark:\n  conf: {executor.memory: 2g}\n")
    assert problem_at(problems, "spark.conf['executor.memory']") == (
        "spark.conf['executor.memory']: bad key 'executor.memory'; expected a Spark setting "
        "name starting with 'spark.' (line 16)")
