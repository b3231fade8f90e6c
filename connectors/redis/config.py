"""Settings of the Redis sink: where Redis is, and how rows become keys and values."""

from __future__ import annotations

from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, model_validator

from cdc.config import (
    ConfigModel,
    Duration,
    raise_field_problems,
    template_validator,
    url_validator,
)

KEY_PLACEHOLDERS = ("prefix", "topic", "schema", "table", "key")

RedisUrl = Annotated[str, url_validator(("redis", "rediss", "unix"))]
KeyTemplate = Annotated[str, template_validator(KEY_PLACEHOLDERS, "{table}:{key.id}")]


class RedisSinkConfig(ConfigModel):
    """One Redis key per row, written with a compare-and-set on the row's version."""

    url: RedisUrl = Field(description="redis://host:6379/0, rediss:// (TLS) or unix://")
    password: SecretStr | None = Field(default=None, description="if the URL carries none")
    key_template: KeyTemplate = Field(
        default="{table}:{key}", description="placeholders: {prefix} {topic} {schema} {table}, "
        "{key} (all key columns joined by ':') or {key.<column>}")
    value_format: Literal["json", "hash"] = Field(
        default="json",
        description="json: the row as a JSON string; hash: one hash field per column")
    ttl: Duration | None = Field(default=None,
                                 description="expire keys after this long; null: never")

    @model_validator(mode="after")
    def _one_password(self) -> RedisSinkConfig:
        if self.password is not None and urlsplit(self.url).password:
            raise_field_problems("RedisSinkConfig", [(
                ("password",), "the URL already contains a password; give it in one place",
                None)])
        return self
