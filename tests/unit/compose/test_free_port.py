"""``free_port``: a port handed out once is not handed out again while its claim lives,
in this process or any other (a Redis Cluster's twelve picks collided once in CI)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from compose.launcher import base


@pytest.fixture
def reservations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "ports"
    monkeypatch.setattr(base, "PORT_RESERVATIONS", folder)
    return folder


def test_many_picks_are_distinct_and_each_is_reserved(reservations: Path) -> None:
    ports = [base.free_port() for _ in range(300)]

    assert len(set(ports)) == len(ports)
    assert {int(name.name) for name in reservations.iterdir() if name.name.isdigit()} == set(ports)


def test_a_port_another_process_claimed_is_not_handed_out(
        reservations: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    picks = iter([20_001, 20_001, 20_002])
    monkeypatch.setattr(base._PICK, "randrange", lambda low, high: next(picks))
    monkeypatch.setattr(base, "_bindable", lambda port: True)
    reservations.mkdir()
    (reservations / "20001").touch()  # claimed just now by someone else

    assert base.free_port() == 20_002


def test_a_lapsed_claim_is_taken_over(reservations: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base._PICK, "randrange", lambda low, high: 20_001)
    monkeypatch.setattr(base, "_bindable", lambda port: True)
    reservations.mkdir()
    claim = reservations / "20001"
    claim.touch()
    lapsed = time.time() - base._RESERVATION_SECONDS - 5
    os.utime(claim, (lapsed, lapsed))

    assert base.free_port() == 20_001
    assert claim.stat().st_mtime > lapsed + 5  # renewed: nobody else takes it now
