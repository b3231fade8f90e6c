"""The OpenSearch sink: bulk indexing with external versions (the sink itself comes later)."""

from connectors.opensearch.config import OpenSearchSinkConfig
from connectors.registry import SinkSpec

SPEC = SinkSpec(name="opensearch", config_model=OpenSearchSinkConfig, factory=None)

__all__ = ["SPEC", "OpenSearchSinkConfig"]
