"""The fuzz target itself: its seed relation decodes, valid and broken inputs pass
through it, and a DecodeError without its place would be reported as a crash."""

from __future__ import annotations

import struct

import pytest

from cdc.capture.pgoutput import PgOutputDecoder, Relation
from cdc.errors import DecodeError
from chaos import fuzz_pgoutput
from chaos.fuzz_pgoutput import RELATION_OID, decode_one, fuzz_with_hypothesis, relation_message


def test_the_seed_relation_decodes() -> None:
    decoded = PgOutputDecoder(proto_version=2).decode(relation_message())
    assert isinstance(decoded, Relation) and decoded.oid == RELATION_OID
    assert [c.name for c in decoded.columns] == ["id", "note"]


@pytest.mark.parametrize("data", [
    b"", b"\x00", b"\x01", b"\x00I" + struct.pack(">I", RELATION_OID) + b"N\x00\x02t",
    b"\x01I" + struct.pack(">II", 731, RELATION_OID) + b"N\x00\x02n\x00", b"\x00\xff" * 40])
def test_inputs_pass_or_raise_a_located_decode_error(data: bytes) -> None:
    decode_one(data)


def test_a_decode_error_without_its_place_is_a_crash(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: PgOutputDecoder, payload: bytes) -> None:
        if payload == b"B":  # the fuzzed payload; the seed relation decodes as usual
            raise DecodeError("", 0, "")

    monkeypatch.setattr(PgOutputDecoder, "decode", broken)
    with pytest.raises(AssertionError, match="without its place"):
        fuzz_pgoutput.decode_one(b"\x00B")


def test_the_hypothesis_fallback_runs_for_its_budget() -> None:
    assert fuzz_with_hypothesis(0.5) >= 2_000
