"""Download every jar the launcher and PySpark need into the cache (``make setup``), and
the PostgreSQL builds of other major versions."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from .base import ServerError
from .jars import resolve_jars, spark_kafka_jars
from .postgres_versions import VERSIONS, bin_dir


def _bundles() -> list[tuple[str, Callable[[], list[Path]]]]:
    return [("opensearch", lambda: resolve_jars("opensearch")),
            ("opensearch-security", lambda: resolve_jars("opensearch-security")),
            ("kafka", lambda: resolve_jars("kafka")),
            ("spark-kafka", spark_kafka_jars),
            ("postgres", lambda: [bin_dir(major) for major in sorted(VERSIONS)])]


def main() -> int:
    """Resolve the OpenSearch (plain and with its security plugin), Kafka and Spark-Kafka
    bundles and the PostgreSQL builds; print one line each."""
    for bundle, resolve in _bundles():
        started = time.monotonic()
        try:
            jars = resolve()
        except (ServerError, ImportError) as exc:
            print(f"setup: jars {bundle}: {exc}", file=sys.stderr)
            return 1
        print(f"setup: jars {bundle}: {len(jars)} files ({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
