"""A missing optional extra costs only what needs it: one line naming the extra, status 2.

Each case runs ``cdc`` in a fresh interpreter with the extra's library blocked
(``sys.modules[name] = None`` makes every import of it fail, as if not installed).
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from importlib.metadata import EntryPoint, packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from cdc.extras import EXTRA_OF_MODULE, missing_extra
from cdc.plugins import index

from .import_rules import REPO

PIPELINE = """\
source: {{dsn: "postgresql://cdc@127.0.0.1:1/app", slot: s1, publication: p1}}
log: {log}
connectors:
  - {{name: cache, type: redis, topics: [app.public.t], config: {{url: "redis://127.0.0.1:1/0"}}}}
"""
FILE_LOG = "{path: .data/log}"
KAFKA_LOG = "{backend: kafka, bootstrap_servers: ['127.0.0.1:1']}"


def cdc(blocked: list[str], *args: str) -> subprocess.CompletedProcess[str]:
    """``cdc ARGS`` with the modules ``blocked`` made unimportable."""
    code = ("import sys\n"
            f"for name in {blocked!r}:\n    sys.modules[name] = None\n"
            "from cdc.cli import main\nmain(sys.argv[1:], prog_name='cdc')\n")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True,
                          text=True, timeout=120, cwd=REPO, check=False)


def write_pipeline(tmp_path: Path, log: str) -> str:
    path = tmp_path / "pipeline.yaml"
    path.write_text(PIPELINE.format(log=log))
    return str(path)


def test_the_cli_imports_without_any_extra() -> None:
    done = cdc(list(EXTRA_OF_MODULE), "--help")
    assert done.returncode == 0, done.stderr
    assert "replay" in done.stdout and "capture" in done.stdout


@pytest.mark.parametrize("args", [["replay", "materialize", "-c", "x.yaml"],
                                  ["replay", "--help"], ["replay"]])
def test_replay_without_spark_is_one_line(args: list[str]) -> None:
    done = cdc(["pyspark"], *args)
    assert (done.returncode, done.stdout, done.stderr) == (
        2, "", "cdc replay needs the spark extra: pip install 'distributary[spark]'\n")


def test_validate_and_capture_help_need_no_extra(tmp_path: Path) -> None:
    blocked = list(EXTRA_OF_MODULE)
    assert cdc(blocked, "validate", "-c", write_pipeline(tmp_path, FILE_LOG)).stdout == "ok\n"
    assert cdc(blocked, "capture", "--help").returncode == 0


@pytest.mark.parametrize("command", ["capture", "run"])
def test_a_kafka_log_without_the_kafka_extra_is_one_line(tmp_path: Path,
                                                         command: str) -> None:
    done = cdc(["confluent_kafka"], command, "-c", write_pipeline(tmp_path, KAFKA_LOG))
    assert (done.returncode, done.stderr) == (
        2, "log.backend 'kafka' needs the kafka extra: pip install 'distributary[kafka]'\n")


def test_the_extras_table_matches_pyproject() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    backends = {name: [Requirement(r).name for r in requirements]
                for name, requirements in extras.items() if name not in ("all", "dev")}
    assert sorted(EXTRA_OF_MODULE.values()) == sorted(backends)
    installed = packages_distributions()
    for module, extra in EXTRA_OF_MODULE.items():
        distributions = {name.lower().replace("_", "-") for name in installed[module]}
        assert distributions & {r.lower() for r in backends[extra]}, (module, extra)


def test_missing_extra_follows_the_cause() -> None:
    missing = ModuleNotFoundError("No module named 'pyspark'", name="pyspark")
    wrapped = ImportError("the replay needs PySpark")
    wrapped.__cause__ = missing
    assert missing_extra(wrapped) == "spark"
    assert missing_extra(ModuleNotFoundError("x", name="yaml")) is None
    assert missing_extra(ValueError("x")) is None


def test_a_sink_missing_its_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opensearchpy", None)
    point = EntryPoint("search", "opensearchpy.never_imported:SPEC", index.ENTRY_POINT_GROUP)
    monkeypatch.setattr(index, "entry_points", lambda group: [point])
    with pytest.raises(index.SinkLoadError) as caught:
        index.load_sink("search")
    assert str(caught.value).endswith(
        "; the search sink needs the opensearch extra: pip install 'distributary[opensearch]'")
