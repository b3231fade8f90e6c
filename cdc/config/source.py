"""The ``source:`` section: one PostgreSQL database, its slot and its publication."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from psycopg.conninfo import make_conninfo
from pydantic import Field, SecretStr, field_validator, model_validator

from cdc.capture.source.table_selection import PatternError, parse_pattern
from cdc.config.base import ConfigModel, Loc, raise_field_problems
from cdc.config.conninfo import parse_dsn
from cdc.config.fields import Duration, PgIdentifier, PostgresDsn, SlotName

SnapshotMode = Literal["initial", "never", "always", "initial_only"]
RewriteAction = Literal["resnapshot", "ignore"]


class SchemaChangesConfig(ConfigModel):
    """What the capture does when a schema change alters rows nobody wrote since
    (``ADD COLUMN … DEFAULT``, ``ALTER COLUMN … TYPE``, ``DROP COLUMN``)."""

    default: RewriteAction = Field(
        default="resnapshot", description="resnapshot: read the table again (an incremental "
        "snapshot) so the log and every sink hold its rows' new values; ignore: keep the "
        "old values downstream until each row is written again (a dropped column's values "
        "stay in the sinks)")
    tables: dict[str, RewriteAction] = Field(
        default_factory=dict, description="per table: 'schema.table' or a glob pattern "
        "('public.audit_*') → resnapshot or ignore; the first matching entry wins")
    confirm_above_rows: int | None = Field(
        default=None, ge=0, description="a table estimated to hold more rows is not read "
        "again by itself: the capture logs the change and waits for `cdc snapshot --table` "
        "to start the re-read; null: no limit")

    @field_validator("tables")
    @classmethod
    def _patterns_valid(cls, tables: dict[str, RewriteAction]) -> dict[str, RewriteAction]:
        problems: list[tuple[Loc, str, object]] = []
        for entry in tables:
            try:
                if parse_pattern(entry).exclude:
                    problems.append(((entry,), "expected an inclusion; set the table to "
                                     "'ignore' instead of excluding it", entry))
            except PatternError as exc:
                problems.append(((entry,), str(exc), entry))
        if problems:
            raise_field_problems("SchemaChangesConfig", problems)
        return tables

    def action_for(self, schema: str, table: str) -> RewriteAction:
        """The action for ``schema.table``: its first matching entry's, else the default."""
        for entry, action in self.tables.items():
            if parse_pattern(entry).matches(schema, table):
                return action
        return self.default


class SourceConfig(ConfigModel):
    """Where changes come from: a database reached by ``dsn``, read through ``slot``."""

    dsn: PostgresDsn = Field(description="a postgresql:// URL or a key=value connection string")
    password: SecretStr | None = Field(
        default=None, description="the password, if the DSN has none (or use password_file)")
    slot: SlotName = Field(description="the logical replication slot the service owns")
    publication: PgIdentifier = Field(description="the publication the slot reads")
    tables: tuple[str, ...] = Field(
        default=(), description="'schema.table' names or glob patterns ('public.*', "
        "'sales.order_*'; '!public.audit_*' excludes; '\"Odd Schema\".\"a.b\"' quotes a "
        "name) to capture; empty means every table")
    snapshot: SnapshotMode = Field(
        default="initial", description="initial: snapshot once, then stream; never: stream only; "
        "always: snapshot at every start (incrementally, while streaming, once the slot "
        "exists); initial_only: snapshot, then stop")
    snapshot_new_tables: bool = Field(
        default=True, description="snapshot a table that joins the publication later "
        "(incrementally, while streaming continues)")
    snapshot_parallel_tables: int | None = Field(
        default=None, ge=1, le=64, description="connections the initial snapshot reads "
        "tables on at once (each reads many tables per transaction); null: one per CPU")
    snapshot_range_mb: int | None = Field(
        default=None, ge=1, description="read a table bigger than this (MiB on disk) as "
        "page ranges (ctid) of about this size, by all of the initial snapshot's "
        "connections at once (PostgreSQL 14+): faster when the server, not this host, "
        "limits the snapshot; null: every table through one COPY")
    schema_changes: SchemaChangesConfig = Field(
        default_factory=SchemaChangesConfig, description="schema changes that alter "
        "existing rows' values: read the table again (default) or not")
    heartbeat_interval: Duration | None = Field(
        default=timedelta(seconds=10), description="how often to advance an idle slot; null: never")
    messages_prefixes: tuple[str, ...] = Field(
        default=(), description="pg_logical_emit_message prefixes to capture")
    two_phase: bool = Field(
        default=False, description="create the slot with two-phase decoding (PostgreSQL "
        "15+): a prepared transaction is sent at PREPARE TRANSACTION and held until COMMIT "
        "PREPARED; its events are the same either way. Applies when the slot is created")
    failover_slot: bool = Field(
        default=False, description="create the slot as a failover slot (PostgreSQL 17+; "
        "refused at start-up before): a standby with sync_replication_slots = on keeps a "
        "copy, so the capture goes on from the promoted standby after a failover. An "
        "existing slot without the flag is altered to have it")
    primary_dsn: PostgresDsn | None = Field(
        default=None, description="when dsn is a physical standby (PostgreSQL 16+): the "
        "primary, where what a standby cannot write goes: heartbeats, incremental-snapshot "
        "watermarks and chunks, the publication (created or extended there). null: those "
        "are off on a standby (a warning each at start). password applies when it has none")

    @field_validator("tables")
    @classmethod
    def _tables_valid_and_listed_once(cls, tables: tuple[str, ...]) -> tuple[str, ...]:
        first_seen: dict[str, int] = {}
        problems: list[tuple[Loc, str, object]] = []
        for index, table in enumerate(tables):
            try:
                parse_pattern(table)
            except PatternError as exc:
                problems.append(((index,), str(exc), table))
            if table in first_seen:
                problems.append(((index,), f"{table!r} is already listed at "
                                 f"tables[{first_seen[table]}]", table))
            first_seen.setdefault(table, index)
        if problems:
            raise_field_problems("SourceConfig", problems)
        return tables

    @field_validator("messages_prefixes")
    @classmethod
    def _prefixes_not_empty(cls, prefixes: tuple[str, ...]) -> tuple[str, ...]:
        if any(not prefix for prefix in prefixes):
            raise ValueError("expected non-empty message prefixes")
        return prefixes

    @model_validator(mode="after")
    def _one_password(self) -> SourceConfig:
        if self.password is not None and "password" in parse_dsn(self.dsn):
            raise_field_problems("SourceConfig", [(
                ("password",), "the DSN already contains a password; give it in one place",
                None)])
        return self

    @property
    def database(self) -> str | None:
        """The database name the DSN selects, if it names one."""
        return parse_dsn(self.dsn).get("dbname")

    def conninfo(self) -> str:
        """The DSN with ``password`` merged in: what to hand to psycopg. Holds a secret."""
        return self._with_password(self.dsn)

    def primary_conninfo(self) -> str | None:
        """``primary_dsn`` with ``password`` merged in (if it has none), or None."""
        return None if self.primary_dsn is None else self._with_password(self.primary_dsn)

    def _with_password(self, dsn: str) -> str:
        if self.password is None or "password" in parse_dsn(dsn):
            return dsn
        return make_conninfo(dsn, password=self.password.get_secret_value())
