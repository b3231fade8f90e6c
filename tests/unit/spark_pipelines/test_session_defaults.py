"""The settings a replay session gets per master, the zip of the shipped packages, and
the Spark children's stderr under ``cdc run``."""

from __future__ import annotations

import logging
import zipfile
from collections import deque
from pathlib import Path

import pytest

from cdc.supervisor.process import ChildProcess, ChildSpec
from spark_pipelines.session import (
    DELTA_SNAPSHOT_PARTITIONS,
    LOG4J2_CONFIG,
    LOOPBACK_DRIVER,
    SHIPPED_PACKAGES,
    defaults_for,
    local_shuffle_partitions,
    package_zip,
    with_batch_gc,
    with_quiet_driver,
)


@pytest.mark.parametrize("master", ["local[2]", "local[*]", "spark://127.0.0.1:7077",
                                    "spark://localhost:7077,127.0.0.1:7078"])
def test_a_loopback_driver_for_local_and_loopback_masters(master: str) -> None:
    settings = defaults_for(master)
    assert LOOPBACK_DRIVER.items() <= settings.items()
    assert settings["spark.sql.session.timeZone"] == "UTC"
    assert ("spark.ui.enabled" in settings) == master.startswith("local")


@pytest.mark.parametrize("master", ["spark://10.0.0.5:7077", "yarn",
                                    "k8s://https://10.0.0.9:6443"])
def test_no_loopback_driver_for_a_remote_master(master: str) -> None:
    settings = defaults_for(master)
    assert not LOOPBACK_DRIVER.keys() & settings.keys()
    assert settings["spark.sql.session.timeZone"] == "UTC"


def test_a_local_master_gets_shuffle_partitions_for_its_cores(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert local_shuffle_partitions("local") == 8
    assert local_shuffle_partitions("local[2]") == 8
    assert local_shuffle_partitions("local[12]") == 24
    assert local_shuffle_partitions("local[12,3]") == 24  # with task retries
    assert local_shuffle_partitions("local[*]") == 32
    assert defaults_for("local[2]")["spark.sql.shuffle.partitions"] == "8"
    assert defaults_for("local[2]")[DELTA_SNAPSHOT_PARTITIONS] == "8"
    assert "spark.sql.shuffle.partitions" not in defaults_for("spark://10.0.0.5:7077")
    assert DELTA_SNAPSHOT_PARTITIONS not in defaults_for("spark://10.0.0.5:7077")


def test_the_zip_holds_every_shipped_package_without_bytecode(tmp_path: Path) -> None:
    with zipfile.ZipFile(package_zip(tmp_path / "code.zip")) as archive:
        names = archive.namelist()
    for package in SHIPPED_PACKAGES:
        assert f"{package}/__init__.py" in names
    assert "spark_pipelines/session.py" in names
    assert "cdc/observability/static/index.html" in names  # package data too
    assert not [name for name in names if name.endswith(".pyc") or "__pycache__" in name]


def test_the_driver_logs_errors_only_unless_the_pipeline_configures_log4j2() -> None:
    settings = with_quiet_driver({"spark.driver.extraJavaOptions": "-Xss4m"})
    options = str(settings["spark.driver.extraJavaOptions"])
    assert options.startswith("-Xss4m -Dlog4j2.configurationFile=file:")
    assert "rootLogger.level = error" in LOG4J2_CONFIG.read_text()
    own = {"spark.driver.extraJavaOptions": "-Dlog4j2.configurationFile=/etc/mine.xml"}
    assert with_quiet_driver(own) == own


def test_the_driver_gets_the_parallel_collector_unless_the_pipeline_chooses_one() -> None:
    assert with_batch_gc({})["spark.driver.extraJavaOptions"] == "-XX:+UseParallelGC"
    settings = with_batch_gc({"spark.driver.extraJavaOptions": "-Xss4m", "a": "b"})
    assert settings == {"spark.driver.extraJavaOptions": "-Xss4m -XX:+UseParallelGC",
                        "a": "b"}
    for own in ("-XX:+UseG1GC", "-Xss4m -XX:+UseZGC -Xmx2g", "-XX:+UseShenandoahGC"):
        assert with_batch_gc({"spark.driver.extraJavaOptions": own}) == \
            {"spark.driver.extraJavaOptions": own}


def test_a_line_that_is_not_a_log_record_is_a_warning_unless_it_says_error(
        caplog: pytest.LogCaptureFixture) -> None:
    child = ChildProcess.__new__(ChildProcess)  # its line handling alone, no process
    child.spec, child._json, child._lines = ChildSpec("lakehouse", ()), True, deque()
    with caplog.at_level(logging.INFO):
        for line in ("WARNING: Using incubator modules: jdk.incubator.vector",
                     "Error: log.path: no such directory",
                     "Traceback (most recent call last):"):
            child._forward(line)
    assert [r.levelname for r in caplog.records] == ["WARNING", "ERROR", "ERROR"]
    assert child.last_error() == "log.path: no such directory"
