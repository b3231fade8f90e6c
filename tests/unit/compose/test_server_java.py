"""The launched servers' ``java`` command: the options ``make test`` gives every one."""

from __future__ import annotations

import pytest

from compose.launcher.jars import SERVER_JVM_OPTIONS_ENV, jdk_tool, server_java


def test_server_java_adds_the_environments_options(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SERVER_JVM_OPTIONS_ENV, "-XX:TieredStopAtLevel=1  '-Dname=a b'")
    assert server_java() == [jdk_tool("java"), "-XX:TieredStopAtLevel=1", "-Dname=a b"]


def test_server_java_is_plain_java_without_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(SERVER_JVM_OPTIONS_ENV, raising=False)
    assert server_java() == [jdk_tool("java")]
