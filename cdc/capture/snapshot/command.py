"""``cdc snapshot``: request, cancel or follow incremental snapshots.

The command only writes a request into the WAL (``pg_logical_emit_message``); the
running capture sees it in the stream, records it in the log and performs it. So a
request made while the capture is stopped waits in the slot until it starts again.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import orjson
import psycopg
from psycopg import sql

from cdc.config import PipelineConfig
from cdc.config.commands import config_option, load_config_or_exit
from cdc.errors import SourceError
from cdc.log.open import open_log

from ..lsn import format_lsn
from ..source.messages import incremental_refusal
from ..source.slot import split_table
from .chunks import chunk_key
from .incremental_log import MESSAGE_PREFIX, read_records, table_states


@click.command(name="snapshot")
@config_option
@click.option("--table", "table", metavar="SCHEMA.TABLE",
              help="the table to read again, e.g. public.orders")
@click.option("--where", default=None, metavar="SQL",
              help="only rows matching this SQL condition (read in key order as well)")
@click.option("--chunk", type=click.IntRange(1, 1_000_000), default=5000, show_default=True,
              help="rows per chunk (each chunk is bracketed by WAL watermarks)")
@click.option("--cancel", is_flag=True, help="cancel the table's running snapshot")
@click.option("--status", is_flag=True, help="show every table's snapshot progress")
def snapshot(config_path: Path, table: str | None, where: str | None, chunk: int,
             cancel: bool, status: bool) -> None:
    """Re-read a table while streaming continues (an incremental snapshot).

    The running capture reads the table in primary-key chunks between low and high
    watermarks written to the WAL; a change streamed meanwhile supersedes the chunk's
    row, so the log stays exact. Progress is kept in the log: after a crash the
    snapshot resumes after its last complete chunk.

    \b
    Example:
      cdc snapshot -c pipeline.yaml --table public.orders
      cdc snapshot -c pipeline.yaml --table public.orders --where "region = 'eu'" --chunk 10000
      cdc snapshot -c pipeline.yaml --status
      cdc snapshot -c pipeline.yaml --table public.orders --cancel
    """
    config = load_config_or_exit(config_path)
    if status:
        _show_status(config)
        return
    if table is None:
        raise click.UsageError("give --table SCHEMA.TABLE (or --status)")
    name = ".".join(split_table(table))
    try:
        # a request is a WAL message: on the primary when the capture reads a standby
        dsn = config.source.primary_conninfo() or config.source.conninfo()
        with psycopg.connect(dsn, autocommit=True) as conn:
            refusal = incremental_refusal(conn.info.server_version, config.source.slot)
            if refusal is not None:  # the request would never reach the capture
                raise SourceError(f"--table {name}: {refusal}")
            if cancel:
                lsn = emit_request(conn, {"action": "cancel", "table": name})
                click.echo(f"cancellation of {name}'s snapshot sent (WAL {lsn}); the capture "
                           "stops it when it reads that far")
                return
            _check_request(conn, config, name, where)
            lsn = emit_request(conn, {"action": "snapshot", "table": name, "where": where,
                               "chunk": chunk})
    except SourceError as exc:
        raise click.ClickException(str(exc)) from None
    except psycopg.OperationalError as exc:
        raise click.ClickException(f"cannot reach the source database: "
                                   f"{type(exc).__name__}") from None
    click.echo(f"snapshot of {name} requested (WAL {lsn}, chunks of {chunk} rows); the "
               f"running capture performs it. Follow it: cdc snapshot -c {config_path} --status")


def _check_request(conn: psycopg.Connection[Any], config: PipelineConfig, name: str,
                   where: str | None) -> None:
    schema, table = split_table(name)
    chunk_key(conn, schema, table)  # the table exists and can be read in key order
    published = conn.execute("SELECT 1 FROM pg_publication_tables WHERE pubname = %s AND "
                             "schemaname = %s AND tablename = %s",
                             (config.source.publication, schema, table)).fetchone()
    if published is None:
        raise SourceError(f"--table {name}: not in publication {config.source.publication!r}, "
                          "so its changes are not streamed; add it to source.tables (or the "
                          "publication) first")
    if where:
        try:
            with conn.transaction():
                conn.execute("SET TRANSACTION READ ONLY")
                conn.execute(sql.SQL("EXPLAIN SELECT 1 FROM {} WHERE ({})").format(
                    sql.Identifier(schema, table), sql.SQL(where.replace("%", "%%"))), ())
        except psycopg.errors.Error as exc:
            if isinstance(exc, psycopg.OperationalError):
                raise
            raise SourceError(f"--where {where!r}: PostgreSQL rejects it "
                              f"({str(exc).strip()}); give a condition on {name}'s columns"
                              ) from None
    event_log = open_log(config.log)
    try:
        state = table_states(read_records(event_log, config.topic_prefix)).get(name)
    finally:
        event_log.close()
    if state is not None and state.active:
        raise SourceError(f"--table {name}: a snapshot of it is already {state.state} "
                          f"({state.chunks} chunks, {state.rows} rows); cancel it first "
                          "(--cancel) to start over")


def emit_request(conn: psycopg.Connection[Any], content: dict[str, Any]) -> str:
    """Send ``content`` (a snapshot request or cancel) to the running capture as a WAL
    logical message; the message's LSN as text."""
    try:
        row = conn.execute("SELECT pg_logical_emit_message(false, %s, %s)",
                           (MESSAGE_PREFIX, orjson.dumps(content).decode())).fetchone()
    except psycopg.errors.InsufficientPrivilege:
        raise SourceError("this role may not call pg_logical_emit_message; GRANT EXECUTE ON "
                          "FUNCTION pg_logical_emit_message(boolean, text, text) TO <role> "
                          "(from PostgreSQL 17 on: (boolean, text, text, boolean))") from None
    assert row is not None
    lsn = row[0]
    return lsn if isinstance(lsn, str) else format_lsn(int(lsn))


def _show_status(config: PipelineConfig) -> None:
    event_log = open_log(config.log)
    try:
        states = table_states(read_records(event_log, config.topic_prefix))
    finally:
        event_log.close()
    if not states:
        click.echo("no incremental snapshot recorded in the log")
        return
    for name, state in sorted(states.items()):
        where = f" where={state.where!r}" if state.where else ""
        reason = f" reason={state.reason!r}" if state.reason else ""
        click.echo(f"{name} {state.state} chunks={state.chunks} rows={state.rows} "
                   f"last_key={','.join(state.last_key or []) or '-'} "
                   f"chunk_size={state.chunk_size}{where} requested={state.requested_at} "
                   f"updated={state.updated_at}{reason}")
