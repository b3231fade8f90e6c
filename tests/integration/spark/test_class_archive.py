"""The JVM class archive (``cdc replay class-archive``): built from a real Spark job, it
maps into a later job's JVM (``-Xshare:on`` makes a mismatch fatal), and that job writes
the same rows and checksum as one without it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from spark_pipelines.class_archive import ARCHIVE_DIR_ENV
from spark_pipelines.class_archive_job import PREFIX, write_log

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


def test_a_job_maps_the_archive_and_writes_the_same(tmp_path: Path) -> None:
    write_log(tmp_path / "log")
    config = tmp_path / "pipeline.yaml"
    config.write_text(f"source:\n  dsn: postgresql://127.0.0.1:1/none\n  slot: {PREFIX}\n"
                      f"  publication: {PREFIX}\n"
                      f"log:\n  backend: file\n  path: {tmp_path / 'log'}\n"
                      f"spark:\n  output_path: {tmp_path / 'out'}\n"
                      "  conf:\n    spark.driver.extraJavaOptions: -Xshare:on\n")
    archives, none = tmp_path / "archives", tmp_path / "no-archives"
    built = cdc("replay", "class-archive", archives=archives).stdout
    assert "built in" in built, built
    assert len(list(archives.glob("spark-*.jsa"))) == 1
    assert "exists" in cdc("replay", "class-archive", archives=archives).stdout

    with_archive, errors = materialize(config, archives)
    assert "rows=" in with_archive and "cds" not in errors.lower(), errors[-2000:]
    without, _ = materialize(config, none)
    assert with_archive == without
    assert int(without.split("rows=")[1].split()[0]) > 1000
