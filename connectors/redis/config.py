"""Settings of the Redis sink: where Redis is, and how rows become keys and values."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, model_validator

from cdc.config import (
    DataSize,
    Duration,
    Loc,
    RetentionTime,
    raise_field_problems,
    template_validator,
    url_validator,
)
from derived import JoinSettings, ViewDefinition, join_problems

KEY_PLACEHOLDERS = ("prefix", "topic", "schema", "table", "key")

RedisUrl = Annotated[str, url_validator(("redis", "rediss", "unix"))]
KeyTemplate = Annotated[str, template_validator(KEY_PLACEHOLDERS, "{table}:{key.id}")]


class RedisSinkConfig(JoinSettings):
    """One Redis key per row, written with a compare-and-set on the row's version."""

    url: RedisUrl | None = Field(
        default=None, description="redis://host:6379/0, rediss:// (TLS) or unix://; or urls")
    urls: tuple[RedisUrl, ...] = Field(
        default=(), description="a Redis Cluster instead of url: seed nodes (redis:// or "
        "rediss://, db 0), any of them; the others are discovered")
    password: SecretStr | None = Field(default=None, description="if the URL carries none")
    key_template: KeyTemplate = Field(
        default="{table}:{key}", description="placeholders: {prefix} {topic} {schema} {table}, "
        "{key} (all key columns joined by ':') or {key.<column>}")
    value_format: Literal["json", "hash"] = Field(
        default="json",
        description="json: the row as a JSON string; hash: one hash field per column")
    ttl: Duration | None = Field(default=None,
                                 description="expire keys after this long; null: never")
    mode: Literal["upsert", "invalidate"] = Field(
        default="upsert", description="upsert: keep each row's value in Redis; invalidate: "
        "delete the key on any change (for read-through caches)")
    tombstone_retention: RetentionTime = Field(
        default=timedelta(days=7), description="how long a deleted row's version is kept, so "
        "a replayed older write cannot bring the row back; 'forever' keeps it")
    max_value_bytes: DataSize = Field(
        default=512 * 1024**2, description="a row whose value (or one hash field) is larger "
        "goes to the dead-letter topic; keep it at most Redis's proto-max-bulk-len (512MB "
        "by default), which refuses larger values by dropping the connection")
    timeout: Duration = Field(default=timedelta(seconds=5),
                              description="connect and per-command timeout")
    views: tuple[ViewDefinition, ...] = Field(
        default=(), description="derived views; a view's key_template overrides key_template; "
        "tables without a view are written as they are")

    @model_validator(mode="after")
    def _consistent(self) -> RedisSinkConfig:
        problems = _address_problems(self)
        if self.password is not None and any(urlsplit(url).password for url in self.seeds):
            problems.append((("password",), "the URL already contains a password; give it in "
                             "one place", None))
        if self.mode == "invalidate" and self.ttl is not None:
            problems.append((("ttl",), "only used when mode is 'upsert' (invalidate writes no "
                             "values to expire); remove it or set mode: upsert", None))
        templates: dict[tuple[str, str], int] = {}
        for number, view in enumerate(self.views):
            template = view.key_template or self.key_template
            if (view.source, template) in templates:
                problems.append((("views", number, "key_template"), "another view of "
                                 f"{view.source} writes the same keys "
                                 f"(views[{templates[view.source, template]}]); give this view "
                                 "its own key_template", template))
            templates[view.source, template] = number
        problems.extend(join_problems(self.views, self.joins))
        if problems:
            raise_field_problems("RedisSinkConfig", problems)
        return self

    @property
    def cluster(self) -> bool:
        """True for a Redis Cluster (``urls``)."""
        return bool(self.urls)

    @property
    def seeds(self) -> tuple[str, ...]:
        """The URLs to connect to: ``url``, or the cluster's seed nodes."""
        return self.urls or ((self.url,) if self.url else ())


def _address_problems(config: RedisSinkConfig) -> list[tuple[Loc, str, object]]:
    """``url`` xor ``urls``; cluster seeds on TCP and db 0."""
    if config.url and config.urls:
        return [(("urls",), "give url (one Redis) or urls (the seed nodes of a Redis "
                 "Cluster), not both", [_shown(url) for url in config.urls])]
    if not config.url and not config.urls:
        return [(("url",), "where is Redis? give url: redis://host:6379/0, or urls: "
                 "[redis://host:7000, ...] for a Redis Cluster", None)]
    problems: list[tuple[Loc, str, object]] = []
    for number, url in enumerate(config.urls):
        parts = urlsplit(url)
        if parts.scheme == "unix":
            problems.append((("urls", number), "a Redis Cluster node is reached over TCP: "
                             "use redis://host:port or rediss://host:port", _shown(url)))
        elif parts.path.strip("/") not in ("", "0"):
            problems.append((("urls", number), "a Redis Cluster has only database 0: end "
                             "the URL with /0 or no path", _shown(url)))
    return problems


def _shown(url: str) -> str:
    """``url`` without its password, for an error message."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]
    return parts._replace(netloc=f"{parts.username or ''}:***@{host}").geturl()
