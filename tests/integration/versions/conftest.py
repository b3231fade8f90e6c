"""Every PostgreSQL major version besides the default: a server per version (built from
Maven Central by the launcher), shared by the tests of this package."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from compose.launcher import PostgresServer
from compose.launcher.postgres_versions import VERSIONS
from tests.integration.fidelity.conftest import make_scenario

__all__ = ["make_scenario", "postgres_dsn", "server_major"]

# small enough that a few thousand rows stream before their commit (PostgreSQL 14+)
SETTINGS = {"logical_decoding_work_mem": "64kB", "max_prepared_transactions": "10"}


@pytest.fixture(scope="package", params=sorted(VERSIONS), ids=lambda major: f"pg{major}")
def server_major(request: pytest.FixtureRequest) -> int:
    """The major version the package's tests run against."""
    return int(request.param)


@pytest.fixture(scope="package")
def postgres_dsn(server_major: int) -> Iterator[str]:
    """A superuser DSN on PostgreSQL ``server_major`` (overrides the session server)."""
    with PostgresServer(version=server_major, settings=SETTINGS) as server:
        yield server.dsn()
