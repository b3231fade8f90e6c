"""The native fuzz targets (``chaos.fuzz_native``) over their seed corpus: every target
passes and reaches the native entry points it is for, and a panic or a native result
that differs from the reference would be reported as a crash."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from cdc.native import CORE
from chaos.fuzz_native import NAMES, fuzz_with_hypothesis, one_input, seed_corpus, target_of
from chaos.fuzz_native import targets as all_targets
from chaos.fuzz_native_changes import _spool_root, remove_spools
from chaos.fuzz_native_checks import NativeFault


class PanicException(BaseException):
    """What a Rust panic looks like from Python (PyO3's ``PanicException``)."""


class Proxy:
    """The native core, each function counted (calls, and results not None or empty)
    and optionally replaced by ``change(name, function)``."""

    def __init__(self, core: Any,
                 change: Callable[[str, Callable[..., Any]], Callable[..., Any]] | None = None
                 ) -> None:
        self._core = core
        self._change = change
        self.calls: Counter[str] = Counter()
        self.results: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        function = getattr(self._core, name)
        if self._change is not None:
            function = self._change(name, function)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            result = function(*args, **kwargs)
            if result is not None and result != [] and result != ([], []):
                self.results[name] += 1
            return result

        return counted


def run_corpus(core: Any) -> Iterator[str]:
    """Each seed through its target; yields the target names as they pass."""
    try:
        for data in seed_corpus():
            name, rest = target_of(data)
            all_targets()[name](core, rest)
            yield name
    finally:
        remove_spools()


def test_every_target_passes_its_seeds_and_reaches_the_native_core() -> None:
    proxy = Proxy(CORE)
    ran = Counter(run_corpus(proxy))
    assert set(ran) == set(NAMES) and min(ran.values()) >= 10
    # each entry point fed bytes from outside ran, and converted something
    for name in ["dml_event", "feed_batch", "spool_records",
                 "snapshot_rows", "snapshot_batch", "decode_lines",
                 "murmur2", "partition_for", "crc32"]:
        assert proxy.calls[name] > 0, f"the seed corpus never calls {name}"
        assert proxy.results[name] > 0, f"{name} never converted anything of the corpus"


def test_the_dispatch_byte_and_fuzz_target(monkeypatch: pytest.MonkeyPatch) -> None:
    assert target_of(b"") == ("change", b"")
    assert target_of(bytes([2]) + b"xy") == ("copy", b"xy")
    assert target_of(bytes([len(NAMES) + 3]) + b"z") == ("log", b"z")
    monkeypatch.setenv("FUZZ_TARGET", "spool")
    assert target_of(b"\x00ab") == ("spool", b"\x00ab")
    monkeypatch.setenv("FUZZ_TARGET", "nope")
    with pytest.raises(SystemExit, match="not a target"):
        target_of(b"")


def _panics(target: str) -> Callable[[str, Callable[..., Any]], Callable[..., Any]]:
    def change(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        if name != target:
            return function

        def panicking(*args: Any, **kwargs: Any) -> Any:
            raise PanicException("called `Option::unwrap()` on a `None` value")

        return panicking

    return change


@pytest.mark.parametrize("target", ["dml_event", "feed_batch", "snapshot_batch",
                                    "decode_lines", "spool_records"])
def test_a_panic_is_a_crash(target: str) -> None:
    with pytest.raises(NativeFault, match="panicked"):
        list(run_corpus(Proxy(CORE, _panics(target))))


def _wrong(target: str, alter: Callable[[Any], Any]
           ) -> Callable[[str, Callable[..., Any]], Callable[..., Any]]:
    def change(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        if name != target:
            return function
        return lambda *args, **kwargs: alter(function(*args, **kwargs))

    return change


def _key_changed(result: Any) -> Any:
    return None if result is None else (b'{"id":0}', *result[1:])


def _next_seq_changed(result: Any) -> Any:
    leftover, seq, done = result
    return (leftover, seq + 1, done)


def _one_row_dropped(result: Any) -> Any:
    return result[1:] if isinstance(result, list) else result


def _end_moved(result: Any) -> Any:
    messages, end, *rest = result
    return (messages, end + 1, *rest)


@pytest.mark.parametrize(("target", "alter"), [
    ("dml_event", _key_changed), ("spool_records", _next_seq_changed),
    ("snapshot_rows", _one_row_dropped), ("decode_lines", _end_moved)])
def test_a_result_unlike_the_reference_is_a_crash(target: str,
                                                  alter: Callable[[Any], Any]) -> None:
    with pytest.raises(AssertionError, match=r"differs|dml_event|next seq"):
        list(run_corpus(Proxy(CORE, _wrong(target, alter))))


def test_one_input_runs_every_target_and_removes_its_spools() -> None:
    for index in range(len(NAMES)):
        one_input(bytes([index]))
        assert _spool_root.cache_info().currsize == 0


def test_the_hypothesis_fallback_runs_for_its_budget() -> None:
    assert fuzz_with_hypothesis(0.5) >= 20
