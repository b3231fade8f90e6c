"""The connector runtime: consumer groups, batching, retries, dead letters, metrics.

``ConnectorRunner`` runs one ``ConnectorConfig``; a sink only implements
:class:`connectors.contract.Sink`. The modules, in the order a batch meets them:
``collector`` (size/time batching), ``events`` (decode, coalesce), ``delivery`` (write,
isolate refused events), ``retry`` (backoff), ``dead_letter`` (the DLQ topic), ``worker``
(flush, then commit), ``runner`` (threads, lag); the metrics live in
``cdc.observability.connector_metrics``.
"""

from cdc.config.models import dead_letter_topic
from cdc.observability.connector_metrics import ConnectorMetrics, RuntimeMetrics

from .dead_letter import DeadLetter, DeadLetterWriter
from .errors import (
    ConnectorFailedError,
    RetriesExhaustedError,
    SinkNotRunnableError,
    StopRequested,
    WriteRefusedError,
)
from .events import coalesce, decode_event
from .retry import Retrier, RetryPolicy
from .runner import ConnectorRunner, RunnerOptions
from .sinks import build_sink

__all__ = [
    "ConnectorFailedError",
    "ConnectorMetrics",
    "ConnectorRunner",
    "DeadLetter",
    "DeadLetterWriter",
    "Retrier",
    "RetriesExhaustedError",
    "RetryPolicy",
    "RunnerOptions",
    "RuntimeMetrics",
    "SinkNotRunnableError",
    "StopRequested",
    "WriteRefusedError",
    "build_sink",
    "coalesce",
    "dead_letter_topic",
    "decode_event",
]
