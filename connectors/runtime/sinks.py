"""Building a connector's sink from the registry."""

from __future__ import annotations

from cdc.config import ConnectorConfig
from cdc.extras import MissingExtraError, missing_extra
from connectors.contract import Sink, SinkContext
from connectors.joins import joined_sink
from connectors.registry import load_sink

from .errors import SinkNotRunnableError

SINK_METHODS = ("open", "write", "flush", "close")


def build_sink(connector: ConnectorConfig, context: SinkContext) -> Sink:
    """``load_sink(type).factory(config, context)``, checked; not opened yet.

    A factory that cannot import its library raises ``MissingExtraError`` naming the extra.
    """
    spec = load_sink(connector.type)
    if spec.factory is None:
        raise SinkNotRunnableError(connector.type, "its SinkSpec has no factory (the config "
                                   "can be validated, but no sink is implemented yet)")
    joins = getattr(connector.config, "joins", ())  # the OpenSearch and Redis sinks'
    try:
        sink = (joined_sink(spec.factory, connector.config, context, connector.batch_size) if joins
                else spec.factory(connector.config, context))
    except ImportError as exc:
        extra = missing_extra(exc)
        if extra is None:
            raise
        raise MissingExtraError(f"the {connector.type} sink", extra) from exc
    missing = [name for name in SINK_METHODS if not callable(getattr(sink, name, None))]
    if missing:
        raise SinkNotRunnableError(connector.type, f"its factory returned a "
                                   f"{type(sink).__name__!r}, which lacks {', '.join(missing)}")
    return sink
