"""Spark's Kafka source comes from spark.jars.packages, unless the pipeline brings its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from spark_pipelines.kafka_packages import ivy_cache, kafka_package, with_kafka_source

PACKAGE = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0"


def test_the_package_matches_the_spark_version(monkeypatch: pytest.MonkeyPatch,
                                               tmp_path: Path) -> None:
    monkeypatch.setenv("DISTRIBUTARY_CACHE", str(tmp_path))
    assert kafka_package("4.0.5") == PACKAGE
    assert kafka_package("4.1.0-preview2") == "org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.0"
    assert kafka_package("custom") == "org.apache.spark:spark-sql-kafka-0-10_2.13:custom"
    settings = with_kafka_source({"spark.driver.memory": "2g"}, "4.0.5")
    assert settings == {"spark.driver.memory": "2g", "spark.jars.packages": PACKAGE,
                        "spark.jars.ivy": str(tmp_path / "ivy")}


def test_other_packages_are_kept() -> None:
    settings = with_kafka_source({"spark.jars.packages": "io.delta:delta-spark_2.13:4.0.0"},
                                 "4.0.5")
    assert settings["spark.jars.packages"] == f"io.delta:delta-spark_2.13:4.0.0,{PACKAGE}"


def test_a_pinned_kafka_package_and_ivy_folder_win() -> None:
    pinned = "org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.1"
    settings = with_kafka_source({"spark.jars.packages": pinned, "spark.jars.ivy": "/ivy"},
                                 "4.0.5")
    assert settings["spark.jars.packages"] == pinned
    assert settings["spark.jars.ivy"] == "/ivy"


def test_local_kafka_jars_are_used_as_they_are() -> None:
    jars = "/opt/jars/kafka-clients-3.9.0.jar,/opt/jars/spark-sql-kafka-0-10_2.13-4.0.5.jar"
    assert with_kafka_source({"spark.jars": jars}, "4.0.5") == {"spark.jars": jars}


def test_unrelated_local_jars_still_get_the_package() -> None:
    settings = with_kafka_source({"spark.jars": "/opt/jars/postgresql.jar"}, "4.0.5")
    assert settings["spark.jars.packages"] == PACKAGE


def test_the_cache_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("DISTRIBUTARY_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert ivy_cache() == tmp_path / "distributary" / "ivy"
