"""YAML with ``yaml.safe_load`` semantics, plus the line of every key and list item."""

from __future__ import annotations

from dataclasses import dataclass, field

import yaml

from cdc.errors import ConfigError, ConfigProblem

YamlPath = tuple[str | int, ...]

_MERGE_TAG = "tag:yaml.org,2002:merge"
_MAX_NODES = 100_000


@dataclass
class YamlDocument:
    """A parsed document: its data, the line of each path, and problems the parser saw."""

    data: object
    lines: dict[YamlPath, int] = field(default_factory=dict)
    problems: list[tuple[YamlPath, str]] = field(default_factory=list)


class LineNumberLoader(yaml.SafeLoader):
    """A ``SafeLoader`` that records where each mapping key and sequence item starts."""

    def load_with_lines(self) -> YamlDocument:
        """Compose the single document, note lines and duplicate keys, then construct it."""
        node = self.get_single_node()
        if node is None:
            return YamlDocument(data=None)
        document = YamlDocument(data=None)
        self._note_lines(node, (), document, set())
        document.data = self.construct_document(node)
        return document

    def _note_lines(self, node: yaml.Node, path: YamlPath, document: YamlDocument,
                    ancestors: set[int]) -> None:
        if id(node) in ancestors or len(document.lines) > _MAX_NODES:
            return  # a recursive alias, or an alias bomb: lines are a courtesy, stop here
        ancestors = ancestors | {id(node)}
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key_node, value_node in node.value:
                if key_node.tag == _MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                    continue
                key, line = str(key_node.value), key_node.start_mark.line + 1
                if key in seen:
                    document.problems.append(((*path, key), f"duplicate key (lines "
                                              f"{seen[key]} and {line}); keep one"))
                seen.setdefault(key, line)
                document.lines[(*path, key)] = line
                self._note_lines(value_node, (*path, key), document, ancestors)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                document.lines[(*path, index)] = item.start_mark.line + 1
                self._note_lines(item, (*path, index), document, ancestors)


def _describe_yaml_error(exc: yaml.YAMLError) -> str:
    if not isinstance(exc, yaml.MarkedYAMLError) or exc.problem_mark is None:
        return f"invalid YAML: {exc}"
    mark = exc.problem_mark
    message = f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {exc.problem}"
    if exc.context and exc.context_mark is not None:
        message += f" ({exc.context} at line {exc.context_mark.line + 1})"
    elif exc.context:
        message += f" ({exc.context})"
    return message


def parse_yaml(text: str) -> YamlDocument:
    """Parse ``text``; ``ConfigError`` with the line and column if it is not valid YAML."""
    loader = LineNumberLoader(text)
    try:
        return loader.load_with_lines()
    except yaml.YAMLError as exc:
        raise ConfigError([ConfigProblem("", _describe_yaml_error(exc))]) from None
    except RecursionError:
        raise ConfigError([ConfigProblem("", "invalid YAML: nested too deeply")]) from None
    finally:
        loader.dispose()
