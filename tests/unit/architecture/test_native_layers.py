"""The native core's modules depend on each other in one direction (``native/src/lib.rs``):
the codecs below, the capture's conversions on them, the sinks' renderers apart, the
Python bindings over everything."""

from __future__ import annotations

import re
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[3] / "native" / "src"
USES = re.compile(r"\bcrate::(\w+)")

ALLOWED: dict[str, set[str]] = {
    "record": set(),
    "murmur2": set(),
    "convert": set(),
    "snapshot": {"convert", "record", "murmur2"},
    "pgoutput": {"convert"},
    "spool": {"pgoutput", "convert"},
    "redis_args": {"convert"},
    "opensearch": {"convert"},
    "joins": {"convert", "redis_args"},
    "python": {"record", "murmur2", "convert", "snapshot", "pgoutput", "spool", "redis_args",
               "opensearch", "joins"},
}


def _module_of(path: Path) -> str:
    return path.relative_to(SOURCE).with_suffix("").parts[0]


def _uses(path: Path) -> set[str]:
    code = "\n".join(line.split("//", 1)[0]
                     for line in path.read_text(encoding="utf-8").splitlines())
    return set(USES.findall(code))


def test_every_module_has_its_place() -> None:
    modules = {_module_of(path) for path in SOURCE.rglob("*.rs") if path.name != "lib.rs"}
    assert modules == set(ALLOWED)


def test_each_module_uses_only_the_layers_below_it() -> None:
    wrong = {}
    for path in sorted(SOURCE.rglob("*.rs")):
        if path.name == "lib.rs":
            continue
        module = _module_of(path)
        outside = _uses(path) - ALLOWED[module] - {module}
        if outside:
            wrong[str(path.relative_to(SOURCE))] = sorted(outside)
    assert not wrong, f"modules reaching past their layer: {wrong}"


def test_the_rule_sees_a_use() -> None:
    sample = SOURCE / "spool.rs"
    assert {"pgoutput", "convert"} <= _uses(sample)
