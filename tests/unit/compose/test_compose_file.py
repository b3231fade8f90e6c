"""``compose/docker-compose.yml`` is whole: it parses, names only services, volumes and
profiles that exist, mounts files the repository has, and mounts valid pipelines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from cdc.config import load_config

COMPOSE_DIR = Path(__file__).resolve().parents[3] / "compose"
COMPOSE_FILE = COMPOSE_DIR / "docker-compose.yml"
PROFILES = {"kafka", "jobs"}


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict)
    return data


def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = compose["services"]
    return found


def mounts(service: dict[str, Any]) -> list[tuple[str, str]]:
    """(source, target) of each short-syntax volume entry."""
    return [(entry.split(":")[0], entry.split(":")[1]) for entry in service.get("volumes", [])]


def test_services_and_dependencies_exist(compose: dict[str, Any]) -> None:
    known = services(compose)
    assert {"postgres", "opensearch", "redis", "kafka", "distributary", "spark"} <= set(known)
    for name, service in known.items():
        for dependency in service.get("depends_on", {}):
            assert dependency in known, f"{name} depends on unknown service {dependency}"
            needed = set(known[dependency].get("profiles", []))
            assert needed <= set(service.get("profiles", [])) or not needed, (
                f"{name} runs without profile {needed} but depends on {dependency}")


def test_profiles_are_known_and_kafka_is_one(compose: dict[str, Any]) -> None:
    used = {p for s in services(compose).values() for p in s.get("profiles", [])}
    assert used == PROFILES
    assert services(compose)["kafka"]["profiles"] == ["kafka"]


def test_named_volumes_are_declared(compose: dict[str, Any]) -> None:
    declared = set(compose.get("volumes", {}))
    used = {source for s in services(compose).values() for source, _ in mounts(s)
            if not source.startswith((".", "/"))}
    assert used <= declared, f"undeclared volumes: {used - declared}"
    assert declared <= used, f"unused volumes: {declared - used}"


def test_mounted_files_and_build_context_exist(compose: dict[str, Any]) -> None:
    for name, service in services(compose).items():
        for source, _ in mounts(service):
            if source.startswith("."):
                assert (COMPOSE_DIR / source).exists(), f"{name} mounts missing {source}"
        build = service.get("build")
        if build is not None:
            context = COMPOSE_DIR / build["context"]
            assert (context / build.get("dockerfile", "Dockerfile")).is_file()
            assert "python:3.11" in (context / build.get("dockerfile", "Dockerfile")).read_text()


def test_images_are_pinned_or_built_here(compose: dict[str, Any]) -> None:
    built = {s["image"] for s in services(compose).values() if "build" in s and "image" in s}
    for name, service in services(compose).items():
        image = service.get("image")
        assert image is not None or "build" in service, name
        if image is not None and image not in built:
            assert ":" in image and not image.endswith(":latest"), f"{name}: pin {image}"


def test_postgres_runs_with_logical_wal(compose: dict[str, Any]) -> None:
    command = " ".join(services(compose)["postgres"]["command"])
    assert "wal_level=logical" in command
    environment = services(compose)["opensearch"]["environment"]
    assert environment["DISABLE_SECURITY_PLUGIN"] == "true"


@pytest.mark.parametrize("service_name", ["distributary", "distributary-kafka", "spark"])
def test_mounted_pipelines_validate(compose: dict[str, Any], service_name: str,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    service = services(compose)[service_name]
    pipelines = [source for source, target in mounts(service) if target.endswith(".yaml")]
    assert pipelines, f"{service_name} mounts no pipeline file"
    for key, value in service.get("environment", {}).items():
        monkeypatch.setenv(key, str(value))
    for source in pipelines:
        config = load_config(COMPOSE_DIR / source)
        assert config.source.dsn == service["environment"]["PG_DSN"]
        if config.log.backend == "kafka":
            assert config.log.bootstrap_servers == (service["environment"]["KAFKA_BOOTSTRAP"],)
