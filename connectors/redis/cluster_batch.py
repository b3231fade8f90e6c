"""A batch on a Redis Cluster: a ``ScriptBatch`` per hash slot, run pipelined.

A script call must touch one slot, so each row goes to its slot's ``ScriptBatch`` with
its version key and truncate marker named into that slot (``slots``). The
calls run in rounds: round ``n`` holds the ``n``-th call of every slot, sent as one
pipeline (redis-py's ``ClusterPipeline`` sends each master its share at once and follows
``MOVED``/``ASK`` itself); rounds run one after the other, so the calls of a slot (and of
a key) keep their order whatever is redirected or retried. A batch of the usual size is
one round. An error that may pass (a failover, ``CLUSTERDOWN``, a lost connection)
fails the whole batch as ``SinkUnavailableError``: the runtime retries it, and the
versioned writes already made are made again unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.commands.core import Script
from redis.exceptions import NoScriptError, RedisClusterException, RedisError, ResponseError

from connectors.contract import Rejection, SinkEvent, SinkRejectedError

from .batch import Arg, ScriptBatch, rejections
from .errors import is_transient, unavailable
from .slots import VERSION_PREFIX, slot_marker, slot_of, tagged

Call = tuple[list[str], list[Arg], list[SinkEvent]]


class SlotBatches:
    """The rows of one batch on a cluster (see the module docstring); ``row`` as
    ``ScriptBatch.row``."""

    def __init__(self, ttls: tuple[int, int, int]) -> None:
        self._ttls = ttls
        self._slots: dict[int, ScriptBatch] = {}
        self._rows = 0

    def row(self, event: SinkEvent, key: str, marker: str, kind: str,
            extra: Sequence[Arg] = (), size: int = 0) -> None:
        """Add the row of ``event`` to its slot's batch."""
        slot = slot_of(key)
        batch = self._slots.get(slot)
        if batch is None:
            batch = self._slots[slot] = ScriptBatch(self._ttls)
        batch.row(event, key, slot_marker(marker, slot), kind, extra, size,
                  tagged(VERSION_PREFIX, slot, key))  # KeyNames.version_key, slot known
        self._rows += 1

    def __len__(self) -> int:
        return self._rows

    def rounds(self) -> list[list[Call]]:
        """The calls, round by round (one call per slot in a round)."""
        per_slot = [batch.call_rows() for batch in self._slots.values()]
        depth = max(map(len, per_slot), default=0)
        return [[calls[n] for calls in per_slot if n < len(calls)] for n in range(depth)]

    def run(self, script: Script) -> list[Rejection]:
        """Run the rounds in order; the rows Redis refused (errors as ``ScriptBatch.run``)."""
        client = script.registered_client
        rejected: list[Rejection] = []
        for calls in self.rounds():
            for events, reply in zip((call[2] for call in calls),
                                     _pipelined(client, script, calls), strict=True):
                rejected += rejections(events, reply)
        return rejected


def _pipelined(client: Any, script: Script, calls: list[Call]) -> list[Any]:
    """The replies of ``calls``, sent as one cluster pipeline; the calls Redis had no
    script for (a new or restarted master) are sent again after loading it everywhere."""
    replies = _send(client, script.sha, calls)
    lost = [n for n, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
    if lost:
        try:
            client.script_load(script.script)  # on every master
        except (RedisError, RedisClusterException) as exc:
            raise unavailable(exc, "loading the batch script") from exc
        for n, reply in zip(lost, _send(client, script.sha, [calls[n] for n in lost]),
                            strict=True):
            replies[n] = reply
    for reply, (_, _, events) in zip(replies, calls, strict=True):
        if isinstance(reply, RedisError | RedisClusterException):
            raise _refused(reply, len(events))
    return replies


def _send(client: Any, sha: str, calls: list[Call]) -> list[Any]:
    """``EVALSHA`` of each call, pipelined (as a command: ``ClusterPipeline.evalsha``
    refuses), to the master of its slot as the client's slot map has it: without a
    target redis-py asks a node for the keys of each ``EVALSHA`` (``COMMAND GETKEYS``, a
    round trip per call). A redirected call is sent again by its slot."""
    try:
        pipe = client.pipeline(transaction=False)  # a ClusterPipeline (untyped)
        for keys, args, _ in calls:
            pipe.execute_command("EVALSHA", sha, len(keys), *keys, *args,
                                 target_nodes=client.get_node_from_key(keys[-1]))
        return list(pipe.execute(raise_on_error=False))
    except (RedisError, RedisClusterException) as exc:
        raise unavailable(exc, f"writing {sum(len(c[2]) for c in calls)} rows") from exc


def _refused(exc: RedisError | RedisClusterException, rows: int) -> Exception:
    """The sink error for a call's error reply (as ``batch._call``)."""
    if isinstance(exc, ResponseError) and not is_transient(exc):
        return SinkRejectedError(f"Redis refused a call writing {rows} rows: "
                                 f"{str(exc)[:500]}")
    return unavailable(exc, f"writing {rows} rows")


