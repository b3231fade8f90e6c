"""``cdc replay``'s own way to Spark's Kafka source: ``spark.jars.packages`` through Ivy.

The test fixtures put the launcher's jars on the session of the test process; this
starts a separate Spark (a JVM's jars are fixed when its first session starts) with only
the settings product code computes, and reads a real Kafka topic with it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic  # admin re-exports it, but untyped

from compose.launcher import cache_dir, file_lock

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
READ = """\
import sys
import pyspark
from spark_pipelines.kafka_packages import with_kafka_source
from spark_pipelines.session import spark_session

settings = with_kafka_source({"spark.sql.shuffle.partitions": "1"}, pyspark.__version__)
with spark_session("local[1]", settings, app_name="kafka-packages") as spark:
    rows = (spark.read.format("kafka").option("kafka.bootstrap.servers", sys.argv[1])
            .option("subscribe", sys.argv[2]).option("startingOffsets", "earliest")
            .load().selectExpr("CAST(value AS STRING) AS value").collect())
    print("values=" + ",".join(sorted(row["value"] for row in rows)))
"""


def test_replay_settings_read_kafka(kafka_bootstrap: str, unique_name: str) -> None:
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    admin.create_topics([NewTopic(unique_name, num_partitions=1, replication_factor=1)],
                        operation_timeout=30)[unique_name].result(timeout=30)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "acks": "all"})
    values = [f"event-{n}" for n in range(5)]
    failed: list[object] = []
    for value in values:
        producer.produce(unique_name, value=value.encode(),
                         on_delivery=lambda error, _: failed.append(error) if error else None)
    assert producer.flush(30) == 0 and failed == []

    env = dict(os.environ)
    env.setdefault("DISTRIBUTARY_CACHE", str(cache_dir()))  # the launcher's download cache
    # Ivy's cache is not safe for two resolutions at once (two clones' tests, say)
    with file_lock(Path(env["DISTRIBUTARY_CACHE"]) / "ivy.lock"):
        done = subprocess.run([sys.executable, "-c", READ, kafka_bootstrap, unique_name],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=600,
                              check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"values={','.join(values)}" in done.stdout.splitlines()
