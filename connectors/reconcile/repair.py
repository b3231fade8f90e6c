"""``--repair``: differences go back through the normal pipeline, versioned like any write.

Rows whose record is missing, different, or present though the view filters the row out
are re-read by the running capture: one incremental snapshot request (``cdc snapshot``'s
WAL message) selecting exactly their keys, so the sinks rewrite them from the row as it
is then, with a newer version. Extras (records of no row) are deleted in the sink under
the current WAL position as their version, after the sink has caught up to that
position and still holds the old record: any later change of the key carries a version
at least as new, so a repair never overwrites a newer change.
"""

from __future__ import annotations

from collections.abc import Sequence

from cdc.capture.snapshot.command import emit_request
from cdc.capture.snapshot.incremental_log import read_records, table_states
from cdc.errors import SourceError
from cdc.log import Log
from connectors.contract import version_of

from .source import KeyText, TableSource, current_lsn
from .target import Target
from .walk import CatchUp

MAX_CHUNK = 5000


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
