"""What the fuzz targets share: hypothesis in rounds when atheris is not installed."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable


def hypothesis_rounds(one_input: Callable[[bytes], None], seconds: float, *,
                      max_examples: int, max_size: int) -> int:
    """``one_input`` under hypothesis, in rounds of ``max_examples`` byte strings of up to
    ``max_size`` bytes, until ``seconds`` have passed; the number of examples run (a
    failure raises with the shrunk input)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    examples = 0

    @settings(max_examples=max_examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.binary(max_size=max_size))
    def run(data: bytes) -> None:
        nonlocal examples
        examples += 1
        one_input(data)

    stop_at = time.monotonic() + seconds
    while time.monotonic() < stop_at:
        run()
    return examples


def fuzz(name: str, argv: list[str], with_atheris: Callable[[list[str]], None],
         with_hypothesis: Callable[[float], int]) -> int:
    """Run ``with_atheris`` when atheris is installed; otherwise ``with_hypothesis`` for
    ``-max_total_time`` seconds (60 by default). The exit status."""
    try:
        import atheris  # type: ignore[import-untyped,import-not-found,unused-ignore]  # noqa: F401
    except ImportError:
        seconds = next((float(a.split("=", 1)[1]) for a in argv
                        if a.startswith("-max_total_time=")), 60.0)
        print(f"atheris is not installed for Python {sys.version.split()[0]}: fuzzing with "
              f"hypothesis for {seconds:g} s instead", file=sys.stderr)
        examples = with_hypothesis(seconds)
        print(f"{name}: examples={examples} crashes=0")
        return 0
    with_atheris(argv)
    return 0
