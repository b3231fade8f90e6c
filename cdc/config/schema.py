"""The JSON Schema of ``pipeline.yaml``, with every registered sink's ``config`` spelled out."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode, models_json_schema

from cdc.config.connector import ConnectorConfig
from cdc.config.models import PipelineConfig
from cdc.config.units import format_duration
from cdc.plugins.index import known_sinks

DIALECT = "https://json-schema.org/draft/2020-12/schema"


class PipelineSchemaGenerator(GenerateJsonSchema):
    """Writes duration defaults the way the YAML does (``10s``, not ``PT10S``)."""

    def encode_default(self, dft: Any) -> Any:
        """``format_duration`` for a ``timedelta``, pydantic's encoding for the rest."""
        if isinstance(dft, timedelta):
            return format_duration(dft)
        return super().encode_default(dft)


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
    references, definitions = models_json_schema(
        models, ref_template="#/$defs/{model}", schema_generator=PipelineSchemaGenerator)
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
