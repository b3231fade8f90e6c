"""The JSON Schema of pipeline files."""

from __future__ import annotations

from typing import Any

from cdc.config import config_json_schema


def test_top_level_sections() -> None:
    schema = config_json_schema()
    assert schema["type"] == "object"
    assert set(schema["properties"]) == {"source", "log", "connectors", "spark", "metrics",
                                          "reconcile", "capture"}


def test_sink_configs_are_tied_to_the_connector_type() -> None:
    schema = config_json_schema()
    defs: dict[str, Any] = schema["$defs"]
    connector = defs["ConnectorConfig"]
    assert connector["properties"]["type"]["enum"] == ["opensearch", "redis", "webhook"]
    tied = {rule["if"]["properties"]["type"]["const"]:
            rule["then"]["properties"]["config"]["$ref"] for rule in connector["allOf"]}
    assert tied == {"opensearch": "#/$defs/OpenSearchSinkConfig",
                    "redis": "#/$defs/RedisSinkConfig",
                    "webhook": "#/$defs/WebhookSinkConfig"}
    assert "hosts" in defs["OpenSearchSinkConfig"]["required"]


def test_secret_fields_offer_a_file_variant() -> None:
    source = config_json_schema()["$defs"]["SourceConfig"]
    assert source["properties"]["password_file"]["type"] == "string"
    assert source["additionalProperties"] is False


def test_defaults_are_written_like_the_yaml() -> None:
    defs = config_json_schema()["$defs"]
    assert defs["RetentionConfig"]["properties"]["time"]["default"] == "7d"
    assert defs["RetentionConfig"]["properties"]["size"]["default"] == "forever"
    assert defs["SourceConfig"]["properties"]["heartbeat_interval"]["default"] == "10s"
