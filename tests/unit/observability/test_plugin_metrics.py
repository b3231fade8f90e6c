"""Sinks' counters in the default registry reach the endpoint's registry."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, generate_latest

from cdc.observability.plugin_metrics import PluginMetrics


def test_only_distributary_families_of_the_source_are_forwarded() -> None:
    source = CollectorRegistry()
    ours = Counter("distributary_test_sink_things", "things", ("field",), registry=source)
    Counter("someone_elses_total", "not ours", registry=source).inc()
    ours.labels("price").inc(3)
    served = CollectorRegistry()
    served.register(PluginMetrics(source))

    text = generate_latest(served).decode()

    assert 'distributary_test_sink_things_total{field="price"} 3.0' in text
    assert "someone_elses_total" not in text


def test_values_are_read_at_each_scrape() -> None:
    source = CollectorRegistry()
    counter = Counter("distributary_test_later", "later", registry=source)
    served = CollectorRegistry()
    served.register(PluginMetrics(source))
    counter.inc(2)
    assert "distributary_test_later_total 2.0" in generate_latest(served).decode()
    counter.inc()
    assert "distributary_test_later_total 3.0" in generate_latest(served).decode()
