"""The Spark session of a ``cdc replay`` job: the configured master (``local[*]`` by
default) and settings, Spark's Kafka source jars when the log is Kafka, loopback only.

Python workers run this interpreter (``PYSPARK_PYTHON`` unless set, or
``spark.pyspark.python`` in the conf): the rebuilds' tasks import the connectors, which
``python3`` on the PATH may not have. On a cluster (``spark://host:7077``) that path must
exist on every worker machine with the same Python and the third-party dependencies
(pydantic, redis, opensearch-py, orjson, …) installed; Distributary's own packages need
not be: the session ships them to the executors as a zip (``addPyFile``). Spark's jars
(``spark.jars``, ``spark.jars.packages``) reach the executors through Spark itself.

A local master, or a cluster whose master is on the loopback address, gets a driver
bound to 127.0.0.1 (executors connect back to it) unless the conf says otherwise; for
such a cluster ``SPARK_LOCAL_IP`` defaults to 127.0.0.1 too (the driver's web UI, which
a local session does not start, binds to it).
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

from pyspark.sql import SparkSession

from .class_archive import with_class_archive

COMMON_DEFAULTS = {
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    # PostgreSQL tells "note" from "Note": so must the jobs (Spark ignores case by default,
    # and two such columns would be one, or an error)
    "spark.sql.caseSensitive": "true",
}
LOOPBACK_DRIVER = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}
LOCAL_DEFAULTS = {**COMMON_DEFAULTS, **LOOPBACK_DRIVER, "spark.ui.enabled": "false"}
DELTA_SNAPSHOT_PARTITIONS = "spark.databricks.delta.snapshotPartitions"
SHIPPED_PACKAGES = ("cdc", "connectors", "derived", "spark_pipelines")
"""The top-level packages the tasks import (the connectors import ``derived``)."""
_LOOPBACK_HOSTS = {"127.0.0.1", "localhost", "::1"}
LOG4J2_CONFIG = Path(__file__).with_name("log4j2.properties")
"""The driver's logging: errors only, on stderr (a pipeline's own
``spark.driver.extraJavaOptions`` naming a ``log4j2.configurationFile`` wins)."""


def is_local(master: str) -> bool:
    """True for ``local``, ``local[N]``, ``local[*]``, ``local-cluster[…]``: one machine."""
    return master.startswith("local")


def local_shuffle_partitions(master: str) -> int:
    """Shuffle partitions for a local master: twice its cores, at least 8. Spark's 200
    suit a cluster; on one machine each shuffle then runs 200 tasks, most of them tiny (a
    small table's Delta write took 33 s instead of 12, a plain materialize 16 s instead
    of 5; ``make bench-spark`` chose 8 for 3 M events on two cores)."""
    match = re.fullmatch(r"local\[(\d+|\*)(?:,\d+)?\]", master)
    if master == "local":
        cores = 1
    elif match is None or match.group(1) == "*":
        cores = os.cpu_count() or 1
    else:
        cores = int(match.group(1))
    return max(8, 2 * cores)


def defaults_for(master: str) -> dict[str, str]:
    """The settings a session on ``master`` gets unless its conf names them."""
    if is_local(master):
        partitions = str(local_shuffle_partitions(master))
        # Delta's table state likewise: its 50 partitions made each read of a small table
        # run 50 tasks twice (3.7 s of the 4 a checksum of a Delta table took)
        return {**LOCAL_DEFAULTS, "spark.sql.shuffle.partitions": partitions,
                DELTA_SNAPSHOT_PARTITIONS: partitions}
    settings = dict(COMMON_DEFAULTS)
    hosts = [urlparse(f"//{address}").hostname
             for address in master.split("://", 1)[-1].split(",")]
    if hosts and all(host in _LOOPBACK_HOSTS for host in hosts):
        settings.update(LOOPBACK_DRIVER)  # executors on this machine connect back here
    return settings


def with_quiet_driver(settings: Mapping[str, object]) -> dict[str, object]:
    """``settings`` with the driver's JVM logging errors only (``LOG4J2_CONFIG``), unless
    its ``spark.driver.extraJavaOptions`` already name a log4j2 configuration."""
    quiet = dict(settings)
    java_options = str(quiet.get("spark.driver.extraJavaOptions", ""))
    if "log4j2.configurationFile" not in java_options and LOG4J2_CONFIG.is_file():
        quiet["spark.driver.extraJavaOptions"] = \
            f"{java_options} -Dlog4j2.configurationFile={LOG4J2_CONFIG.as_uri()}".strip()
    return quiet


def with_batch_gc(settings: Mapping[str, object]) -> dict[str, object]:
    """``settings`` with the driver JVM on the parallel collector, unless its
    ``spark.driver.extraJavaOptions`` choose a collector: a job is a batch, and G1's
    concurrent threads take cores from its tasks (about 2 s of a 20 s job on 2 cores)."""
    batch = dict(settings)
    java_options = str(batch.get("spark.driver.extraJavaOptions", ""))
    if not re.search(r"-XX:\+Use\w*GC\b", java_options):
        batch["spark.driver.extraJavaOptions"] = f"{java_options} -XX:+UseParallelGC".strip()
    return batch


@contextmanager
def spark_session(master: str, conf: Mapping[str, object], *, app_name: str,
                  jars: list[Path] | None = None) -> Iterator[SparkSession]:
    """A session for one job, stopped afterwards — unless one was already running in
    this process (a test's or a notebook's), which is then used as it is and kept."""
    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    if "spark.pyspark.python" not in conf:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    settings: dict[str, object] = dict(defaults_for(master))
    if not is_local(master) and "spark.driver.host" in settings:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the driver's UI binds to it
    settings.update(conf)
    settings = with_class_archive(with_batch_gc(with_quiet_driver(settings)))
    if jars:
        settings["spark.jars"] = ",".join(str(jar) for jar in jars)
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    shipped = None if is_local(master) else Path(tempfile.mkdtemp(prefix="distributary-py-"))
    session = builder.getOrCreate()
    added: list[str] = []
    try:
        session.sparkContext.setLogLevel("ERROR")
        if shipped is not None:
            before = set(sys.path)
            session.sparkContext.addPyFile(str(package_zip(shipped / "distributary.zip")))
            added = [entry for entry in sys.path if entry not in before]
        yield session
    finally:
        session.stop()
        for entry in added:  # addPyFile put the zip on the driver's path too
            while entry in sys.path:
                sys.path.remove(entry)
        if shipped is not None:
            shutil.rmtree(shipped, ignore_errors=True)


def package_zip(target: Path) -> Path:
    """A zip of ``SHIPPED_PACKAGES`` where this process imports them from (sources and
    package data, no bytecode), for ``addPyFile``: executors import them from it."""
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as archive:
        for package in SHIPPED_PACKAGES:
            module = importlib.import_module(package)
            assert module.__file__ is not None, f"{package} is not a regular package"
            base = Path(module.__file__).parent
            for path in sorted(base.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts \
                        and path.suffix not in {".pyc", ".pyo"}:
                    archive.write(path, f"{package}/{path.relative_to(base).as_posix()}")
    return target
