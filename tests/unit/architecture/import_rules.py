"""The import rule of docs/architecture.md ("Layers"), checked by parsing source files.

Every import counts: module level, inside functions, under ``if TYPE_CHECKING:``, and
``importlib.import_module("…")`` with a literal name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]

ABOVE_THE_CORE = frozenset({"connectors", "derived", "spark_pipelines"})
OUTSIDE_THE_PRODUCT = frozenset({"compose", "bench", "chaos", "tests"})
# cdc modules that wire the layers together; they may import ABOVE_THE_CORE lazily
COMPOSITION_ROOT = frozenset({"cdc.cli", "cdc.pipeline"})


@dataclass(frozen=True, slots=True)
class Import:
    """One imported module name, where it is and whether it runs at import time."""

    target: str
    line: int
    module_level: bool


@dataclass(frozen=True, slots=True)
class Violation:
    """An import the rule forbids."""

    module: str
    target: str
    line: int
    rule: str

    def __str__(self) -> str:
        return f"{self.module}:{self.line} imports {self.target} ({self.rule})"


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    parts = module.split(".")
    base = parts if is_package else parts[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def _imports(tree: ast.AST, module: str, is_package: bool) -> Iterator[Import]:
    def visit(node: ast.AST, module_level: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            inside = module_level and not isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(alias.name, child.lineno, module_level)
            elif isinstance(child, ast.ImportFrom):
                yield Import(_resolve(module, is_package, child), child.lineno, module_level)
            elif (isinstance(child, ast.Call) and child.args
                  and isinstance(child.args[0], ast.Constant)
                  and isinstance(child.args[0].value, str)
                  and _called_name(child.func) in {"import_module", "__import__"}):
                yield Import(child.args[0].value, child.lineno, module_level)
            yield from visit(child, inside)

    yield from visit(tree, True)


def _called_name(func: ast.expr) -> str:
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else ""


def _top(target: str) -> str:
    return target.split(".", 1)[0]


def violations(module: str, source: str, *, is_package: bool = False) -> list[Violation]:
    """What in ``source`` (the text of ``module``) breaks the import rule."""
    found: list[Violation] = []
    layer = _top(module)
    for imported in _imports(ast.parse(source), module, is_package):
        top = _top(imported.target)
        if top in OUTSIDE_THE_PRODUCT and layer not in OUTSIDE_THE_PRODUCT:
            found.append(Violation(module, imported.target, imported.line,
                                   "product code never imports development tools"))
        elif layer == "cdc" and top in ABOVE_THE_CORE:
            if module not in COMPOSITION_ROOT:
                found.append(Violation(module, imported.target, imported.line,
                                       "the core imports nothing above it"))
            elif imported.module_level:
                found.append(Violation(module, imported.target, imported.line,
                                       "the composition root imports the layers above "
                                       "only inside the command that needs them"))
    return found


def module_name(path: Path) -> tuple[str, bool]:
    """``cdc/config/schema.py`` -> ``("cdc.config.schema", False)``; packages -> True."""
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def product_modules() -> Iterator[Path]:
    """Every Python file of the product: the core and the layers above it."""
    for package in ("cdc", *sorted(ABOVE_THE_CORE)):
        yield from sorted((REPO / package).rglob("*.py"))


def tree_violations() -> list[Violation]:
    """Every violation in the repository's product code."""
    found: list[Violation] = []
    for path in product_modules():
        module, is_package = module_name(path)
        found += violations(module, path.read_text(encoding="utf-8"), is_package=is_package)
    return found


def import_graph() -> dict[str, set[str]]:
    """Product module → the product modules it imports (any import, as ``violations``
    counts them; ``from package import module`` counts the module)."""
    paths = {module_name(path)[0]: path for path in product_modules()}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        is_package = path.name == "__init__.py"
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = _resolve(module, is_package, node)
                targets.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths
                               else base for alias in node.names)
        graph[module] = {target for target in targets if target in paths and target != module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of modules that import each other, round (strongly connected components
    of more than one module), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(found)
