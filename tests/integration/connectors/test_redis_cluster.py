"""``cdc run`` into a real Redis Cluster (three masters, a replica each): the snapshot,
then inserts, updates, deletes and a truncate over keys in many slots on every master,
as JSON and as hashes; and a master SIGKILLed under load, its replica promoted. Each time
``cdc reconcile`` is clean and nothing is dead-lettered. And a slot moved under a sink,
and a sink writing (or truncating) while a slot is mid-migration."""

from __future__ import annotations

import contextlib
import itertools
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import orjson
import pytest
from redis import Redis
from redis.cluster import RedisCluster
from redis.crc import key_slot

from connectors.contract import SinkEvent, SinkUnavailableError
from connectors.redis import RedisSinkConfig
from connectors.redis.scripts import version_text
from connectors.redis.sink import RedisSink
from connectors.redis.slots import KeyNames
from tests.processes import start_cdc_run, stop_process
from tests.unit.connectors.sink_events import TableEvents

from .conftest import MakeHarness
from .harness import PipelineHarness

ROWS = 300
SUMMARY = re.compile(r"reconcile: tables=(\d+) rows=(\d+) missing=(\d+) extra=(\d+) "
                     r"different=(\d+)")
SCHEMA = """
CREATE TABLE items (id int PRIMARY KEY, v text NOT NULL, n int NOT NULL);
CREATE TABLE gone (id int PRIMARY KEY, v text);
INSERT INTO items SELECT g, 'v' || g, g FROM generate_series(1, 300) g;  -- ROWS
INSERT INTO gone SELECT g, 'g' || g FROM generate_series(1, 50) g;
"""


def connectors_yaml(name: str, urls: list[str]) -> str:
    topics = f"[{name}.public.items, {name}.public.gone]"
    return "".join(f"""
  - name: {kind}
    type: redis
    topics: {topics}
    batch_timeout: 50ms
    retry: {{initial_backoff: 100ms, max_backoff: 1s}}
    config:
      urls: [{", ".join(urls)}]
      key_template: "{name}:{kind}:{{table}}:{{key}}"
      value_format: {kind}
      timeout: 2s
""" for kind in ("json", "hash"))


@pytest.fixture
def cluster_client(redis_cluster: Any, unique_name: str) -> Iterator[RedisCluster]:
    client = RedisCluster.from_url(redis_cluster.urls[0])
    yield client
    doomed = list(client.scan_iter(match=f"*{unique_name}:*", count=1000))
    if doomed:
        client.unlink(*doomed)
    client.close()


@pytest.fixture
def pipeline(make_harness: MakeHarness, redis_cluster: Any,
             unique_name: str) -> PipelineHarness:
    return make_harness(SCHEMA, connectors_yaml(unique_name, redis_cluster.urls))


def reconcile(config: Path) -> tuple[int, ...]:
    """``cdc reconcile``'s summary (it waits until the connectors consumed everything)."""
    done = subprocess.run([sys.executable, "-m", "cdc.cli", "reconcile", "-c", str(config),
                           "--timeout", "60"], capture_output=True, text=True, timeout=180)
    match = SUMMARY.search(done.stdout)
    assert match is not None, (done.returncode, done.stdout[-2000:], done.stderr[-2000:])
    return tuple(int(group) for group in match.groups())


