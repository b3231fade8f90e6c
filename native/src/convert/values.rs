//! The value codecs of `cdc/capture/codecs/` for the common type families, writing the
//! JSON value orjson writes for the codec's result (the temporal ones in `temporal`).
//! Each returns false for a text it does not handle exactly as the Python codec does
//! (out-of-range numbers, spellings PostgreSQL does not write, …): the row then goes
//! through the Python reference.

use super::arrays::push_array;
use super::interval::push_interval;
use super::json::{push_float, push_string, push_u64};
use super::ranges::push_range;
use super::temporal::{push_temporal, push_timetz};

/// Which Python codec a column uses: its code is its place in `Kind::ALL`, which the module
/// exports as `VALUE_KINDS` (codec function name → code) for `cdc/capture/snapshot/native.py`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `decode_text`: the text as a JSON string.
    Text,
    /// `decode_int`: a JSON integer.
    Int,
    /// `decode_bool`: `t`/`f`.
    Bool,
    /// `decode_float`: a JSON number, or the strings `NaN`, `Infinity`, `-Infinity`.
    Float,
    /// `decode_numeric`: the text as a JSON string.
    Numeric,
    /// `decode_date`.
    Date,
    /// `decode_timestamp`.
    Timestamp,
    /// `decode_timestamptz` (the capture's sessions use `TimeZone=UTC`: `+00`).
    Timestamptz,
    /// `decode_json` (json and jsonb).
    Json,
    /// `decode_bytea`: hex output (`\x…`) as base64 in a JSON string.
    Bytea,
    /// `decode_timetz`: its own offset kept, written `±HH:MM[:SS]`.
    Timetz,
    /// `decode_interval`: an ISO-8601 duration with a sign per component.
    Interval,
}

impl Kind {
    /// Every kind, in the order of their codes.
    pub const ALL: [Kind; 12] = [
        Kind::Text,
        Kind::Int,
        Kind::Bool,
        Kind::Float,
        Kind::Numeric,
        Kind::Date,
        Kind::Timestamp,
        Kind::Timestamptz,
        Kind::Json,
        Kind::Bytea,
        Kind::Timetz,
        Kind::Interval,
    ];

    /// The kind numbered `code`, or None.
    pub fn from_code(code: u8) -> Option<Kind> {
        Self::ALL.get(usize::from(code)).copied()
    }

    /// The name of the Python codec (in `cdc.capture.codecs`) this kind reproduces.
    pub fn codec(self) -> &'static str {
        match self {
            Kind::Text => "decode_text",
            Kind::Int => "decode_int",
            Kind::Bool => "decode_bool",
            Kind::Float => "decode_float",
            Kind::Numeric => "decode_numeric",
            Kind::Date => "decode_date",
            Kind::Timestamp => "decode_timestamp",
            Kind::Timestamptz => "decode_timestamptz",
            Kind::Json => "decode_json",
            Kind::Bytea => "decode_bytea",
            Kind::Timetz => "decode_timetz",
            Kind::Interval => "decode_interval",
        }
    }
}

/// The code bit of an array column (`array_codec` of a kind's codec, `,` delimited):
/// exported as `ARRAY_OF`.
pub const ARRAY_OF: u8 = 0x80;
/// The code bit of a range column (`range_codec` of a kind's codec): `RANGE_OF`.
pub const RANGE_OF: u8 = 0x40;

/// What a column holds of its kind: one value, an array, or a range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    Value,
    Array,
    Range,
}

/// A column's codec (`Plan` holds one a column).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Codec {
    pub kind: Kind,
    pub form: Form,
}

impl Codec {
    /// The codec numbered `code` (a kind's code, with `ARRAY_OF` or `RANGE_OF`), or None.
    pub fn from_code(code: u8) -> Option<Codec> {
        let form = match code & (ARRAY_OF | RANGE_OF) {
            0 => Form::Value,
            ARRAY_OF => Form::Array,
            RANGE_OF => Form::Range,
            _ => return None,
        };
        Some(Codec {
            kind: Kind::from_code(code & !(ARRAY_OF | RANGE_OF))?,
            form,
        })
    }

