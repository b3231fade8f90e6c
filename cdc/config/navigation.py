"""Which pydantic model validates each mapping of a raw (unvalidated) document.

Needed before and after validation: to find ``<secret>_file`` keys, to keep secrets out
of messages, and to list the keys a mapping accepts when it has an unknown one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, get_args, get_origin

from pydantic import BaseModel

from cdc.config.base import strip_optional
from cdc.config.yaml_source import YamlPath

_SEQUENCES = (list, tuple, set, frozenset)
_MAPPINGS = (dict, Mapping)


def as_model(annotation: Any) -> type[BaseModel] | None:
    """The model class ``annotation`` denotes (through ``Optional``/``Annotated``), if any."""
    core = strip_optional(annotation)
    if isinstance(core, type) and issubclass(core, BaseModel) and core is not BaseModel:
        return core
    return None


def field_annotation(model: type[BaseModel], raw: Mapping[str, Any], key: str) -> Any:
    """The annotation validating ``raw[key]``: a field's, or what the model says it is."""
    field = model.model_fields.get(key)
    if field is None:
        return None
    hook = getattr(model, "field_model", None)
    dynamic = hook(key, raw) if callable(hook) else None
    return dynamic if dynamic is not None else field.annotation


def models_by_path(data: object, root: type[BaseModel]) -> dict[YamlPath, type[BaseModel]]:
    """Map each mapping's path in ``data`` to the model that will validate it."""
    found: dict[YamlPath, type[BaseModel]] = {}
    _visit(data, root, (), found)
    return found


def _visit(value: object, annotation: Any, path: YamlPath,
           found: dict[YamlPath, type[BaseModel]]) -> None:
    model = as_model(annotation)
    if model is not None:
        if isinstance(value, dict):
            found[path] = model
            for key, item in value.items():
                if isinstance(key, str):
                    _visit(item, field_annotation(model, value, key), (*path, key), found)
        return
    core = strip_optional(annotation)
    origin, args = get_origin(core), get_args(core)
    if origin in _SEQUENCES and args and isinstance(value, list):
        for index, item in enumerate(value):
            _visit(item, args[0], (*path, index), found)
    elif origin in _MAPPINGS and len(args) == 2 and isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str):
                _visit(item, args[1], (*path, key), found)
