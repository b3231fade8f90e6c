"""Stored generated columns on PostgreSQL 18: captured — by the initial snapshot, an
incremental snapshot and the stream — when the publication has
``publish_generated_columns = stored``, absent otherwise, and always absent before 18
(PostgreSQL 15 lists them in ``pg_publication_tables.attnames`` but never sends them)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from psycopg import sql

from cdc.capture.snapshot.resume import request_records
from cdc.config import load_config
from cdc.log.file import FileLog
from compose.launcher import PostgresServer
from tests.integration.fidelity.conftest import MakeScenario
from tests.integration.fidelity.scenario import server_major as fidelity_major

from .conftest import SETTINGS

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server_major(request: pytest.FixtureRequest) -> int:
    """The version each case names (indirect parameter)."""
    return int(request.param)


@pytest.fixture(scope="module")
def postgres_dsn(server_major: int) -> Iterator[str]:
    with PostgresServer(version=server_major, settings=SETTINGS) as server:
        yield server.dsn()


@pytest.mark.parametrize(("server_major", "published"), [(18, True), (18, False), (15, False)],
                         ids=["pg18-stored", "pg18-none", "pg15"], indirect=["server_major"])
def test_stored_generated_column_captured_when_published(make_scenario: MakeScenario,
                                                         server_major: int,
                                                         published: bool) -> None:
    scenario = make_scenario(types=False)
    assert fidelity_major(scenario.dsn) == server_major
    option = sql.SQL(" WITH (publish_generated_columns = stored)") if published else sql.SQL("")
    scenario.sql("CREATE TABLE gen (id int PRIMARY KEY, a int, "
                 "g int GENERATED ALWAYS AS (a * 2) STORED)",
                 "INSERT INTO gen (id, a) SELECT n, n FROM generate_series(1, 5) n",
                 sql.SQL("CREATE PUBLICATION {} FOR TABLE gen{}").format(
                     sql.Identifier(scenario.name), option))
    prefix = load_config(scenario.write_config()).topic_prefix
    event_log = FileLog(scenario.log_dir)  # an incremental snapshot too, once streaming
    event_log.producer().append(request_records(prefix, ["public.gen"]))
    event_log.close()
    scenario.start_capture()
    scenario.wait_for("public", "gen", lambda found: sum(e["op"] == "r" for e in found) >= 10)
    scenario.sql("INSERT INTO gen (id, a) VALUES (6, 6)",
                 "UPDATE gen SET a = 10 WHERE id = 1")
    events = scenario.wait_for("public", "gen",
                               lambda found: any(e["op"] == "u" for e in found))
    assert [e["op"] for e in events] == ["r"] * 10 + ["c", "u"]
    for event in events:
        after = event["after"]
        if published:
            assert after == {"id": after["id"], "a": after["a"], "g": after["a"] * 2}, event
        else:
            assert after == {"id": after["id"], "a": after["a"]}, event
