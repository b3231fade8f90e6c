"""The JSON Schema of ``pipeline.yaml``, with every registered sink's ``config`` spelled out."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from cdc.config.connector import ConnectorConfig
from cdc.config.models import PipelineConfig
from connectors.registry import known_sinks

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def _def_name(reference: dict[str, Any]) -> str:
    return str(reference["$ref"]).rsplit("/", 1)[-1]


def config_json_schema() -> dict[str, Any]:
    """The JSON Schema of a pipeline file, for editors and for ``cdc config-schema``.

    A connector's ``config`` is tied to its ``type`` with ``if``/``then``, so an editor
    checks it against that sink's own model. Raises ``SinkLoadError`` for a broken sink.
    """
    sinks = known_sinks()
    models: list[tuple[type[BaseModel], JsonSchemaMode]] = [(PipelineConfig, "validation")]
    models += [(spec.config_model, "validation") for spec in sinks.values()]
    references, definitions = models_json_schema(models, ref_template="#/$defs/{model}")
    defs: dict[str, Any] = definitions.get("$defs", {})
    root = defs.pop(_def_name(references[(PipelineConfig, "validation")]))
    connector = next(schema for schema in defs.values()
                     if schema.get("title") == ConnectorConfig.__name__)
    connector["properties"]["type"]["enum"] = list(sinks)
    connector["allOf"] = [
        {"if": {"properties": {"type": {"const": name}}, "required": ["type"]},
         "then": {"properties": {"config": references[(spec.config_model, "validation")]}}}
        for name, spec in sinks.items()]
    return {"$schema": DIALECT, **root, "$defs": defs}
