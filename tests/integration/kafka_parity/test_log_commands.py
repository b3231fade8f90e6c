"""``cdc log`` on the Kafka backend prints what it prints on the file log: the same records
are appended to a file log and to a real Kafka broker, and ``dump``, ``tail``, ``topics``
and ``stats`` are compared."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from cdc.cli import main
from cdc.log import Log, Position, Record, StartAt
from cdc.log.file import FileLog, FileLogSettings
from cdc.log.kafka import KafkaLog

pytestmark = pytest.mark.integration

PARTITIONS = 3
EVENTS = 60
WIDE = {"COLUMNS": "250"}  # rich tables: no column is shortened


def event(topic: str, number: int, lsn: int, seq: int) -> Record:
    """Event ``number`` of a row (17 rows, so keys repeat across transactions)."""
    key = number % 17
    deleted = number % 11 == 10
    value = {"op": "d" if deleted else "u", "key": {"id": key}, "before": None,
             "after": None if deleted else {"id": key, "n": number, "note": "ünï ✓ \"q\""},
             "source": {"commit_lsn": lsn, "seq": seq}}
    return Record(topic, orjson.dumps({"id": key}), orjson.dumps(value), Position(lsn, seq),
                  tombstone=deleted)


def transactions(topic: str, first: int, count: int) -> list[Record]:
    """``count`` events, four per transaction, in commit order."""
    return [event(topic, n, 0x16B3000 + (n // 4) * 0x100, n % 4)
            for n in range(first, first + count)]


@dataclass
class Logs:
    """The same topic on both backends, and the options that name each log."""

    topic: str
    file: FileLog
    kafka: KafkaLog
    file_options: tuple[str, ...]
    kafka_options: tuple[str, ...]

    def append(self, records: list[Record]) -> None:
        for log in (self.file, self.kafka):
            log.producer().append(records)


@pytest.fixture
def logs(tmp_path: Path, kafka_bootstrap: str, unique_name: str) -> Iterator[Logs]:
    file_log = FileLog(tmp_path / "log", FileLogSettings(default_partitions=PARTITIONS,
                                                         fsync=False))
    kafka_log = KafkaLog([kafka_bootstrap], default_partitions=PARTITIONS)
    both = Logs(f"{unique_name}.public.orders", file_log, kafka_log,
                ("--path", str(tmp_path / "log")), ("--bootstrap-servers", kafka_bootstrap))
    both.append(transactions(both.topic, 0, EVENTS // 2))  # two batches
    both.append(transactions(both.topic, EVENTS // 2, EVENTS // 2))
    yield both
    file_log.close()
    kafka_log.close()


def cdc_log(*args: str) -> str:
    """The output of ``cdc log ARGS`` (in this process); fails the test on an error."""
    result = CliRunner().invoke(main, ["log", *args], env=WIDE)
    assert result.exit_code == 0, result.output
    return result.output


def table_rows(output: str, first_cell: str) -> list[list[str]]:
    """The cells of every rich table row whose first cell is ``first_cell``."""
    rows = [[cell.strip() for cell in line.strip("│ ").split("│")]
            for line in output.splitlines() if "│" in line]
    return [row for row in rows if row[0] == first_cell]


def test_dump_prints_the_same_events_on_both_backends(logs: Logs, tmp_path: Path) -> None:
    on_file = cdc_log("dump", logs.topic, *logs.file_options)
    on_kafka = cdc_log("dump", logs.topic, *logs.kafka_options)
    assert on_kafka == on_file
    printed = [orjson.loads(line) for line in on_kafka.splitlines()]
    assert len(printed) == EVENTS
    positions = [(e["source"]["commit_lsn"], e["source"]["seq"]) for e in printed]
    assert positions == sorted(positions) and len(set(positions)) == EVENTS, "commit order"

    # one partition, between two offsets
    window = ("--partition", "1", "--from", "2", "--to", "6")
    part_file = cdc_log("dump", logs.topic, *window, *logs.file_options)
    assert cdc_log("dump", logs.topic, *window, *logs.kafka_options) == part_file
    assert len(part_file.splitlines()) == 4
    assert cdc_log("dump", logs.topic, "--from", "latest", *logs.kafka_options) == ""

    # the pipeline file of a Kafka pipeline names the log the same way
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(
        "source:\n  dsn: postgresql://u@127.0.0.1:1/app\n  slot: s\n  publication: p\n"
        f"  tables: [public.orders]\nlog:\n  backend: kafka\n  bootstrap_servers: "
        f"[{logs.kafka_options[1]}]\n  topic_prefix: app\n")
    assert cdc_log("dump", logs.topic, "-c", str(pipeline)) == on_file

    missing = CliRunner().invoke(main, ["log", "dump", f"{logs.topic}.nope",
                                        *logs.kafka_options])
    assert missing.exit_code == 1
    assert f"no topic '{logs.topic}.nope' in Kafka at {logs.kafka_options[1]}" in missing.output


def drain_and_commit(log: Log, group: str, topic: str) -> None:
    consumer = log.consumer(group, topics=[topic], start=StartAt.earliest())
    read = 0
    deadline = time.monotonic() + 60
    try:
        while read < EVENTS:
            assert time.monotonic() < deadline, f"{group} read {read} of {EVENTS}"
            read += len(consumer.poll(500, timeout=1.0))
        consumer.commit()
    finally:
        consumer.close()


def test_topics_and_stats_agree_but_for_sizes(logs: Logs, unique_name: str) -> None:
    group = f"{unique_name}-stats"
    prefix = ("--prefix", unique_name)
    for log in (logs.file, logs.kafka):
        drain_and_commit(log, group, logs.topic)
    [file_topic] = table_rows(cdc_log("topics", *prefix, *logs.file_options), logs.topic)
    [kafka_topic] = table_rows(cdc_log("topics", *prefix, *logs.kafka_options), logs.topic)
    assert file_topic[:3] == kafka_topic[:3] == [logs.topic, str(PARTITIONS), str(EVENTS)]
    assert int(file_topic[3]) > 0 and kafka_topic[3] == "-"

    file_stats = cdc_log("stats", *prefix, *logs.file_options)
    kafka_stats = cdc_log("stats", *prefix, *logs.kafka_options)
    file_partitions = [row[:4] for row in table_rows(file_stats, logs.topic)]
    assert [row[:4] for row in table_rows(kafka_stats, logs.topic)] == file_partitions
    assert len(file_partitions) == PARTITIONS
    assert sum(int(row[3]) for row in file_partitions) == EVENTS
    file_lags = table_rows(file_stats, group)
    assert table_rows(kafka_stats, group) == file_lags
    assert [row[5] for row in file_lags] == ["0"] * PARTITIONS


def test_tail_prints_what_is_there_then_what_arrives(logs: Logs, unique_name: str) -> None:
    dumped = cdc_log("dump", logs.topic, *logs.file_options)
    for options in (logs.file_options, logs.kafka_options):
        tailed = cdc_log("tail", logs.topic, "--from", "earliest", "--limit", str(EVENTS),
                         *options)
        assert tailed == dumped
        as_group = cdc_log("tail", logs.topic, "--group", f"{unique_name}-tail", "--from",
                           "earliest", "--limit", str(EVENTS), *options)
        assert sorted(as_group.splitlines()) == sorted(dumped.splitlines())

    number = 1000  # events appended from here on: numbers (and positions) above the rest
    for options in (logs.file_options, logs.kafka_options):  # from the end: new events only
        follower = subprocess.Popen(
            [sys.executable, "-m", "cdc.cli", "log", "tail", logs.topic, "--limit", "3",
             *options], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        first_new = number
        deadline = time.monotonic() + 60
        while follower.poll() is None:  # until it printed 3 (it may start after a few)
            assert time.monotonic() < deadline, "cdc log tail printed no 3 new events"
            logs.append(transactions(logs.topic, number, 1))
            number += 1
            time.sleep(0.3)
        out, err = follower.communicate(timeout=30)
        assert follower.returncode == 0, err.decode()
        printed = [orjson.loads(line) for line in out.splitlines()]
        assert len(printed) == 3
        first_lsn = transactions(logs.topic, first_new, 1)[0].position.commit_lsn
        assert all(e["source"]["commit_lsn"] >= first_lsn for e in printed), printed
