"""Plugins: the sink contract and the index of registered sinks (entry points).

The core defines what a sink is and finds the installed ones; ``connectors/`` implements
the built-in sinks and the runtime that feeds them (``connectors.contract`` and
``connectors.registry`` re-export these names).
"""

from .contract import (
    Rejection,
    Sink,
    SinkContext,
    SinkEvent,
    SinkFactory,
    SinkRejectedError,
    SinkUnavailableError,
    WriteResult,
    version_of,
)
from .index import (
    ENTRY_POINT_GROUP,
    SinkLoadError,
    SinkSpec,
    known_sinks,
    load_sink,
    sink_entry_points,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "Rejection",
    "Sink",
    "SinkContext",
    "SinkEvent",
    "SinkFactory",
    "SinkLoadError",
    "SinkRejectedError",
    "SinkSpec",
    "SinkUnavailableError",
    "WriteResult",
    "known_sinks",
    "load_sink",
    "sink_entry_points",
    "version_of",
]
