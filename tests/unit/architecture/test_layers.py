"""The import rule of docs/architecture.md ("Layers") holds, and the check can fail."""

from __future__ import annotations

import pytest

from .import_rules import (
    REPO,
    circles,
    import_graph,
    module_name,
    product_modules,
    tree_violations,
    violations,
)


def test_the_product_follows_the_import_rule() -> None:
    assert [str(v) for v in tree_violations()] == []


def test_every_core_package_is_checked() -> None:
    checked = {module_name(path)[0] for path in product_modules()}
    for module in ("cdc.capture.runner", "cdc.log.file.writer", "cdc.config.connector",
                   "cdc.errors", "cdc.observability.launch", "cdc.plugins.index",
                   "connectors.commands", "spark_pipelines.commands"):
        assert module in checked
    assert (REPO / "cdc" / "config" / "connector.py").is_file()


@pytest.mark.parametrize("source", [
    "import connectors.registry\n",
    "from connectors.registry import load_sink\n",
    "from derived import views\n",
    "def later() -> None:\n    from spark_pipelines.commands import replay\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import connectors\n",
    "import importlib\nimportlib.import_module('connectors.commands')\n",
    "class A:\n    def m(self) -> None:\n        import bench.tables\n",
])
def test_a_core_module_importing_a_layer_above_fails(source: str) -> None:
    found = violations("cdc.config.fake", source)
    assert len(found) == 1
    assert found[0].module == "cdc.config.fake"


def test_relative_imports_are_resolved() -> None:
    assert violations("cdc.config.fake", "from ..log import Log\n") == []
    assert [v.target for v in violations("connectors.runtime.fake",
                                         "from ...compose import launcher\n")] == ["compose"]


def test_the_composition_root_imports_the_layers_above_only_lazily() -> None:
    lazy = "def run() -> None:\n    from connectors.commands import run_connectors\n"
    assert violations("cdc.pipeline", lazy) == []
    eager = violations("cdc.cli", "from spark_pipelines.commands import replay\n")
    assert [(v.target, v.line) for v in eager] == [("spark_pipelines.commands", 1)]
    assert "only inside the command" in eager[0].rule


@pytest.mark.parametrize("module", ["cdc.cli", "connectors.commands", "spark_pipelines.x",
                                    "derived.apply"])
def test_product_code_never_imports_development_tools(module: str) -> None:
    found = violations(module, "def jars() -> None:\n    from compose.launcher import x\n")
    assert [v.target for v in found] == ["compose.launcher"]


def test_tests_and_tools_may_import_anything() -> None:
    assert violations("tests.unit.fake", "import connectors\nimport compose.launcher\n") == []
    assert violations("bench.fake", "import spark_pipelines\n") == []


def test_the_old_layering_would_fail() -> None:
    old_schema = "from cdc.config.models import PipelineConfig\n" \
                 "from connectors.registry import known_sinks\n"
    assert [str(v) for v in violations("cdc.config.schema", old_schema)] == [
        "cdc.config.schema:2 imports connectors.registry (the core imports nothing above it)"]


def test_no_product_modules_import_each_other_round() -> None:
    graph = import_graph()
    assert "cdc.log.file.directory" in graph["cdc.log.file.consumer"]  # under TYPE_CHECKING
    assert circles(graph) == []


def test_a_circle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert circles(graph) == [["a", "b", "c"]]
