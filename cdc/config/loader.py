"""``pipeline.yaml`` → ``PipelineConfig``: read, parse, interpolate, read secret files, validate.

Every problem found on the way is collected; one ``ConfigError`` reports them all.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import ValidationError

from cdc.config.connector import duplicate_names
from cdc.config.document import ConfigDocument
from cdc.config.interpolation import interpolate_document
from cdc.config.models import PipelineConfig
from cdc.config.navigation import models_by_path
from cdc.config.problems import show_value, validation_problems
from cdc.config.secrets import Redactor, read_secret_files, secret_values
from cdc.config.yaml_source import YamlPath, parse_yaml
from cdc.errors import ConfigError, ConfigProblem

SECTIONS = ", ".join(PipelineConfig.model_fields)


def read_config_text(path: str | os.PathLike[str]) -> str:
    """The file's text; ``ConfigError`` (not ``OSError``) if it cannot be read."""
    shown = str(path)
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        reason = "no such file"
    except IsADirectoryError:
        reason = "it is a directory"
    except PermissionError:
        reason = "permission denied"
    except UnicodeDecodeError as exc:
        reason = f"not UTF-8 text (byte {exc.start})"
    except OSError as exc:
        reason = (exc.strerror or type(exc).__name__).lower()
    raise ConfigError([ConfigProblem("", f"cannot read {shown!r}: {reason}")])


def load_config(path: str | os.PathLike[str]) -> PipelineConfig:
    """Load and validate a ``pipeline.yaml``; ``ConfigError`` lists every problem."""
    return parse_config(read_config_text(path))


def parse_config(text: str, env: Mapping[str, str] | None = None) -> PipelineConfig:
    """Validate the YAML ``text``, interpolating from ``env`` (default: ``os.environ``)."""
    parsed = parse_yaml(text)
    if parsed.data is None:
        raise ConfigError([ConfigProblem("", f"the file is empty; expected a mapping with "
                                             f"the sections {SECTIONS}")])
    if not isinstance(parsed.data, dict):
        raise ConfigError([ConfigProblem("", f"expected a mapping with the sections "
                                             f"{SECTIONS} at the top, got "
                                             f"{show_value(parsed.data)}")])
    data, early = interpolate_document(parsed.data, os.environ if env is None else env)
    assert isinstance(data, dict)  # interpolation keeps the shape
    models = models_by_path(data, PipelineConfig)
    secret_files = read_secret_files(data, models)
    early += parsed.problems + secret_files.problems
    document = ConfigDocument(data=data, lines=parsed.lines, renamed=secret_files.renamed,
                              models=models, redactor=Redactor(secret_values(data, models)))
    try:
        config = PipelineConfig.model_validate(data)
    except ValidationError as exc:
        late = validation_problems(exc, document) + _duplicate_names(data)
    else:
        late = []
    problems = _merge(early, late, document)
    if problems:
        raise ConfigError(problems)
    return config


def _duplicate_names(data: dict[object, object]) -> list[tuple[YamlPath, str]]:
    """Duplicate connector names, checked on the raw list: validation skips the check when
    any connector is invalid, and a user should learn about both at once."""
    connectors = data.get("connectors")
    if not isinstance(connectors, list):
        return []
    return [(("connectors", *loc), message) for loc, message, _ in duplicate_names(connectors)]


def _merge(early: list[tuple[YamlPath, str]], late: list[tuple[YamlPath, str]],
           document: ConfigDocument) -> list[ConfigProblem]:
    """Problems in file order, without repeats. Early ones (a missing variable, an unreadable
    secret file) hide later ones at or under their path: they explain them."""
    claimed = [document.file_path(loc) for loc, _ in early if loc]
    kept = list(early) + [(loc, message) for loc, message in late
                          if not any(document.file_path(loc)[: len(path)] == path
                                     for path in claimed)]
    problems: dict[str, tuple[int, ConfigProblem]] = {}
    for loc, message in kept:
        problem = document.problem(loc, message)
        problems.setdefault(str(problem), (document.line(loc) or 0, problem))
    return [problem for _, problem in sorted(problems.values(), key=lambda item: item[0])]
