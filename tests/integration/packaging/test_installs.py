"""The wheel installs and works with no extra and with each extra alone.

The wheel is built once from a copy of the sources (maturin compiles the native core from
``native/``, reusing the checkout's build cache); each case installs it into a fresh
virtualenv (no system site-packages) with pip, which takes the dependencies from its
cache when it has them. The wheel holds the product's packages and the native core, typed
by its stub, only (no ``compose``, ``chaos``, ``bench`` or ``tests``); every environment
imports the native core. In every environment ``cdc --help``, ``cdc validate``
and ``cdc capture --help`` work, and each command whose extra is missing prints one line
naming the extra, and nothing else, and exits with status 2; the base install captures
from a real PostgreSQL. The environments are made two at a time; most of the time is pip.
"""

from __future__ import annotations

import configparser
import os
import shutil
import signal
import subprocess
import sys
import time
import venv
import zipfile
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from tests.reference.partitioner import murmur2_reference

REPO = Path(__file__).resolve().parents[3]
SOURCES = ("cdc", "connectors", "derived", "spark_pipelines")
NATIVE = "distributary_native"
STUB = f"{NATIVE}.pyi"
# copied too, so that pyproject's package list is what keeps them out of the wheel
OUTSIDE_THE_PRODUCT = ("compose", "chaos", "bench", "tests")
PIP_TIMEOUT = 600

PIPELINE = """\
source: {dsn: "postgresql://cdc@127.0.0.1:1/app", slot: s1, publication: p1}
log: {path: .data/log}
connectors:
  - {name: search, type: opensearch, topics: [app.public.t],
     config: {hosts: ["http://127.0.0.1:1"]}}
  - {name: cache, type: redis, topics: [app.public.t], config: {url: "redis://127.0.0.1:1/0"}}
  - {name: hook, type: webhook, topics: [app.public.t], config: {url: "http://127.0.0.1:1/"}}
"""
KAFKA_PIPELINE = """\
source: {dsn: "postgresql://cdc@127.0.0.1:1/app", slot: s1, publication: p1}
log: {backend: kafka, bootstrap_servers: ["127.0.0.1:1"]}
"""


@dataclass(frozen=True, slots=True)
class ExtraCheck:
    """The command that needs an extra, and an import that works once it is installed."""

    argv: tuple[str, ...]
    message: str
    installed_import: str


def install_hint(extra: str) -> str:
    return f"pip install 'distributary[{extra}]'"


CHECKS = {
    "spark": ExtraCheck(("replay", "materialize", "-c", "pipeline.yaml"),
                        f"cdc replay needs the spark extra: {install_hint('spark')}",
                        "spark_pipelines.commands"),
    "kafka": ExtraCheck(("capture", "-c", "kafka.yaml"),
                        f"log.backend 'kafka' needs the kafka extra: {install_hint('kafka')}",
                        "cdc.log.kafka"),
    "redis": ExtraCheck(("connect", "-c", "pipeline.yaml", "--connector", "cache"),
                        f"the redis sink needs the redis extra: {install_hint('redis')}",
                        "connectors.redis.sink"),
    "opensearch": ExtraCheck(("connect", "-c", "pipeline.yaml", "--connector", "search"),
                             "the opensearch sink needs the opensearch extra: "
                             f"{install_hint('opensearch')}",
                             "connectors.opensearch.sink"),
}


def run(argv: list[str], cwd: Path, timeout: float = 120,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    inherited = {key: value for key, value in os.environ.items()
                 if key not in ("PYTHONPATH", "VIRTUAL_ENV", "DISTRIBUTARY_CONFIG")}
    cargo = Path.home() / ".cargo" / "bin"  # where rustup puts cargo (make setup finds it)
    inherited["PATH"] = f"{inherited.get('PATH', '')}{os.pathsep}{cargo}"
    return subprocess.run(argv, cwd=cwd, env={**inherited, **(env or {})},
                          capture_output=True, text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project's wheel, built once from a copy of the sources."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md", STUB):
        shutil.copy2(REPO / name, source / name)
    for package in (*SOURCES, *OUTSIDE_THE_PRODUCT, "native"):
        shutil.copytree(REPO / package, source / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "target"))
    out = tmp_path_factory.mktemp("wheel")
    # the checkout's build cache: only what changed since ``make setup`` is compiled
    built = run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out),
                 str(source)], cwd=source, timeout=PIP_TIMEOUT,
                env={"CARGO_TARGET_DIR": str(REPO / "native" / "target")})
    assert built.returncode == 0, built.stdout + built.stderr
    [found] = out.glob("distributary-*.whl")
    return found


