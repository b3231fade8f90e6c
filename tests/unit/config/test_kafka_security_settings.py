"""The ``log:`` section's Kafka security settings: contradictions are reported on the
field to change, with the fix, and never with a password."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cdc.config import PipelineConfig
from tests.unit.config.conftest import LoadProblems, WriteConfig, problem_at, variant

FILE_LOG = "  backend: file\n  path: ./.data/log"
KAFKA = "  backend: kafka\n  bootstrap_servers: [k:9093]\n"
SECRET = "s3cret-never-shown"


def kafka(settings: str) -> str:
    return variant(FILE_LOG, KAFKA + settings)


@pytest.mark.parametrize(("settings", "path", "words"), [
    ("  security_protocol: SASL_SSL", "log.sasl_mechanism",
     "required when security_protocol is SASL_SSL; expected PLAIN, SCRAM-SHA-256 or "
     "SCRAM-SHA-512"),
    ("  security_protocol: SASL_PLAINTEXT\n  sasl_mechanism: PLAIN", "log.sasl_password",
     "required when security_protocol is SASL_PLAINTEXT"),
    ("  security_protocol: SSL\n  sasl_username: app", "log.sasl_username",
     "only used when security_protocol is SASL_PLAINTEXT or SASL_SSL (it is SSL); remove it "
     "or set security_protocol: SASL_SSL"),
    ("  sasl_mechanism: PLAIN\n", "log.sasl_mechanism", "(it is PLAINTEXT)"),
    ("  security_protocol: SASL_PLAINTEXT\n  sasl_mechanism: PLAIN\n  sasl_username: a\n"
     "  sasl_password: b\n  ssl_verify_hostname: false", "log.ssl_verify_hostname",
     "only used when security_protocol is SSL or SASL_SSL (it is SASL_PLAINTEXT)"),
    ("  security_protocol: SSL\n  ssl_ca_location: /no/such/ca.pem", "log.ssl_ca_location",
     "no such file; expected a PEM file"),
    ("  security_protocol: KERBEROS", "log.security_protocol", "SASL_SSL"),
    ("  security_protocol: SASL_SSL\n  sasl_mechanism: GSSAPI", "log.sasl_mechanism",
     "SCRAM-SHA-512"),
])
def test_contradictions_name_the_field_and_the_fix(load_problems: LoadProblems, settings: str,
                                                   path: str, words: str) -> None:
    assert words in problem_at(load_problems(kafka(settings)), path)


def test_a_file_log_refuses_kafka_security_settings(load_problems: LoadProblems) -> None:
    problems = load_problems(variant(FILE_LOG, FILE_LOG + "\n  security_protocol: SSL\n"
                                     f"  sasl_password: {SECRET}"))
    assert "only used when backend is 'kafka'" in problem_at(problems, "log.security_protocol")
    assert "only used when backend is 'kafka'" in problem_at(problems, "log.sasl_password")
    assert SECRET not in "\n".join(problems)


def test_a_client_certificate_needs_its_key(load_problems: LoadProblems,
                                            tmp_path: Path) -> None:
    cert = tmp_path / "client.crt"
    cert.write_text("pem")
    problems = load_problems(kafka(f"  security_protocol: SSL\n"
                                   f"  ssl_certificate_location: {cert}\n"
                                   f"  ssl_key_password: {SECRET}"))
    assert "required when ssl_certificate_location is set" in problem_at(
        problems, "log.ssl_key_location")
    assert "only used with ssl_key_location" in problem_at(problems, "log.ssl_key_password")
    assert SECRET not in "\n".join(problems)


def test_sasl_ssl_with_a_password_file(load_valid: Callable[[str], PipelineConfig],
                                       tmp_path: Path, write_config: WriteConfig) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("pem")
    secret = tmp_path / "kafka-password"
    secret.write_text(SECRET + "\n")
    config = load_valid(kafka(f"  security_protocol: SASL_SSL\n  sasl_mechanism: "
                              f"SCRAM-SHA-512\n  sasl_username: app\n  sasl_password_file: "
                              f"{secret}\n  ssl_ca_location: {ca}"))
    log = config.log
    assert log.sasl_password is not None and log.sasl_password.get_secret_value() == SECRET
    assert log.ssl_verify_hostname and log.ssl_ca_location == ca
    assert SECRET not in repr(config) and SECRET not in str(log)
