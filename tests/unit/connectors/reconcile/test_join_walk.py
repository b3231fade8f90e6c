"""The joined-view walk over fakes (a clean view stays quiet, a sink ahead of the
snapshot is no drift, hot records are left for the next run, extras come from the
listing, repairs never go back in versions), the join plans of a pipeline file, and the
summary of ``reconcile_pipeline`` with joined views."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from cdc.config.loader import parse_config
from connectors.contract import version_of
from connectors.reconcile import check
from connectors.reconcile.compare import Record, StoredRecord
from connectors.reconcile.join_source import JoinedRead, JoinedRow
from connectors.reconcile.join_walk import JoinWalk, repair_join
from connectors.reconcile.plan import join_only, plan_joins
from connectors.reconcile.run import TableOutcome
from connectors.reconcile.walk import TableFindings


class FakeView:
    """Root rows ``{id: status}`` (``None``: the row has no record); the WAL position
    moves by 100 per read."""

    name = "public.orders"

    def __init__(self, rows: dict[int, str | None]) -> None:
        self.rows = rows
        self.lsn = 1000
        self.on_read: list[Callable[[], None]] = []

    def read(self, keys: Sequence[Sequence[str]] | None = None,
             on_snapshot: Callable[[int], None] | None = None) -> Iterator[JoinedRead]:
        before = self.lsn
        self.lsn += 100
        if on_snapshot is not None:
            on_snapshot(self.lsn)
        ids = sorted(self.rows) if keys is None else sorted(
            int(key[0]) for key in keys if int(key[0]) in self.rows)
        rows = [JoinedRow({"id": i}, (str(i),), self.record(i)) for i in ids]
        for callback in self.on_read:
            callback()
        yield JoinedRead(rows, before, self.lsn)

    def record(self, i: int) -> Record | None:
        status = self.rows[i]
        return None if status is None else {"id": i, "status": status, "items": []}

    def current_lsn(self) -> int:
        return self.lsn


class FakeSink:
    """Records by id with versions, written and deleted under versions."""

    label = "fake index x"
    missing_is_drift = True

    def __init__(self) -> None:
        self.records: dict[str, StoredRecord] = {}

    def put(self, view: FakeView, i: int, lsn: int) -> None:
        record = view.record(i)
        assert record is not None
        self.records[str(i)] = StoredRecord(record, version_of(lsn, 0))

    def id_of(self, key: Mapping[str, Any]) -> str | None:
        return str(key["id"])

    def stored_form(self, record: Record) -> Record:
        return record

    def read_now(self, ids: Sequence[str]) -> dict[str, StoredRecord]:
        return {i: self.records[i] for i in ids if i in self.records}

    read = read_now

    def listing(self) -> Iterator[str]:
        return iter(list(self.records))

    def versions(self, ids: Sequence[str]) -> dict[str, int | None]:
        return {i: self.records[i].version for i in ids if i in self.records}

    def write(self, sink_id: str, record: Record, version: int) -> bool:
        held = self.records.get(sink_id)
        if held is not None and held.version is not None and held.version > version:
            return False
        self.records[sink_id] = StoredRecord(record, version)
        return True

    def delete(self, sink_id: str, version: int) -> bool:
        held = self.records.get(sink_id)
        if held is None or (held.version is not None and held.version > version):
            return False
        del self.records[sink_id]
        return True

    def close(self) -> None:
        pass


def walk(view: FakeView, sink: FakeSink) -> TableFindings:
    return JoinWalk(view, [sink], lambda lsn: None).run()  # type: ignore[list-item]


def kinds(findings: TableFindings) -> list[tuple[str, str]]:
    return [(d.kind.value, d.sink_id) for _, d in findings.differences]


def test_a_clean_view_reports_nothing() -> None:
    view, sink = FakeView({1: "paid", 2: None, 3: "sent"}), FakeSink()
    sink.put(view, 1, 10)
    sink.put(view, 3, 10)
    findings = walk(view, sink)
    assert (findings.rows, kinds(findings), findings.unsettled) == (3, [], 0)


def test_drift_is_reported_once_settled() -> None:
    view, sink = FakeView({1: "paid", 2: None, 3: "sent", 4: "new"}), FakeSink()
    sink.put(view, 1, 10)
    sink.records["1"] = StoredRecord({"id": 1, "status": "old"}, version_of(10, 0))
    sink.records["2"] = StoredRecord({"id": 2}, version_of(10, 0))  # the view drops 2
    sink.records["9"] = StoredRecord({"id": 9}, version_of(10, 0))  # no root row
    sink.put(view, 3, 10)
    assert kinds(walk(view, sink)) == [("different", "1"), ("extra", "2"), ("missing", "4"),
                                       ("extra", "9")]


def test_a_sink_ahead_of_the_snapshot_is_no_drift() -> None:
    view, sink = FakeView({1: "paid"}), FakeSink()
    sink.put(view, 1, 10)
    view.rows[1] = "sent"  # committed after ... and already in the sink, newer
    sink.records["1"] = StoredRecord({"id": 1, "status": "sent", "items": []},
                                     version_of(5000, 0))
    view.rows[1] = "paid"  # the first snapshot still sees the old row

    def commit() -> None:
        view.rows[1] = "sent"
        view.on_read.clear()

    view.on_read.append(commit)
    findings = walk(view, sink)
    assert (kinds(findings), findings.unsettled) == ([], 0)


def test_a_hot_record_is_left_for_the_next_run() -> None:
    view, sink = FakeView({1: "paid"}), FakeSink()
    sink.put(view, 1, 10)
    writes = iter(range(100))

    def change() -> None:  # every read is overtaken by a newer write in the sink
        view.rows[1] = f"s{next(writes)}"
        sink.records["1"] = StoredRecord({"id": 1, "status": "ahead"},
                                         version_of(view.lsn + 50, 0))

    view.on_read.append(change)
    findings = walk(view, sink)
    assert (kinds(findings), findings.unsettled) == ([], 1)


def test_repair_writes_and_deletes_under_the_snapshot_version_never_back() -> None:
    view, sink = FakeView({1: "paid", 2: None, 3: "sent"}), FakeSink()
    sink.records["1"] = StoredRecord({"id": 1, "status": "old"}, version_of(10, 0))
    sink.records["2"] = StoredRecord({"id": 2}, version_of(10, 0))
    sink.records["9"] = StoredRecord({"id": 9}, version_of(10, 0))
    findings = walk(view, sink)
    found = findings.targets[0]
    sink.records["3"] = StoredRecord({"id": 3, "status": "newer"}, version_of(10**9, 0))
    lines = repair_join(view, found, lambda lsn: None, findings.walk_start)
    assert lines == ["wrote 1 and deleted 1 of 3 joined records in fake index x from a "
                     "fresh snapshot (version 0/4B0#0)",  # 1200: the WAL before it
                     "deleted 1 of 1 extra records in fake index x"]
    assert sink.records["1"] == StoredRecord(view.record(1) or {}, version_of(1200, 0))
    assert "2" not in sink.records and "9" not in sink.records
    assert sink.records["3"].record["status"] == "newer"  # a newer write stays


CONFIG = """
source: {{dsn: "postgresql://nobody@127.0.0.1:1/none", slot: app, publication: app}}
log: {{backend: file, path: {log}}}
connectors:
  - name: search
    type: opensearch
    topic_pattern: "app\\\\..*"
    config:
      hosts: ["http://127.0.0.1:1"]
      views: [{{source: public.customers, target: customers}}]
      joins:
        - source: public.orders
          target: orders_joined
          lookups: [{{name: customer, source: public.customers, "on": {{customer_id: id}}}}]
          nested: [{{name: items, source: public.order_items, "on": {{id: order_id}}}}]
  - name: cache
    type: redis
    topic_pattern: "app\\\\..*"
    config:
      url: redis://127.0.0.1:1/0