    /// Append the JSON of `text` (valid UTF-8, unescaped COPY text); false when Python
    /// must decide.
    pub fn push(self, out: &mut Vec<u8>, text: &[u8]) -> bool {
        match self.form {
            Form::Value => push_value(out, self.kind, text),
            Form::Array => push_array(out, self.kind, text),
            Form::Range => push_range(out, self.kind, text),
        }
    }
}

/// Append the JSON of `text` (valid UTF-8, unescaped COPY text) decoded as `kind`;
/// false (and `out` possibly longer: the caller truncates) when Python must decide.
pub fn push_value(out: &mut Vec<u8>, kind: Kind, text: &[u8]) -> bool {
    match kind {
        Kind::Text | Kind::Numeric => {
            push_string(out, text);
            true
        }
        Kind::Int => push_int(out, text),
        Kind::Bool => match text {
            b"t" => {
                out.extend_from_slice(b"true");
                true
            }
            b"f" => {
                out.extend_from_slice(b"false");
                true
            }
            _ => false,
        },
        Kind::Float => push_float_text(out, text),
        Kind::Date | Kind::Timestamp | Kind::Timestamptz => push_temporal(out, text, kind),
        Kind::Json => super::json_value::push_json(out, text),
        Kind::Bytea => push_bytea(out, text),
        Kind::Timetz => push_timetz(out, text),
        Kind::Interval => push_interval(out, text),
    }
}

/// `decode_bytea` of hex output (`\x` then pairs of hex digits, as PostgreSQL writes it
/// with `bytea_output = hex`): the bytes as standard base64 in a JSON string. Anything
/// else (escape output, a stray character) goes to Python.
fn push_bytea(out: &mut Vec<u8>, text: &[u8]) -> bool {
    const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let Some(hex) = text.strip_prefix(b"\\x") else {
        return false;
    };
    if hex.len() % 2 != 0 {
        return false;
    }
    let nibble = |digit: u8| char::from(digit).to_digit(16).map(|value| value as u8);
    let mut raw = Vec::with_capacity(hex.len() / 2);
    for pair in hex.chunks_exact(2) {
        let (Some(high), Some(low)) = (nibble(pair[0]), nibble(pair[1])) else {
            return false;
        };
        raw.push(high << 4 | low);
    }
    out.reserve(raw.len().div_ceil(3) * 4 + 2);
    out.push(b'"');
    for group in raw.chunks(3) {
        let bits = group.iter().enumerate().fold(0u32, |bits, (at, &byte)| {
            bits | u32::from(byte) << (16 - 8 * at)
        });
        for at in 0..4 {
            if at <= group.len() {
                out.push(BASE64[(bits >> (18 - 6 * at) & 63) as usize]);
            } else {
                out.push(b'=');
            }
        }
    }
    out.push(b'"');
    true
}

/// `int(text)` for `-?[0-9]+` within what orjson writes (a signed or unsigned 64-bit
/// integer); other spellings Python accepts (`+1`, ` 1`, `1_0`) go to Python.
fn push_int(out: &mut Vec<u8>, text: &[u8]) -> bool {
    let digits = text.strip_prefix(b"-").unwrap_or(text);
    if digits.is_empty() || digits.len() > 20 || !digits.iter().all(u8::is_ascii_digit) {
        return false;
    }
    let mut magnitude: u128 = 0;
    for &digit in digits {
        magnitude = magnitude * 10 + u128::from(digit - b'0');
    }
    let negative = digits.len() != text.len();
    if negative {
        if magnitude > 1 << 63 {
            return false;
        }
        if magnitude != 0 {
            out.push(b'-');
        }
    } else if magnitude > u128::from(u64::MAX) {
        return false;
    }
    // at most u64::MAX or 2^63 here
    push_u64(out, u64::try_from(magnitude).unwrap_or(u64::MAX));
    true
}

/// `decode_float`: float8/float4 output (`-?d+(.d+)?(e±d+)?`, `NaN`, `±Infinity`).
fn push_float_text(out: &mut Vec<u8>, text: &[u8]) -> bool {
    if matches!(text, b"NaN" | b"Infinity" | b"-Infinity") {
        push_string(out, text);
        return true;
    }
    if !plain_float(text) {
        return false;
    }
    let Ok(value) = std::str::from_utf8(text).unwrap_or("x").parse::<f64>() else {
        return false;
    };
    if !value.is_finite() {
        return false; // 1e999: Python's codec refuses it
    }
    push_float(out, value)
}

