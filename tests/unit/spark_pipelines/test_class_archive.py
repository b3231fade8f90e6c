"""When a job's JVM maps the class archive, and which archive is its own."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from spark_pipelines import class_archive
from spark_pipelines.class_archive import (
    ARCHIVE_DIR_ENV,
    QUIET_CDS,
    archive_dir,
    archive_key,
    prune_other_archives,
    with_class_archive,
)

LOG4J = "-Dlog4j2.configurationFile=file:///quiet.properties"


def test_an_existing_archive_is_mapped_after_the_settings_own_options(tmp_path: Path) -> None:
    archive = tmp_path / "spark.jsa"
    archive.write_bytes(b"archive")
    settings = {"spark.driver.extraJavaOptions": LOG4J, "spark.ui.enabled": "false"}
    found = with_class_archive(settings, archive)
    assert found["spark.driver.extraJavaOptions"] == \
        f"{LOG4J} -XX:SharedArchiveFile={archive} {QUIET_CDS}"
    assert found["spark.ui.enabled"] == "false"
    assert settings["spark.driver.extraJavaOptions"] == LOG4J, "the caller's dict is kept"
    assert with_class_archive({}, archive)["spark.driver.extraJavaOptions"] == \
        f"-XX:SharedArchiveFile={archive} {QUIET_CDS}"


@pytest.mark.parametrize("options", ["-Xshare:off", "-XX:SharedArchiveFile=/mine.jsa",
                                     "-XX:ArchiveClassesAtExit=/new.jsa"])
def test_settings_that_choose_class_sharing_are_left_alone(tmp_path: Path,
                                                           options: str) -> None:
    archive = tmp_path / "spark.jsa"
    archive.write_bytes(b"archive")
    settings = {"spark.driver.extraJavaOptions": options}
    assert with_class_archive(settings, archive) == settings


def test_no_archive_changes_nothing(tmp_path: Path) -> None:
    assert with_class_archive({"a": "b"}, tmp_path / "missing.jsa") == {"a": "b"}


def fake_java(path: Path, version: str) -> str:
    path.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\"' >&2\n")
    path.chmod(0o755)
    return str(path)


def test_each_jvm_build_has_its_own_archive(tmp_path: Path) -> None:
    first = archive_key(fake_java(tmp_path / "java17", "17.0.15"))
    again = archive_key(fake_java(tmp_path / "java17-copy", "17.0.15"))
    other = archive_key(fake_java(tmp_path / "java21", "21.0.4"))
    assert first is not None and first == again
    assert other is not None and other != first
    assert archive_key(str(tmp_path / "no-such-java")) is None


def test_spark_reinstalled_in_place_has_a_new_archive(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The JVM refuses an archive whose class-path jars changed size or time (a fresh
    checkout's ``make setup`` reinstalls Spark at the same path, with the same names)."""
    jars = tmp_path / "jars"
    jars.mkdir()
    jar = jars / "spark-core.jar"
    jar.write_bytes(b"classes")
    os.utime(jar, (1_000_000, 1_000_000))
    monkeypatch.setattr(class_archive, "spark_jars", lambda: jars)
    before = archive_key(fake_java(tmp_path / "java-before", "17.0.15"))
    os.utime(jar, (2_000_000, 2_000_000))
    touched = archive_key(fake_java(tmp_path / "java-touched", "17.0.15"))
    jar.write_bytes(b"classes, rebuilt")
    os.utime(jar, (2_000_000, 2_000_000))
    resized = archive_key(fake_java(tmp_path / "java-resized", "17.0.15"))
    assert len({before, touched, resized}) == 3 and None not in {before, touched, resized}


def test_the_archive_directory_can_be_chosen(tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ARCHIVE_DIR_ENV, str(tmp_path))
    assert archive_dir() == tmp_path
    monkeypatch.delenv(ARCHIVE_DIR_ENV)
    assert archive_dir() == Path.home() / ".cache" / "distributary" / "spark-class-archive"


def test_a_new_archive_keeps_only_the_newest_others(tmp_path: Path) -> None:
    others = [tmp_path / f"spark-{n:016x}.jsa" for n in range(4)]
    for age, path in enumerate(others):
        path.write_bytes(b"archive")
        os.utime(path, (1_000_000 - age, 1_000_000 - age))  # others[0] the newest
    unrelated = tmp_path / "notes.txt"
    unrelated.write_text("kept")
    new = tmp_path / "spark-ffffffffffffffff.jsa"
    new.write_bytes(b"archive")
    assert prune_other_archives(new, others=2) == others[2:]
    assert sorted(tmp_path.iterdir()) == sorted([new, *others[:2], unrelated])
