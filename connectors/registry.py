"""The sink registry, kept in the core's plugin index (:mod:`cdc.plugins.index`) and
re-exported here: sinks are entry points of group ``distributary.sinks``."""

from cdc.plugins import index as _core
from cdc.plugins.index import *  # noqa: F403 (every name of ``_core.__all__``)

__all__ = _core.__all__
