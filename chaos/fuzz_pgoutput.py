"""Coverage-guided fuzzing of the pgoutput decoder with atheris (libFuzzer).

``python -m chaos.fuzz_pgoutput -max_total_time=60 [corpus_dir]`` (``make chaos`` runs it
for ``FUZZ_SECONDS``). Each input is one XLogData payload, decoded by a fresh decoder
that knows one relation; its first byte chooses whether the decoder is inside a stream
block (protocol 2 messages then carry an xid). Anything but ``DecodeError`` — or a
DecodeError without its message type, offset and reason — is a crash libFuzzer reports
with the input that caused it. Without atheris (no wheel for this Python), the same
property runs under hypothesis for the same time budget instead.
"""

from __future__ import annotations

import struct
import sys
import time

from cdc.errors import DecodeError

RELATION_OID = 16385
XID = 731


def relation_message() -> bytes:
    """A Relation message for ``public.orders (id int8 key, note text)``."""
    columns = [(1, b"id", 20), (0, b"note", 25)]
    body = b"R" + struct.pack(">I", RELATION_OID) + b"public\0orders\0d"
    body += struct.pack(">h", len(columns))
    for flags, name, type_oid in columns:
        body += bytes([flags]) + name + b"\0" + struct.pack(">Ii", type_oid, -1)
    return body


def decode_one(data: bytes) -> None:
    """Decode ``data[1:]`` (``data[0]`` odd: inside a stream block); only DecodeError."""
    from cdc.capture.pgoutput import PgOutputDecoder

    decoder = PgOutputDecoder(proto_version=2)
    decoder.decode(relation_message())
    if data[:1] and data[0] & 1:
        decoder.decode(b"S" + struct.pack(">I", XID) + b"\x01")
    payload = data[1:]
    try:
        decoder.decode(payload)
    except DecodeError as error:
        if not (error.message_type and error.reason and 0 <= error.offset <= len(payload)):
            raise AssertionError(f"a DecodeError without its place: {error!r}") from error


def fuzz_with_atheris(argv: list[str]) -> None:
    """Run libFuzzer on ``decode_one`` (flags like ``-max_total_time=60`` in ``argv``)."""
    import atheris  # type: ignore[import-untyped,import-not-found,unused-ignore]

    with atheris.instrument_imports(include=["cdc.capture.pgoutput"]):
        import cdc.capture.pgoutput  # noqa: F401
    atheris.Setup(argv, decode_one)
    atheris.Fuzz()


def fuzz_with_hypothesis(seconds: float) -> int:
    """The same property under hypothesis, in rounds, until ``seconds`` have passed; the
    number of examples run (a failure raises with the shrunk input)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    examples = 0

    @settings(max_examples=2_000, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(st.binary(max_size=300))
    def run(data: bytes) -> None:
        nonlocal examples
        examples += 1
        decode_one(data)

    stop_at = time.monotonic() + seconds
    while time.monotonic() < stop_at:
        run()
    return examples


def main(argv: list[str]) -> int:
    """atheris when installed; otherwise hypothesis for ``-max_total_time`` seconds."""
    try:
        import atheris  # noqa: F401
    except ImportError:
        seconds = next((float(a.split("=", 1)[1]) for a in argv
                        if a.startswith("-max_total_time=")), 60.0)
        print(f"atheris is not installed for Python {sys.version.split()[0]}: fuzzing with "
              f"hypothesis for {seconds:g} s instead", file=sys.stderr)
        examples = fuzz_with_hypothesis(seconds)
        print(f"fuzz_pgoutput: examples={examples} crashes=0")
        return 0
    fuzz_with_atheris(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
