"""The configuration reference: ``cdc config-schema``'s JSON Schema as markdown tables.

``python -m cdc.config.reference`` prints it; ``--write README.md`` replaces the part of
the file between the ``BEGIN``/``END`` markers (a unit test checks the README is current).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cdc.config.schema import config_json_schema

BEGIN = "<!-- BEGIN config reference: python -m cdc.config.reference --write README.md -->"
END = "<!-- END config reference -->"
_DURATION = re.compile(r"\(ms\|s\|m\|h\|d\|w\)")
_SIZE = re.compile(r"KMGT")

Schema = dict[str, Any]


def _resolve(node: Schema, defs: Schema) -> Schema:
    while "$ref" in node:
        node = defs[str(node["$ref"]).rsplit("/", 1)[-1]]
    return node


def _branches(node: Schema, defs: Schema) -> list[Schema]:
    """The non-null alternatives of a property, resolved."""
    options = node.get("anyOf") or node.get("oneOf") or [node]
    return [_resolve(option, defs) for option in options if option.get("type") != "null"]


def _type_name(node: Schema, defs: Schema) -> str:
    node = _resolve(node, defs)
    if "enum" in node:
        return " | ".join(f"`{value}`" for value in node["enum"])
    if "const" in node:
        return f"`{node['const']}`"
    if "anyOf" in node or "oneOf" in node:
        names = [_type_name(option, defs) for option in node.get("anyOf") or node["oneOf"]]
        return " or ".join(dict.fromkeys(names))
    kind = node.get("type")
    pattern = str(node.get("pattern", ""))
    if kind == "string" and _DURATION.search(pattern):
        return "duration"
    if kind == "string" and _SIZE.search(pattern):
        return "size"
    if kind == "array":
        return f"list of {_type_name(node.get('items', {}), defs)}"
    if kind == "object" and "properties" not in node:
        values = node.get("additionalProperties")
        return f"map of {_type_name(values, defs)}" if isinstance(values, dict) else "map"
    return str(kind or "object")


def _default(node: Schema) -> str:
    if "default" not in node:
        return ""
    return f"`{json.dumps(node['default'], ensure_ascii=False)}`"


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _ref_name(node: Schema) -> str | None:
    ref = node.get("$ref")
    return None if ref is None else str(ref).rsplit("/", 1)[-1]


def rows(node: Schema, defs: Schema, path: str, required: bool = False,
         expanded: dict[str, str] | None = None) -> Iterator[tuple[str, str, str, str]]:
    """``(key, type, default, description)`` for ``node`` at ``path`` and below; a
    section that contains itself (a joined table's lookups) is listed once, its inner
    occurrences pointing at the first (``expanded``: section → where it is listed)."""
    expanded = {} if expanded is None else expanded
    resolved = _resolve(node, defs)
    description = node.get("description") or resolved.get("description") or ""
    if path:
        kind = _type_name(node, defs)
        objects = [b for b in _branches(node, defs) if "properties" in b]
        if objects and "properties" in objects[0]:
            kind = "section" + (" or null" if kind.endswith("null") else "")
        yield (f"`{path}`" + (" (required)" if required else ""), kind, _default(node),
               description)
    for branch in _branches(node, defs):
        if branch.get("type") == "array" and "items" in branch:
            items = _resolve(branch["items"], defs)
            ref = _ref_name(branch["items"])
            if ref is not None and ref in expanded:
                yield (f"`{path}[]`", "section", "",
                       f"the same keys as `{expanded[ref]}` (nested to any depth)")
            elif "properties" in items:
                inner = expanded if ref is None else {**expanded, ref: f"{path}[]"}
                yield from rows(items, defs, f"{path}[]", expanded=inner)
            continue
        needed = set(branch.get("required", []))
        for name, child in branch.get("properties", {}).items():
            yield from rows(child, defs, f"{path}.{name}" if path else name, name in needed,
                            expanded)
        for rule in branch.get("allOf", []):
            condition = rule.get("if", {}).get("properties", {})
            label = ", ".join(f"{key}: {value.get('const')}" for key, value in condition.items())
            for name, child in rule.get("then", {}).get("properties", {}).items():
                for key, kind, default, text in rows(child, defs, f"{path}.{name}"):
                    yield key + f" (when {label})", kind, default, text


def reference_markdown(schema: Schema | None = None) -> str:
    """The reference as markdown: one table per top-level section."""
    schema = schema or config_json_schema()
    defs: Schema = schema.get("$defs", {})
    required = set(schema.get("required", []))
    out = [BEGIN, "", "Generated from `cdc config-schema`; every key, its type, its default "
           "and what it does. A `SecretStr` key such as `password` may also be given as "
           "`password_file: PATH`.", ""]
    for name, node in schema["properties"].items():
        sections = [b["description"] for b in _branches(node, defs)
                    if "properties" in b and b.get("description")]
        notes = [*sections, *([node["description"]] if "description" in node else [])]
        out += [f"#### `{name}`" + (" (required)" if name in required else ""), "",
                " ".join(_cell(note).rstrip(".") + "." for note in notes), "",
                "| key | type | default | description |", "|---|---|---|---|"]
        for key, kind, default, text in list(rows(node, defs, name, name in required))[1:]:
            out.append(f"| {key} | {_cell(kind)} | {_cell(default)} | {_cell(text)} |")
        out.append("")
    out.append(END)
    return "\n".join(out)


def replace_section(document: str, section: str) -> str:
    """``document`` with the text between the markers replaced by ``section``."""
    start, end = document.find(BEGIN), document.find(END)
    if start < 0 or end < start:
        raise ValueError(f"the markers {BEGIN!r} … {END!r} are missing")
    return document[:start] + section + document[end + len(END):]


def main(argv: list[str] | None = None) -> int:
    """Print the reference, or write it into a markdown file between the markers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--write", type=Path, metavar="FILE",
                        help="replace the reference section of FILE (e.g. README.md)")
    args = parser.parse_args(argv)
    section = reference_markdown()
    if args.write is None:
        sys.stdout.write(section + "\n")
        return 0
    path: Path = args.write
    try:
        path.write_text(replace_section(path.read_text(encoding="utf-8"), section),
                        encoding="utf-8")
    except ValueError as exc:
        print(f"{path}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
