"""The ``reconcile:`` section: ``cdc run`` compares the sinks with the tables in the background."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from pydantic import AfterValidator, Field, ValidationInfo

from cdc.config.base import ConfigModel, Loc, raise_field_problems
from cdc.config.connector import ConnectorConfig, ConnectorName
from cdc.config.fields import Duration, TableName


class ReconcileConfig(ConfigModel):
    """What ``cdc run`` reconciles in the background (a ``cdc reconcile --continuous``
    child): the OpenSearch and Redis sinks against the tables, every ``interval``, reading
    at most ``rate`` rows per second; differences are reported, never repaired."""

    interval: Duration = Field(
        default=timedelta(hours=1), description="from the start of one run to the start of "
        "the next (a run that takes longer is followed at once by the next); the first run "
        "starts one interval after cdc run")
    rate: float = Field(default=1000.0, ge=1, description="rows per second read from "
                        "PostgreSQL, at most")
    connectors: tuple[ConnectorName, ...] = Field(
        default=(), description="the connectors to check; empty: every opensearch and redis "
        "connector (mode: upsert)")
    tables: tuple[TableName, ...] = Field(
        default=(), description="'schema.table' names to check; empty: every table the "
        "connectors consume")


def _known_connectors(section: ReconcileConfig | None,
                      info: ValidationInfo) -> ReconcileConfig | None:
    """Every connector ``reconcile.connectors`` names is configured (checked against the
    ``connectors`` section, when that one is valid)."""
    configured: tuple[ConnectorConfig, ...] | None = info.data.get("connectors")
    if section is None or configured is None:
        return section
    names = [connector.name for connector in configured]
    problems: list[tuple[Loc, str, object]] = [
        (("connectors", index), f"no connector named {name!r}; configured: "
         f"{', '.join(names) or '(none)'}", name)
        for index, name in enumerate(section.connectors) if name not in names]
    if problems:
        raise_field_problems("PipelineConfig", problems)
    return section


ReconcileSection = Annotated[ReconcileConfig | None, AfterValidator(_known_connectors)]
