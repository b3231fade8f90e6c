"""Coverage-guided fuzzing of the native core's entry points with atheris (libFuzzer),
each against its Python reference.

``python -m chaos.fuzz_native -max_total_time=60 [corpus_dir]`` (``make chaos`` runs it
after ``chaos.fuzz_pgoutput``). The first byte of an input picks the target, the rest is
its input (``FUZZ_TARGET=copy`` keeps to one target):

- ``change``: one pgoutput row change → ``dml_event``, ``feed_batch`` (record, frame);
- ``session``: a replication stream → ``feed_batch``, ``spool_records`` (drain);
- ``copy``: COPY text rows → ``snapshot_rows``, ``snapshot_batch`` (its records and lines);
- ``log``: a segment chunk → ``decode_lines`` (and ``murmur2``, ``partition_for``,
  ``crc32``);
- ``spool``: stream spool frames → ``spool_records``.

A failure is a panic crossing into Python, an error without its place, or an output (or
error type) different from the reference's: an ``AssertionError`` libFuzzer reports with
the input. Without atheris the same targets run under hypothesis for the same time.
The references the targets hold the native core to are the product's Python paths and
``tests/reference`` (run it from the repository's root).
"""

from __future__ import annotations

import logging
import os
import random
import sys
from collections.abc import Callable
from functools import cache
from typing import Any

from cdc.native import CORE

from .fuzz_fallback import fuzz, hypothesis_rounds

# the targets' modules are imported by ``targets()``, under atheris' instrumentation
Target = Callable[[Any, bytes], None]
"""A fuzz target: the native core to call (``CORE``, or a stand-in), and its input."""


@cache
def targets() -> dict[str, Target]:
    """Every fuzz target by name, in dispatch order."""
    from .fuzz_native_changes import fuzz_change, fuzz_session
    from .fuzz_native_log import fuzz_log, fuzz_spool
    from .fuzz_native_rows import fuzz_copy

    return {"change": fuzz_change, "session": fuzz_session, "copy": fuzz_copy,
            "log": fuzz_log, "spool": fuzz_spool}


NAMES = ["change", "session", "copy", "log", "spool"]


def target_of(data: bytes) -> tuple[str, bytes]:
    """The target an input is for (``FUZZ_TARGET``, else its first byte) and its input."""
    chosen = os.environ.get("FUZZ_TARGET")
    if chosen:
        if chosen not in NAMES:
            raise SystemExit(f"FUZZ_TARGET={chosen!r} is not a target: use one of {NAMES}")
        return chosen, data
    return (NAMES[data[0] % len(NAMES)], data[1:]) if data else (NAMES[0], b"")


def one_input(data: bytes) -> None:
    """Run the target ``data`` is for (libFuzzer's entry point)."""
    name, rest = target_of(data)
    from .fuzz_native_changes import remove_spools

    try:
        targets()[name](CORE, rest)
    finally:
        remove_spools()


def seed_corpus(per_target: int = 12) -> list[bytes]:
    """A small fixed corpus: for each target, the empty input (its plainest well-formed
    case) and ``per_target - 1`` pseudo-random ones."""
    chooser = random.Random(13)
    seeds = []
    for index in range(len(NAMES)):
        seeds.append(bytes([index]))
        seeds += [bytes([index]) + chooser.randbytes(chooser.randrange(400))
                  for _ in range(per_target - 1)]
    return seeds


def fuzz_with_atheris(argv: list[str]) -> None:
    """Run libFuzzer on ``one_input`` (flags like ``-max_total_time=60`` in ``argv``)."""
    import atheris  # type: ignore[import-untyped,import-not-found,unused-ignore]

    if not any(arg.startswith("-max_len=") for arg in argv):
        argv = [*argv, "-max_len=2048"]  # whole transactions and chunks, not 4-byte inputs

    with atheris.instrument_imports(include=["cdc.capture", "cdc.log", "chaos"]):
        targets()
    atheris.Setup(argv, one_input)
    atheris.Fuzz()


def fuzz_with_hypothesis(seconds: float) -> int:
    """The same targets under hypothesis until ``seconds`` have passed; the number of
    examples run (a failure raises with the shrunk input)."""
    return hypothesis_rounds(one_input, seconds, max_examples=500, max_size=400)


def main(argv: list[str]) -> int:
    """atheris when installed; otherwise hypothesis for ``-max_total_time`` seconds."""
    logging.disable(logging.WARNING)  # the reference's warnings for odd values
    return fuzz("fuzz_native", argv, fuzz_with_atheris, fuzz_with_hypothesis)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
