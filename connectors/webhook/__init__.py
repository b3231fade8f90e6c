"""The webhook sink: signed HTTP POST batches (the sink itself comes later)."""

from connectors.registry import SinkSpec
from connectors.webhook.config import WebhookSinkConfig

SPEC = SinkSpec(name="webhook", config_model=WebhookSinkConfig, factory=None)

__all__ = ["SPEC", "WebhookSinkConfig"]
