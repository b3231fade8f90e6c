"""The status page in real headless Chromium while ``cdc run`` streams: its charts show
data (SVG paths with points, ``data-points`` > 0) drawn by the page's own script."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import threading
import uuid
from pathlib import Path

import pytest

from ..connectors.harness import wait_until
from .pipeline_process import TOKEN, Pipeline, running_pipeline, wait_until_ready

CHART_BOTTOM = 150  # HEIGHT - BOTTOM in status.js: y of a zero value


def chromium() -> str:
    """The Chromium binary; its absence fails in CI and skips elsewhere."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        message = "chromium is not installed (compose/setup.sh installs the Debian package)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def render(url: str, profile: Path) -> str:
    """The DOM after the page ran for a while, from headless Chromium."""
    result = subprocess.run(
        [chromium(), "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--no-first-run", "--disable-extensions",
         f"--user-data-dir={profile}", "--virtual-time-budget=4000", "--dump-dom", url],
        capture_output=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-2000:]
    return result.stdout.decode()


def figure(dom: str, figure_id: str) -> str:
    match = re.search(rf'<figure id="{figure_id}"[^>]*>.*?</figure>', dom, re.S)
    assert match, f"no figure {figure_id} in the page"
    return match.group(0)


def points(path_d: str) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in re.findall(r"[ML](-?[\d.]+),(-?[\d.]+)", path_d)]


def keep_writing(pipeline: Pipeline, stop: threading.Event) -> None:
    start = 100_000
    while not stop.is_set():
        pipeline.write(40, start=start)
        start += 40
        stop.wait(0.2)


def every_chart_has_data(pipeline: Pipeline) -> bool:
    """``/status.json`` holds what each chart plots: a sample with events flowing, the
    capture's lag and WAL figures, and the connector's lag."""
    status, body = pipeline.get("/status.json")
    samples = json.loads(body)["samples"] if status == 200 else []
    return (any((s["events_per_s"] or 0) > 0 for s in samples)
            and any(s["lag_seconds"] is not None for s in samples)
            and any(s["lag_bytes"] is not None for s in samples)
            and any("cache" in s["connector_lag"] for s in samples))


def test_status_page_charts_show_data(postgres_dsn: str, redis_url: str,
                                      tmp_path: Path) -> None:
    chromium()
    name = f"t_{uuid.uuid4().hex[:10]}"
    with running_pipeline(postgres_dsn, name, redis_url, tmp_path) as pipeline:
        wait_until_ready(pipeline)
        stop = threading.Event()
        writer = threading.Thread(target=keep_writing, args=(pipeline, stop))
        writer.start()
        try:
            wait_until(lambda: every_chart_has_data(pipeline), timeout=60,
                       what="samples with events flowing, lags and WAL in /status.json")
            dom = render(f"{pipeline.base}/#token={TOKEN}", tmp_path / "profile")
            assert pipeline.process.poll() is None
        finally:
            stop.set()
            writer.join()
    assert ">ready<" in dom, dom[:3000]
    for chart in ("throughput", "capture-lag", "wal", "connector-lag"):
        html = figure(dom, chart)
        count = re.search(r'<figure id="[^"]+" data-points="(\d+)"', html)
        assert count and int(count.group(1)) > 0, f"{chart}: no points drawn"
        paths = re.findall(r'<path class="series" d="([^"]*)"[^>]*data-points="(\d+)"', html)
        assert paths and any(int(n) > 0 and len(points(d)) == int(n) for d, n in paths), chart
    throughput = re.findall(r'<path class="series" d="([^"]*)"', figure(dom, "throughput"))
    assert any(y < CHART_BOTTOM - 1 for x, y in points(throughput[0])), \
        "the throughput line never rises above zero"
    connector = figure(dom, "connector-lag")
    assert 'data-series="cache"' in connector
    assert f"{name}.public.customers" in dom  # the topics table
