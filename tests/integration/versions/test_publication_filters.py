"""A user-made publication with a column list and a row filter (PostgreSQL 15 and 17):
the initial snapshot, the stream and an incremental snapshot carry only the published
columns and rows; an UPDATE moving a row out of the filter arrives as pgoutput sends it,
a DELETE, and Redis stays equal to the published part of the table; ``cdc doctor`` shows
the column list and the filter, and warns when a column list leaves out the replica
identity."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
import redis
from psycopg import sql

from cdc.capture.snapshot.resume import request_records
from cdc.config import load_config
from cdc.log.file import FileLog
from compose.launcher import PostgresServer
from tests.integration.fidelity.conftest import MakeScenario
from tests.integration.fidelity.scenario import Scenario
from tests.processes import stop_or_fail

from .conftest import SETTINGS

pytestmark = pytest.mark.integration

PUBLISHED = ["region", "id", "amount"]  # "secret" is left out
FILTER = "region LIKE 'eu%'"  # '%': the filter goes through queries with parameters


@pytest.fixture(scope="module", params=[15, 17], ids=lambda major: f"pg{major}")
def server_major(request: pytest.FixtureRequest) -> int:
    """The default version (15, protocol 3) and one with protocol 4 (17)."""
    return int(request.param)


@pytest.fixture(scope="module")
def postgres_dsn(server_major: int) -> Iterator[str]:
    with PostgresServer(version=server_major, settings=SETTINGS) as server:
        yield server.dsn()


def _config(scenario: Scenario, redis_url: str) -> Path:
    path = scenario.write_config()
    topic = load_config(path).topic_for("public", "orders")
    path.write_text(path.read_text() + f"""
connectors:
  - name: cache
    type: redis
    topics: [{topic}]
    batch_timeout: 100ms
    config:
      url: {redis_url}
      key_template: "{scenario.name}:{{table}}:{{key}}"
      value_format: json
""")
    return path


def _published_rows(dsn: str) -> dict[tuple[str, int], dict[str, Any]]:
    """What the publication publishes of ``orders``: the oracle."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(sql.SQL("SELECT region, id, amount FROM orders WHERE {}")
                            .format(sql.SQL(FILTER))).fetchall()
    return {(r[0], r[1]): {"region": r[0], "id": r[1], "amount": r[2]} for r in rows}


def _redis_rows(client: redis.Redis, name: str) -> dict[tuple[str, int], dict[str, Any]]:
    found = {}
    for key in client.scan_iter(match=f"{name}:orders:*"):
        value: Any = client.get(key)
        if value is not None:
            row = json.loads(value)
            found[(row["region"], int(row["id"]))] = row
    return found


def _schema_columns(log_dir: Path, prefix: str, table: str) -> list[list[str]]:
    """The columns of every schema version recorded for ``public.<table>``."""
    event_log = FileLog(log_dir)
    try:
        return [[c["name"] for c in record["columns"]]
                for record in (orjson.loads(m.value)
                               for m in event_log.read_to_end(f"{prefix}._schemas"))
                if record["table"] == table]
    finally:
        event_log.close()


