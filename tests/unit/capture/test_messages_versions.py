"""Which servers send logical decoding messages, and the errors on those that do not."""

from __future__ import annotations

import pytest

from cdc.capture.source.messages import (
    MessagesUnsupportedError,
    ddl_capture_refusal,
    incremental_refusal,
    require_outbox_messages,
    sends_messages,
)
from cdc.errors import TerminalError


def test_messages_come_with_postgresql_14() -> None:
    assert not sends_messages(130022)
    assert sends_messages(140000) and sends_messages(180001)


def test_outbox_prefixes_on_13_stop_naming_the_version_and_the_alternative() -> None:
    require_outbox_messages(130022, ())  # nothing configured: nothing to refuse
    require_outbox_messages(140019, ("outbox",))
    with pytest.raises(MessagesUnsupportedError) as raised:
        require_outbox_messages(130022, ("outbox",))
    assert isinstance(raised.value, TerminalError), "stops the capture, never retried"
    text = str(raised.value)
    assert text.startswith("source.messages_prefixes ['outbox']: PostgreSQL 13's pgoutput")
    assert "rows of a published table" in text and "PostgreSQL 14 or later" in text


def test_ddl_capture_and_incremental_snapshots_are_refused_on_13_only() -> None:
    assert ddl_capture_refusal(140000) is None and incremental_refusal(170000, "s") is None
    ddl = ddl_capture_refusal(130022)
    assert ddl is not None and ddl.startswith("cdc ddl install: PostgreSQL 13's pgoutput")
    incremental = incremental_refusal(130022, "app_slot")
    assert incremental is not None and incremental.startswith("PostgreSQL 13: incremental")
    assert "pg_drop_replication_slot('app_slot')" in incremental
    assert "--recreate-lost-slot" in incremental
