"""``cdc doctor`` on the Kafka backend: can the log take a record of ``log.max_record_bytes``?

Topics the capture creates carry their own ``max.message.bytes``; the broker's
``message.max.bytes`` is what topics created any other way get, and the capture raises
the limit of existing topics below it when it first writes to them.
"""

from __future__ import annotations

from cdc.config import PipelineConfig
from cdc.errors import ConfigError, LogError

from .findings import Finding

SHOWN = 10


def kafka_limit_findings(config: PipelineConfig) -> list[Finding]:
    """The broker's and the existing topics' record size limits against the setting."""
    if config.log.backend != "kafka":
        return []
    try:
        from confluent_kafka import KafkaException

        from cdc.log.kafka import KafkaAdmin
        from cdc.log.kafka.access import check_access
        from cdc.log.kafka.admin import Replication
        from cdc.log.kafka.security import client_security
        from cdc.log.kafka.settings import message_bytes
    except ImportError as exc:
        return [Finding("error", "kafka", str(exc), "pip install 'distributary[kafka]'")]
    setting = config.log.max_record_bytes
    needed = message_bytes(setting)
    servers = ",".join(config.log.bootstrap_servers)
    client = {"bootstrap.servers": servers, **client_security(config.log)}
    try:
        check_access(client, servers)
    except ConfigError as exc:  # a login, certificate or protocol the cluster refused
        return [Finding("error", "kafka", str(exc), "fix the setting it names")]
    admin = KafkaAdmin(client, config.log.partitions, setting,
                       Replication(config.log.replication_factor,
                                   config.log.min_insync_replicas))
    try:
        broker = admin.broker_limit()
        prefix = f"{config.topic_prefix}."
        topics = [t for t in admin.topics() if t.startswith(prefix)]
        limits = admin.topic_limits(topics)
        factor, _ = admin.replication()
        replicas = admin.replica_counts(topics)
    except (KafkaException, LogError) as exc:
        return [Finding("error", "kafka", f"cannot read the broker's settings: {exc}",
                        "check log.bootstrap_servers")]
    findings = []
    if broker is not None and broker < needed:
        findings.append(Finding(
            "warn", "kafka message.max.bytes",
            f"the broker's message.max.bytes is {broker} bytes, below log.max_record_bytes "
            f"({setting}): topics the capture creates carry max.message.bytes={needed}, "
            "but topics created by other tools (or auto-created) refuse larger records",
            f"set message.max.bytes={needed} in the broker's server.properties, or lower "
            "log.max_record_bytes"))
    else:
        findings.append(Finding("ok", "kafka message.max.bytes", f"broker: {broker} bytes"))
    low = sorted(t for t, limit in limits.items() if limit < needed)
    if low:
        shown = ", ".join(low[:SHOWN]) + (f" … and {len(low) - SHOWN} more"
                                          if len(low) > SHOWN else "")
        findings.append(Finding(
            "warn", "kafka max.message.bytes",
            f"{len(low)} topics take records below log.max_record_bytes ({setting}): "
            f"{shown}; the capture raises them when it next writes to them",
            f"or now: kafka-configs --alter --entity-type topics --entity-name <topic> "
            f"--add-config max.message.bytes={needed}"))
    elif topics:
        findings.append(Finding("ok", "kafka max.message.bytes",
                                f"{len(topics)} topics take records of {setting} bytes"))
    return findings + _replication_findings(replicas, factor)


def _replication_findings(replicas: dict[str, int], factor: int) -> list[Finding]:
    """Topics with fewer replicas than the pipeline's replication factor."""
    few = sorted(t for t, count in replicas.items() if count < factor)
    if not few:
        return [Finding("ok", "kafka replication", f"{len(replicas)} topics have "
                        f"{factor} replicas or more")]
    shown = ", ".join(few[:SHOWN]) + (f" … and {len(few) - SHOWN} more"
                                      if len(few) > SHOWN else "")
    return [Finding("warn", "kafka replication",
                    f"{len(few)} topics have fewer replicas than the replication factor "
                    f"({factor}): {shown}; losing one broker may lose or stop them",
                    "add replicas with kafka-reassign-partitions, or set "
                    "log.replication_factor to what the cluster has")]
