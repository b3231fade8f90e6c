"""The Kafka log over SASL_SSL on a real broker (the launcher's, PLAIN and SCRAM users, a
PEM certificate): the right settings work end to end; a login, certificate or protocol
the broker refuses at the first contact is a configuration error naming the ``log.*``
setting (``cdc capture``/``cdc connect``/``cdc run``: one line, exit status 2, no
password shown); a password that turns wrong after that is retried, and the producer says
why meanwhile (the capture's reason on ``/healthz``)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._scram import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from cdc.config.event_log import LogConfig
from cdc.errors import ConfigError
from cdc.log.kafka import KafkaLog
from cdc.log.kafka.consumer import KafkaConsumer
from cdc.log.kafka.producer import KafkaProducer
from cdc.log.open import open_log
from cdc.log.records import Record, StartAt
from compose.launcher.base import free_port
from compose.launcher.kafka import KafkaServer
from compose.launcher.kafka_security import ListenerSecurity

from .certs import CertificateAuthority
from .cli import cdc

pytestmark = pytest.mark.integration

USER, PASSWORD = "capture", "kafka-Secret-8812"
ADMIN, ADMIN_PASSWORD = "admin", "admin-Secret-1203"
WRONG = "not-the-Kafka-Secret-4455"


@dataclass(frozen=True)
class Broker:
    server: KafkaServer
    issuer: CertificateAuthority
    stranger: CertificateAuthority
    directory: Path


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """A broker whose client listener is SASL_SSL (PLAIN: admin; SCRAM: capture) with a
    certificate of ``issuer``; SASL clients log in again every 2 s."""
    directory = tmp_path_factory.mktemp("kafka-tls")
    issuer = CertificateAuthority.create(directory, "issuer")
    stranger = CertificateAuthority.create(directory, "stranger")
    cert, key = issuer.issue("kafka", "kafka", server=True)
    security = ListenerSecurity("SASL_SSL", plain_users={ADMIN: ADMIN_PASSWORD},
                                scram_users={USER: PASSWORD}, certificate=cert, key=key,
                                reauthenticate_ms=2000)
    with KafkaServer(security=security) as server:
        yield Broker(server, issuer, stranger, directory)


def settings(broker: Broker, **changes: Any) -> dict[str, Any]:
    return {"backend": "kafka", "bootstrap_servers": broker.server.bootstrap_servers,
            "security_protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": USER, "sasl_password": PASSWORD,
            "ssl_ca_location": str(broker.issuer.cert), **changes}


def refused(config: dict[str, Any]) -> str:
    """The one problem ``open_log`` raised; no password in it."""
    with pytest.raises(ConfigError) as raised:
        open_log(LogConfig.model_validate(config)).close()
    assert len(raised.value.problems) == 1
    text = str(raised.value)
    for secret in (PASSWORD, WRONG, ADMIN_PASSWORD):
        assert secret not in text
    return text


def test_sasl_ssl_round_trip(broker: Broker) -> None:
    for mechanism, user, password in (("SCRAM-SHA-512", USER, PASSWORD),
                                      ("SCRAM-SHA-256", USER, PASSWORD),
                                      ("PLAIN", ADMIN, ADMIN_PASSWORD)):
        topic = f"secure.{mechanism.lower().replace('-', '_')}"
        log = open_log(LogConfig.model_validate(settings(
            broker, sasl_mechanism=mechanism, sasl_username=user, sasl_password=password,
            partitions=1)))
        try:
            assert isinstance(log, KafkaLog)
            log.producer().append([Record(topic, b'"k%d"' % i, b'{"n": %d}' % i)
                                   for i in range(5)])
            consumer = log.consumer(f"group-{topic}", topics=[topic], start=StartAt.earliest())
            values: list[bytes] = []
            deadline = time.monotonic() + 60
            while len(values) < 5 and time.monotonic() < deadline:
                values += [m.value for m in consumer.poll(timeout=1.0)]
            consumer.commit()
            consumer.close()
            assert values == [b'{"n": %d}' % i for i in range(5)]
            assert [m.value for m in log.read_to_end(topic)] == values
        finally:
            log.close()


def test_a_wrong_password_is_a_config_error(broker: Broker) -> None:
    port = broker.server.port
    text = refused(settings(broker, sasl_password=WRONG))
    assert text.startswith(f"log.sasl_password: Kafka at 127.0.0.1:{port} refused the login")
    text = refused(settings(broker, sasl_mechanism="PLAIN", sasl_username=ADMIN,
                            sasl_password=WRONG))
    assert text.startswith("log.sasl_password:")


def test_a_certificate_that_does_not_verify_is_a_config_error(broker: Broker) -> None:
    text = refused(settings(broker, ssl_ca_location=str(broker.stranger.cert)))
    assert text.startswith("log.ssl_ca_location: Kafka at 127.0.0.1:")
    assert "did not verify" in text


def test_an_expired_ca_certificate_is_a_config_error(broker: Broker) -> None:
    text = refused(settings(broker, ssl_ca_location=str(broker.issuer.expired())))
    assert text.startswith("log.ssl_ca_location: Kafka at 127.0.0.1:"), text
    assert "did not verify" in text


def test_a_certificate_for_another_host_is_a_config_error(broker: Broker) -> None:
    cert, key = broker.issuer.issue("elsewhere", "elsewhere", server=True,
                                    alt_names="DNS:kafka.elsewhere.invalid")
    security = ListenerSecurity("SASL_SSL", scram_users={USER: PASSWORD}, certificate=cert,
                                key=key)
    with KafkaServer(security=security) as server:
        config = settings(broker, bootstrap_servers=server.bootstrap_servers)
        text = refused(config)
        assert text.startswith("log.ssl_verify_hostname: Kafka at 127.0.0.1:"), text
        open_log(LogConfig.model_validate({**config, "ssl_verify_hostname": False})).close()


def test_the_wrong_protocol_is_a_config_error(broker: Broker) -> None:
    plaintext = refused({"backend": "kafka",
                         "bootstrap_servers": broker.server.bootstrap_servers})
    assert plaintext.startswith("log.security_protocol:") and "expects TLS" in plaintext
    tls = refused(settings(broker, bootstrap_servers=broker.server.internal_servers))
    assert tls.startswith("log.security_protocol:") and "does not speak TLS" in tls


def test_an_unreachable_kafka_is_left_to_the_retries() -> None:
    started = time.monotonic()
    log = open_log(LogConfig.model_validate({"backend": "kafka",
                                             "bootstrap_servers": f"127.0.0.1:{free_port()}"}))
    log.close()
    assert time.monotonic() - started < 10


def pipeline(tmp_path: Path, broker: Broker) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(f"""
source:
  dsn: postgresql://app@127.0.0.1:{free_port()}/app
  slot: s1
  publication: p1