def wait_for(check: Callable[[], bool], what: str, process: subprocess.Popen[bytes],
             stderr: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert process.poll() is None, stderr.read_text()[-3000:]
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def keys_of(client: RedisCluster, pattern: str) -> list[bytes]:
    return list(client.scan_iter(match=pattern, count=1000))


def changes(harness: PipelineHarness, round_: int) -> None:
    """One round of streamed changes over ``items``: inserts, updates, deletes."""
    base = ROWS + 100 * round_
    with harness.connect() as conn:
        conn.execute("INSERT INTO items SELECT g, 'new' || g, g "
                     "FROM generate_series(%s::int, %s::int) g", (base + 1, base + 40))
        conn.execute("UPDATE items SET v = v || '+', n = n + 1 WHERE id %% 7 = %s",
                     (round_ % 7,))
        conn.execute("DELETE FROM items WHERE id %% 23 = %s", (round_ % 23,))


def dead_letters(harness: PipelineHarness, name: str) -> int:
    return sum(harness.end_offsets(f"{name}.dlq.{kind}") for kind in ("json", "hash"))


def test_cdc_run_into_a_redis_cluster_reconciles_clean(
        pipeline: PipelineHarness, cluster_client: RedisCluster, unique_name: str,
        tmp_path: Path) -> None:
    stderr = tmp_path / "run.log"
    process = start_cdc_run(pipeline.config_path, stderr)
    try:
        wait_for(lambda: len(keys_of(cluster_client, f"{unique_name}:hash:items:*")) == ROWS,
                 "the snapshot reaches the cluster", process, stderr)
        for round_ in range(3):
            changes(pipeline, round_)
        pipeline.execute("TRUNCATE gone", "INSERT INTO gone VALUES (1000, 'after')")
        tables, rows, *differences = reconcile(pipeline.config_path)
        assert (tables, differences) == (2, [0, 0, 0])
        assert rows > ROWS
        assert {key.rsplit(b":", 1)[1] for key in
                keys_of(cluster_client, f"{unique_name}:json:gone:*")} == {b"1000"}
        holders = {cluster_client.get_node_from_key(key).name  # type: ignore[no-untyped-call]
                   for key in keys_of(cluster_client, f"{unique_name}:json:items:*")}
        assert len(holders) == 3, "keys on every master"
    finally:
        stop_process(process)
    assert dead_letters(pipeline, unique_name) == 0


def test_a_master_killed_under_load_loses_nothing(
        pipeline: PipelineHarness, cluster_client: RedisCluster, redis_cluster: Any,
        unique_name: str, tmp_path: Path) -> None:
    stderr = tmp_path / "run.log"
    process = start_cdc_run(pipeline.config_path, stderr)
    victim, killed = redis_cluster.masters()[0], False
    try:
        wait_for(lambda: len(keys_of(cluster_client, f"{unique_name}:json:items:*")) == ROWS,
                 "the snapshot reaches the cluster", process, stderr)
        changes(pipeline, 0)
        redis_cluster.kill(victim)
        killed = True
        for round_ in range(1, 6):  # while the cluster notices and fails over
            changes(pipeline, round_)
        redis_cluster.wait_failed_over()
        assert victim not in redis_cluster.masters()
        changes(pipeline, 6)
        tables, _, *differences = reconcile(pipeline.config_path)
        assert (tables, differences) == (2, [0, 0, 0])
        assert process.poll() is None, stderr.read_text()[-3000:]
    finally:
        stop_process(process)
        if killed:  # back as a replica, for the tests after this one
            redis_cluster.start_node(victim)
            redis_cluster.wait_failed_over()
    assert dead_letters(pipeline, unique_name) == 0


def stored(client: RedisCluster, key: str) -> Any:
    return orjson.loads(cast(bytes, client.get(key)))


def test_a_write_after_its_slot_moved_is_retried_by_the_new_slot_map(
        redis_cluster: Any, cluster_client: RedisCluster, unique_name: str) -> None:
    """A resharding moves a slot under a sink whose slot map is old: its next write is
    refused before writing (transient), and the retry writes every row where it now is."""
    config = RedisSinkConfig.model_validate({
        "urls": redis_cluster.urls, "key_template": f"{unique_name}:{{table}}:{{key}}"})
    sink = RedisSink(config)
    sink.open()
    items = TableEvents(table="items")
    key = f"{unique_name}:items:0"
    slot = key_slot(key.encode())
    holder = cluster_client.get_node_from_key(key).port  # type: ignore[no-untyped-call]
    try:
        assert sink.write([items.upsert({"id": n}, 100, n) for n in range(40)]).rejected == []
        redis_cluster.move_slot(slot, next(port for port in redis_cluster.masters()
                                           if port != holder))
        batch = [items.upsert({"id": n, "v": 2}, 200, n) for n in range(40)]
        with pytest.raises(SinkUnavailableError, match="no longer holds a slot"):
            sink.write(batch)
        assert sink.write(batch).rejected == []
        cluster_client.nodes_manager.initialize()
        assert stored(cluster_client, key) == {"id": 0, "v": 2}
        assert {stored(cluster_client, f"{unique_name}:items:{n}")["v"]
                for n in range(40)} == {2}
        stale = [items.upsert({"id": 0, "v": 1}, 150)]  # older: refused by its version
        assert sink.write(stale).rejected == []
        assert stored(cluster_client, key) == {"id": 0, "v": 2}
    finally:
        sink.close()
        redis_cluster.move_slot(slot, holder)
        cluster_client.nodes_manager.initialize()


class Migration:
    """A slot of ``redis_cluster`` left mid-migration (``migrating``): its old master
    answers ``ASK`` for the keys it no longer has and ``TRYAGAIN`` for a command whose
    keys are split, until ``finish``."""

    def __init__(self, cluster: Any, slot: int, source: int, target: int) -> None:
        self.cluster, self.slot, self.source, self.target = cluster, slot, source, target
        self.finished = False

    def move(self, keys: list[str]) -> None:
        """``MIGRATE`` ``keys`` (of the slot) to the new master now."""
        self.cluster.migrate_keys(self.slot, keys)

    def finish(self) -> None:
        """The rest of the keys moved, and the slot given to the new master."""
        if not self.finished:
            self.cluster.finish_slot_move(self.slot)
            self.finished = True

    def keys_on(self, port: int) -> set[str]:
        """The keys of the slot the master on ``port`` holds."""
        with Redis(host="127.0.0.1", port=port, decode_responses=True) as node:
            return set(node.execute_command("CLUSTER", "GETKEYSINSLOT", self.slot, 10_000))


@contextlib.contextmanager
def migrating(redis_cluster: Any, client: RedisCluster, key: str) -> Iterator[Migration]:
    """The slot of ``key`` put mid-migration to another master; afterwards the migration
    finished and the slot moved back (for the tests after this one)."""
    slot = key_slot(key.encode())
    source = client.get_node_from_key(key).port  # type: ignore[no-untyped-call]
    target = next(port for port in redis_cluster.masters() if port != source)
    assert redis_cluster.start_slot_move(slot, target)
    migration = Migration(redis_cluster, slot, source, target)
    try:
        yield migration
    finally:
        migration.finish()
        redis_cluster.move_slot(slot, source)
        client.nodes_manager.initialize()


def ids_in_slot(template: str, count: int) -> list[int]:
    """The first ``count`` ids whose key (``template`` of the id) is in the slot of id 0's."""
    slot = key_slot(template.format(0).encode())
    found = list(itertools.islice((n for n in range(1_000_000)
                                   if key_slot(template.format(n).encode()) == slot), count))
    assert len(found) == count, "not enough ids in one slot"
    return found


def write_retried(sink: RedisSink, batch: list[SinkEvent], *, attempts: int = 10,
                  between: Callable[[int], None] = lambda failures: None,
                  ) -> list[SinkUnavailableError]:
    """``sink.write(batch)`` as the runtime retries it: again after a transient error (a
    short pause, ``between(failures so far)``), up to ``attempts`` times. The write must
    end rejecting nothing (no dead letters); the transient errors it met are returned.
    Any other error fails the test where it is raised."""
    failed: list[SinkUnavailableError] = []
    for _ in range(attempts):
        try:
            result = sink.write(batch)
        except SinkUnavailableError as exc:
            failed.append(exc)
            time.sleep(0.1)
            between(len(failed))
            continue
        assert result.rejected == [], [r.reason for r in result.rejected]
        return failed
    raise AssertionError(f"still refused after {attempts} attempts: {failed[-1]}")


def row_of(client: RedisCluster, key: str) -> dict[str, str] | None:
    """The row stored under ``key`` (a JSON string or a hash), its values as text."""
    kind = client.type(key)
    if kind == b"none":
        return None
    if kind == b"hash":
        fields = cast(dict[bytes, bytes], client.hgetall(key))
        return {name.decode(): value.decode() for name, value in fields.items()}
    return {name: str(value) for name, value in stored(client, key).items()}


def version_of_key(client: RedisCluster, key: str) -> bytes | None:
    """The version stored for value key ``key`` (its version key's)."""
    return cast(bytes | None, client.get(KeyNames(cluster=True).version_key(key)))


def at(event: SinkEvent) -> bytes:
    """The stored form of ``event``'s version."""
    return version_text(event.version).encode()


def sink_of(redis_cluster: Any, unique_name: str, value_format: str = "json") -> RedisSink:
    """An open sink into ``redis_cluster``, keys ``<unique_name>:<table>:<id>``."""
    sink = RedisSink(RedisSinkConfig.model_validate({
        "urls": redis_cluster.urls, "key_template": f"{unique_name}:{{table}}:{{key}}",
        "value_format": value_format}))
    sink.open()
    return sink


def rows_hold(client: RedisCluster, template: str, events: list[SinkEvent]) -> None:
    """Each event's row is what ``client`` reads (its value, or none for a delete), and its
    version key holds the event's version."""
    for event in events:
        n = event.event["key"]["id"]
        after = event.event["after"]
        want = None if after is None else {name: str(value) for name, value in after.items()}
        assert row_of(client, template.format(n)) == want, f"the row of {template.format(n)}"
        assert version_of_key(client, template.format(n)) == at(event), \
            f"the version of {template.format(n)}"


@pytest.mark.parametrize("value_format", ["json", "hash"])
def test_a_write_while_its_slot_is_migrating_with_its_keys_split_waits_for_the_move(
        redis_cluster: Any, cluster_client: RedisCluster, unique_name: str,
        value_format: str) -> None:
    """A slot mid-migration, some of its rows' value and version keys moved and others
    not: a batch over it (newer rows, older ones, a delete, a new row; and rows in other
    slots) fails as transient while the keys are split (ASK, TRYAGAIN), never as dead
    letters; once the move is done its retry writes every row where it now is, no older
    version having landed over a newer one, and a stale write is refused by its version."""
    template = f"{unique_name}:items:{{}}"
    key, names = template.format, KeyNames(cluster=True)
    value_moved, version_moved, both_moved, stays, stays_newer, deleted, new = \
        ids_in_slot(template, 7)
    newer = [value_moved, both_moved, stays_newer]  # stored newer than the batch's
    others = [n for n in range(1, 30)
              if key_slot(key(n).encode()) != key_slot(key(value_moved).encode())]
    items = TableEvents(table="items")
    first = {n: items.upsert({"id": n, "v": 3 if n in newer else 1},
                             300 if n in newer else 100, seq)
             for seq, n in enumerate((value_moved, version_moved, both_moved, stays,
                                      stays_newer, deleted, *others))}
    batch = {n: items.upsert({"id": n, "v": 2}, 200, seq)
             for seq, n in enumerate((value_moved, version_moved, both_moved, stays,
                                      stays_newer, new, *others[1:]))}
    batch |= {n: items.delete({"id": n}, 200, 900 + seq)
              for seq, n in enumerate((deleted, others[0]))}
    sink = sink_of(redis_cluster, unique_name, value_format)
    try:
        assert sink.write(list(first.values())).rejected == []
        with migrating(redis_cluster, cluster_client, key(value_moved)) as migration:
            migration.move([key(value_moved), names.version_key(key(version_moved)),
                            key(both_moved), names.version_key(key(both_moved))])
            moved = migration.keys_on(migration.target)
            assert {key(value_moved), key(both_moved)} <= moved
            assert {key(version_moved), key(stays), key(deleted)}.isdisjoint(moved)
            assert names.version_key(key(value_moved)) in migration.keys_on(migration.source)

            def finish_after_three(failures: int) -> None:
                if failures == 3:  # the resharding went on meanwhile: now it is done
                    rows_hold(cluster_client, template, [first[n] for n in newer])
                    migration.finish()

            failed = write_retried(sink, list(batch.values()), between=finish_after_three)
            assert migration.finished, "written while the slot's keys were split"
            assert len(failed) >= 3
            assert migration.keys_on(migration.source) == set()
            assert {key(n) for n in (value_moved, stays, new)} <= \
                migration.keys_on(migration.target)
            rows_hold(cluster_client, template,
                      [first[n] if n in newer else event for n, event in batch.items()])
            stale = [items.upsert({"id": n, "v": 1}, 150)
                     for n in (version_moved, stays, new, deleted, others[1])]
            write_retried(sink, stale)  # older: refused by their versions
            rows_hold(cluster_client, template, [batch[n] for n in
                                                 (version_moved, stays, new, deleted,
                                                  others[1])])
    finally:
        sink.close()


@pytest.mark.parametrize("side", ["source", "target"])
def test_a_write_while_its_slot_is_migrating_with_all_its_keys_on_one_side_lands_there(
        redis_cluster: Any, cluster_client: RedisCluster, unique_name: str,
        side: str) -> None:
    """A slot mid-migration whose keys (the truncate marker's copy in the slot too: the
    table was truncated once) are all on its old master, or all moved to the new one
    already: the rows are written there before the move is done (the new master by
    ``ASK``), an older version refused by the version stored there; once the move is done
    every row holds its newest version."""
    template = f"{unique_name}:items:{{}}"
    key = template.format
    slot_rows = ids_in_slot(template, 4)
    newer = slot_rows[2:]  # stored newer than the batch's
    others = [n for n in range(1, 30)
              if key_slot(key(n).encode()) != key_slot(key(slot_rows[0]).encode())]
    items = TableEvents(table="items")
    first = {n: items.upsert({"id": n, "v": 3 if n in newer else 1},
                             300 if n in newer else 100, seq)
             for seq, n in enumerate((*slot_rows, *others))}
    batch = {n: items.upsert({"id": n, "v": 2}, 200, seq)
             for seq, n in enumerate((*slot_rows, *others))}
    newest = [first[n] if n in newer else batch[n] for n in batch]
    sink = sink_of(redis_cluster, unique_name)
    try:
        assert sink.write([items.truncate(50)]).rejected == []  # a marker in every slot
        assert sink.write(list(first.values())).rejected == []
        with migrating(redis_cluster, cluster_client, key(slot_rows[0])) as migration:
            if side == "target":
                migration.move(sorted(migration.keys_on(migration.source)))
            holder = migration.source if side == "source" else migration.target
            ours = {name for name in migration.keys_on(holder) if unique_name in name}
            assert {key(n) for n in slot_rows} <= ours
            assert len(ours) == 2 * len(slot_rows) + 1  # values, versions, the marker
            write_retried(sink, list(batch.values()), attempts=5)
            assert not migration.finished
            rows_hold(cluster_client, template, newest)
            assert {name for name in migration.keys_on(holder) if unique_name in name} == ours
            elsewhere = migration.target if side == "source" else migration.source
            assert not any(unique_name in name for name in migration.keys_on(elsewhere))
            stale = [items.upsert({"id": n, "v": 0}, 150) for n in (*slot_rows, others[0])]
            write_retried(sink, stale, attempts=5)  # older: refused, mid-migration too
            rows_hold(cluster_client, template, newest)
            migration.finish()
            assert {name for name in migration.keys_on(migration.target)
                    if unique_name in name} == ours
            write_retried(sink, stale)
            rows_hold(cluster_client, template, newest)
    finally:
        sink.close()


def test_a_truncate_while_its_slot_is_migrating_keeps_the_rows_newer_than_it(
        redis_cluster: Any, cluster_client: RedisCluster, unique_name: str) -> None:
    """A truncate whose event comes after a newer row's (another partition of the topic)
    leaves that row: also while its slot is mid-migration, the value keys of the slot's
    rows moved and their version keys not yet (as a resharding's ``MIGRATE`` batches
    split them)."""
    template = f"{unique_name}:items:{{}}"
    key, names = template.format, KeyNames(cluster=True)
    kept, gone_here = ids_in_slot(template, 2)
    gone = next(n for n in range(1, 30)
                if key_slot(key(n).encode()) != key_slot(key(kept).encode()))
    items = TableEvents(table="items")
    newer = items.upsert({"id": kept, "v": 3}, 300)
    older = [items.upsert({"id": n}, 100, seq) for seq, n in enumerate((gone_here, gone))]
    sink = sink_of(redis_cluster, unique_name)
    try:
        assert sink.write([newer, *older]).rejected == []
        with migrating(redis_cluster, cluster_client, key(kept)) as migration:
            migration.move([key(kept), key(gone_here)])
            assert names.version_key(key(kept)) in migration.keys_on(migration.source)

            def finish_after_three(failures: int) -> None:
                if failures == 3:
                    migration.finish()

            write_retried(sink, [items.truncate(200)], between=finish_after_three)
            migration.finish()
            rows_hold(cluster_client, template, [newer])
            assert row_of(cluster_client, key(gone_here)) is None
            assert row_of(cluster_client, key(gone)) is None
    finally:
        sink.close()
