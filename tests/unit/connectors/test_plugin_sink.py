"""A third-party sink package, installed with pip, found through its entry point, validated
in a pipeline file and run by the runtime and by ``cdc connect``; gone once removed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from cdc.config import parse_config
from cdc.errors import ConfigError
from cdc.log.file import FileLog, FileLogSettings
from connectors.registry import load_sink, sink_entry_points
from connectors.runtime import ConnectorRunner

from .conftest import GROUP, TOPIC, append_events, committed, run_until
from .plugin_wheel import build_wheel

REPO = Path(__file__).resolve().parents[3]
PLUGIN = REPO / "tests" / "fixtures" / "sink_plugin"

PIPELINE = """\
source:
  dsn: postgresql://app@127.0.0.1:5432/app
  slot: app
  publication: app
  tables: [public.orders]
log:
  backend: file
  path: {log}
  partitions: 1
  fsync: false
connectors:
  - name: c1
    type: jsonl
    topics: [{topic}]
    batch_timeout: 50ms
    config:
      path: {out}
"""


@pytest.fixture
def installed_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """pip-install the plugin's wheel into a private directory put on ``sys.path``;
    removing it from the path uninstalls it for this process."""
    site = tmp_path / "site"
    wheel = build_wheel(PLUGIN, tmp_path)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-index", "--disable-pip-version-check", "--target", str(site),
                    str(wheel)], check=True, timeout=120)
    assert "jsonl" not in sink_entry_points()
    monkeypatch.syspath_prepend(str(site))
    yield site
    monkeypatch.undo()
    for module in [m for m in sys.modules if m.startswith("distributary_sink_jsonl")]:
        del sys.modules[module]
    assert "jsonl" not in sink_entry_points(), "uninstalled"


def pipeline(tmp_path: Path) -> str:
    return PIPELINE.format(log=tmp_path / "log", topic=TOPIC, out=tmp_path / "out.jsonl")


def lines(path: Path) -> list[dict[str, object]]:
    """The complete lines of ``path`` (a running sink may be writing the last one)."""
    if not path.exists():
        return []
    data = path.read_bytes()
    return [orjson.loads(line) for line in data[:data.rfind(b"\n") + 1].splitlines()]


def test_the_plugin_registers_validates_and_runs(installed_plugin: Path,
                                                 tmp_path: Path) -> None:
    assert "jsonl" in sink_entry_points()
    assert load_sink("jsonl").factory is not None
    config = parse_config(pipeline(tmp_path), env={})
    with pytest.raises(ConfigError, match=r"connectors\[0\]\.config\.path"):
        parse_config(pipeline(tmp_path).replace("      path: ", "      where: "), env={})
    log = FileLog(tmp_path / "log", FileLogSettings(default_partitions=1, fsync=False))
    append_events(log, [1, 2, 3])
    runner = ConnectorRunner(config.connectors[0], log, topic_prefix=config.topic_prefix)
    run_until(runner, lambda: committed(log).get((TOPIC, 0)) == 3)
    assert [line["key"] for line in lines(tmp_path / "out.jsonl")] == [
        {"id": 1}, {"id": 2}, {"id": 3}]
    log.close()


def test_cdc_connect_runs_the_plugin_until_sigterm(installed_plugin: Path,
                                                   tmp_path: Path) -> None:
    config_path = tmp_path / "pipeline.yaml"
    config_path.write_text(pipeline(tmp_path))
    log = FileLog(tmp_path / "log", FileLogSettings(default_partitions=1, fsync=False))
    append_events(log, [1, 2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(installed_plugin), str(REPO)])}
    process = subprocess.Popen([sys.executable, "-m", "cdc.cli", "connect", "-c",
                                str(config_path), "--connector", "c1"], cwd=REPO, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while committed(log, GROUP).get((TOPIC, 0)) != 2:
            assert process.poll() is None, process.communicate()[0].decode()
            assert time.monotonic() < deadline, "cdc connect wrote nothing"
            time.sleep(0.05)
        append_events(log, [3], first_lsn=500)
        while len(lines(tmp_path / "out.jsonl")) < 3:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=30)[0].decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, output
    assert "c1: started 1 workers in group 'c1'" in output
    assert [line["key"] for line in lines(tmp_path / "out.jsonl")] == [
        {"id": 1}, {"id": 2}, {"id": 3}]
    assert committed(log) == {(TOPIC, 0): 3}
    log.close()


def test_cdc_connect_names_an_unknown_connector(tmp_path: Path) -> None:
    config_path = tmp_path / "pipeline.yaml"
    config_path.write_text(pipeline(tmp_path).replace("type: jsonl", "type: webhook").replace(
        "      path: " + str(tmp_path / "out.jsonl"), "      url: http://127.0.0.1:9/x"))
    result = subprocess.run([sys.executable, "-m", "cdc.cli", "connect", "-c", str(config_path),
                             "--connector", "nope"], cwd=REPO, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 1
    assert "no connector named 'nope'; configured: c1" in result.stderr
