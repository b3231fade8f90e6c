"""A ``connectors:`` entry: which topics feed which sink, how fast, and at what lag."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from cdc.config.base import ConfigModel, Loc, raise_field_problems
from cdc.config.fields import Duration, RegexPattern, TopicName
from cdc.plugins.index import SinkLoadError, load_sink, sink_entry_points


def _connector_name(value: str) -> str:
    if not value or len(value) > 100 or not all(c.isalnum() or c in "._-" for c in value):
        raise ValueError("expected a name of letters, digits, '.', '_' or '-' (1-100)")
    return value


ModelClass = type[BaseModel]
ConnectorName = Annotated[str, AfterValidator(_connector_name)]

SinkConfig = Annotated[BaseModel, WithJsonSchema(
    {"type": "object", "description": "the sink's own settings (see the sink named by type)"})]


class UncheckedSinkConfig(ConfigModel, extra="allow"):
    """Stands in for ``config`` when ``type`` is invalid (that error is reported instead)."""


class BackpressureConfig(ConfigModel):
    """What a consumer does when it falls behind the log."""

    policy: Literal["buffer", "drop", "block"] = Field(
        default="buffer", description="buffer: keep everything within retention; drop: skip to the "
        "newest past max_lag; block: pause the capture's acknowledgements past max_lag")
    max_lag: int | None = Field(default=None, ge=1, description="events behind; for drop and block")

    @model_validator(mode="after")
    def _max_lag_fits_policy(self) -> BackpressureConfig:
        if self.policy in ("drop", "block") and self.max_lag is None:
            raise_field_problems("BackpressureConfig", [(
                ("max_lag",), f"required when policy is {self.policy!r}; "
                "expected a number of events, like 100000", None)])
        if self.policy == "buffer" and self.max_lag is not None:
            raise_field_problems("BackpressureConfig", [(
                ("max_lag",), "only used when policy is 'drop' or 'block'; remove it "
                "or change the policy", self.max_lag)])
        return self


class RetryConfig(ConfigModel):
    """How the runtime retries a sink's transient errors: exponential backoff, full jitter."""

    initial_backoff: Duration = Field(default=timedelta(milliseconds=500),
                                      description="the longest wait before the first retry")
    max_backoff: Duration = Field(default=timedelta(seconds=60),
                                  description="the longest wait between two attempts")
    max_attempts: int | None = Field(
        default=None, ge=1, description="give up (stop the connector) after this many "
        "attempts of one write; null: retry until it works, logging every attempt")

    @model_validator(mode="after")
    def _backoff_order(self) -> RetryConfig:
        if self.max_backoff < self.initial_backoff:
            raise_field_problems("RetryConfig", [(
                ("max_backoff",), "must be at least initial_backoff "
                f"({self.initial_backoff.total_seconds():g}s)", None)])
        return self


class ConnectorConfig(ConfigModel):
    """One consumer group feeding one sink; ``config`` is checked by the sink's own model."""

    name: ConnectorName = Field(description="unique; also the consumer group's name")
    type: str = Field(description="the sink to feed, like opensearch, redis or webhook")
    topics: Annotated[tuple[TopicName, ...], Field(min_length=1)] | None = Field(
        default=None, description="the topics to consume (or topic_pattern)")
    topic_pattern: RegexPattern | None = Field(
        default=None, description="a regular expression over topic names (or topics)")
    workers: int = Field(default=1, ge=1, le=256, description="parallel consumers in the group")
    batch_size: int = Field(default=500, ge=1, description="events per sink write, at most")
    batch_timeout: Duration = Field(default=timedelta(seconds=1),
                                    description="write a partial batch after this long")
    backpressure: BackpressureConfig = Field(default_factory=BackpressureConfig)
    retry: RetryConfig = Field(default_factory=RetryConfig)
    config: SinkConfig = Field(default_factory=lambda: UncheckedSinkConfig(),
                               validate_default=True)

    @field_validator("type")
    @classmethod
    def _registered_sink(cls, sink: str) -> str:
        try:
            load_sink(sink)
        except LookupError:
            known = ", ".join(sink_entry_points()) or "(none registered)"
            raise PydanticCustomError("unknown_sink", "{sink} is not a known sink; known: {known}",
                                      {"sink": repr(sink), "known": known}) from None
        except SinkLoadError as exc:
            raise PydanticCustomError("broken_sink", "{reason}", {"reason": str(exc)}) from None
        return sink

    @field_validator("config", mode="before")
    @classmethod
    def _sink_settings(cls, settings: Any, info: ValidationInfo) -> Any:
        sink = info.data.get("type")
        if sink is None:
            return UncheckedSinkConfig()
        if isinstance(settings, UncheckedSinkConfig):
            settings = {}
        return load_sink(sink).config_model.model_validate(settings)

    @model_validator(mode="after")
    def _one_topic_selector(self) -> ConnectorConfig:
        if (self.topics is None) == (self.topic_pattern is None):
            both = self.topics is not None
            raise_field_problems("ConnectorConfig", [(
                ("topic_pattern" if both else "topics",),
                "give either topics or topic_pattern, not both" if both
                else "missing: give topics (a list) or topic_pattern (a regex)", None)])
        if getattr(self.config, "joins", ()) and self.workers > 1:
            raise_field_problems("ConnectorConfig", [(
                ("workers",), "a connector with joins runs one worker (its joined views keep "
                "one state store); set workers: 1, or move the plain views to a second "
                "connector", self.workers)])
        return self

    @classmethod
    def field_model(cls, field: str, raw: Mapping[str, Any]) -> ModelClass | None:
        """The model validating ``field`` of the raw mapping ``raw``: the sink's for ``config``."""
        if field != "config" or not isinstance(raw.get("type"), str):
            return None
        try:
            return load_sink(raw["type"]).config_model
        except (LookupError, SinkLoadError):
            return None


def duplicate_names(connectors: Sequence[object]) -> list[tuple[Loc, str, object]]:
    """A problem per connector whose name an earlier one already has (raw or validated)."""
    first_seen: dict[str, int] = {}
    problems: list[tuple[Loc, str, object]] = []
    for index, connector in enumerate(connectors):
        name = connector.get("name") if isinstance(connector, dict) else getattr(
            connector, "name", None)
        if not isinstance(name, str):
            continue
        if name in first_seen:
            problems.append(((index, "name"), f"{name!r} is already the name of "
                             f"connectors[{first_seen[name]}]; names must be unique", name))
        first_seen.setdefault(name, index)
    return problems
