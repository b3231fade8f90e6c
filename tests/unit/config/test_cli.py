"""``cdc validate`` and ``cdc config-schema`` through click, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cdc.cli import main
from tests.unit.config.conftest import REPO_ROOT, VALID, WriteConfig, variant


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def assert_user_error(result: Result) -> None:
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output


def test_validate_ok(write_config: WriteConfig) -> None:
    result = run("validate", "-c", str(write_config(VALID)))
    assert (result.exit_code, result.stdout) == (0, "ok\n")


def test_validate_example_config(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("PG_DSN", "OPENSEARCH_URL", "REDIS_URL"):
        monkeypatch.delenv(name, raising=False)
    result = run("validate", "--config", str(REPO_ROOT / "compose" / "pipeline.yaml"))
    assert (result.exit_code, result.stdout) == (0, "ok\n")


def test_validate_unknown_sink(write_config: WriteConfig) -> None:
    result = run("validate", "-c", str(write_config(variant("type: opensearch",
                                                             "type: opensearh"))))
    assert_user_error(result)
    assert result.stdout == ("connectors[0].type: 'opensearh' is not a known sink; "
                             "known: opensearch, redis, webhook (line 11)\n")


def test_validate_prints_one_line_per_problem(write_config: WriteConfig) -> None:
    text = variant("  slot: distributary", "  slto: distributary")
    text = variant("  backend: file", "  backend: file\n  partitions: zero", text)
    result = run("validate", "-c", str(write_config(text)))
    assert_user_error(result)
    lines = result.stdout.splitlines()
    assert [line.split(":")[0] for line in lines] == ["source.slot", "source.slto",
                                                     "log.partitions"]


def test_validate_yaml_syntax_error(write_config: WriteConfig) -> None:
    result = run("validate", "-c", str(write_config("source:\n  dsn: [x\nlog: {}\n")))
    assert_user_error(result)
    assert result.stdout.startswith("invalid YAML at line 3, column 4:")


def test_validate_missing_file(tmp_path: Path) -> None:
    result = run("validate", "-c", str(tmp_path / "absent.yaml"))
    assert_user_error(result)
    assert result.stdout == f"cannot read '{tmp_path / 'absent.yaml'}': no such file\n"


def test_validate_empty_file(write_config: WriteConfig) -> None:
    result = run("validate", "-c", str(write_config("")))
    assert_user_error(result)
    assert result.stdout.startswith("the file is empty")


def test_validate_unreadable_file(write_config: WriteConfig) -> None:
    path = write_config(VALID)
    path.chmod(0)
    try:
        if _readable(path):
            pytest.skip("running as a user who can read any file (root)")
        result = run("validate", "-c", str(path))
    finally:
        path.chmod(0o644)
    assert_user_error(result)
    assert "permission denied" in result.stdout


def test_validate_directory(tmp_path: Path) -> None:
    result = run("validate", "-c", str(tmp_path))
    assert_user_error(result)
    assert result.stdout == f"cannot read '{tmp_path}': it is a directory\n"


def _readable(path: Path) -> bool:
    try:
        path.read_bytes()
    except PermissionError:
        return False
    return True


def test_validate_reads_the_config_path_from_the_environment(write_config: WriteConfig) -> None:
    path = write_config(VALID)
    result = CliRunner().invoke(main, ["validate"], env={"DISTRIBUTARY_CONFIG": str(path)})
    assert (result.exit_code, result.stdout) == (0, "ok\n")


def test_config_schema_is_json_with_the_sections() -> None:
    result = run("config-schema")
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert list(schema["properties"]) == ["source", "log", "connectors", "spark", "metrics",
                                          "reconcile", "capture"]
    assert schema["required"] == ["source", "log"]
    assert schema["additionalProperties"] is False
    assert result.stdout.startswith('{\n  "$schema"')  # indent 2


def test_help_lists_the_commands() -> None:
    result = run("--help")
    assert result.exit_code == 0
    assert "validate" in result.stdout and "config-schema" in result.stdout
