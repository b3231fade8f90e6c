"""Fuzzer bytes read as choices: the structure-aware fuzz targets of ``fuzz_native``
draw message kinds, values and mutations from one input, so libFuzzer's mutations of the
input become mutations of well-formed wire and disk bytes (and the empty tail of an
input reads as zeros: every input is a valid one)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

# values of every native kind as PostgreSQL writes them, and odd ones around them
VALUES: tuple[bytes, ...] = (
    b"0", b"1", b"-1", b"-0", b"007", b"+1", b" 1", b"1_0", b"", b"32767", b"-32768",
    b"2147483648", b"9223372036854775807", b"-9223372036854775808", b"9223372036854775808",
    b"18446744073709551616", b"1.5", b"-0.000", b"1e308", b"1e999", b"-1e-320", b"4.9e-324",
    b"3.4028235e+38", b"NaN", b"nan", b"Infinity", b"-Infinity", b"inf", b"123456789.123456789",
    b"t", b"f", b"true", b"x", b"2024-02-29", b"0001-01-01 BC", b"10000-01-01", b"infinity",
    b"-infinity", b"2024-02-29 10:11:12", b"2024-02-29 10:11:12.5", b"2024-02-29 10:11:12.000001",
    b"2024-02-29 10:11:12.5+00", b"2024-02-29 10:11:12+05:30", b"1999-12-31 23:59:59-00:53:28",
    b"0044-03-15 12:00:00 BC", b"2024-13-40 25:61:61", b"{}", b"[]", b"null",
    b'{"a": [1, -0, 1.5e300], "b": null}',
    b'"\\u00e9"', b'{"a":1,"a":2}', b"{\"a\":", "q\"\\ \t\u00e9\u2603 \U0001F600".encode(),
    b"\xff", b"\xc3", b"\xed\xa0\x80", b"a\\x\\", b"\\N", b"\\t\\n\\\\", b"\\", b"\x00",
    b"\x7f\x1b", b"{1,2,NULL}", b'{{"a b",NULL},{"\\"",x}}', b"[0:1]={1,2}", b"{1,,2}",
    b"[1,10)", b"(,5]", b"empty", b'["a""b",)', b"[1,2,3)", b"1 year 2 mons -3 days 04:05:06.5",
    b"-00:00:00.5", b"P1Y", b"@ 1 year", b"10:11:12+05:30", b"24:00:00-15:59:59",
)

_INTS = (b"0", b"1", b"-1", b"42", b"32767", b"-32768", b"2147483647", b"-2147483648",
         b"9223372036854775807", b"-9223372036854775808")
_TIMES = (b"2024-02-29 10:11:12", b"2024-02-29 10:11:12.5", b"1970-01-01 00:00:00",
          b"9999-12-31 23:59:59.999999", b"infinity", b"-infinity", b"0044-03-15 12:00:00 BC")
# type OID → values PostgreSQL writes for it (the native core converts most of them)
CANONICAL: dict[int, tuple[bytes, ...]] = {
    20: _INTS, 23: _INTS[:8], 21: _INTS[:6], 16: (b"t", b"f"),
    25: (b"", b"a", "q\"\\ \u00e9\u2603 \U0001F600".encode(), b"x\ty", b"\\N", b"\xff"),
    1043: (b"abc", b"\x01\x7f"),
    701: (b"0", b"-0", b"1.5", b"1e+308", b"-1.7976931348623157e+308", b"5e-324", b"NaN",
          b"Infinity", b"-Infinity", b"0.1", b"123456789012345680"),
    700: (b"1.5", b"3.4028235e+38", b"1e-45", b"NaN", b"-Infinity", b"0.1"),
    1700: (b"0", b"-0.000", b"123456789012345678901234567890.000000001", b"NaN", b"Infinity",
           b"-Infinity", b"1e5"),
    1082: (b"2024-02-29", b"0001-01-01", b"9999-12-31", b"infinity", b"-infinity",
           b"0001-01-01 BC", b"5874897-12-31"),
    1114: _TIMES,
    1184: (*(t + b"+00" for t in _TIMES[:4]), b"infinity", b"2024-02-29 10:11:12-05",
           b"2024-02-29 10:11:12+05:30"),
    3802: (b"{}", b"[]", b"null", b'{"a": [1, -0, 1.5e300], "b": null}', b'"\\u00e9"',
           b"123456789012345678901234567890", b'{"a": 1, "a": 2}', b"1.0E+2"),
    114: (b'{"a":1,"a":2}', b" [1, 2] ", b"-0.0", b'"\\ud800"'),
    17: (b"\\x", b"\\x00ff", b"abc"),
    1186: (b"00:00:00", b"1 year 2 mons", b"-1 years -2 mons +3 days -04:05:06.5",
           b"178000000 years 2147483647 days 2562047788:00:54.775807", b"infinity"),
    1266: (b"10:11:12+00", b"10:11:12.5-05:30", b"24:00:00-15:59:59", b"00:00:00+00:53:28"),
    1007: (b"{}", b"{1,-2,NULL}", b"{{1,2},{3,4}}", b"[0:1]={1,2}"),
    1009: (b"{}", b'{"",NULL,"NULL","a b","q\\"\\\\"}', b'{{"{}"},{x}}', "{é}".encode()),
    3904: (b"empty", b"[1,10)", b"(,5]", b"[-2147483648,)"),
    3908: (b'["2024-02-29 10:11:12","2024-03-01 00:00:00.5")', b"(,infinity]", b"empty"),
}


class Choices:
    """Reads ``data`` front to back as small decisions; past its end every read is 0."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def byte(self) -> int:
        """The next byte (0 past the end)."""
        at = self.at
        self.at += 1
        return self.data[at] if at < len(self.data) else 0

    def below(self, count: int) -> int:
        """A number in ``range(count)`` (``count`` ≤ 65536)."""
        if count <= 1:
            return 0
        value = self.byte() if count <= 256 else self.byte() << 8 | self.byte()
        return value % count

    def pick(self, options: Sequence[T]) -> T:
        """One of ``options``."""
        return options[self.below(len(options))]

    def chance(self, one_in: int) -> bool:
        """True about once in ``one_in`` reads of a random byte (never past the end)."""
        return self.below(one_in) == one_in - 1

    def blob(self, max_size: int) -> bytes:
        """The next bytes, as many as the next byte says (at most ``max_size``)."""
        size = self.below(max_size + 1)
        out = self.data[self.at:self.at + size]
        self.at += size
        return out

    def rest(self) -> bytes:
        """Everything not read yet."""
        out = self.data[self.at:]
        self.at = len(self.data)
        return out

    def value(self) -> bytes:
        """A column value: a known one, raw bytes, or two known ones run together."""
        kind = self.below(8)
        if kind == 6:
            return self.blob(12)
        if kind == 7:
            return self.pick(VALUES) + self.pick(VALUES)
        return self.pick(VALUES)

    def value_of(self, type_oid: int) -> bytes:
        """A value of a column of type ``type_oid``: mostly one PostgreSQL writes."""
        if self.chance(5):
            return self.value()
        return self.pick(CANONICAL.get(type_oid, VALUES))

    def mutate(self, payload: bytes, one_in: int = 4) -> bytes:
        """``payload`` as it is most of the time, else (about once in ``one_in``) cut
        short, grown by a byte or with one byte changed."""
        kind = self.below(3 * one_in)
        if kind == 1 and payload:
            return payload[:self.below(len(payload))]
        if kind == 2:
            return payload + bytes([self.byte()])
        if kind == 3 and payload:
            at = self.below(len(payload))
            return payload[:at] + bytes([self.byte()]) + payload[at + 1:]
        return payload
