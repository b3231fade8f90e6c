from __future__ import annotations

from cdc.observability.auth import BearerToken
from cdc.observability.health import PartHealth, readiness


def test_ready_when_every_part_is() -> None:
    status, body = readiness([PartHealth("capture", "streaming"),
                              PartHealth("connector cache", "running")])
    assert status == 200
    assert body == {"status": "ready",
                    "parts": {"capture": "streaming", "connector cache": "running"}}


def test_not_ready_names_each_reason() -> None:
    status, body = readiness([PartHealth("capture", "starting", "not streaming yet"),
                              PartHealth("connector cache", "running"),
                              PartHealth("connector search", "failed", "failed (see the log)")])
    assert status == 503
    assert body["status"] == "not ready"
    assert body["reasons"] == ["capture: not streaming yet",
                               "connector search: failed (see the log)"]


def test_nothing_running_is_not_ready() -> None:
    assert readiness([])[0] == 503


def test_without_a_token_everything_is_allowed() -> None:
    token = BearerToken(None)
    assert not token.required
    assert token.allows(None) and token.allows("Bearer anything")
    assert BearerToken("").allows(None)


def test_a_token_must_match_exactly() -> None:
    token = BearerToken("s3cret-token")
    assert token.required
    assert token.allows("Bearer s3cret-token")
    assert token.allows("  Bearer s3cret-token ")
    for header in (None, "", "s3cret-token", "Bearer s3cret", "Bearer s3cret-token2",
                   "Basic s3cret-token", "bearer S3CRET-TOKEN"):
        assert not token.allows(header), header


def test_the_token_is_never_shown() -> None:
    assert "s3cret" not in repr(BearerToken("s3cret-token"))
