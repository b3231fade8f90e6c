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

from cdc.errors import DecodeError

from .fuzz_fallback import fuzz, hypothesis_rounds

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
    """The same targets under hypothesis until ``seconds`` have passed; the number of
    examples run (a failure raises with the shrunk input)."""
    return hypothesis_rounds(decode_one, seconds, max_examples=2_000, max_size=300)


def main(argv: list[str]) -> int:
    """atheris when installed; otherwise hypothesis for ``-max_total_time`` seconds."""
    return fuzz("fuzz_pgoutput", argv, fuzz_with_atheris, fuzz_with_hypothesis)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
