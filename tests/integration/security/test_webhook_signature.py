"""A real HTTP receiver verifies the webhook's signature the way the docs say — written
here from the documentation alone (``hmac`` + ``hashlib``, not the package's helper): the
``X-Distributary-Signature`` header is ``sha256=`` + the hex HMAC-SHA256 of the raw body,
keyed with the secret's UTF-8 bytes, compared in constant time. Forged or tampered
requests fail that check."""

from __future__ import annotations

import hashlib
import hmac
import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from cdc.log.file import FileLog, FileLogSettings
from tests.integration.connectors.test_webhook_sink import runner, webhook
from tests.integration.connectors.webhook_receiver import Receiver, Request, webhook_receiver
from tests.unit.connectors.conftest import append_events, run_until

SECRET = "receiver-side-Secret-31"


def receiver_accepts(request: Request) -> bool:
    """What a receiver does, following the README."""
    header = request.headers.get("x-distributary-signature", "")
    expected = "sha256=" + hmac.new(SECRET.encode("utf-8"), request.body,
                                    hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, header)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with webhook_receiver() as running:
        running.answer = lambda request: (200, {}) if receiver_accepts(request) else (401, {})
        yield running


def test_a_receiver_verifies_signed_batches(tmp_path: Path, receiver: Receiver) -> None:
    log = FileLog(tmp_path / "log", FileLogSettings(default_partitions=1, fsync=False))
    try:
        append_events(log, list(range(5)))
        connector = webhook(receiver.url, signing_secret=SECRET)
        run_until(runner(log, connector), lambda: len(receiver.accepted_keys()) == 5)
    finally:
        log.close()
    assert all(status == 200 for _, status in receiver.answered), receiver.answered

    genuine = receiver.requests[0]
    tampered = genuine.body.replace(b'"id":0', b'"id":9')
    assert tampered != genuine.body
    for body, signature in ((tampered, genuine.headers["x-distributary-signature"]),
                            (genuine.body, "sha256=" + "0" * 64),
                            (genuine.body, "")):
        forged = urllib.request.Request(receiver.url, data=body, method="POST", headers={
            "Content-Type": "application/json", "X-Distributary-Signature": signature})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(forged, timeout=5)
        assert refused.value.code == 401
    assert json.loads(genuine.body)["events"][0]["event"]["key"] == {"id": 0}
