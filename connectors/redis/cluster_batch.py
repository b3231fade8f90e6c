"""A batch on a Redis Cluster: a ``ScriptBatch`` per master, run pipelined.

Each row's version key and truncate marker are named into its key's hash slot
(``slots``), and the rows of every slot a master holds (as the client's slot map has it)
go into one ``ScriptBatch`` whose calls run ``scripts.BATCH_CLUSTER`` with their keys
passed undeclared, so a batch costs about one script call per master instead of one per
slot. When the map is out of date (a master failed over, a resharding moved a slot), a
call fails before it writes (``Script attempted to access a non local key``): the batch
fails as ``SinkUnavailableError``, the sink reads the slot map afresh, and its retry runs
``by_slot``: one call per slot with its keys declared, which redis-py's pipeline sends on
by ``MOVED`` and ``ASK`` (a slot being migrated).

The calls run in rounds: round ``n`` holds the ``n``-th call of every master (or slot),
sent as one pipeline (redis-py's ``ClusterPipeline`` sends each master its share at
once); rounds run one after the other, so the calls of a slot (and of a key) keep their
order whatever is redirected or retried. A batch of the usual size is one round. An error
that may pass (a failover, ``CLUSTERDOWN``, a lost connection) fails the whole batch as
``SinkUnavailableError``: the runtime retries it, and the versioned writes already made are
made again unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, NamedTuple

from redis.commands.core import Script
from redis.exceptions import NoScriptError, RedisClusterException, RedisError, ResponseError

from connectors.contract import Rejection, SinkEvent, SinkRejectedError, SinkUnavailableError

from .batch import CHUNK_BYTES, CHUNK_ROWS, Arg, ScriptBatch, rejections
from .errors import NOT_LOCAL, is_transient, unavailable
from .slots import VERSION_PREFIX, slot_marker, slot_of, tagged

Call = tuple[list[str], list[Arg], list[SinkEvent]]


class SlotsMovedError(SinkUnavailableError):
    """A master refused a call: a slot of its keys is no longer (all) there."""


class _Row(NamedTuple):
    event: SinkEvent
    key: str
    marker: str
    kind: str
    extra: Sequence[Arg]
    size: int
    slot: int


class ClusterRows:
    """The rows of one batch on a cluster (see the module docstring); ``row`` as
    ``ScriptBatch.row``. ``by_slot``: one call per slot (the retry after a slot moved)."""

    def __init__(self, ttls: tuple[int, int, int], *, chunk_rows: int = CHUNK_ROWS,
                 chunk_bytes: int = CHUNK_BYTES) -> None:
        """``chunk_rows``, ``chunk_bytes``: as ``ScriptBatch``'s, per call."""
        self._ttls = ttls
        self._chunk_rows = chunk_rows
        self._chunk_bytes = chunk_bytes
        self._rows: list[_Row] = []
        self.by_slot = False

    def row(self, event: SinkEvent, key: str, marker: str, kind: str,
            extra: Sequence[Arg] = (), size: int = 0) -> None:
        """Add the row of ``event``."""
        self._rows.append(_Row(event, key, marker, kind, extra, size, slot_of(key)))

    def __len__(self) -> int:
        return len(self._rows)

    def rounds(self, holder: Callable[[int], Hashable]) -> list[list[Call]]:
        """The calls, round by round: one call per ``holder`` of a slot in a round (its
        master, or the slot itself)."""
        batches: dict[Hashable, ScriptBatch] = {}
        for event, key, marker, kind, extra, size, slot in self._rows:
            target = holder(slot)
            batch = batches.get(target)
            if batch is None:
                batch = batches[target] = ScriptBatch(self._ttls, chunk_rows=self._chunk_rows,
                                                      chunk_bytes=self._chunk_bytes)
            batch.row(event, key, slot_marker(marker, slot), kind, extra, size,
                      tagged(VERSION_PREFIX, slot, key))  # KeyNames.version_key, slot known
        per_target = [batch.call_rows() for batch in batches.values()]
        depth = max(map(len, per_target), default=0)
        return [[calls[n] for calls in per_target if n < len(calls)] for n in range(depth)]

    def run(self, script: Script) -> list[Rejection]:
        """Run the rounds in order; the rows Redis refused (errors as ``ScriptBatch.run``).
        ``script`` is ``scripts.BATCH_CLUSTER`` on a ``RedisCluster``."""
        client = script.registered_client
        holder: Callable[[int], Hashable] = _same if self.by_slot else _master_of(client)
        rejected: list[Rejection] = []
        for calls in self.rounds(holder):
            for events, reply in zip((call[2] for call in calls),
                                     _pipelined(client, script, calls, self.by_slot),
                                     strict=True):
                rejected += rejections(events, reply)
        return rejected


def _same(slot: int) -> int:
    return slot


def _master_of(client: Any) -> Callable[[int], Hashable]:
    """The name of the master of a slot, by the client's slot map."""
    slots = client.nodes_manager.slots_cache

    def master(slot: int) -> str:
        nodes = slots.get(slot)
        if not nodes:
            raise SinkUnavailableError(f"Redis Cluster: no master holds slot {slot} "
                                       "(the cluster is down or being reconfigured)")
        return str(nodes[0].name)
    return master


def _pipelined(client: Any, script: Script, calls: list[Call], declared: bool) -> list[Any]:
    """The replies of ``calls``, sent as one cluster pipeline; the calls Redis had no
    script for (a new or restarted master) are sent again after loading it everywhere."""
    replies = _send(client, script.sha, calls, declared)
    lost = [n for n, reply in enumerate(replies) if isinstance(reply, NoScriptError)]
    if lost:
        try:
            client.script_load(script.script)  # on every master
        except (RedisError, RedisClusterException) as exc:
            raise unavailable(exc, "loading the batch script") from exc
        for n, reply in zip(lost, _send(client, script.sha, [calls[n] for n in lost],
                                        declared), strict=True):
            replies[n] = reply
    for reply, (_, _, events) in zip(replies, calls, strict=True):
        if isinstance(reply, ResponseError) and str(reply).startswith(NOT_LOCAL):
            raise SlotsMovedError(f"a master no longer holds a slot of {len(events)} rows "
                                  f"({str(reply)[:200]}); the slot map is read again")
        if isinstance(reply, RedisError | RedisClusterException):
            raise _refused(reply, len(events))
    return replies


def _send(client: Any, sha: str, calls: list[Call], declared: bool) -> list[Any]:
    """``EVALSHA`` of each call, pipelined (as a command: ``ClusterPipeline.evalsha``
    refuses), to the master of its last key's slot as the client's slot map has it
    (without a target redis-py asks a node for the keys of each ``EVALSHA``). Keys are
    ``declared`` (one slot: a redirected call is sent again by it) or passed at the head
    of the arguments (``scripts.BATCH_CLUSTER``)."""
    try:
        pipe = client.pipeline(transaction=False)  # a ClusterPipeline (untyped)
        for keys, args, _ in calls:
            head = (len(keys),) if declared else (0, len(keys))
            pipe.execute_command("EVALSHA", sha, *head, *keys, *args,
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
