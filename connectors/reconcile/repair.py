"""``--repair``: differences go back through the normal pipeline, versioned like any write.

Rows whose record is missing, different, or present though the view filters the row out
are re-read by the running capture: one incremental snapshot request (``cdc snapshot``'s
WAL message) selecting exactly their keys, so the sinks rewrite them from the row as it
is then, with a newer version. Extras (records of no row) are deleted in the sink under
the current WAL position as their version, after the sink has caught up to that
position and still holds the old record: any later change of the key carries a version
at least as new, so a repair never overwrites a newer change.

``wait_repaired`` then waits until the capture has recorded the snapshot as completed on
the snapshots topic and every connector has consumed what it wrote, so a check right
after the repair finds the sinks repaired.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from cdc.capture.lsn import parse_lsn
from cdc.capture.snapshot.command import emit_request
from cdc.capture.snapshot.incremental_log import TableSnapshot, read_records, table_states
from cdc.errors import SourceError
from cdc.log import Log
from connectors.contract import version_of

from .catchup import CatchUpTimeoutError
from .source import KeyText, TableSource, current_lsn
from .target import Target
from .walk import CatchUp

MAX_CHUNK = 5000
POLL_S = 0.2


def request_snapshot(source: TableSource, keys: Sequence[KeyText], event_log: Log,
                     topic_prefix: str) -> str:
    """Ask the capture to read ``keys`` of the table again; the request's WAL position.

    Refused (``SourceError``) while another snapshot of the table is running: a new
    request would restart it.
    """
    state = table_states(read_records(event_log, topic_prefix)).get(source.name)
    if state is not None and state.active:
        raise SourceError(f"{source.name}: a snapshot of it is {state.state}; run "
                          "reconcile --repair again once it completed (cdc snapshot --status)")
    content = {"action": "snapshot", "table": source.name, "where": source.where_keys(keys),
               "chunk": max(1, min(len(keys), MAX_CHUNK))}
    return emit_request(source.conn, content)


def delete_extras(source: TableSource, target: Target, ids: Sequence[str], older_than: int,
                  catch_up: CatchUp) -> int:
    """Delete the records of ``ids`` still older than ``older_than`` (see the module
    docstring); how many were deleted."""
    lsn = current_lsn(source.conn)
    catch_up(lsn)
    version = version_of(lsn, 0)
    held = target.versions(list(ids))
    deleted = 0
    for sink_id, stored in sorted(held.items()):
        if (stored is None or stored < older_than) and target.delete(sink_id, version):
            deleted += 1
    return deleted


def repair_state(event_log: Log, prefix: str, table: str,
                 requested_after: int) -> TableSnapshot | None:
    """The state of ``table``'s snapshot requested at or after WAL ``requested_after``
    (``None`` while the capture has not recorded the request)."""
    state = table_states(read_records(event_log, prefix)).get(table)
    if state is None or parse_lsn(state.request_lsn) < requested_after:
        return None
    return state


def wait_repaired(state_now: Callable[[], TableSnapshot | None], table: str,
                  catch_up: Callable[[], None], timeout_s: float,
                  clock: Callable[[], float] = time.monotonic,
                  sleep: Callable[[float], None] = time.sleep) -> None:
    """Until the snapshot ``state_now`` reports has completed, then ``catch_up`` (the
    connectors consume what it wrote). ``SourceError`` when it was cancelled or failed,
    ``CatchUpTimeoutError`` when it has not completed within ``timeout_s``."""
    deadline = clock() + timeout_s
    while True:
        state = state_now()
        if state is not None and state.state == "completed":
            catch_up()
            return
        if state is not None and not state.active:
            raise SourceError(f"the repair of {table} did not land: its incremental snapshot "
                              f"was {state.state}" + (f" ({state.reason})" if state.reason
                                                      else ""))
        if clock() > deadline:
            where = "not yet recorded by the capture" if state is None else (
                f"{state.state}, {state.rows} rows read")
            raise CatchUpTimeoutError(
                f"the repair of {table} has not landed within {timeout_s:g}s (its incremental "
                f"snapshot is {where}); check again once cdc snapshot --status shows it "
                "completed (--timeout waits longer)")
        sleep(POLL_S)

