"""The base of every config model, and the helpers cross-field checks use.

``ConfigModel`` is frozen and forbids unknown keys; a ``SecretStr`` field may be given
as ``<name>_file``. ``raise_field_problems`` reports contradictions on the field to change.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import UnionType
from typing import Annotated, Any, ClassVar, NoReturn, Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, GetJsonSchemaHandler, SecretStr, ValidationError
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import InitErrorDetails, PydanticCustomError, core_schema

SECRET_FILE_SUFFIX = "_file"


def strip_optional(annotation: Any) -> Any:
    """``X`` for ``X | None`` and ``Annotated[X, ...]``; anything else unchanged."""
    while True:
        origin = get_origin(annotation)
        args = [arg for arg in get_args(annotation) if arg is not type(None)]
        if origin is Annotated or (origin in (Union, UnionType) and len(args) == 1):
            annotation = args[0]
        else:
            return annotation


def is_secret_annotation(annotation: Any) -> bool:
    """True for ``SecretStr`` and ``SecretStr | None``: fields that accept ``<name>_file``."""
    return strip_optional(annotation) is SecretStr


def contains_secret(annotation: Any) -> bool:
    """True if a ``SecretStr`` occurs anywhere in ``annotation`` (``dict[str, SecretStr]``)."""
    return annotation is SecretStr or any(contains_secret(arg) for arg in get_args(annotation))


class ConfigModel(BaseModel):
    """Base of every config section: frozen, and unknown keys are errors.

    A ``SecretStr`` field ``password`` may also be given as ``password_file: PATH``; the
    loader reads the file (trailing newline stripped). The JSON Schema shows both keys.
    """

    model_config: ClassVar[ConfigDict] = ConfigDict(frozen=True, extra="forbid")

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: core_schema.CoreSchema,
                                     handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        json_schema = handler(schema)
        target = handler.resolve_ref_schema(json_schema)
        properties = target.get("properties", {})
        for name, field in cls.model_fields.items():
            if is_secret_annotation(field.annotation) and name in properties:
                properties[name + SECRET_FILE_SUFFIX] = {
                    "type": "string", "description": f"a file holding {name} (newline stripped)"}
                if name in target.get("required", []):
                    target["required"].remove(name)
        return json_schema


Loc = tuple[str | int, ...]


def raise_field_problems(model: str, problems: Sequence[tuple[Loc, str, object]]) -> NoReturn:
    """Raise one ``ValidationError`` with a problem per ``(location, message, value)``.

    Used by cross-field checks, so each contradiction is reported on the field to change;
    ``location`` is relative to the model being validated, e.g. ``("path",)``.
    """
    raise ValidationError.from_exception_data(model, [
        InitErrorDetails(type=PydanticCustomError("config_conflict", message),
                         loc=loc, input=value)
        for loc, message, value in problems])