class Environments:
    """Fresh virtualenvs holding the wheel, one per extra (``None``: the base install),
    made two at a time in the background from the start (pip mostly waits on the disk)."""

    def __init__(self, wheel: Path, root: Path, extras: list[str | None]) -> None:
        self._wheel = wheel
        self._root = root
        self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="venv")
        self._made = {extra: self._pool.submit(self._make, extra) for extra in extras}

    def bin(self, extra: str | None) -> Path:
        """The ``bin`` folder of the environment with ``extra``, once it is made."""
        return self._made[extra].result()

    def close(self) -> None:
        """Wait for the environments still being made (none is left half-made)."""
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _make(self, extra: str | None) -> Path:
        home = self._root / (extra or "base")
        venv.EnvBuilder(with_pip=False, system_site_packages=False).create(home)
        target = f"{self._wheel}[{extra}]" if extra else str(self._wheel)
        # --no-compile: the commands below import a few modules; compiling all of
        # pyspark's to bytecode would be most of the install's time
        done = run([sys.executable, "-m", "pip", "--python", str(home / "bin" / "python"),
                    "install", "-q", "--no-compile", target], cwd=self._root,
                   timeout=PIP_TIMEOUT)
        assert done.returncode == 0, done.stdout + done.stderr
        (home / "pipeline.yaml").write_text(PIPELINE)
        (home / "kafka.yaml").write_text(KAFKA_PIPELINE)
        return home / "bin"


@pytest.fixture(scope="module")
def environments(wheel: Path, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[Environments]:
    made = Environments(wheel, tmp_path_factory.mktemp("venvs"), [None, *CHECKS])
    try:
        yield made
    finally:
        made.close()


def test_the_wheel_holds_the_product_and_its_sinks(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        [entry_points] = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
        registered = configparser.ConfigParser(delimiters=("=",))
        registered.read_string(archive.read(entry_points).decode())
    assert dict(registered["console_scripts"]) == {"cdc": "cdc.cli:main"}
    assert dict(registered["distributary.sinks"]) == {
        "opensearch": "connectors.opensearch:SPEC", "redis": "connectors.redis:SPEC",
        "webhook": "connectors.webhook:SPEC"}
    assert "cdc/plugins/index.py" in names and "spark_pipelines/commands.py" in names
    assert "cdc/observability/static/index.html" in names
    assert {name.split("/", 1)[0] for name in names if "/" in name
            and not name.split("/", 1)[0].endswith(".dist-info")} == {*SOURCES, NATIVE}
    assert {f"{NATIVE}/__init__.pyi", f"{NATIVE}/py.typed"} <= set(names)
    assert any(name.startswith(f"{NATIVE}/{NATIVE}.") and name.endswith(".so")
               for name in names)
    outside = tuple(f"{folder}/" for folder in OUTSIDE_THE_PRODUCT)
    assert not [name for name in names if name.startswith(outside)]


@pytest.mark.parametrize("extra", [None, *CHECKS])
def test_an_install_with_one_extra(environments: Environments, extra: str | None) -> None:
    bin_dir = environments.bin(extra)
    cwd = bin_dir.parent
    cdc = str(bin_dir / "cdc")

    helped = run([cdc, "--help"], cwd)
    assert helped.returncode == 0, helped.stderr
    assert all(name in helped.stdout for name in ("capture", "connect", "replay", "validate"))
    validated = run([cdc, "validate", "-c", "pipeline.yaml"], cwd)
    assert (validated.returncode, validated.stdout) == (0, "ok\n"), validated.stderr
    native = run([str(bin_dir / "python"), "-c",
                  "from cdc.native import CORE; print(CORE.murmur2(b'k'))"], cwd)
    assert native.returncode == 0, native.stderr
    assert int(native.stdout) == murmur2_reference(b"k")
    capture_help = run([cdc, "capture", "--help"], cwd)
    assert capture_help.returncode == 0 and "Usage: cdc capture" in capture_help.stdout
    replay_help = run([cdc, "replay", "--help"], cwd)
    assert replay_help.returncode == (0 if extra == "spark" else 2), replay_help.stderr

    for name, check in CHECKS.items():
        if name == extra:
            imported = run([str(bin_dir / "python"), "-c", f"import {check.installed_import}"],
                           cwd)
            assert imported.returncode == 0, imported.stderr
            continue
        failed = run([cdc, *check.argv], cwd)
        assert failed.returncode == 2, (name, failed.stdout, failed.stderr)
        assert (failed.stdout, failed.stderr) == ("", check.message + "\n"), failed.stderr


def test_capture_runs_with_only_the_base_install(environments: Environments, tmp_path: Path,
                                                 fresh_database: str, unique_name: str) -> None:
    bin_dir = environments.bin(None)
    with psycopg.connect(fresh_database, autocommit=True) as conn:
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, v text)")
        conn.execute("INSERT INTO t VALUES (1, 'one')")
    log_dir = tmp_path / "log"
    config = tmp_path / "capture.yaml"
    config.write_text(f"source: {{dsn: '{fresh_database}', slot: {unique_name}, "
                      f"publication: {unique_name}}}\nlog: {{path: '{log_dir}'}}\n")
    process = subprocess.Popen([str(bin_dir / "cdc"), "capture", "-c", str(config)],
                               cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)
    topic = f"{unique_name}.public.t"
    try:
        deadline = time.monotonic() + 60
        listed = ""
        while topic not in listed and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
            if log_dir.is_dir():
                listed = run([str(bin_dir / "cdc"), "log", "topics", "--path", str(log_dir)],
                             tmp_path).stdout
        assert topic in listed, listed
    finally:
        process.send_signal(signal.SIGTERM)
        output, _ = process.communicate(timeout=60)
    assert process.returncode == 0, output
    assert "Traceback" not in output
