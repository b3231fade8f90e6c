"""The security part of every Kafka client's configuration, and which of librdkafka's
errors at the first contact are refusals no retry can fix (and which setting they name)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError

from cdc.config.event_log import LogConfig
from cdc.log.kafka.access import refusal
from cdc.log.kafka.security import client_security

SECRET = "s3cret-never-shown"


def log_config(tmp_path: Path, **settings: Any) -> LogConfig:
    return LogConfig.model_validate({"backend": "kafka", "bootstrap_servers": "k:9093",
                                     **settings})


def test_plaintext_adds_nothing(tmp_path: Path) -> None:
    assert client_security(log_config(tmp_path)) == {}


def test_sasl_ssl_with_a_client_certificate(tmp_path: Path) -> None:
    for name in ("ca.pem", "client.crt", "client.key"):
        (tmp_path / name).write_text("pem")
    config = log_config(tmp_path, security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-256",
                        sasl_username="app", sasl_password=SECRET,
                        ssl_ca_location=str(tmp_path / "ca.pem"),
                        ssl_certificate_location=str(tmp_path / "client.crt"),
                        ssl_key_location=str(tmp_path / "client.key"),
                        ssl_key_password="key-pw", ssl_verify_hostname=False)
    assert client_security(config) == {
        "security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "app", "sasl.password": SECRET,
        "ssl.endpoint.identification.algorithm": "none",
        "ssl.ca.location": str(tmp_path / "ca.pem"),
        "ssl.certificate.location": str(tmp_path / "client.crt"),
        "ssl.key.location": str(tmp_path / "client.key"), "ssl.key.password": "key-pw"}
    assert SECRET not in repr(config)


def test_ssl_verifies_host_names_by_default(tmp_path: Path) -> None:
    assert client_security(log_config(tmp_path, security_protocol="SSL")) == {
        "security.protocol": "ssl", "ssl.endpoint.identification.algorithm": "https"}


CLIENT = {"security.protocol": "sasl_ssl", "sasl.mechanism": "SCRAM-SHA-512",
          "sasl.username": "app", "sasl.password": SECRET}


@pytest.mark.parametrize(("code", "text", "setting", "words"), [
    (KafkaError._AUTHENTICATION, "sasl_ssl://k:9093/bootstrap: SASL authentication error: "
     "Authentication failed during authentication due to invalid credentials with SASL "
     "mechanism SCRAM-SHA-512", "log.sasl_password", "refused the login (user 'app'"),
    (KafkaError._AUTHENTICATION, "SASL PLAIN mechanism handshake failed: Broker: Request "
     "not valid in current SASL state: broker's supported mechanisms:  (after 2ms in state "
     "AUTH_HANDSHAKE)", "log.security_protocol", "offers no SASL login"),
    (KafkaError._AUTHENTICATION, "SASL SCRAM-SHA-512 mechanism handshake failed: Broker: "
     "Unsupported SASL mechanism: broker's supported mechanisms: PLAIN (after 2ms)",
     "log.sasl_mechanism", "(it offers PLAIN)"),
    (KafkaError._SSL, "SSL handshake failed: error:0A000086:SSL routines::certificate verify "
     "failed: broker certificate could not be verified (after 5ms in state SSL_HANDSHAKE)",
     "log.ssl_ca_location", "did not verify"),
    (KafkaError._TRANSPORT, "SSL handshake failed: Disconnected: SSL connection closed by "
     "peer: connecting to a PLAINTEXT broker listener? (after 6ms)", "log.security_protocol",
     "does not speak TLS"),
])
def test_refusals_name_the_setting(code: int, text: str, setting: str, words: str) -> None:
    found = refusal(code, text, CLIENT)
    assert found is not None and found[0] == setting and words in found[1]
    assert SECRET not in found[1]


@pytest.mark.parametrize(("code", "text"), [
    (KafkaError._TRANSPORT, "Connect to ipv4#127.0.0.1:1 failed: Connection refused"),
    (KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"),
    (KafkaError._TIMED_OUT, "Timed out"),
])
def test_outages_are_not_refusals(code: int, text: str) -> None:
    assert refusal(code, text, CLIENT) is None
