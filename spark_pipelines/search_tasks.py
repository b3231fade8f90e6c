"""What ``rebuild-search``'s tasks write with: an ``OpenSearchSink`` per task, with the
column types the driver read from the schema topic, counting documents per alias.

The driver creates each new index behind its temporary alias before the tasks start
(``create_indices``), so tasks do not race to create it; each task's sink then finds it
and maps the fields its documents bring (the same mapping whatever task is first).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from opensearchpy import OpenSearch

from cdc.log import Log
from connectors.contract import Sink, SinkEvent
from connectors.opensearch.columns import SchemaTopicColumns
from connectors.opensearch.config import OpenSearchSinkConfig
from connectors.opensearch.indices import IndexCatalog
from connectors.opensearch.mapping import ColumnType
from connectors.opensearch.sink import OpenSearchSink
from derived import apply_view

from .state import TableHistory
from .task_writes import ShippedConfig, Targets


@dataclass(frozen=True, slots=True)
class KnownColumnTypes:
    """Column types read from the schema topic by the driver (a ``ColumnTypes``): a task
    may not reach the log (a file log is a directory on the driver's machine)."""

    tables: Mapping[str, Mapping[str, ColumnType]] = field(default_factory=dict)

    def __call__(self, schema: str, table: str,
                 version: int) -> Mapping[str, ColumnType] | None:
        return self.tables.get(f"{schema}.{table}")


def known_column_types(log: Log, schema_topic: str, group: str,
                       history: TableHistory) -> KnownColumnTypes:
    """The table's column types as ``SchemaTopicColumns`` gives them for its newest schema
    version (the types a streaming sink would use for every event of the state)."""
    newest = history.newest
    types = SchemaTopicColumns(log, schema_topic, group)(newest.schema, newest.table,
                                                          newest.version)
    return KnownColumnTypes({history.name: dict(types)} if types is not None else {})


@dataclass(frozen=True, slots=True)
class SearchRecipe:
    """A task's ``OpenSearchSink`` writing the temporary aliases (``config``), and the
    real alias each document counts towards (``aliases``: temporary → real)."""

    config: ShippedConfig[OpenSearchSinkConfig]
    topic_prefix: str
    column_types: KnownColumnTypes
    aliases: tuple[tuple[str, str], ...]

    def build(self) -> tuple[Sink, Targets]:
        config = self.config.load()
        views = {view.target: view for view in config.views}
        kept = [(views.get(temporary), alias) for temporary, alias in self.aliases]

        def targets(event: SinkEvent) -> Iterator[str]:
            after = event.event["after"]
            return (alias for view, alias in kept
                    if view is None or apply_view(view, after) is not None)

        sink = OpenSearchSink(config, topic_prefix=self.topic_prefix,
                              column_types=self.column_types)
        return sink, targets


def create_indices(client: OpenSearch, config: OpenSearchSinkConfig,
                   temporaries: Sequence[str]) -> None:
    """Create the index behind each temporary alias (``<temporary>-1``) if missing."""
    catalog = IndexCatalog(client, int(config.tombstone_retention.total_seconds()),
                           replicas=config.replicas)
    for temporary in temporaries:
        catalog.state(temporary, temporary)
