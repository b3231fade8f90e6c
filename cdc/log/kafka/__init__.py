"""The Kafka backend: the log contract on a Kafka cluster (needs the ``kafka`` extra)."""

try:
    import confluent_kafka  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError("the kafka log backend needs confluent-kafka: "
                      "pip install 'distributary[kafka]'") from exc

from .admin import KafkaAdmin
from .consumer import KafkaConsumer
from .log import KafkaLog
from .producer import KafkaProducer

__all__ = ["KafkaAdmin", "KafkaConsumer", "KafkaLog", "KafkaProducer"]
