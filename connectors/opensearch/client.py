"""The opensearch-py client the sink uses, and how it fails over between nodes.

Responses are parsed with orjson (bulk responses are the hot path's biggest parse).

Failover: opensearch-py's transport sends each request to the next live node of its
connection pool (round robin). A request that gets no answer — the node refused the
connection, dropped it, or (with several nodes) timed out — marks that node dead (left
out for ``dead_timeout``, then tried again) and is sent at once to another node, up to
once per other node (``max_retries``). Every sink write is versioned, so sending a bulk
request again after a node may have applied part of it changes nothing. An answer with a
status, 429 or 503 included, is never retried here and never marks a node dead: the
errors module sorts it, and the runtime retries transient ones with backoff. With one
node there is nobody to fail over to: a request is tried once and the runtime retries.
When every node is down, the request fails (``ConnectionError``, transient) and the
runtime retries it with backoff until a node answers; nothing is dead-lettered.
"""

from __future__ import annotations

from typing import Any, TypedDict

import orjson
from opensearchpy import OpenSearch
from opensearchpy.exceptions import SerializationError
from opensearchpy.serializer import JSONSerializer

from .config import OpenSearchSinkConfig

DEAD_TIMEOUT_S = 30.0
"""How long a node that did not answer is left out before it is tried again (doubling
while it keeps failing, as opensearch-py does)."""


class OrjsonSerializer(JSONSerializer):
    """``JSONSerializer`` whose ``loads`` is orjson's."""

    def loads(self, s: str) -> Any:
        try:
            return orjson.loads(s)
        except orjson.JSONDecodeError as exc:
            raise SerializationError(s, exc) from exc


class FailoverOptions(TypedDict):
    """The transport's retry settings (``OpenSearch(**options)``)."""

    max_retries: int
    retry_on_timeout: bool
    retry_on_status: tuple[int, ...]
    dead_timeout: float


def failover_options(nodes: int) -> FailoverOptions:
    """The transport settings for a cluster reached through ``nodes`` hosts: a request
    no node answers is sent to each other node once; answered requests are not retried."""
    return FailoverOptions(max_retries=max(nodes - 1, 0), retry_on_timeout=nodes > 1,
                           retry_on_status=(), dead_timeout=DEAD_TIMEOUT_S)


def make_client(config: OpenSearchSinkConfig) -> OpenSearch:
    """A client for the configured cluster (credentials kept out of the URLs); each node's
    connection pool keeps a connection for every bulk request in flight, and one more for
    the sink's other requests (urllib3 keeps one by default: with two bulk requests in
    flight it opened a new connection for every other request)."""
    auth = None
    if config.username is not None and config.password is not None:
        auth = (config.username, config.password.get_secret_value())
    return OpenSearch(hosts=list(config.hosts), http_auth=auth,
                      verify_certs=config.verify_certs,
                      ca_certs=str(config.ca_certs) if config.ca_certs else None,
                      timeout=config.request_timeout.total_seconds(),
                      serializer=OrjsonSerializer(), pool_maxsize=config.bulk_concurrency + 1,
                      **failover_options(len(config.hosts)))
