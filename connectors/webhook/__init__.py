"""The webhook sink: signed HTTP POST batches (``sink``; body and signature in ``payload``)."""

from connectors.registry import SinkSpec
from connectors.webhook.config import WebhookSinkConfig
from connectors.webhook.payload import sign, signature_matches
from connectors.webhook.sink import WebhookSink

SPEC = SinkSpec(name="webhook", config_model=WebhookSinkConfig, factory=WebhookSink)

__all__ = ["SPEC", "WebhookSink", "WebhookSinkConfig", "sign", "signature_matches"]
