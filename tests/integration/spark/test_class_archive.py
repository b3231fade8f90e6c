"""The JVM class archive (``cdc replay class-archive``): built from a real Spark job, it
maps into a later job's JVM (``-Xshare:on`` makes a mismatch fatal), and that job writes
the same rows and checksum as one without it (the tests' shared session).

``make setup`` builds the archive the jobs map: when it did, that one is tested (a copy);
else the test builds one itself."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from spark_pipelines.class_archive import ARCHIVE_DIR_ENV, archive_key, archive_path
from spark_pipelines.class_archive_job import PREFIX, write_log
from tests.integration.spark.test_replay_materialize import replay

pytestmark = pytest.mark.integration


def cdc(*args: str, archives: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([sys.executable, "-m", "cdc.cli", *args],
                          env={**os.environ, ARCHIVE_DIR_ENV: str(archives)},
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    return done


def materialize(config: Path, archives: Path) -> tuple[str, str]:
    """``cdc replay materialize`` of the table; its result line, and its stderr."""
    done = cdc("replay", "materialize", "-c", str(config), "--tables", "public.orders",
               "--master", "local[1]", "--no-progress", archives=archives)
    return next(line for line in done.stdout.splitlines() if "rows=" in line), done.stderr


def test_a_job_maps_the_archive_and_writes_the_same(tmp_path: Path, spark: Any) -> None:
    write_log(tmp_path / "log")
    config = tmp_path / "pipeline.yaml"
    config.write_text(f"source:\n  dsn: postgresql://127.0.0.1:1/none\n  slot: {PREFIX}\n"
                      f"  publication: {PREFIX}\n"
                      f"log:\n  backend: file\n  path: {tmp_path / 'log'}\n"
                      f"spark:\n  output_path: {tmp_path / 'out'}\n"
                      "  conf:\n    spark.driver.extraJavaOptions: -Xshare:on\n")
    archives = tmp_path / "archives"
    key = archive_key()
    assert key is not None, "no java"
    if archive_path(key).is_file():  # make setup's (the environment names no other dir)
        archives.mkdir()
        shutil.copy(archive_path(key), archives)
    else:
        built = cdc("replay", "class-archive", archives=archives).stdout
        assert "built in" in built, built
    assert len(list(archives.glob("spark-*.jsa"))) == 1
    assert "exists" in cdc("replay", "class-archive", archives=archives).stdout

    with_archive, errors = materialize(config, archives)
    assert "rows=" in with_archive and "cds" not in errors.lower(), errors[-2000:]
    rows, checksum = with_archive.split("rows=")[1].split(" checksum=")
    without = replay("materialize", "-c", str(config), "--tables", "public.orders")
    assert without == {"public.orders": (int(rows), checksum.split()[0])}
    assert int(rows) > 1000
