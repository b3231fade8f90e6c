"""``${VAR}`` and ``${VAR:-default}`` in string values, from the environment.

``$${`` writes a literal ``${``. A variable that is set but empty counts as unset for
``:-`` (as in the shell). Only values are interpolated, never keys.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from cdc.config.yaml_source import YamlPath

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_REFERENCE = re.compile(r"\$\$\{|\$\{([^}]*)\}|\$\{")


class InterpolationError(ValueError):
    """A ``${...}`` that cannot be resolved; the message names the variable, not values."""


def _resolve(reference: str, env: Mapping[str, str]) -> str:
    name, has_default, default = reference.partition(":-")
    if not _NAME.fullmatch(name):
        raise InterpolationError(f"invalid variable reference '${{{reference}}}'; expected "
                                 "${NAME} or ${NAME:-default}")
    value = env.get(name)
    if has_default:
        return value if value else default
    if value is None:
        raise InterpolationError(f"environment variable {name!r} is not set; set it, or give "
                                 f"a default: ${{{name}:-value}}")
    return value


def interpolate(text: str, env: Mapping[str, str]) -> str:
    """Replace every ``${...}`` in ``text``; ``InterpolationError`` if one cannot be."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$${":
            return "${"
        if match.group(1) is None:
            raise InterpolationError("unterminated '${'; write '$${' for a literal '${'")
        return _resolve(match.group(1), env)

    return _REFERENCE.sub(replace, text)


def interpolate_document(data: object, env: Mapping[str, str],
                         path: YamlPath = ()) -> tuple[object, list[tuple[YamlPath, str]]]:
    """Interpolate every string value under ``data``; returns the new data and problems.

    A value that cannot be interpolated is kept as written and reported by path.
    """
    problems: list[tuple[YamlPath, str]] = []
    if isinstance(data, str):
        try:
            return interpolate(data, env), problems
        except InterpolationError as exc:
            return data, [(path, str(exc))]
    if isinstance(data, dict):
        result: dict[object, object] = {}
        for key, value in data.items():
            key_path = (*path, key) if isinstance(key, str | int) else path
            result[key], found = interpolate_document(value, env, key_path)
            problems.extend(found)
        return result, problems
    if isinstance(data, list):
        items: list[object] = []
        for index, item in enumerate(data):
            new_item, found = interpolate_document(item, env, (*path, index))
            items.append(new_item)
            problems.extend(found)
        return items, problems
    return data, problems
