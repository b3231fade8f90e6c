"""The Spark session of a ``cdc replay`` job: the configured master (``local[*]`` by
default) and settings, Spark's Kafka source jars when the log is Kafka, loopback only.

With a local master, Python workers run this interpreter (``PYSPARK_PYTHON`` unless set):
the rebuilds' tasks import the connectors, which ``python3`` on the PATH may not have."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from pyspark.sql import SparkSession

LOCAL_DEFAULTS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.sql.session.timeZone": "UTC",
}


@contextmanager
def spark_session(master: str, conf: Mapping[str, object], *, app_name: str,
                  jars: list[Path] | None = None) -> Iterator[SparkSession]:
    """A session for one job, stopped afterwards — unless one was already running in
    this process (a test's or a notebook's), which is then used as it is and kept."""
    active = SparkSession.getActiveSession()
    if active is not None:
        yield active
        return
    if master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.master(master).appName(app_name)
    settings: dict[str, object] = dict(LOCAL_DEFAULTS) if master.startswith("local") else {}
    settings.update(conf)
    if jars:
        settings["spark.jars"] = ",".join(str(jar) for jar in jars)
    for key, value in settings.items():
        builder = builder.config(key, str(value))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
