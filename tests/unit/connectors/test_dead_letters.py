"""Dead letters: rejected, poison and undecodable events go to ``<prefix>.dlq.<name>``
with the event, where it was, the error and the time; the other events go on."""

from __future__ import annotations

import base64
from datetime import datetime

import orjson

from cdc.config import parse_config
from cdc.config.models import dead_letter_topic
from cdc.log import Position, Record
from cdc.log.file import FileLog
from connectors.contract import SinkContext, version_of
from tests.unit.config.conftest import VALID

from .conftest import (
    TOPIC,
    SinkBuilders,
    append_events,
    committed,
    make_connector,
    make_runner,
    read_topic,
    run_until,
)
from .fakes import RecordingSink

DLQ = "app.dlq.c1"


def install(sinks: SinkBuilders, sink: RecordingSink) -> RecordingSink:
    sinks["default"] = lambda context: sink
    return sink


def test_a_rejected_event_is_dead_lettered_with_its_origin(event_log: FileLog,
                                                           fake_sinks: SinkBuilders) -> None:
    sink = install(fake_sinks, RecordingSink(refuse={2}))
    append_events(event_log, [1, 2, 3])
    runner = make_runner(event_log, make_connector())
    run_until(runner, lambda: committed(event_log).get((TOPIC, 0)) == 3)
    assert sorted(sink.durable) == [1, 3]
    [letter] = read_topic(event_log, DLQ)
    failed_at = letter.pop("failed_at")
    assert datetime.fromisoformat(failed_at.replace("Z", "+00:00")).tzinfo is not None
    timestamp = letter["source"].pop("timestamp_ms")
    assert isinstance(timestamp, int) and timestamp > 0
    assert letter == {
        "connector": "c1", "error": "refused by the test", "error_type": "Rejection",
        "source": {"topic": TOPIC, "partition": 0, "offset": 1, "commit_lsn": 101, "seq": 0},
        "key": {"id": 2},
        "event": {"op": "u", "key": {"id": 2}, "before": None, "after": {"id": 2},
                  "unchanged": []}}
    assert runner.dead_letter_topic == DLQ


def test_a_poison_event_is_isolated_and_does_not_block_the_others(
        event_log: FileLog, fake_sinks: SinkBuilders) -> None:
    sink = install(fake_sinks, RecordingSink(poison={13}))
    append_events(event_log, list(range(20)))
    runner = make_runner(event_log, make_connector())
    run_until(runner, lambda: committed(event_log).get((TOPIC, 0)) == 20)
    assert sorted(sink.durable) == [k for k in range(20) if k != 13]
    [letter] = read_topic(event_log, DLQ)
    assert letter["key"] == {"id": 13}
    assert letter["error"] == "SinkRejectedError: poison keys [13]"
    assert letter["error_type"] == "SinkRejectedError"
    assert len(sink.batches) <= 2 * 5, "bisection, not one write per event"
    assert runner.failures == []


def test_an_unexpected_error_is_retried_a_little_then_isolated(
        event_log: FileLog, fake_sinks: SinkBuilders) -> None:
    class BuggySink(RecordingSink):
        def write(self, batch):  # type: ignore[no-untyped-def]
            if any(event.key["id"] == 5 for event in batch):
                raise KeyError("price")
            return super().write(batch)

    sink = install(fake_sinks, BuggySink())
    append_events(event_log, list(range(8)))
    delays: list[float] = []
    runner = make_runner(event_log, make_connector(), retry_sleep=delays.append)
    run_until(runner, lambda: committed(event_log).get((TOPIC, 0)) == 8)
    assert len(delays) == 2, "three attempts on the whole batch, none while isolating"
    assert sorted(sink.durable) == [0, 1, 2, 3, 4, 6, 7]
    [letter] = read_topic(event_log, DLQ)
    assert (letter["key"], letter["error"]) == ({"id": 5}, "KeyError: 'price'")


