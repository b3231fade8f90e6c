"""The sink registry, kept in the core's plugin index (:mod:`cdc.plugins.index`) and
re-exported here: sinks are entry points of group ``distributary.sinks``."""

from cdc.plugins.index import (
    ENTRY_POINT_GROUP,
    SinkLoadError,
    SinkSpec,
    known_sinks,
    load_sink,
    sink_entry_points,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "SinkLoadError",
    "SinkSpec",
    "known_sinks",
    "load_sink",
    "sink_entry_points",
]
