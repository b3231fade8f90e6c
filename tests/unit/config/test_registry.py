"""The sink registry: entry points of group ``distributary.sinks``."""

from __future__ import annotations

import re
from importlib.metadata import EntryPoint

import pytest

from cdc.config import parse_config
from cdc.errors import ConfigError
from cdc.plugins import index as registry
from cdc.plugins.index import SinkLoadError, SinkSpec, known_sinks, load_sink
from connectors.opensearch import OpenSearchSinkConfig
from connectors.redis import RedisSinkConfig
from connectors.webhook import WebhookSinkConfig
from tests.unit.config.conftest import VALID


def use_entry_points(monkeypatch: pytest.MonkeyPatch, **values: str) -> None:
    """Replace the installed sink entry points with ``name="module:attribute"`` ones."""
    points = [EntryPoint(name, value, registry.ENTRY_POINT_GROUP) for name, value in
              values.items()]
    monkeypatch.setattr(registry, "entry_points", lambda group: points)


def test_built_in_sinks_are_registered() -> None:
    sinks = known_sinks()
    assert list(sinks) == ["opensearch", "redis", "webhook"]
    assert sinks["opensearch"].config_model is OpenSearchSinkConfig
    assert sinks["redis"].config_model is RedisSinkConfig
    assert sinks["webhook"].config_model is WebhookSinkConfig
    assert all(isinstance(spec, SinkSpec) for spec in sinks.values())
    assert sinks["webhook"].factory is not None


def test_unknown_sink_lists_the_known_ones() -> None:
    with pytest.raises(LookupError, match="'nope' is not a known sink; known: opensearch, "
                                          "redis, webhook"):
        load_sink("nope")


@pytest.mark.parametrize(("value", "reason"), [
    ("distributary_no_such_module:SPEC", "ModuleNotFoundError"),
    ("connectors.redis:NO_SUCH_ATTRIBUTE", "AttributeError"),
    ("json:dumps", "expected a SinkSpec, got function"),
    ("connectors.webhook:SPEC", "the SinkSpec is named 'webhook', not 'broken'"),
])
def test_broken_entry_point_names_itself(monkeypatch: pytest.MonkeyPatch, value: str,
                                         reason: str) -> None:
    use_entry_points(monkeypatch, broken=value)
    with pytest.raises(SinkLoadError) as caught:
        known_sinks()
    assert caught.value.entry_point == f"broken = {value}"
    assert str(caught.value).startswith(f"cannot load sink entry point 'broken = {value}' "
                                        "(group distributary.sinks): ")
    assert reason in str(caught.value)


def test_one_name_registered_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    points = [EntryPoint("redis", "connectors.redis:SPEC", registry.ENTRY_POINT_GROUP),
              EntryPoint("redis", "other_package:SPEC", registry.ENTRY_POINT_GROUP)]
    monkeypatch.setattr(registry, "entry_points", lambda group: points)
    with pytest.raises(SinkLoadError, match=re.escape("already registered as 'connectors.redis:")):
        known_sinks()


def test_broken_sink_in_a_config_is_a_config_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    use_entry_points(monkeypatch, opensearch="connectors.opensearch:SPEC",
                     broken="distributary_no_such_module:SPEC")
    text = VALID + "  - {name: other, type: broken, topics: [a]}\n"
    with pytest.raises(ConfigError) as caught:
        parse_config(text, env={})
    assert [str(problem) for problem in caught.value.problems] == [
        "connectors[1].type: cannot load sink entry point 'broken = "
        "distributary_no_such_module:SPEC' (group distributary.sinks): ModuleNotFoundError: "
        "No module named 'distributary_no_such_module' (line 15)"]


def test_a_broken_sink_does_not_spoil_others(monkeypatch: pytest.MonkeyPatch) -> None:
    use_entry_points(monkeypatch, opensearch="connectors.opensearch:SPEC",
                     broken="distributary_no_such_module:SPEC")
    assert parse_config(VALID, env={}).connectors[0].type == "opensearch"


def test_no_sinks_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    use_entry_points(monkeypatch)
    with pytest.raises(ConfigError, match=r"'opensearch' is not a known sink; "
                                          r"known: \(none registered\)"):
        parse_config(VALID, env={})
