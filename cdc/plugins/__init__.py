"""Plugins: the sink contract and the index of registered sinks (entry points).

The core defines what a sink is and finds the installed ones; ``connectors/`` implements
the built-in sinks and the runtime that feeds them (``connectors.contract`` and
``connectors.registry`` re-export these names).
"""

from . import contract, index
from .contract import *  # noqa: F403 (every name of ``contract.__all__``)
from .index import *  # noqa: F403 (every name of ``index.__all__``)

__all__ = [*contract.__all__, *index.__all__]
