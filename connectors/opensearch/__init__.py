"""The OpenSearch sink: bulk indexing with external versions, through aliases.

The config model imports nothing but pydantic, so pipelines validate without the
``opensearch`` extra; the factory imports opensearch-py when a sink is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from connectors.contract import SinkContext
from connectors.opensearch.config import OpenSearchSinkConfig
from connectors.registry import SinkSpec

if TYPE_CHECKING:
    from connectors.opensearch.sink import OpenSearchSink


def create(config: OpenSearchSinkConfig, context: SinkContext) -> OpenSearchSink:
    """Build the sink of one worker (``SinkSpec.factory``); see ``sink.create``."""
    try:
        from connectors.opensearch import sink
    except ImportError as exc:
        raise ImportError("the opensearch sink needs opensearch-py: "
                          "pip install 'distributary[opensearch]'") from exc
    return sink.create(config, context)


SPEC = SinkSpec(name="opensearch", config_model=OpenSearchSinkConfig, factory=create)

__all__ = ["SPEC", "OpenSearchSinkConfig", "create"]
