"""Secrets in a raw document: read ``<name>_file`` keys, and find every value to redact."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel

from cdc.config.base import SECRET_FILE_SUFFIX, contains_secret, is_secret_annotation
from cdc.config.conninfo import dsn_secrets
from cdc.config.navigation import field_annotation
from cdc.config.yaml_source import YamlPath

REDACTED = "'***'"


@dataclass
class SecretFiles:
    """What reading ``<name>_file`` keys did: keys renamed, and problems by path."""

    renamed: dict[YamlPath, str] = field(default_factory=dict)
    problems: list[tuple[YamlPath, str]] = field(default_factory=list)


def _read_secret(path: str) -> str:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"cannot read secret file {path!r}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"cannot read secret file {path!r}: it is a directory") from None
    except PermissionError:
        raise ValueError(f"cannot read secret file {path!r}: permission denied") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"cannot read secret file {path!r}: {type(exc).__name__}") from None
    return text.rstrip("\r\n")


def read_secret_files(data: object, models: dict[YamlPath, type[BaseModel]]) -> SecretFiles:
    """Replace each ``password_file: PATH`` with ``password: <contents>``, in place.

    Only for ``SecretStr`` fields. The renamed key is recorded so messages can name
    ``password_file`` again; on failure the key is dropped and the problem recorded.
    """
    result = SecretFiles()
    for path, model in models.items():
        mapping = _at(data, path)
        if not isinstance(mapping, dict):
            continue
        for key in [k for k in mapping if isinstance(k, str) and k.endswith(SECRET_FILE_SUFFIX)]:
            name = key.removesuffix(SECRET_FILE_SUFFIX)
            if not is_secret_annotation(field_annotation(model, mapping, name)):
                continue
            result.renamed[(*path, name)] = key
            file_path = mapping.pop(key)
            if name in mapping:
                result.problems.append(((*path, name), f"give either {name} or {key}, not both"))
            elif not isinstance(file_path, str):
                result.problems.append(((*path, name), "expected the path of a file"))
            else:
                try:
                    mapping[name] = _read_secret(file_path)
                except ValueError as exc:
                    result.problems.append(((*path, name), str(exc)))
    return result


def _at(data: object, path: YamlPath) -> object:
    for step in path:
        if isinstance(data, dict):
            data = data.get(step)
        elif isinstance(data, list) and isinstance(step, int) and step < len(data):
            data = data[step]
        else:
            return None
    return data


def _strings(data: object) -> Iterator[str]:
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for value in data.values():
            yield from _strings(value)
    elif isinstance(data, list):
        for item in data:
            yield from _strings(item)


def secret_values(data: object, models: dict[YamlPath, type[BaseModel]]) -> set[str]:
    """Every string that must never be shown: secret fields' values and passwords in URLs/DSNs."""
    secrets: set[str] = set()
    for path, model in models.items():
        mapping = _at(data, path)
        if isinstance(mapping, dict):
            for key, value in mapping.items():
                if isinstance(key, str) and contains_secret(field_annotation(model, mapping, key)):
                    secrets.update(_strings(value))
    for text in _strings(data):
        if "://" in text:
            try:
                password = urlsplit(text).password
            except ValueError:
                password = None
            secrets.update(filter(None, [password]))
            secrets.update(re.findall(r"://[^:/@\s]*:([^@\s]+)@", text))
        if "=" in text or "://" in text:
            secrets.update(dsn_secrets(text))
    return {secret for secret in secrets if secret}


class Redactor:
    """Keeps known secrets out of text.

    Secrets of ``MIN_SCRUBBED`` characters or more are replaced by ``***`` wherever they
    occur; shorter ones would mangle ordinary words, so text holding one is not shown.
    """

    MIN_SCRUBBED = 4

    def __init__(self, secrets: set[str]) -> None:
        ordered = sorted(secrets, key=len, reverse=True)
        self._long = [secret for secret in ordered if len(secret) >= self.MIN_SCRUBBED]
        self._short = [secret for secret in ordered if len(secret) < self.MIN_SCRUBBED]

    def scrub(self, text: str) -> str:
        """``text`` with every long-enough secret (and its ``repr``) replaced."""
        for secret in self._long:
            text = text.replace(repr(secret), REDACTED).replace(secret, "***")
        return text

    def leaks(self, text: str) -> bool:
        """True if ``text``, once scrubbed, would still show a (short) secret."""
        return any(secret in text for secret in self._short)
