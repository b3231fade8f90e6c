"""The settings a replay session gets per master, and the zip of the shipped packages."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from spark_pipelines.session import LOOPBACK_DRIVER, SHIPPED_PACKAGES, defaults_for, package_zip


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


def test_the_zip_holds_every_shipped_package_without_bytecode(tmp_path: Path) -> None:
    with zipfile.ZipFile(package_zip(tmp_path / "code.zip")) as archive:
        names = archive.namelist()
    for package in SHIPPED_PACKAGES:
        assert f"{package}/__init__.py" in names
    assert "spark_pipelines/session.py" in names
    assert "cdc/observability/static/index.html" in names  # package data too
    assert not [name for name in names if name.endswith(".pyc") or "__pycache__" in name]