/// `-?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?`
fn plain_float(text: &[u8]) -> bool {
    fn digits(text: &[u8], at: &mut usize) -> bool {
        let start = *at;
        while *at < text.len() && text[*at].is_ascii_digit() {
            *at += 1;
        }
        *at > start
    }
    let mut at = usize::from(text.first() == Some(&b'-'));
    if !digits(text, &mut at) {
        return false;
    }
    if text.get(at) == Some(&b'.') {
        at += 1;
        if !digits(text, &mut at) {
            return false;
        }
    }
    if matches!(text.get(at), Some(b'e' | b'E')) {
        at += 1;
        if matches!(text.get(at), Some(b'+' | b'-')) {
            at += 1;
        }
        if !digits(text, &mut at) {
            return false;
        }
    }
    at == text.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(kind: Kind, text: &str) -> Option<String> {
        let mut out = Vec::new();
        push_value(&mut out, kind, text.as_bytes()).then(|| String::from_utf8(out).unwrap())
    }

    #[test]
    fn a_kind_is_found_by_its_code_and_names_its_own_codec() {
        for (code, kind) in Kind::ALL.iter().enumerate() {
            assert_eq!(Kind::from_code(u8::try_from(code).unwrap()), Some(*kind));
        }
        assert_eq!(Kind::from_code(12), None);
        let mut codecs: Vec<&str> = Kind::ALL.iter().map(|kind| kind.codec()).collect();
        codecs.sort_unstable();
        codecs.dedup();
        assert_eq!(codecs.len(), Kind::ALL.len());
    }

    #[test]
    fn bytea_hex_output_is_base64() {
        assert_eq!(value(Kind::Bytea, "\\x").unwrap(), "\"\"");
        assert_eq!(value(Kind::Bytea, "\\x66").unwrap(), "\"Zg==\"");
        assert_eq!(value(Kind::Bytea, "\\x666f").unwrap(), "\"Zm8=\"");
        assert_eq!(value(Kind::Bytea, "\\x666F6f").unwrap(), "\"Zm9v\"");
        assert_eq!(value(Kind::Bytea, "\\x00fffe80").unwrap(), "\"AP/+gA==\"");
        for refused in ["\\x6", "\\x6g", "\\x66 6f", "abc\\000", "", "x66"] {
            assert_eq!(value(Kind::Bytea, refused), None, "{refused}");
        }
    }

    #[test]
    fn integers() {
        assert_eq!(
            value(Kind::Int, "-9223372036854775808").unwrap(),
            "-9223372036854775808"
        );
        assert_eq!(
            value(Kind::Int, "18446744073709551615").unwrap(),
            "18446744073709551615"
        );
        assert_eq!(value(Kind::Int, "-0").unwrap(), "0");
        assert_eq!(value(Kind::Int, "007").unwrap(), "7");
        assert_eq!(value(Kind::Int, "18446744073709551616"), None);
        assert_eq!(value(Kind::Int, "-9223372036854775809"), None);
        assert_eq!(value(Kind::Int, "+1"), None);
        assert_eq!(value(Kind::Int, ""), None);
        assert_eq!(value(Kind::Int, "-"), None);
    }

    #[test]
    fn floats_and_specials() {
        assert_eq!(value(Kind::Float, "1.5").unwrap(), "1.5");
        assert_eq!(value(Kind::Float, "1e+16").unwrap(), "1e+16");
        assert_eq!(value(Kind::Float, "NaN").unwrap(), "\"NaN\"");
        assert_eq!(value(Kind::Float, "-Infinity").unwrap(), "\"-Infinity\"");
        assert_eq!(value(Kind::Float, "1e999"), None);
        assert_eq!(value(Kind::Float, "inf"), None);
        assert_eq!(value(Kind::Float, ".5"), None);
    }

    #[test]
    fn temporal_and_bool() {
        assert_eq!(
            value(Kind::Date, "0044-03-15 BC").unwrap(),
            "\"-0043-03-15\""
        );
        assert_eq!(value(Kind::Timestamp, "10000-03-15 12:00:00+01"), None);
        assert_eq!(value(Kind::Bool, "t").unwrap(), "true");
        assert_eq!(value(Kind::Bool, "x"), None);
    }
}
