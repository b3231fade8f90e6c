from __future__ import annotations

from pathlib import Path

import pytest

from cdc.config.loader import load_config
from cdc.errors import ConfigError

BASE = """
source: {dsn: "postgresql://app@127.0.0.1/app", slot: s, publication: p}
log: {backend: file, path: /tmp/log}
"""


def test_token_from_a_file_stays_secret(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("t0ken-from-file\n")
    path = tmp_path / "pipeline.yaml"
    path.write_text(BASE + f"metrics: {{port: 9187, token_file: {tmp_path / 'token'}}}\n")
    metrics = load_config(path).metrics
    assert metrics is not None and metrics.host == "127.0.0.1"
    assert metrics.token is not None and metrics.token.get_secret_value() == "t0ken-from-file"
    assert "t0ken" not in repr(metrics)
    assert metrics.sample_interval.total_seconds() == 2


def test_a_bad_sample_interval_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "pipeline.yaml"
    path.write_text(BASE + "metrics: {port: 9187, sample_interval: soon, token: abcdefgh}\n")
    with pytest.raises(ConfigError) as error:
        load_config(path)
    text = str(error.value)
    assert "metrics.sample_interval" in text and "abcdefgh" not in text
