"""``cdc run`` with a ``reconcile:`` section reconciles in the background: a clean run
first, then a drift made by hand shows up in ``/metrics`` and, as the last summary line,
on the status page (``/status.json``)."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from .conftest import Pipeline, StartPipeline, inject_drift

SECTION = """reconcile:
  interval: 2s
  rate: 20000
"""


def metrics(pipeline: Pipeline) -> dict[tuple[str, str], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{pipeline.metrics_port}/metrics",
                                timeout=10) as response:
        text = response.read().decode()
    return {(sample.name, sample.labels.get("kind", "")): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name.startswith("distributary_reconcile_")}


def status(pipeline: Pipeline) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{pipeline.metrics_port}/status.json",
                                timeout=10) as response:
        result: dict[str, Any] = json.loads(response.read())
    return result


def wait_for(what: str, pipeline: Pipeline, check: Callable[[], bool],
             timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while not check():
        assert pipeline.process.poll() is None, pipeline.stderr.read_text()[-3000:]
        assert time.monotonic() < deadline, (what, pipeline.stderr.read_text()[-3000:])
        time.sleep(1)


def test_cdc_run_reports_drift_in_metrics_and_on_the_status_page(
        start_pipeline: StartPipeline, opensearch_url: str, redis_url: str) -> None:
    pipeline = start_pipeline(SECTION, metrics=True)

    def clean_run() -> bool:
        last = status(pipeline).get("reconcile")
        return bool(last and last["finished"]
                    and last["summary"].endswith("missing=0 extra=0 different=0"))

    wait_for("a clean background run", pipeline, clean_run)
    before = metrics(pipeline)
    assert before["distributary_reconcile_rows_checked_total", ""] >= 2000
    assert before["distributary_reconcile_differences_total", "missing"] == 0
    assert before["distributary_reconcile_differences_total", "different"] == 0
    assert before["distributary_reconcile_differences_total", "extra"] == 0

    inject_drift(pipeline.name, opensearch_url, redis_url)
    expected = "reconcile: tables=1 rows=2000 missing=1 extra=3 different=3"

    def drift_reported() -> bool:
        last = status(pipeline).get("reconcile")
        return bool(last and last["finished"] and last["summary"] == expected)

    wait_for("the drift in a background run", pipeline, drift_reported)
    after = metrics(pipeline)
    assert after["distributary_reconcile_differences_total", "missing"] >= 1
    assert after["distributary_reconcile_differences_total", "extra"] >= 3
    assert after["distributary_reconcile_differences_total", "different"] >= 3
    assert after["distributary_reconcile_last_run_differences", "extra"] == 3
    assert after["distributary_reconcile_rows_checked_total", ""] > before[
        "distributary_reconcile_rows_checked_total", ""]
