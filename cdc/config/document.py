"""A raw configuration document with what it takes to word problems about it."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pydantic import BaseModel

from cdc.config.base import contains_secret
from cdc.config.navigation import field_annotation
from cdc.config.secrets import Redactor
from cdc.config.yaml_source import YamlPath
from cdc.errors import ConfigProblem

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_SENSITIVE_KEYS = frozenset({"dsn"})


@dataclass
class ConfigDocument:
    """The loaded data, where each path is in the file, and what must stay secret."""

    data: object
    lines: dict[YamlPath, int] = field(default_factory=dict)
    renamed: dict[YamlPath, str] = field(default_factory=dict)
    models: dict[YamlPath, type[BaseModel]] = field(default_factory=dict)
    redactor: Redactor = field(default_factory=lambda: Redactor(set()))

    def file_path(self, loc: YamlPath) -> YamlPath:
        """``loc`` with the keys as written in the file (``password_file``, not ``password``)."""
        return tuple(self.renamed.get(loc[: i + 1], step) for i, step in enumerate(loc))

    def display_path(self, loc: YamlPath) -> str:
        """``connectors[1].config.hosts[0]``; odd keys quoted: ``conf['spark.x']``."""
        text = ""
        for step in self.file_path(loc):
            if isinstance(step, int):
                text += f"[{step}]"
            elif _PLAIN_KEY.fullmatch(step):
                text += f".{step}" if text else step
            else:
                text += f"[{step!r}]"
        return text

    def line(self, loc: YamlPath) -> int | None:
        """The line of ``loc``, or of its nearest ancestor that has one."""
        path = self.file_path(loc)
        for length in range(len(path), 0, -1):
            line = self.lines.get(path[:length])
            if line is not None:
                return line
        return None

    def is_sensitive(self, loc: YamlPath) -> bool:
        """True if ``loc`` is, or is inside, a secret field or a DSN."""
        for length in range(1, len(loc) + 1):
            key, parent = loc[length - 1], self.models.get(loc[: length - 1])
            if key in _SENSITIVE_KEYS:
                return True
            if parent is not None and isinstance(key, str):
                raw = self._mapping_at(loc[: length - 1])
                if contains_secret(field_annotation(parent, raw, key)):
                    return True
        return False

    def _mapping_at(self, loc: YamlPath) -> dict[str, object]:
        data = self.data
        for step in loc:
            if isinstance(data, dict):
                data = data.get(step)
            elif isinstance(data, list) and isinstance(step, int) and step < len(data):
                data = data[step]
            else:
                return {}
        return data if isinstance(data, dict) else {}

    def problem(self, loc: YamlPath, message: str) -> ConfigProblem:
        """A problem at ``loc``, with its line when known, and every secret scrubbed."""
        line = self.line(loc)
        suffix = f" (line {line})" if line is not None else ""
        return ConfigProblem(self.display_path(loc), self.redactor.scrub(message) + suffix)
