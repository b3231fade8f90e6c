"""``PipelineView``: the children's endpoints merged into the pipeline's."""

from __future__ import annotations

import json

from prometheus_client import CollectorRegistry, generate_latest

from cdc.supervisor import ChildExit, ChildState, PipelineView
from cdc.supervisor.view import child_parts, merge_families

CAPTURE = """# HELP distributary_capture_events_total Events.
# TYPE distributary_capture_events_total counter
distributary_capture_events_total{topic="p.public.a"} 7.0
distributary_capture_events_total{topic="p.public.b"} 3.0
# HELP distributary_capture_lag_bytes Lag.
# TYPE distributary_capture_lag_bytes gauge
distributary_capture_lag_bytes 42.0
# HELP distributary_ready Ready.
# TYPE distributary_ready gauge
distributary_ready 1.0
"""


def connector(name: str, lag: int) -> str:
    return f"""# HELP distributary_connector_events_written_total Written.
# TYPE distributary_connector_events_written_total counter
distributary_connector_events_written_total{{connector="{name}"}} 5.0
# HELP distributary_connector_lag Lag.
# TYPE distributary_connector_lag gauge
distributary_connector_lag{{connector="{name}",partition="0",topic="p.public.a"}} {lag}.0
"""


class Endpoints:
    """Answers per port and path; a port not listed does not answer."""

    def __init__(self, answers: dict[tuple[int, str], tuple[int, bytes]]) -> None:
        self.answers = answers

    def get(self, port: int, path: str) -> tuple[int, bytes] | None:
        return self.answers.get((port, path))


def healthz(**parts: str) -> tuple[int, bytes]:
    return 200, json.dumps({"status": "ready", "parts": parts}).encode()


def test_families_of_several_children_merge_by_name() -> None:
    families = {f.name: f for f in merge_families([connector("a", 1), connector("b", 2)])}
    assert len(families["distributary_connector_lag"].samples) == 2
    assert len(families["distributary_connector_events_written"].samples) == 2


def test_a_down_child_is_one_part_not_ready() -> None:
    down = ChildState("capture", False, 2, None, ChildExit("capture", -9, None), 1.5)
    [part] = child_parts(down, None)
    assert part.name == "capture" and not part.ready
    assert part.problem == "the process is down (killed by signal 9; restarting in 1.5s)"
    [starting] = child_parts(ChildState("capture", True, 0), None)
    assert starting.state == "starting" and not starting.ready


def test_the_view_serves_merged_metrics_health_and_samples() -> None:
    states = [ChildState("capture", True, 1, 1001), ChildState("connector a", True, 0, 1002),
              ChildState("connector b", False, 3, None, ChildExit("connector b", 1, "x"))]
    view = PipelineView(lambda: states, Endpoints({
        (1001, "/metrics"): (200, CAPTURE.encode()),
        (1001, "/healthz"): healthz(capture="streaming"),
        (1002, "/metrics"): (200, connector("a", 4).encode()),
        (1002, "/healthz"): healthz(**{"connector a": "running"})}), ["a", "b"])
    status, body = view.health()
    assert status == 503 and body["parts"] == {
        "capture": "streaming", "connector a": "running", "connector b": "down"}
    assert body["reasons"] == ["connector b: the process is down (exited with status 1: x)"]
    registry = CollectorRegistry()
    registry.register(view)
    text = generate_latest(registry).decode()
    assert 'distributary_child_restarts_total{child="connector b"} 3.0' in text
    assert 'distributary_child_up{child="connector b"} 0.0' in text
    assert 'distributary_capture_lag_bytes 42.0' in text
    assert text.count("\ndistributary_ready ") == 1 and "distributary_ready 0.0" in text
    sample, topics = view.reading(100.0)
    assert topics == {"p.public.a": 7, "p.public.b": 3}
    assert (sample.events, sample.lag_bytes) == (10, 42)
    assert sample.connector_lag == {"a": 4, "b": 0}


def test_a_child_without_an_endpoint_is_ready_while_it_runs() -> None:
    [running] = child_parts(ChildState("columnar", True, 0, serves_endpoint=False), None)
    assert running.state == "running" and running.ready
    [down] = child_parts(ChildState("columnar", False, 1, serves_endpoint=False), None)
    assert down.state == "down" and not down.ready
