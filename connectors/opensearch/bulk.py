"""Bulk requests: versioned actions encoded once with orjson, sent in size-bounded chunks.

Every action carries ``version_type=external_gte`` and the event's version, so a stale or
replayed write is a no-op (409) and retrying a whole chunk is harmless. Index actions set
``require_alias``: a write never auto-creates an index where the alias should be.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Executor, wait
from typing import Any, NamedTuple

import orjson
from opensearchpy import OpenSearch
from opensearchpy.exceptions import TransportError

from connectors.contract import Rejection, SinkEvent, SinkUnavailableError

from .errors import ItemOutcome, item_outcome, status_of, translate

RESPONSE_FILTER = "errors,items.*.status,items.*.error.type,items.*.error.reason"
MIN_SPLIT = 100  # the fewest actions a request of a batch split among several carries

# The action lines, as orjson.dumps writes the headers' dicts (same members, same order),
# filled with the JSON of the alias and the id: no dict to build and encode per action.
_INDEX_LINES = (b'{"index":{"_index":%b,"_id":%b,"version":%d,"version_type":"external_gte",'
                b'"require_alias":true}}\n%b\n')
_DELETE_LINE = b'{"delete":{"_index":%b,"_id":%b,"version":%d,"version_type":"external_gte"}}\n'


class BulkAction(NamedTuple):
    """One encoded action (and its document), with the event it comes from (a named tuple:
    one is made per event)."""

    event: SinkEvent
    kind: str  # index | delete
    payload: bytes


def index_action(event: SinkEvent, alias: str, doc_id: str, document: dict[str, Any]) -> BulkAction:
    """An external-versioned index of ``document``."""
    payload = _INDEX_LINES % (orjson.dumps(alias), orjson.dumps(doc_id), event.version,
                              orjson.dumps(document))
    return BulkAction(event, "index", payload)


def delete_action(event: SinkEvent, alias: str, doc_id: str) -> BulkAction:
    """An external-versioned delete (it leaves a tombstone with the version)."""
    payload = _DELETE_LINE % (orjson.dumps(alias), orjson.dumps(doc_id), event.version)
    return BulkAction(event, "delete", payload)


def send(client: OpenSearch, actions: Sequence[BulkAction], max_actions: int,
         max_bytes: int, sending: Executor | None = None,
         concurrency: int = 1) -> list[Rejection]:
    """Send ``actions`` (one request unless they exceed the bounds); the rejected events.
    With ``sending`` (an executor of ``concurrency`` threads), up to ``concurrency``
    requests at once, a batch of at least ``2 * MIN_SPLIT`` actions split among them: a
    shard indexes one request's items on one thread, so requests in flight together use
    more of the cluster's cores. Every action is versioned, so the order the requests
    are applied in changes nothing.

    Raises ``SinkUnavailableError`` when any item (or request) may succeed later (once
    every request sent has ended).
    """
    if sending is not None and concurrency > 1 and len(actions) >= 2 * MIN_SPLIT:
        parts = min(concurrency, len(actions) // MIN_SPLIT)
        each = -(-len(actions) // parts)
        chunks = chunked(actions, min(max_actions, each), max_bytes)
    else:
        chunks = chunked(actions, max_actions, max_bytes)
    if sending is None or len(chunks) < 2:
        outcomes = [_send_chunk(client, chunk) for chunk in chunks]
    else:
        requests = [sending.submit(_send_chunk, client, chunk) for chunk in chunks]
        wait(requests)  # none left in flight, whatever failed: a retry never overlaps them
        outcomes = [request.result() for request in requests]
    rejected: list[Rejection] = []
    retry: str | None = None
    for chunk_rejected, chunk_retry in outcomes:
        rejected.extend(chunk_rejected)
        retry = retry or chunk_retry
    if retry is not None:
        raise SinkUnavailableError(f"OpenSearch asked to retry: {retry}")
    return rejected


def chunked(actions: Sequence[BulkAction], max_actions: int,
            max_bytes: int) -> list[list[BulkAction]]:
    """``actions`` in order, cut into requests of at most ``max_actions`` and ``max_bytes``
    (an action larger than ``max_bytes`` goes alone)."""
    if len(actions) <= max_actions and sum(len(a.payload) for a in actions) <= max_bytes:
        return [list(actions)] if actions else []  # the usual batch: one request
    chunks: list[list[BulkAction]] = []
    current: list[BulkAction] = []
    size = 0
    for action in actions:
        if current and (len(current) >= max_actions or size + len(action.payload) > max_bytes):
            chunks.append(current)
            current, size = [], 0
        current.append(action)
        size += len(action.payload)
    if current:
        chunks.append(current)
    return chunks


def _send_chunk(client: OpenSearch, chunk: list[BulkAction]) -> tuple[list[Rejection], str | None]:
    try:
        response = client.bulk(body=b"".join(a.payload for a in chunk),
                               filter_path=RESPONSE_FILTER)
    except TransportError as exc:
        if status_of(exc) == 413:
            return _split_too_large(client, chunk)
        failure = translate(exc, f"sending a bulk request of {len(chunk)} actions")
        if isinstance(failure, SinkUnavailableError):
            raise failure from exc
        return [Rejection(a.event, str(failure)) for a in chunk], None
    if not response.get("errors"):
        return [], None
    rejected: list[Rejection] = []
    retry: str | None = None
    for action, item in zip(chunk, response["items"], strict=True):
        answer = item[action.kind]
        error = answer.get("error") or {}
        outcome = item_outcome(action.kind, answer["status"], error.get("type"))
        if outcome is ItemOutcome.REJECT:
            rejected.append(Rejection(action.event, f"OpenSearch rejected the {action.kind}: "
                                      f"HTTP {answer['status']} {error.get('type')}: "
                                      f"{error.get('reason')}"))
        elif outcome is ItemOutcome.RETRY and retry is None:
            retry = f"HTTP {answer['status']} {error.get('type')}"
    return rejected, retry


def _split_too_large(client: OpenSearch,
                     chunk: list[BulkAction]) -> tuple[list[Rejection], str | None]:
    if len(chunk) == 1:
        return [Rejection(chunk[0].event, "OpenSearch refused the document as too large "
                          "(HTTP 413: over http.max_content_length)")], None
    half = len(chunk) // 2
    first_rejected, first_retry = _send_chunk(client, chunk[:half])
    second_rejected, second_retry = _send_chunk(client, chunk[half:])
    return first_rejected + second_rejected, first_retry or second_retry
