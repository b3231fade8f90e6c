"""The sink contract, defined in the core (:mod:`cdc.plugins.contract`) and re-exported
here for sinks: a sink implements ``Sink``; the runtime does everything else."""

from cdc.plugins.contract import (
    SEQ_BITS,
    SEQ_MAX,
    PreparingSink,
    Rejection,
    Sink,
    SinkContext,
    SinkEvent,
    SinkFactory,
    SinkRejectedError,
    SinkUnavailableError,
    Undecoded,
    WriteResult,
    version_of,
)

__all__ = [
    "SEQ_BITS",
    "SEQ_MAX",
    "PreparingSink",
    "Rejection",
    "Sink",
    "SinkContext",
    "SinkEvent",
    "SinkFactory",
    "SinkRejectedError",
    "SinkUnavailableError",
    "Undecoded",
    "WriteResult",
    "version_of",
]
