"""The opensearch-py client the sink uses: no retries of its own (the runtime retries),
and responses parsed with orjson (bulk responses are the hot path's biggest parse)."""

from __future__ import annotations

from typing import Any

import orjson
from opensearchpy import OpenSearch
from opensearchpy.exceptions import SerializationError
from opensearchpy.serializer import JSONSerializer

from .config import OpenSearchSinkConfig


class OrjsonSerializer(JSONSerializer):
    """``JSONSerializer`` whose ``loads`` is orjson's."""

    def loads(self, s: str) -> Any:
        try:
            return orjson.loads(s)
        except orjson.JSONDecodeError as exc:
            raise SerializationError(s, exc) from exc


def make_client(config: OpenSearchSinkConfig) -> OpenSearch:
    """A client for the configured cluster (credentials kept out of the URLs)."""
    auth = None
    if config.username is not None and config.password is not None:
        auth = (config.username, config.password.get_secret_value())
    return OpenSearch(hosts=list(config.hosts), http_auth=auth,
                      verify_certs=config.verify_certs,
                      ca_certs=str(config.ca_certs) if config.ca_certs else None,
                      timeout=config.request_timeout.total_seconds(),
                      max_retries=0, retry_on_timeout=False, serializer=OrjsonSerializer())
