"""The connector runtime on a real file log: batching, coalescing, retries, offsets,
drain on stop, backpressure and metrics."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from cdc.log import StartAt
from cdc.log.file import FileLog, FileLogSettings
from connectors.contract import SinkContext, SinkUnavailableError
from connectors.runtime import ConnectorFailedError, RuntimeMetrics

from .conftest import (
    GROUP,
    TOPIC,
    SinkBuilders,
    append_events,
    committed,
    make_connector,
    make_runner,
    run_until,
    sample,
)
from .fakes import RecordingSink


def install(sinks: SinkBuilders, sink: RecordingSink, name: str = "default") -> RecordingSink:
    sinks[name] = lambda context: sink
    return sink


def test_batches_by_size(event_log: FileLog, fake_sinks: SinkBuilders) -> None:
    sink = install(fake_sinks, RecordingSink())
    append_events(event_log, list(range(7)))
    runner = make_runner(event_log, make_connector(batch_size=3))
    run_until(runner, lambda: len(sink.durable) == 7)
    assert [len(batch) for batch in sink.batches] == [3, 3, 1]
    assert sink.flushes == 3 and sink.opened and sink.closed
    assert committed(event_log) == {(TOPIC, 0): 7}


def test_batches_by_time(event_log: FileLog, fake_sinks: SinkBuilders) -> None:
    sink = install(fake_sinks, RecordingSink())
    runner = make_runner(event_log, make_connector(batch_size=1000, batch_timeout="200ms"))
    runner.start()
    try:
        append_events(event_log, [1, 2])
        started = time.monotonic()
        while not sink.durable:
            assert time.monotonic() - started < 5
            time.sleep(0.01)
        assert sink.batches == [[(1, (100 << 10)), (2, (101 << 10))]]
    finally:
        runner.stop()
        runner.join(10)


def test_coalesces_a_keys_events_to_the_last(event_log: FileLog,
                                             fake_sinks: SinkBuilders) -> None:
    sink = install(fake_sinks, RecordingSink())
    append_events(event_log, [1, 2, 1, 1, 3, 2])
    metrics = RuntimeMetrics()
    runner = make_runner(event_log, make_connector(), metrics)
    run_until(runner, lambda: committed(event_log).get((TOPIC, 0)) == 6)
    assert sink.batches == [[(1, 103 << 10), (3, 104 << 10), (2, 105 << 10)]]
    assert sample(metrics, "messages_read_total") == 6
    assert sample(metrics, "events_written_total") == 3


def test_transient_errors_are_retried_with_backoff(event_log: FileLog,
                                                   fake_sinks: SinkBuilders) -> None:
    sink = install(fake_sinks, RecordingSink(
        open_errors=[ConnectionRefusedError(111, "refused")],
        write_errors=[SinkUnavailableError("busy"), SinkUnavailableError("busy"),
                      SinkUnavailableError("slow down", retry_after=30)]))
    append_events(event_log, [1, 2, 3])
    delays: list[float] = []
    metrics = RuntimeMetrics()
    runner = make_runner(event_log, make_connector(retry={"initial_backoff": "1s"}), metrics,
                         retry_sleep=delays.append, retry_draw=lambda: 1.0)
    run_until(runner, lambda: len(sink.durable) == 3)
    assert delays == [1.0, 1.0, 2.0, 30.0]  # open, then the write's three failures
    assert sample(metrics, "retries_total") == 4
    assert committed(event_log) == {(TOPIC, 0): 3}


def test_exhausted_retries_stop_the_connector_without_commit(
        event_log: FileLog, fake_sinks: SinkBuilders) -> None:
    install(fake_sinks, RecordingSink(write_errors=[SinkUnavailableError("down")] * 9))
    append_events(event_log, [1, 2])
    runner = make_runner(event_log, make_connector(retry={"max_attempts": 2}),
                         retry_sleep=lambda delay: None)
    run_until(runner, lambda: False)
    with pytest.raises(ConnectorFailedError, match="'c1' stopped: RetriesExhaustedError: "
                                                   "write of 2 events still failing"):
        runner.raise_failure()
    assert committed(event_log) == {}


def test_offsets_are_committed_only_after_flush(event_log: FileLog,
                                                fake_sinks: SinkBuilders) -> None:
    broken = install(fake_sinks, RecordingSink(flush_errors=[RuntimeError("disk full")] * 9))
    append_events(event_log, [1, 2, 3])
    runner = make_runner(event_log, make_connector(), retry_sleep=lambda delay: None)
    run_until(runner, lambda: False)
    assert runner.failures and broken.batches and not broken.durable
    assert committed(event_log) == {}
    healthy = install(fake_sinks, RecordingSink())  # a restart gets the events again
    run_until(make_runner(event_log, make_connector()), lambda: len(healthy.durable) == 3)
    assert healthy.durable == {1: 100 << 10, 2: 101 << 10, 3: 102 << 10}


def test_a_transient_flush_failure_writes_the_batch_again(event_log: FileLog,
                                                          fake_sinks: SinkBuilders) -> None:
    sink = install(fake_sinks, RecordingSink(flush_errors=[SinkUnavailableError("lost")]))
    append_events(event_log, [1, 2])
    runner = make_runner(event_log, make_connector(), retry_sleep=lambda delay: None)
    run_until(runner, lambda: len(sink.durable) == 2)
    assert sink.written_keys == [1, 2, 1, 2]
    assert committed(event_log) == {(TOPIC, 0): 2}


def test_stop_drains_the_batch_in_hand(event_log: FileLog, fake_sinks: SinkBuilders) -> None:
    gate = threading.Event()
    sink = install(fake_sinks, RecordingSink(gate=gate))
    append_events(event_log, [1, 2, 3])
    runner = make_runner(event_log, make_connector())
    runner.start()
    assert sink.entered.wait(5)
    runner.stop()  # while the sink is inside write
    time.sleep(0.1)
    gate.set()
    assert runner.join(10)
    assert sink.durable == {1: 100 << 10, 2: 101 << 10, 3: 102 << 10} and sink.closed
    assert committed(event_log) == {(TOPIC, 0): 3}
    assert runner.failures == []


def test_stop_during_retries_leaves_the_batch_uncommitted(
        event_log: FileLog, fake_sinks: SinkBuilders) -> None:
    sink = install(fake_sinks, RecordingSink(write_errors=[SinkUnavailableError("down")] * 999))
    append_events(event_log, [1])
    runner = make_runner(event_log, make_connector(retry={"initial_backoff": "10ms",
                                                          "max_backoff": "10ms"}))
    runner.start()
    assert sink.entered.wait(5)
    runner.stop()
    assert runner.join(10)
    assert runner.failures == [] and committed(event_log) == {}


def test_workers_share_the_partitions(fake_sinks: SinkBuilders, tmp_path: Path) -> None:
    log = FileLog(tmp_path / "log4", FileLogSettings(default_partitions=4, fsync=False))
    sinks: list[RecordingSink] = []
    lock = threading.Lock()

    def build(context: SinkContext) -> RecordingSink:
        with lock:
            sinks.append(RecordingSink())
            return sinks[-1]

    fake_sinks["default"] = build
    runner = make_runner(log, make_connector(workers=2))
    members = log.root / "_groups" / GROUP / "members"
    appended: list[bool] = []

    def fed_once_both_joined() -> bool:
        # events appear only once both members hold leases, so neither can take them all
        if not appended and members.is_dir() and len(
                [p for p in members.iterdir() if not p.name.startswith(".")]) == 2:
            append_events(log, list(range(40)))
            appended.append(True)
        return sum(len(s.durable) for s in sinks) == 40

    run_until(runner, fed_once_both_joined)
    assert len(sinks) == 2 and all(s.durable for s in sinks), "both workers got partitions"
    assert sorted(k for s in sinks for k in s.durable) == list(range(40))
    assert sum(v or 0 for v in committed(log).values()) == 40
    log.close()


def test_backpressure_policy_reaches_the_consumer(event_log: FileLog,
                                                  fake_sinks: SinkBuilders) -> None:
    sink = install(fake_sinks, RecordingSink())
    append_events(event_log, list(range(500)))
    metrics = RuntimeMetrics()
    runner = make_runner(event_log, make_connector(
        backpressure={"policy": "drop", "max_lag": 100}), metrics, start=StartAt.earliest())

    appended: list[int] = []

    def dropped_then_fed() -> bool:
        if runner.dropped and not appended:
            append_events(event_log, [1000], first_lsn=10_000)
            appended.append(1000)
        return 1000 in sink.durable

    run_until(runner, dropped_then_fed)
    assert runner.dropped == 500
    assert sample(metrics, "dropped_total") == 500
    assert sink.written_keys == [1000]
    assert (event_log.root / "_groups" / GROUP / "policy.json").read_text() == (
        '{"policy": "drop", "max_lag": 100}')


def test_metrics_count_events_batches_and_lag(event_log: FileLog,
                                              fake_sinks: SinkBuilders) -> None:
    sink = install(fake_sinks, RecordingSink(refuse={4}))
    metrics = RuntimeMetrics()
    append_events(event_log, list(range(10)))
    runner = make_runner(event_log, make_connector(batch_size=5), metrics)
    run_until(runner, lambda: committed(event_log).get((TOPIC, 0)) == 10)
    assert len(sink.durable) == 9
    append_events(event_log, [20, 21], first_lsn=500)  # arrives after the runner stopped
    runner.refresh_lag()
    assert sample(metrics, "messages_read_total") == 10
    assert sample(metrics, "events_written_total") == 9
    assert sample(metrics, "batches_total") == 2
    assert sample(metrics, "dead_letters_total") == 1
    assert sample(metrics, "retries_total") == 0
    assert sample(metrics, "lag", topic=TOPIC, partition="0") == 2
    assert sample(metrics, "batch_seconds_count") == 2


def test_a_failed_batch_leaves_the_batches_behind_it_uncommitted(
        event_log: FileLog, fake_sinks: SinkBuilders) -> None:
    """The next batch is queued behind the one being written; when that one fails for
    good, the next may still be written, but neither is committed (the next one's offsets
    would cover the failed one's events)."""
    gate = threading.Event()
    sink = install(fake_sinks, RecordingSink(write_errors=[SinkUnavailableError("down")] * 2,
                                             gate=gate))
    append_events(event_log, [1, 2, 3, 4, 5, 6])
    metrics = RuntimeMetrics()
    runner = make_runner(event_log, make_connector(batch_size=2, retry={"max_attempts": 2}),
                         metrics, retry_sleep=lambda delay: None)

    def open_once_queued() -> None:
        """Every batch read (the third prepared: the second was handed to the sender)."""
        deadline = time.monotonic() + 30
        while (sample(metrics, "messages_read_total") or 0) < 6 and time.monotonic() < deadline:
            time.sleep(0.01)
        gate.set()

    threading.Thread(target=open_once_queued, daemon=True).start()
    run_until(runner, lambda: False)
    assert runner.failures
    assert sink.written_keys[:2] == [3, 4]  # written behind the failed batch
    assert committed(event_log) == {}


def test_what_the_log_client_reports_is_the_connectors_problem(
        event_log: FileLog, fake_sinks: SinkBuilders, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Kafka consumer's ``problem`` (a login refused while it reads) is the connector's
    reason on /healthz; a file log's consumer has none."""
    install(fake_sinks, RecordingSink())
    consumers: list[object] = []
    open_consumer = event_log.consumer

    def consumer(*args: object, **kwargs: object) -> object:
        made = open_consumer(*args, **kwargs)  # type: ignore[arg-type]
        consumers.append(made)
        return made

    monkeypatch.setattr(event_log, "consumer", consumer)
    runner = make_runner(event_log, make_connector(), RuntimeMetrics(),
                         start=StartAt.earliest())
    seen: list[str | None] = []

    def reported() -> bool:
        if not consumers:
            return False
        seen.append(runner.problem)
        consumers[0].problem = "Kafka: SASL authentication error: Authentication failed"  # type: ignore[attr-defined]
        return runner.problem is not None

    run_until(runner, reported)
    assert seen[0] is None
    assert runner.problem == "Kafka: SASL authentication error: Authentication failed"
