"""Fidelity scenarios: a database per scenario (its own settings or encoding), cleaned up
afterwards with its slot."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from ..databases import drop_database
from .catalogue import TYPES_SQL
from .scenario import Scenario, admin_dsn

MakeScenario = Callable[..., Scenario]


@pytest.fixture
def make_scenario(postgres_dsn: str, tmp_path: Path) -> Iterator[MakeScenario]:
    """``make(settings={...}, latin1=False, types=True)``: a new database whose
    ``ALTER DATABASE … SET`` holds ``settings``, with the catalogue's types created."""
    made: list[Scenario] = []

    def make(settings: dict[str, str] | None = None, latin1: bool = False,
             types: bool = True) -> Scenario:
        name = f"fid_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(postgres_dsn, autocommit=True) as conn:
            create = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
            if latin1:
                create = sql.SQL("{} ENCODING 'LATIN1' LC_COLLATE 'C' LC_CTYPE 'C' "
                                 "TEMPLATE template0").format(create)
            conn.execute(create)
            for setting, value in (settings or {}).items():
                conn.execute(sql.SQL("ALTER DATABASE {} SET {} = {}").format(
                    sql.Identifier(name), sql.Identifier(setting), sql.Literal(value)))
        workdir = tmp_path / name
        workdir.mkdir()
        scenario = Scenario(admin_dsn(postgres_dsn, name), name, workdir)
        made.append(scenario)
        if types:
            scenario.sql(*TYPES_SQL)
        return scenario

    yield make
    for scenario in made:
        scenario.stop()
        drop_database(postgres_dsn, scenario.name)
