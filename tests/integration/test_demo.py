"""A short ``make demo`` (``python -m compose.demo``, its own Spark JVM) against the test
servers: it names its status page, which answers while the demo runs, prints no JVM or
Spark ``WARN`` line (they go to the log file it names), reconciles the tables and the
joined view of orders with PostgreSQL and ends with ``consistent=yes``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request
from pathlib import Path

from compose.launcher.services import ENV_OPENSEARCH, ENV_POSTGRES, ENV_REDIS

STATUS_LINE = re.compile(r"demo: status page (http://127\.0\.0\.1:\d+/) while the demo runs")
SPARK_LOG = re.compile(r"its log: (\S+spark\.log)")


def _status(url: str) -> int:
    with urllib.request.urlopen(url, timeout=10) as response:
        return int(response.status)


def test_short_demo_names_its_status_page_prints_no_warnings_and_is_consistent(
        postgres_dsn: str, redis_url: str, opensearch_url: str) -> None:
    env = {**os.environ, ENV_POSTGRES: postgres_dsn, ENV_REDIS: redis_url,
           ENV_OPENSEARCH: opensearch_url, "COLUMNS": "100"}
    demo = subprocess.Popen([sys.executable, "-m", "compose.demo", "--duration", "8"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, errors="replace")
    lines: list[str] = []
    answered: list[int] = []
    assert demo.stdout is not None
    try:
        for line in demo.stdout:
            lines.append(line.rstrip("\n"))
            found = STATUS_LINE.search(line)
            if found and not answered:  # the page is up while the demo goes on
                answered.append(_status(found.group(1)))
        demo.wait(timeout=60)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    output = "\n".join(lines)
    assert demo.returncode == 0, output[-4000:]
    assert answered == [200], "the demo named no status page, or it did not answer"
    assert lines[-1].endswith("consistent=yes"), output[-4000:]
    # customers, products, orders (connectors search and cache) and orders_joined
    # (orders-search: each order with its customer and items)
    assert any(line.startswith("reconcile: tables=4 ") and
               line.endswith(" missing=0 extra=0 different=0") for line in lines), output
    assert "distributary.public.order_items" in output, "the live view showed topics"
    warnings = [line for line in lines if "WARN" in line]
    assert not warnings, warnings[:10]
    spark_log = SPARK_LOG.search(output)
    assert spark_log and Path(spark_log.group(1)).is_file(), "the demo names Spark's log"

