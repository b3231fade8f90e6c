"""``source.failover_slot``: the replication commands and the version check."""

from __future__ import annotations

import pytest

from cdc.capture.doctor import standby_settings
from cdc.capture.source.slot import (
    alter_failover_query,
    create_slot_query,
    require_failover_support,
)
from cdc.config import PipelineConfig
from cdc.errors import SourceError


def test_create_slot_query_lists_failover_after_the_other_options() -> None:
    query = create_slot_query("s", export_snapshot=True, two_phase=True, failover=True)
    assert query.as_string(None) == ('CREATE_REPLICATION_SLOT "s" LOGICAL pgoutput '
                                     "(SNAPSHOT 'export', TWO_PHASE true, FAILOVER true)")
    query = create_slot_query("s", export_snapshot=False, two_phase=False, failover=True)
    assert query.as_string(None) == ('CREATE_REPLICATION_SLOT "s" LOGICAL pgoutput '
                                     "(SNAPSHOT 'nothing', FAILOVER true)")


def test_alter_failover_query() -> None:
    assert alter_failover_query("s").as_string(None) == \
        'ALTER_REPLICATION_SLOT "s" (FAILOVER true)'


def test_failover_refused_before_17_naming_version_and_setting() -> None:
    require_failover_support(160004, failover=False)
    require_failover_support(170006, failover=True)
    with pytest.raises(SourceError, match=r"source\.failover_slot.*PostgreSQL 16.*17"):
        require_failover_support(160004, failover=True)


def test_failover_slot_defaults_off() -> None:
    config = PipelineConfig.model_validate({
        "source": {"dsn": "postgresql://app@127.0.0.1/app", "slot": "s", "publication": "p"},
        "log": {"backend": "file", "path": "/tmp/log"}})
    assert config.source.failover_slot is False


def test_standby_settings_name_every_setting_and_the_database() -> None:
    text = standby_settings("app")
    for setting in ("sync_replication_slots = on", "hot_standby_feedback = on",
                    "primary_slot_name", "primary_conninfo", "dbname=app"):
        assert setting in text
