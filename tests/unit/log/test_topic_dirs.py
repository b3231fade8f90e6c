"""Topic directories: names that differ only in case stay apart on any file system."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cdc.errors import LogError
from cdc.log import Position, Record, StartAt
from cdc.log.file import FileLog, topic_dir, topic_dir_name
from cdc.log.file.topics import TopicMeta, write_meta

UPPER = "app.public.Orders"
LOWER = "app.public.orders"


def test_lower_case_names_keep_their_directory() -> None:
    assert topic_dir_name(LOWER) == LOWER
    assert topic_dir(Path("/log"), "app.public.order_items-2") == Path(
        "/log/app.public.order_items-2")


def test_names_with_upper_case_get_a_lower_case_hashed_directory() -> None:
    names = {topic_dir_name(t) for t in (UPPER, "app.public.ORDERS", "app.public.OrderS")}
    assert len(names) == 3
    assert len({n.lower() for n in names} | {LOWER}) == 4  # apart even ignoring case
    for name in names:
        assert re.fullmatch(r"app\.public\.orders~[0-9a-f]{8}", name), name
    assert topic_dir_name(UPPER) == topic_dir_name(UPPER)  # stable


def test_the_longest_names_fit_a_file_name() -> None:
    longest = "A" * 249
    assert len(topic_dir_name(longest)) <= 255
    assert topic_dir_name(longest) != topic_dir_name("A" * 248 + "a")


def _record(topic: str, i: int) -> Record:
    return Record(topic, b'{"id":%d}' % i, b'{"n":%d}' % i, Position(100 + i, 0))


def test_topics_differing_in_case_are_listed_and_read_apart(tmp_path: Path) -> None:
    log = FileLog(tmp_path / "log")
    log.producer().append([_record(UPPER, 1), _record(LOWER, 2), _record(UPPER, 3)])
    assert log.admin().topics() == [UPPER, LOWER]
    assert sorted(p.name for p in (tmp_path / "log").iterdir()
                  if not p.name.startswith(("_", "."))) == sorted(
        [LOWER, topic_dir_name(UPPER)])
    for topic, ids in ((UPPER, [1, 3]), (LOWER, [2])):
        consumer = log.consumer("g", topics=[topic], start=StartAt.earliest())
        got = []
        while batch := consumer.poll(100, timeout=0.3):
            got.extend(batch)
        consumer.commit()
        consumer.close()
        assert sorted(int(m.key[6:-1]) for m in got) == ids
        assert {m.topic for m in got} == {topic}
    lag = log.admin().group_lag("g")
    assert {g.topic for g in lag} == {UPPER, LOWER}  # offsets of both, kept apart
    assert all(g.lag == 0 for g in lag)
    assert sum(g.committed or 0 for g in lag if g.topic == UPPER) == 2
    assert sum(g.committed or 0 for g in lag if g.topic == LOWER) == 1
    log.close()


def test_a_directory_never_holds_two_topics(tmp_path: Path) -> None:
    log = FileLog(tmp_path / "log")
    log.admin().create_topic(UPPER, 1)
    meta = topic_dir(log.root, UPPER) / "topic.json"
    meta.write_text(meta.read_text().replace(UPPER, "app.public.OTHER"))
    with pytest.raises(LogError, match=r"already holds topic 'app\.public\.OTHER'"):
        write_meta(log.root, UPPER, TopicMeta(1))
    log.close()


def test_a_log_from_before_the_rule_is_moved_by_its_writer(tmp_path: Path) -> None:
    root = tmp_path / "log"
    log = FileLog(root)
    log.producer().append([_record(UPPER, 1), _record(LOWER, 2)])
    log.close()
    topic_dir(root, UPPER).rename(root / UPPER)  # the layout older versions wrote
    meta = root / UPPER / "topic.json"
    meta.write_text(meta.read_text().replace(f', "topic": "{UPPER}"', ""))
    reopened = FileLog(root)
    reopened.producer()
    assert not (root / UPPER).exists() and topic_dir(root, UPPER).is_dir()
    assert reopened.admin().topics() == [UPPER, LOWER]
    positions = reopened.producer().last_positions(UPPER)
    assert max(positions.values()) == Position(101, 0)  # what was written before stays
    reopened.close()
