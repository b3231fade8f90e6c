"""Secrets never reach a problem message, whatever the mistake next to them."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cdc.cli import main
from cdc.config.secrets import Redactor
from tests.unit.config.conftest import VALID, LoadProblems, WriteConfig, variant

SECRET = "Sup3r-S3cret"
DSN = "postgresql://app@127.0.0.1:5432/app"
REDIS = ("  - name: cache\n    type: redis\n    topics: [a]\n"
         "    config: {{url: '{url}', ttl: {ttl}}}\n")
WEBHOOK = ("  - name: hook\n    type: webhook\n    topics: [a]\n"
           "    config: {{url: 'https://hooks.example/x', {settings}}}\n")

CASES = {
    "dsn password and password field": variant("  slot:", f"  password: {SECRET}x\n  slot:",
                                               variant(DSN, f"postgresql://app:{SECRET}@db/app")),
    "dsn with a bad query": variant(DSN, f"postgresql://app:{SECRET}@db/app?foo=bar"),
    "dsn with a broken IPv6 host": variant(DSN, f"'postgresql://app:{SECRET}@[::1/app'"),
    "key=value dsn with a bad port": variant(DSN, f"\"host=db password='{SECRET}' port=x\""),
    "key=value dsn unparsable": variant(DSN, f"\"host=db password={SECRET} dbname\""),
    "key=value dsn, password with a space": variant(DSN, f"'host=db password=my {SECRET}'"),
    "password of the wrong type": variant("  slot:", f"  password: [{SECRET}]\n  slot:"),
    "secret in an invalid URL": VALID + REDIS.format(url=f"http://:{SECRET}@h:6379", ttl="1m"),
    "secret in a URL beside a bad value": VALID + REDIS.format(
        url=f"redis://:{SECRET}@h:6379/0", ttl="soon"),
    "header value of the wrong type": VALID + WEBHOOK.format(
        settings=f"headers: {{Authorization: [Bearer {SECRET}]}}"),
    "signing secret of the wrong type": VALID + WEBHOOK.format(
        settings=f"signing_secret: {{key: {SECRET}}}"),
    "secret in an opensearch host": variant("http://127.0.0.1:9200",
                                            f"ftp://admin:{SECRET}@127.0.0.1:9200"),
    "dsn password as an unknown key's value": variant(
        "  slot:", f"  passwrd: {SECRET}\n  slot:", variant(DSN, f"postgresql://u:{SECRET}@h/d")),
}


@pytest.mark.parametrize("text", CASES.values(), ids=CASES.keys())
def test_secret_is_not_in_any_message(load_problems: LoadProblems, text: str) -> None:
    problems = load_problems(text)
    assert problems
    assert not [line for line in problems if SECRET in line]


def test_secret_from_a_file_is_not_in_any_message(load_problems: LoadProblems,
                                                  tmp_path: Path) -> None:
    secret_file = tmp_path / "pg"
    secret_file.write_text(SECRET + "\n")
    text = variant(DSN, f"postgresql://app:{SECRET}@db/app")
    text = variant("  slot:", f"  password_file: {secret_file}\n  slot:", text)
    problems = load_problems(text)
    assert [line.split(":")[0] for line in problems] == ["source.password_file"]
    assert SECRET not in "\n".join(problems)


def test_secret_from_the_environment_is_not_in_any_message(
        load_problems: LoadProblems, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTRIBUTARY_TEST_PASSWORD", SECRET)
    text = variant(DSN, "postgresql://app:${DISTRIBUTARY_TEST_PASSWORD}@db/app?foo=bar")
    problems = load_problems(text)
    assert problems and SECRET not in "\n".join(problems)


def test_cli_output_has_no_secret(write_config: WriteConfig) -> None:
    path = write_config(CASES["dsn password and password field"])
    result = CliRunner().invoke(main, ["validate", "-c", str(path)])
    assert result.exit_code == 2
    assert "source.password: the DSN already contains a password" in result.stdout
    assert SECRET not in result.output


def test_short_secret_hides_the_value_without_mangling_the_message(
        load_problems: LoadProblems) -> None:
    problems = load_problems(VALID + REDIS.format(url="http://:a@h:6379", ttl="1m"))
    assert problems == ["connectors[1].config.url: expected a URL starting with redis:// or "
                        "rediss:// or unix:// (line 18)"]


def test_redactor() -> None:
    redactor = Redactor({"hunter2", "ab"})
    assert redactor.scrub("got 'hunter2' and hunter2!") == "got '***' and ***!"
    assert redactor.scrub("a cab") == "a cab"
    assert redactor.leaks("a cab") and not redactor.leaks("a c")
