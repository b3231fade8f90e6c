"""The sink contract, defined in the core (:mod:`cdc.plugins.contract`) and re-exported
here for sinks: a sink implements ``Sink``; the runtime does everything else."""

from cdc.plugins import contract as _core
from cdc.plugins.contract import *  # noqa: F403 (every name of ``_core.__all__``)

__all__ = _core.__all__
