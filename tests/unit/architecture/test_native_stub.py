"""The stub ``distributary_native.pyi`` is the native module's interface as
mypy sees it: it must name what the built module holds, with the same parameters."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path
from types import ModuleType

import pytest

STUB = Path(__file__).resolve().parents[3] / "distributary_native.pyi"


@pytest.fixture(scope="module")
def core() -> ModuleType:
    return importlib.import_module("distributary_native")


def _stub() -> dict[str, ast.FunctionDef | ast.ClassDef]:
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    return {node.name: node for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and not node.name.startswith("_")}


def _annotated(body: list[ast.stmt]) -> dict[str, str]:
    """The names ``body`` declares with an annotation (constants), to its source."""
    return {node.target.id: ast.unparse(node.annotation) for node in body
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)}


def _python_type(annotation: str) -> type:
    """The runtime type a constant's annotation names (``dict[str, int]`` → ``dict``)."""
    return {"int": int, "str": str, "bytes": bytes}.get(annotation) or dict


def _stub_parameters(node: ast.FunctionDef) -> list[tuple[str, str | None]]:
    """``(name, default's source or None)`` of each parameter but ``self``."""
    args = node.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    pairs = [(a.arg, d) for a, d in zip(positional, [*defaults, *args.defaults], strict=True)]
    pairs += list(zip((a.arg for a in args.kwonlyargs), args.kw_defaults, strict=True))
    return [(name, None if d is None else ast.unparse(d)) for name, d in pairs
            if name != "self"]


def _runtime_parameters(obj: object) -> list[tuple[str, str | None]]:
    signature = inspect.signature(obj)  # type: ignore[arg-type]
    return [(p.name, None if p.default is p.empty else repr(p.default))
            for p in signature.parameters.values() if p.name != "self"]


def test_the_stub_names_what_the_module_holds(core: ModuleType) -> None:
    # maturin's package re-exports the extension, which leaves the extension module
    # itself (distributary_native.distributary_native) as an attribute: not the interface
    public = {name for name, value in vars(core).items()
              if not name.startswith("_") and not isinstance(value, ModuleType)}
    tree = ast.parse(STUB.read_text(encoding="utf-8"))
    constants = _annotated(tree.body)
    assert set(_stub()) | set(constants) == public
    for name, annotation in constants.items():
        assert isinstance(getattr(core, name), _python_type(annotation)), name


def test_each_function_has_the_modules_parameters(core: ModuleType) -> None:
    for name, node in _stub().items():
        if isinstance(node, ast.FunctionDef):
            assert _stub_parameters(node) == _runtime_parameters(getattr(core, name)), name


def test_each_class_has_the_modules_constructor_and_methods(core: ModuleType) -> None:
    for name, node in _stub().items():
        if not isinstance(node, ast.ClassDef):
            continue
        cls = getattr(core, name)
        methods = {item.name: item for item in node.body if isinstance(item, ast.FunctionDef)}
        properties = {name for name, item in methods.items()
                      if any(isinstance(d, ast.Name) and d.id == "property"
                             for d in item.decorator_list)}
        for prop in properties:  # a #[pyo3(get)] field or a #[getter]
            assert inspect.isdatadescriptor(vars(cls)[prop]), f"{name}.{prop}"
            methods.pop(prop)
        constants = _annotated(node.body)
        for constant, annotation in constants.items():
            assert isinstance(getattr(cls, constant), _python_type(annotation)), constant
        init = methods.pop("__init__", None)
        # a class without #[new] has no constructor: its signature is ``()``
        constructor = [] if init is None else _stub_parameters(init)
        assert constructor == _runtime_parameters(cls), name
        runtime = {attr for attr in vars(cls)
                   if not attr.startswith("_") or attr == "__len__"}
        assert set(methods) | properties | set(constants) == runtime, name
        for method, item in methods.items():
            assert _stub_parameters(item) == _runtime_parameters(getattr(cls, method)), (
                f"{name}.{method}")


def test_the_installed_stub_is_this_one(core: ModuleType) -> None:
    # maturin installs the stub as the package's __init__.pyi (with py.typed): a stale one
    # means mypy checks against an old interface (rebuild: make setup)
    package = Path(core.__file__ or "").parent
    assert (package / "py.typed").exists()
    installed = package / "__init__.pyi"
    assert installed.read_text(encoding="utf-8") == STUB.read_text(encoding="utf-8")
