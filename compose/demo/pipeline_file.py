"""The demo's pipeline file: ``compose/pipeline.yaml`` with this run's servers and names.

The run's name becomes the slot, the publication and a prefix of the index and cache key
templates and of the joined views' targets, so a demo can share servers with other runs;
the joined views keep their state in the run's directory. The topics keep the example's
prefix (``log.topic_prefix``), so its topic lists and patterns still apply.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from cdc.config import PipelineConfig, load_config

EXAMPLE = Path(__file__).resolve().parents[1] / "pipeline.yaml"
TOPIC_PREFIX = "distributary"


@dataclass(frozen=True)
class DemoServers:
    """Where this run's servers are, and its unique name."""

    dsn: str
    redis_url: str
    opensearch_url: str
    name: str


def write_pipeline(servers: DemoServers, workdir: Path, metrics_port: int) -> Path:
    """Write ``workdir/pipeline.yaml`` and return its path (validated by the loader)."""
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    source = data["source"]
    source.update(dsn=servers.dsn, slot=servers.name, publication=servers.name,
                  snapshot="never")
    data["log"].update(path=str(workdir / "log"), topic_prefix=TOPIC_PREFIX)
    for connector in data["connectors"]:
        settings = connector["config"]
        connector["batch_timeout"] = "200ms"
        if connector["type"] == "opensearch":
            settings["hosts"] = [servers.opensearch_url]
            settings["index"] = f"{servers.name}_{settings.get('index', '{table}')}"
        elif connector["type"] == "redis":
            settings["url"] = servers.redis_url
            settings["key_template"] = f"{servers.name}:{settings['key_template']}"
        for join in settings.get("joins", ()):
            _quote_on(join)
            join["target"] = f"{servers.name}_{join['target']}"
            if "key_template" in join:
                join["key_template"] = f"{servers.name}:{join['key_template']}"
        if "join_state_dir" in settings:
            settings["join_state_dir"] = str(workdir / "joins")
    data["spark"].update(master="local[2]", output_path=str(workdir / "spark"))
    data["metrics"]["port"] = metrics_port
    path = workdir / "pipeline.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    load_config(path)
    return path


def read_pipeline(path: Path) -> PipelineConfig:
    """The validated config of a written pipeline file."""
    return load_config(path)


def _quote_on(level: dict[Any, Any]) -> None:
    """YAML 1.1 reads an unquoted ``on:`` key as ``True``: name it ``on`` again in ``level``
    and the levels below (``safe_dump`` then writes ``'on':``, not ``true:``)."""
    for key in list(level):
        value = level.pop(key)
        level["on" if key is True else key] = value
    for child in (*level.get("lookups", ()), *level.get("nested", ())):
        _quote_on(child)