def test_an_undecodable_value_is_dead_lettered_as_base64(event_log: FileLog,
                                                         fake_sinks: SinkBuilders) -> None:
    sink = install(fake_sinks, RecordingSink())
    event_log.producer().append([Record(TOPIC, b'{"id":1}', b"\xffnot json", Position(9, 0))])
    append_events(event_log, [2])
    run_until(make_runner(event_log, make_connector()),
              lambda: committed(event_log).get((TOPIC, 0)) == 2)
    assert list(sink.durable) == [2]
    [letter] = read_topic(event_log, DLQ)
    assert base64.b64decode(letter["value_base64"]) == b"\xffnot json"
    assert letter["error_type"] == "EventDecodeError" and "event" not in letter


def test_dead_letters_need_no_lock_the_capture_holds(event_log: FileLog,
                                                     fake_sinks: SinkBuilders) -> None:
    install(fake_sinks, RecordingSink(refuse={1}))
    append_events(event_log, [1, 2])  # event_log's producer (the capture) stays open
    connector_side = FileLog(event_log.root, event_log.settings)
    run_until(make_runner(connector_side, make_connector()),
              lambda: committed(event_log).get((TOPIC, 0)) == 2)
    append_events(event_log, [3], first_lsn=200)  # the capture goes on writing
    assert [letter["key"] for letter in read_topic(event_log, DLQ)] == [{"id": 1}]
    connector_side.close()


def test_a_pattern_never_feeds_a_connector_its_dead_letters(event_log: FileLog,
                                                            fake_sinks: SinkBuilders) -> None:
    sink = install(fake_sinks, RecordingSink(refuse={1}))
    append_events(event_log, [1, 2])
    connector = make_connector(topics=None, topic_pattern=r"app\..*")
    run_until(make_runner(event_log, connector),
              lambda: committed(event_log).get((TOPIC, 0)) == 2)
    run_until(make_runner(event_log, connector),  # a restart sees the dead-letter topic
              lambda: committed(event_log).get((DLQ, 0)) == 1)
    assert [[key for key, _ in batch] for batch in sink.batches] == [[1, 2]]
    assert len(read_topic(event_log, DLQ)) == 1


def test_versions_reach_the_sink(event_log: FileLog, fake_sinks: SinkBuilders) -> None:
    seen: list[SinkContext] = []

    def build(context: SinkContext) -> RecordingSink:
        seen.append(context)
        return sink

    sink = RecordingSink()
    fake_sinks["default"] = build
    event_log.producer().append([Record(TOPIC, b'{"id":1}', b'{"op":"c","key":{"id":1}}',
                                        Position(0x16B37A0, 3))])
    run_until(make_runner(event_log, make_connector()), lambda: bool(sink.durable))
    assert sink.durable == {1: version_of(0x16B37A0, 3)}
    assert seen == [SinkContext("c1", "app", 0)]
    assert orjson.dumps(seen[0].connector) == b'"c1"'


def test_the_pipeline_names_dead_letter_topics() -> None:
    config = parse_config(VALID, env={})
    assert dead_letter_topic(config.topic_prefix, "search") == "distributary.dlq.search"
    assert config.is_dead_letter_topic("distributary.dlq.search")
    assert not config.is_dead_letter_topic("distributary.public.orders")
    assert not config.is_dead_letter_topic("other.dlq.search")


def test_a_failing_flush_stops_the_worker_and_blames_no_event(
        event_log: FileLog, fake_sinks: SinkBuilders) -> None:
    sink = install(fake_sinks, RecordingSink(flush_errors=[RuntimeError("disk full")] * 9))
    append_events(event_log, [1, 2, 3])
    runner = make_runner(event_log, make_connector(), retry_sleep=lambda delay: None)
    run_until(runner, lambda: bool(runner.failures))
    assert "disk full" in str(runner.failures[0])
    assert len(sink.batches) == 3, "one write per flush attempt: no splitting"
    assert read_topic(event_log, DLQ) == [] and committed(event_log) == {}
