"""The topics of the published tables: collisions refused at start-up, renamed ones
listed for ``cdc doctor`` (the rule itself: ``cdc.config.topic_names``)."""

from __future__ import annotations

from typing import Any

import psycopg

from cdc.config import PipelineConfig
from cdc.config.topic_names import TopicNamer, plain_topic
from cdc.errors import ConfigError

from ..findings import Finding
from ..source.ddl_race import outlast_ddl


def published_tables(conn: psycopg.Connection[Any], publication: str) -> list[tuple[str, str]]:
    """Every ``(schema, table)`` of ``publication`` (none when it does not exist)."""
    rows = outlast_ddl(lambda: conn.execute(
        "SELECT schemaname, tablename FROM pg_catalog.pg_publication_tables "
        "WHERE pubname = %s ORDER BY 1, 2", (publication,)).fetchall(),
        what=f"listing the tables of publication {publication}")
    return [(str(schema), str(table)) for schema, table in rows]


def check_published_topics(conn: psycopg.Connection[Any], publication: str,
                           namer: TopicNamer) -> None:
    """Raise ``ConfigError`` naming both tables when two published tables would share a
    topic (before anything is written)."""
    namer.check_collisions(published_tables(conn, publication))


def topic_findings(conn: psycopg.Connection[Any], config: PipelineConfig) -> list[Finding]:
    """For ``cdc doctor``: an error when two published tables would share a topic, and
    one line per table whose topic is not its plain ``<prefix>.<schema>.<table>``
    (escaped, shortened or set in ``log.topic_names``)."""
    namer = config.topic_names
    tables = published_tables(conn, config.source.publication)
    try:
        namer.check_collisions(tables)
    except ConfigError as exc:
        return [Finding("error", "topic names", str(exc.problems[0].message),
                        "set log.topic_names for one of the two tables")]
    return [Finding("ok", f"topic {schema}.{table}",
                    f"{topic} (not {plain_topic(namer.prefix, schema, table)}: the name has "
                    "characters a topic cannot hold, or log.topic_names sets it)")
            for schema, table, topic in namer.renamed(tables)]