log:
  backend: kafka
  bootstrap_servers: ["{broker.server.bootstrap_servers}"]
  security_protocol: SASL_SSL
  sasl_mechanism: SCRAM-SHA-512
  sasl_username: {USER}
  sasl_password: {WRONG}
  ssl_ca_location: {broker.issuer.cert}
connectors:
  - name: hook
    type: webhook
    topics: [s1.public.orders]
    config:
      url: http://127.0.0.1:{free_port()}/hook
""")
    return path


def test_commands_stop_with_one_line_and_status_2(broker: Broker, tmp_path: Path) -> None:
    config = str(pipeline(tmp_path, broker))
    expected = (f"log.sasl_password: Kafka at {broker.server.bootstrap_servers} refused the "
                "login")
    for command in ("capture", "connect"):
        run = cdc(command, "-c", config, timeout=120)
        assert run.returncode == 2, run.output
        assert WRONG not in run.output and PASSWORD not in run.output
        lines = run.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"Error: {expected}"), run.output
    run = cdc("run", "-c", config, timeout=120)  # the supervisor stops on its child's error
    assert run.returncode == 2, run.output
    assert expected in run.stderr and WRONG not in run.output and PASSWORD not in run.output


def set_password(broker: Broker, password: str) -> None:
    """Change the SCRAM-SHA-512 credential of ``USER`` through the PLAINTEXT listener."""
    admin: Any = AdminClient({"bootstrap.servers": broker.server.internal_servers})
    upsert = UserScramCredentialUpsertion(
        USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), password.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)


def test_a_password_that_turns_wrong_mid_run_is_retried(broker: Broker) -> None:
    topic = "secure.rotated"
    log = open_log(LogConfig.model_validate(settings(broker, partitions=1)))
    assert isinstance(log, KafkaLog)
    producer = log.producer()
    assert isinstance(producer, KafkaProducer)
    done = threading.Event()
    failure: list[BaseException] = []

    def append() -> None:
        try:
            producer.append([Record(topic, b'"late"', b'{"n": 2}')])
        except BaseException as exc:  # reported by the test
            failure.append(exc)
        done.set()

    try:
        producer.append([Record(topic, b'"early"', b'{"n": 1}')])
        assert producer.problem is None
        set_password(broker, WRONG)
        time.sleep(6)  # every connection has had to log in again, and failed
        writer = threading.Thread(target=append, daemon=True)
        writer.start()
        assert not done.wait(8), failure  # retried, not failed
        problem = producer.problem  # what /healthz shows as the capture's reason
        assert problem is not None and "Authentication failed" in problem, problem
        assert WRONG not in problem and PASSWORD not in problem
        set_password(broker, PASSWORD)
        assert done.wait(90) and not failure, failure
        assert producer.problem is None, "cleared once the append went through"
        assert [m.value for m in log.read_to_end(topic)] == [b'{"n": 1}', b'{"n": 2}']
    finally:
        set_password(broker, PASSWORD)
        log.close()


def test_a_consumer_whose_password_turns_wrong_waits_and_reads_on(broker: Broker) -> None:
    topic = "secure.read_on"
    log = open_log(LogConfig.model_validate(settings(broker, partitions=1)))
    try:
        log.producer().append([Record(topic, b'"early"', b'{"n": 1}')])
        consumer = log.consumer("readers", topics=[topic], start=StartAt.earliest())
        values: list[bytes] = []
        deadline = time.monotonic() + 60
        while not values and time.monotonic() < deadline:
            values += [m.value for m in consumer.poll(timeout=1.0)]
        consumer.commit()
        assert isinstance(consumer, KafkaConsumer) and consumer.problem is None
        set_password(broker, WRONG)
        try:
            time.sleep(6)  # every connection has had to log in again, and failed
            for _ in range(8):  # polls meanwhile: nothing, and no error
                values += [m.value for m in consumer.poll(timeout=1.0)]
            problem = consumer.problem  # what /healthz shows as the connector's reason
            assert problem is not None and "Authentication failed" in problem, problem
            assert WRONG not in problem and PASSWORD not in problem
        finally:
            set_password(broker, PASSWORD)
        log.producer().append([Record(topic, b'"late"', b'{"n": 2}')])
        deadline = time.monotonic() + 90
        while len(values) < 2 and time.monotonic() < deadline:
            values += [m.value for m in consumer.poll(timeout=1.0)]
        assert consumer.problem is None, "cleared once records came again"
        consumer.commit()
        consumer.close()
        assert values == [b'{"n": 1}', b'{"n": 2}']
    finally:
        log.close()
