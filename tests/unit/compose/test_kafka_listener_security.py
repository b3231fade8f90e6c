"""The launcher's secured client listener: its ``server.properties`` lines and the
storage format arguments that create SCRAM users."""

from __future__ import annotations

from pathlib import Path

import pytest

from compose.launcher.kafka_security import ListenerSecurity


def test_sasl_ssl_listener(tmp_path: Path) -> None:
    cert, key = tmp_path / "k.crt", tmp_path / "k.key"
    cert.write_text("CERT\n")
    key.write_text("KEY\n")
    security = ListenerSecurity("SASL_SSL", plain_users={"admin": "a"},
                                scram_users={"app": "b"}, certificate=cert, key=key)
    settings = security.listener_properties("CLIENT", tmp_path)
    assert settings["listener.name.client.sasl.enabled.mechanisms"] == (
        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512")
    assert 'user_admin="a"' in str(settings["listener.name.client.plain.sasl.jaas.config"])
    assert settings["listener.name.client.ssl.keystore.type"] == "PEM"
    assert Path(str(settings["listener.name.client.ssl.keystore.location"])).read_text() == (
        "KEY\nCERT\n")
    assert security.format_arguments() == [
        "--add-scram", "SCRAM-SHA-256=[name=app,password=b]",
        "--add-scram", "SCRAM-SHA-512=[name=app,password=b]"]


def test_incomplete_listeners_are_refused() -> None:
    with pytest.raises(ValueError, match="needs plain_users or scram_users"):
        ListenerSecurity("SASL_PLAINTEXT")
    with pytest.raises(ValueError, match="needs certificate and key"):
        ListenerSecurity("SSL")
    assert ListenerSecurity().plaintext and ListenerSecurity().format_arguments() == []
