"""The webhook's request body and its signature.

Body (``Content-Type: application/json``), one request per batch::

    {"connector": "orders-hook",
     "events": [{"topic": "app.public.orders", "partition": 1, "offset": 17,
                 "version": 24375410688003, "event": {"op": "u", "key": {"id": 42}, ...}}]}

``version`` is ``connectors.contract.version_of(commit_lsn, seq)``: for one key it only
grows, so a receiver keeps the event with the highest version it has seen (batches may
be delivered more than once, after a retry or a restart).

Signature: with ``signing_secret`` set, the header named by ``signature_header``
(default ``X-Distributary-Signature``) is ``sha256=`` followed by the lowercase hex
HMAC-SHA256 of the exact body bytes, keyed with the secret's UTF-8 bytes. A receiver
recomputes it over the raw body and compares in constant time (``signature_matches``).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

import orjson

from connectors.contract import SinkEvent

SIGNATURE_SCHEME = "sha256="


def encode_batch(connector: str, batch: Sequence[SinkEvent]) -> bytes:
    """The JSON body for ``batch`` (each event embedded exactly as the log holds it)."""
    return orjson.dumps({"connector": connector, "events": [
        {"topic": e.message.topic, "partition": e.message.partition,
         "offset": e.message.offset, "version": e.version,
         "event": orjson.Fragment(e.message.value)} for e in batch]})


def sign(secret: str, body: bytes) -> str:
    """The signature header value for ``body``: ``sha256=<hex>``."""
    digest = hmac.new(secret.encode("utf-8"), body, hashlib.sha256).hexdigest()
    return SIGNATURE_SCHEME + digest


def signature_matches(secret: str, body: bytes, header_value: str) -> bool:
    """True when ``header_value`` is the signature of ``body`` (for receivers and tests)."""
    return hmac.compare_digest(sign(secret, body), header_value.strip())
