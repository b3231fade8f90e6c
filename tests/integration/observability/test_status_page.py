"""The status page in real headless Chromium while ``cdc run`` streams: its charts show
data (SVG paths with points, ``data-points`` > 0) drawn by the page's own script."""

from __future__ import annotations

import json
import math
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


def ticks(html: str) -> list[float]:
    """The y axis labels of a chart (``tickLabel`` in status.js), as numbers."""
    scale = {"": 1.0, "k": 1e3, "M": 1e6, "B": 1.0, "KiB": 1024.0, "MiB": 1024.0**2,
             "GiB": 1024.0**3}
    labels = re.findall(r'<text x="48" y="[^"]+" text-anchor="end">([^<]*)</text>', html)
    found = []
    for label in labels:
        match = re.fullmatch(r"(-?[\d.]+) ?(k|M|B|KiB|MiB|GiB)?", label)
        assert match, f"tick label {label!r} is not a number"
        found.append(float(match.group(1)) * scale[match.group(2) or ""])
    return found


def round_ticks(values: list[float], kind: str) -> bool:
    """Ticks from zero in equal steps of 1, 2 or 5 times a power of ten (``decimal``;
    ``whole``: and whole numbers), or of a power of two (``bytes``)."""
    if len(values) < 2 or values[0] != 0:
        return False
    step = values[1]
    if any(abs(v - step * i) > step * 1e-3 for i, v in enumerate(values)):
        return False
    if kind == "bytes":
        return step >= 1 and step == 2 ** round(math.log2(step))
    mantissa = step / 10 ** math.floor(math.log10(step) + 1e-9)
    return any(abs(mantissa - m) < 1e-6 for m in (1, 2, 5)) and (
        kind != "whole" or all(v == int(v) for v in values))


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
    for chart, kind in (("throughput", "decimal"), ("capture-lag", "decimal"),
                        ("wal", "bytes"), ("connector-lag", "whole")):
        values = ticks(figure(dom, chart))
        assert round_ticks(values, kind), f"{chart}: ticks {values}"
    connector = figure(dom, "connector-lag")
    assert 'data-series="cache"' in connector
    assert f"{name}.public.customers" in dom  # the topics table
