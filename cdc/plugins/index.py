"""The sink plugin index: sinks are entry points of group ``distributary.sinks``.

Each entry point names a module attribute holding a :class:`SinkSpec`, for example
``opensearch = "connectors.opensearch:SPEC"`` in ``pyproject.toml``. Third-party
packages register their own sinks the same way. Config validation looks sinks up here,
so the core never imports the connectors that implement them.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

from pydantic import BaseModel

from cdc.errors import TerminalError
from cdc.extras import install_hint, missing_extra

from .contract import SinkFactory

__all__ = [
    "ENTRY_POINT_GROUP",
    "SinkLoadError",
    "SinkSpec",
    "known_sinks",
    "load_sink",
    "sink_entry_points",
]

ENTRY_POINT_GROUP = "distributary.sinks"


@dataclass(frozen=True, slots=True)
class SinkSpec:
    """What the runtime needs to know about one sink.

    ``config_model`` validates the connector's ``config:`` mapping. ``factory`` builds
    one sink per worker as ``factory(config, context)``: ``config`` is the validated
    ``config_model`` instance, ``context`` a :class:`cdc.plugins.contract.SinkContext`
    (connector name, topic prefix, worker index); it returns an object implementing
    :class:`cdc.plugins.contract.Sink`, not yet opened. ``None`` means the sink's config
    can be validated but the sink cannot run (the runtime then names the type).
    """

    name: str
    config_model: type[BaseModel]
    factory: SinkFactory | None = None


class SinkLoadError(TerminalError):
    """A registered sink entry point could not be loaded, or is not a ``SinkSpec``."""

    def __init__(self, entry_point: str, reason: str) -> None:
        self.entry_point = entry_point
        self.reason = reason
        super().__init__(f"cannot load sink entry point {entry_point!r} "
                         f"(group {ENTRY_POINT_GROUP}): {reason}")


def _describe(entry_point: EntryPoint) -> str:
    return f"{entry_point.name} = {entry_point.value}"


def sink_entry_points() -> dict[str, EntryPoint]:
    """The registered sinks by name, without importing them."""
    found: dict[str, EntryPoint] = {}
    for entry_point in entry_points(group=ENTRY_POINT_GROUP):
        known = found.get(entry_point.name)
        if known is not None and known.value != entry_point.value:
            raise SinkLoadError(_describe(entry_point),
                                f"the name is already registered as {known.value!r}")
        found[entry_point.name] = entry_point
    return dict(sorted(found.items()))


def load_sink(name: str) -> SinkSpec:
    """Import and check the sink registered as ``name``.

    Raises ``LookupError`` if no sink has that name, ``SinkLoadError`` if it is broken.
    """
    registered = sink_entry_points()
    entry_point = registered.get(name)
    if entry_point is None:
        raise LookupError(f"{name!r} is not a known sink; known: {', '.join(registered)}")
    return _load(entry_point)


def _load(entry_point: EntryPoint) -> SinkSpec:
    try:
        spec = entry_point.load()
    except Exception as exc:  # any import-time failure of a plugin is reported the same way
        reason = f"{type(exc).__name__}: {exc}"
        extra = missing_extra(exc)
        if extra is not None:
            reason += f"; the {entry_point.name} sink needs the {extra} extra: " \
                      f"{install_hint(extra)}"
        raise SinkLoadError(_describe(entry_point), reason) from exc
    if not isinstance(spec, SinkSpec):
        raise SinkLoadError(_describe(entry_point),
                            f"expected a SinkSpec, got {type(spec).__name__}")
    if spec.name != entry_point.name:
        raise SinkLoadError(_describe(entry_point),
                            f"the SinkSpec is named {spec.name!r}, not {entry_point.name!r}")
    if not (isinstance(spec.config_model, type) and issubclass(spec.config_model, BaseModel)):
        raise SinkLoadError(_describe(entry_point), "config_model is not a pydantic model")
    return spec


def known_sinks() -> dict[str, SinkSpec]:
    """Every registered sink by name, loaded; ``SinkLoadError`` names a broken one."""
    return {name: _load(entry_point) for name, entry_point in sink_entry_points().items()}
