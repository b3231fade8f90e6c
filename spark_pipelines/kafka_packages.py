"""Spark's Kafka source for ``cdc replay`` on a Kafka log: ``spark.jars.packages``.

Spark resolves the package (and what it needs beyond PySpark's own jars) with Ivy from
Maven Central the first time, into a local Ivy cache that later runs reuse offline.
A pipeline file can take over: ``spark.conf`` may list local jars in ``spark.jars``
(any jar named ``spark-sql-kafka*`` there is used as is), pin another version in
``spark.jars.packages``, or move the cache with ``spark.jars.ivy``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

KAFKA_SOURCE = "org.apache.spark:spark-sql-kafka-0-10_2.13"


def kafka_package(spark_version: str) -> str:
    """The Maven coordinates of the Kafka source for this Spark: the first release of its
    line (``4.0.5`` -> ``4.0.0``).

    Patch releases of one line are binary compatible, and the ``.0`` release is the one
    whose jars and dependencies are all on Maven Central: later patch releases of the
    Kafka source name a ``spark-token-provider-kafka`` that Central may lack (4.0.4 did).
    """
    line = re.match(r"(\d+)\.(\d+)\.", spark_version)
    version = f"{line[1]}.{line[2]}.0" if line else spark_version
    return f"{KAFKA_SOURCE}:{version}"


def ivy_cache() -> Path:
    """Where Ivy keeps the packages: ``$DISTRIBUTARY_CACHE/ivy``, else the user's cache."""
    if os.environ.get("DISTRIBUTARY_CACHE"):
        return Path(os.environ["DISTRIBUTARY_CACHE"]) / "ivy"
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "distributary" / "ivy"


def with_kafka_source(conf: Mapping[str, object], spark_version: str) -> dict[str, object]:
    """``conf`` plus what gives Spark its Kafka source, unless ``conf`` already does."""
    return with_package(conf, kafka_package(spark_version), "spark-sql-kafka")


def with_package(conf: Mapping[str, object], coordinates: str,
                 jar_prefix: str) -> dict[str, object]:
    """``conf`` plus the Maven package ``coordinates`` (``group:artifact:version``) in
    ``spark.jars.packages``, unless ``conf`` already lists a version of it there or a
    local jar named ``jar_prefix…`` in ``spark.jars``."""
    settings = dict(conf)
    local_jars = str(settings.get("spark.jars", ""))
    if any(Path(jar.strip()).name.startswith(jar_prefix) for jar in local_jars.split(",")):
        return settings
    packages = [p.strip() for p in str(settings.get("spark.jars.packages", "")).split(",")
                if p.strip()]
    artifact = coordinates.rsplit(":", 1)[0]
    if not any(p.startswith(f"{artifact}:") for p in packages):
        packages.append(coordinates)
    settings["spark.jars.packages"] = ",".join(packages)
    settings.setdefault("spark.jars.ivy", str(ivy_cache()))
    return settings