"""


def test_join_plans(tmp_path: Path) -> None:
    config = parse_config(CONFIG.format(log=tmp_path / "log"))
    search, cache = config.connectors
    assert join_only(search, "public", "order_items") and join_only(search, "public", "orders")
    assert not join_only(search, "public", "customers")  # it has a view of its own
    assert not join_only(cache, "public", "order_items")
    assert [(p.connector.name, p.table) for p in plan_joins(config, (), ())] == [
        ("search", "public.orders")]
    assert plan_joins(config, ("cache",), ()) == []
    assert len(plan_joins(config, (), ("public.order_items",))) == 1
    assert plan_joins(config, (), ("public.other",)) == []


def test_reconcile_pipeline_counts_joined_views_as_tables(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = parse_config(CONFIG.format(log=tmp_path / "log"))
    (plan,) = plan_joins(config, (), ())
    view, sink = FakeView({1: "paid", 2: "sent"}), FakeSink()
    sink.put(view, 1, 10)
    monkeypatch.setattr(check, "plan_tables", lambda *args: [])
    monkeypatch.setattr(check, "plan_joins", lambda *args: [plan])
    monkeypatch.setattr(check, "reconcile_join", lambda *args, **kwargs: TableOutcome(
        walk(view, sink), ["a repair line"]))
    lines: list[str] = []
    summary = check.reconcile_pipeline(config, report=lines.append)
    assert summary.line() == "reconcile: tables=1 rows=2 missing=1 extra=0 different=0"
    assert lines == ["missing public.orders fake index x 2: the row has no record in the sink",
                     "repair: a repair line"]
