"""Download every jar the launcher and PySpark need into the cache (``make setup``)."""

from __future__ import annotations

import sys
import time

from .base import ServerError
from .jars import resolve_jars, spark_kafka_jars


def main() -> int:
    """Resolve the OpenSearch, Kafka and Spark-Kafka bundles; print one line each."""
    for bundle, resolve in (("opensearch", lambda: resolve_jars("opensearch")),
                            ("kafka", lambda: resolve_jars("kafka")),
                            ("spark-kafka", spark_kafka_jars)):
        started = time.monotonic()
        try:
            jars = resolve()
        except ServerError as exc:
            print(f"setup: {exc}", file=sys.stderr)
            return 1
        print(f"setup: jars {bundle}: {len(jars)} files ({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
