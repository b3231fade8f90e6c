"""Spark's Kafka source gets the ``log:`` section's security settings as ``kafka.*``
options (the Java client's names)."""

from __future__ import annotations

from pathlib import Path

from cdc.config.event_log import LogConfig
from spark_pipelines.kafka_options import kafka_security_options
from spark_pipelines.source import LogSource


def test_sasl_ssl_options(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("pem")
    log = LogConfig.model_validate({
        "backend": "kafka", "bootstrap_servers": "k:9093", "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "app",
        "sasl_password": 'pa"ss', "ssl_ca_location": str(ca), "ssl_verify_hostname": False})
    source = LogSource("kafka", "app", None, ("k:9093",), {}, log)
    assert source.kafka_options() == {
        "kafka.bootstrap.servers": "k:9093",
        "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule "
                                  'required username="app" password="pa\\"ss";',
        "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": str(ca),
        "kafka.ssl.endpoint.identification.algorithm": ""}


def test_plain_login_and_plaintext() -> None:
    log = LogConfig.model_validate({
        "backend": "kafka", "bootstrap_servers": "k:9092",
        "security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN",
        "sasl_username": "app", "sasl_password": "pw"})
    options = kafka_security_options(log)
    assert options["kafka.sasl.jaas.config"].startswith(
        "org.apache.kafka.common.security.plain.PlainLoginModule required")
    assert "kafka.ssl.truststore.location" not in options
    assert kafka_security_options(LogConfig.model_validate(
        {"backend": "kafka", "bootstrap_servers": "k:9092"})) == {}
    assert LogSource("kafka", "app", None, ("k:9092",)).kafka_options() == {
        "kafka.bootstrap.servers": "k:9092"}
