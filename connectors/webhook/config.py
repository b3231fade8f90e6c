"""Settings of the webhook sink: where batches are POSTed, and how they are signed."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from pydantic import AfterValidator, Field, SecretStr, model_validator

from cdc.config import ConfigModel, Duration, HttpUrl, raise_field_problems

_TOKEN_CHARS = set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def _header_name(name: str) -> str:
    if not name or not set(name) <= _TOKEN_CHARS:
        raise ValueError("expected an HTTP header name (letters, digits, '-')")
    return name


HeaderName = Annotated[str, AfterValidator(_header_name)]


class WebhookSinkConfig(ConfigModel):
    """Each batch is one JSON POST; with a signing secret it carries an HMAC-SHA256 header."""

    url: HttpUrl = Field(description="the endpoint that receives the batches")
    headers: dict[HeaderName, SecretStr] = Field(
        default_factory=dict, description="extra request headers (values are kept secret)")
    signing_secret: SecretStr | None = Field(
        default=None, description="HMAC-SHA256 key: the signature header is 'sha256=' and "
        "the hex HMAC of the raw body; null: unsigned")
    signature_header: HeaderName = Field(default="X-Distributary-Signature",
                                         description="the header carrying the signature")
    timeout: Duration = Field(default=timedelta(seconds=10), description="per request")

    @model_validator(mode="after")
    def _signature_header_free(self) -> WebhookSinkConfig:
        taken = {name.lower() for name in self.headers}
        if self.signing_secret is not None and self.signature_header.lower() in taken:
            raise_field_problems("WebhookSinkConfig", [(
                ("signature_header",), f"{self.signature_header!r} is also set in headers; "
                "the signature would overwrite it", self.signature_header)])
        return self
