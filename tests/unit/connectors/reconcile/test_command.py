"""``cdc reconcile``'s usage errors: exit status 2 and one line naming the problem, before
any server is contacted."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cdc.cli import main

CONFIG = """
source:
  dsn: postgresql://nobody@127.0.0.1:1/none
  slot: app
  publication: app
log:
  backend: file
  path: {log}
connectors:
  - name: cache
    type: redis
    topics: [app.public.orders]
    config:
      url: redis://127.0.0.1:1/0
  - name: hooks
    type: webhook
    topics: [app.public.orders]
    config:
      url: http://127.0.0.1:1/hook
      signing_secret: {secret}
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(CONFIG.format(log=tmp_path / "log", secret="s" * 32))
    return path


@pytest.mark.parametrize(("args", "message"), [
    (["--connector", "nope"], "no connector named 'nope'; configured: cache, hooks"),
    (["--connector", "hooks"], "--connector hooks: cannot reconcile it (a webhook sink keeps "
                               "no records to compare)"),
    (["--rate", "0"], "Invalid value for '--rate'"),
    (["--continuous"], "--continuous needs a reconcile: section in"),
    (["--continuous", "--repair"], "--continuous only reports; run --repair on its own"),
])
def test_usage_errors_exit_2(config: Path, args: list[str], message: str) -> None:
    result = CliRunner().invoke(main, ["reconcile", "-c", str(config), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_a_bad_config_file_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.yaml"
    path.write_text("source: {}\n")
    assert CliRunner().invoke(main, ["reconcile", "-c", str(path)]).exit_code == 2


def test_an_unreachable_database_exits_3(config: Path) -> None:
    result = CliRunner().invoke(main, ["reconcile", "-c", str(config)])
    assert result.exit_code == 3, result.output
    assert result.output.startswith("reconcile: could not finish: ")


def test_continuous_checks_its_connectors_before_any_run(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.yaml"
    path.write_text(CONFIG.format(log=tmp_path / "log", secret="s" * 32)
                    + "reconcile:\n  interval: 1h\n  connectors: [hooks]\n")
    result = CliRunner().invoke(main, ["reconcile", "-c", str(path), "--continuous"])
    assert result.exit_code == 2, result.output
    assert "cannot reconcile it (a webhook sink keeps no records to compare)" in result.output