def _wait(what: str, done: Any, proc: subprocess.Popen[bytes], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert proc.poll() is None, f"the capture stopped while waiting for {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def test_column_list_and_row_filter_in_snapshot_stream_and_sink(
        make_scenario: MakeScenario, redis_url: str, server_major: int) -> None:
    scenario = make_scenario(types=False)
    scenario.sql("CREATE TABLE orders (region text, id int, amount int, secret text, "
                 "PRIMARY KEY (region, id))",
                 "INSERT INTO orders SELECT r, n, n * 10, 'hidden' FROM generate_series(1, 6) n,"
                 " unnest(ARRAY['eu', 'us']) r",
                 sql.SQL("CREATE PUBLICATION {} FOR TABLE orders ({}) WHERE ({})").format(
                     sql.Identifier(scenario.name),
                     sql.SQL(", ").join(map(sql.Identifier, PUBLISHED)), sql.SQL(FILTER)))
    config_path = _config(scenario, redis_url)
    config = load_config(config_path)
    prefix = config.topic_prefix
    event_log = FileLog(scenario.log_dir)  # an incremental snapshot too, once streaming
    event_log.producer().append(request_records(prefix, ["public.orders"]))
    event_log.close()
    proc = subprocess.Popen([sys.executable, "-m", "cdc.cli", "run", "-c", str(config_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    cache = redis.Redis.from_url(redis_url)
    try:
        _wait("the snapshots", lambda: sum(e["op"] == "r" for e in scenario.events(
            "public", "orders")) >= 12, proc)
        scenario.sql("INSERT INTO orders VALUES ('eu', 7, 70, 'x'), ('us', 7, 70, 'x')",
                     "UPDATE orders SET amount = 100 WHERE region = 'eu' AND id = 1",
                     "UPDATE orders SET secret = 'changed' WHERE region = 'eu' AND id = 4")
        scenario.sql("UPDATE orders SET region = 'us-moved' WHERE region = 'eu' AND id = 2")
        scenario.sql("UPDATE orders SET region = 'eu-west' WHERE region = 'us' AND id = 3")
        scenario.sql("DELETE FROM orders WHERE region = 'eu' AND id = 5",
                     "DELETE FROM orders WHERE region = 'us' AND id = 6",
                     "UPDATE orders SET amount = 1 WHERE region LIKE 'us%'")
        scenario.sql("INSERT INTO orders VALUES ('eu', 99, 0, 'last')")
        want = _published_rows(scenario.dsn)
        _wait("Redis to equal the published rows",
              lambda: _redis_rows(cache, scenario.name) == want, proc)
        # reconcile compares the sink with the published columns and rows only: no
        # unpublished column or filtered-out row counts as drift
        check = subprocess.run([sys.executable, "-m", "cdc.cli", "reconcile", "-c",
                                str(config_path), "--table", "public.orders"],
                               capture_output=True, text=True, timeout=120)
        assert check.returncode == 0, check.stdout + check.stderr
        assert f"rows={len(want)} missing=0 extra=0 different=0" in check.stdout, \
            check.stdout + check.stderr
    finally:
        code = stop_or_fail(proc)
        stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
        cache.close()
    assert code == 0, stderr[-3000:]

    events = scenario.events("public", "orders")
    afters = [e["after"] for e in events if e.get("after")]
    assert afters and all(sorted(a) == sorted(PUBLISHED) for a in afters)
    assert all(a["region"].startswith("eu") for a in afters)  # no row outside the filter
    snapshot = sorted((a["region"], a["id"]) for e in events if e["op"] == "r"
                      for a in [e["after"]])  # the initial and the incremental snapshot
    assert snapshot == sorted([("eu", n) for n in range(1, 7)] * 2)
    changes = [(e["op"], e["key"]["id"]) for e in events if e["op"] != "r"]
    assert changes == [("c", 7), ("u", 1), ("u", 4), ("d", 2), ("c", 3), ("d", 5),
                       ("c", 99)], changes
    moved_out = next(e for e in events if e["op"] == "d" and e["key"]["id"] == 2)
    assert moved_out["key"] == {"region": "eu", "id": 2}  # the old key: what pgoutput sent
    assert _schema_columns(scenario.log_dir, prefix, "orders") == [PUBLISHED], \
        "one schema version, with the published columns, for the snapshot and the stream"

    scenario.sql("CREATE TABLE partial (id int PRIMARY KEY, a int, b int)",
                 sql.SQL("ALTER PUBLICATION {} ADD TABLE partial (a, b)").format(
                     sql.Identifier(scenario.name)))
    doctor = subprocess.run([sys.executable, "-m", "cdc.cli", "doctor", "-c",
                             str(config_path)], capture_output=True, text=True, timeout=60)
    out = doctor.stdout + doctor.stderr
    assert "published public.orders: columns region, id, amount (not secret); rows where " \
        "(region ~~ 'eu%'::text)" in out, out
    assert "warn  published public.partial: the column list of publication " \
        f"{scenario.name} leaves out replica identity columns id" in out, out
    assert "ADD TABLE \"public\".\"partial\" (\"a\", \"b\", \"id\")" in out, out


def test_a_users_publication_is_extended_not_rewritten(make_scenario: MakeScenario) -> None:
    """``source.tables: [public.*]`` as a superuser would publish the schema whole, which
    PostgreSQL refuses on a publication with a column list: the tables it lacks are added
    by name, and its own column list and filter stay as they are."""
    scenario = make_scenario(types=False)
    publication = sql.Identifier(scenario.name)
    scenario.sql("CREATE TABLE orders (id int PRIMARY KEY, amount int, secret text)",
                 "CREATE TABLE other (id int PRIMARY KEY, v text)",
                 "INSERT INTO orders VALUES (1, 10, 's'), (2, 20, 's')",
                 "INSERT INTO other VALUES (1, 'one')",
                 sql.SQL("CREATE PUBLICATION {} FOR TABLE orders (id, amount) WHERE (id > 1)")
                 .format(publication))
    path = scenario.write_config()
    path.write_text(path.read_text().replace("  heartbeat_interval: 1s\n",
                                             "  heartbeat_interval: 1s\n  tables: [public.*]\n"))
    proc = subprocess.Popen([sys.executable, "-m", "cdc.cli", "capture", "-c", str(path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait("the snapshot of both tables", lambda: bool(scenario.events("public", "other"))
              and bool(scenario.events("public", "orders")), proc)
        scenario.sql("INSERT INTO orders VALUES (3, 30, 's'), (0, 0, 's')",
                     "INSERT INTO other VALUES (2, 'two')")
        _wait("the streamed rows", lambda: len(scenario.events("public", "other")) == 2
              and len(scenario.events("public", "orders")) == 2, proc)
    finally:
        stop_or_fail(proc)
        stderr = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    with psycopg.connect(scenario.dsn) as conn:
        published = conn.execute("SELECT tablename, attnames, rowfilter FROM "
                                 "pg_publication_tables WHERE pubname = %s ORDER BY 1",
                                 (scenario.name,)).fetchall()
    assert published == [("orders", ["id", "amount"], "(id > 1)"),
                         ("other", ["id", "v"], None)], stderr[-3000:]
    orders = scenario.events("public", "orders")
    assert [(e["op"], e["after"]) for e in orders] == \
        [("r", {"id": 2, "amount": 20}), ("c", {"id": 3, "amount": 30})]
