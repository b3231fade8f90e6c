//! `decode_json` (json/jsonb): the document re-written compactly, exactly as the Python
//! codec writes it. Its quick path is `orjson.dumps(orjson.loads(text))`; where orjson
//! refuses the text (a number out of a double's range) or a run of 16 or more digits and
//! dots stands anywhere (a number a double may not hold exactly), its careful path keeps
//! every integer beyond 64 bits and every decimal a double does not hold exactly as its
//! text, a JSON string (`careful`). Left to Python: a duplicate key, a lone surrogate
//! escape, invalid JSON, nesting deeper than `MAX_DEPTH`, exponents of more than 15
//! digits.

use super::json::{push_float, push_string, push_u64};

const MAX_DEPTH: usize = 64;

/// Append the JSON of `text` decoded as json/jsonb; false when Python must decide.
pub fn push_json(out: &mut Vec<u8>, text: &[u8]) -> bool {
    let start = out.len();
    if !has_long_number(text) && parse(out, text, false) {
        return true;
    }
    out.truncate(start);
    parse(out, text, true)
}

/// The whole of `text` as one JSON value into `out`; `careful`: the Python codec's
/// careful path for numbers.
fn parse(out: &mut Vec<u8>, text: &[u8], careful: bool) -> bool {
    let mut parser = Parser {
        text,
        at: 0,
        out,
        careful,
    };
    parser.value(0).is_some() && {
        parser.skip_space();
        parser.at == text.len()
    }
}

/// The Python codec's `[0-9][0-9.]{15,}`.
fn has_long_number(text: &[u8]) -> bool {
    let mut run = 0usize; // [0-9.] characters since the run's first digit (inclusive)
    for &byte in text {
        run = match byte {
            b'0'..=b'9' => run + 1,
            b'.' if run > 0 => run + 1,
            _ => 0,
        };
        if run >= 16 {
            return true;
        }
    }
    false
}

struct Parser<'a, 'o> {
    text: &'a [u8],
    at: usize,
    out: &'o mut Vec<u8>,
    careful: bool,
}

impl Parser<'_, '_> {
    fn skip_space(&mut self) {
        while matches!(self.text.get(self.at), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> bool {
        self.skip_space();
        if self.text.get(self.at) == Some(&byte) {
            self.at += 1;
            true
        } else {
            false
        }
    }

    fn value(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.skip_space();
        match *self.text.get(self.at)? {
            b'{' => self.object(depth),
            b'[' => self.array(depth),
            b'"' => {
                let decoded = self.string()?;
                push_string(self.out, &decoded);
                Some(())
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => self.number(),
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.text.get(self.at..end)? == word).then_some(())?;
        self.at = end;
        self.out.extend_from_slice(word);
        Some(())
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        self.at += 1;
        self.out.push(b'[');
        if !self.eat(b']') {
            loop {
                self.value(depth + 1)?;
                if self.eat(b']') {
                    break;
                }
                self.eat(b',').then_some(())?;
                self.out.push(b',');
            }
        }
        self.out.push(b']');
        Some(())
    }

    fn object(&mut self, depth: usize) -> Option<()> {
        self.at += 1;
        self.out.push(b'{');
        let mut keys: Vec<Vec<u8>> = Vec::new();
        if !self.eat(b'}') {
            loop {
                self.skip_space();
                (self.text.get(self.at) == Some(&b'"')).then_some(())?;
                let key = self.string()?;
                push_string(self.out, &key);
                keys.push(key);
                self.eat(b':').then_some(())?;
                self.out.push(b':');
                self.value(depth + 1)?;
                if self.eat(b'}') {
                    break;
                }
                self.eat(b',').then_some(())?;
                self.out.push(b',');
            }
        }
        keys.sort_unstable();
        if keys.windows(2).any(|pair| pair[0] == pair[1]) {
            return None; // orjson keeps the last value at the first key's place
        }
        self.out.push(b'}');
        Some(())
    }

    /// A string's content, escapes decoded (the opening quote is at `at`).
    fn string(&mut self) -> Option<Vec<u8>> {
        self.at += 1;
        let mut decoded = Vec::new();
        loop {
            let byte = *self.text.get(self.at)?;
            self.at += 1;
            match byte {
                b'"' => return Some(decoded),
                0..=0x1f => return None,
                b'\\' => {
                    let escape = *self.text.get(self.at)?;
                    self.at += 1;
                    match escape {
                        b'"' | b'\\' | b'/' => decoded.push(escape),
                        b'b' => decoded.push(0x08),
                        b'f' => decoded.push(0x0c),
                        b'n' => decoded.push(b'\n'),
                        b'r' => decoded.push(b'\r'),
                        b't' => decoded.push(b'\t'),
                        b'u' => self.unicode_escape(&mut decoded)?,
                        _ => return None,
                    }
                }
                _ => decoded.push(byte),
            }
        }
    }

    /// `\uXXXX` (its `\u` read), a surrogate pair as one character; a lone surrogate
    /// is None (orjson refuses it).
    fn unicode_escape(&mut self, decoded: &mut Vec<u8>) -> Option<()> {
        let first = self.hex4()?;
        let code = match first {
            0xD800..=0xDBFF => {
                (self.text.get(self.at..self.at + 2)? == b"\\u").then_some(())?;
                self.at += 2;
                let second = self.hex4()?;
                (0xDC00..=0xDFFF)
                    .contains(&second)
                    .then(|| 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))?
            }
            0xDC00..=0xDFFF => return None,
            _ => first,
        };
        let character = char::from_u32(code)?;
        let mut buffer = [0u8; 4];
        decoded.extend_from_slice(character.encode_utf8(&mut buffer).as_bytes());
        Some(())
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.text.get(self.at..self.at + 4)?;
        self.at += 4;
        let text = std::str::from_utf8(digits).ok()?;
        if !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(text, 16).ok()
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`: an integer within 64 bits, a
    /// double; on the careful path a larger integer, or a decimal no double holds
    /// exactly, as its text (a JSON string).
    fn number(&mut self) -> Option<()> {
        let start = self.at;
        let negative = self.text.get(self.at) == Some(&b'-');
        if negative {
            self.at += 1;
        }
        let first = *self.text.get(self.at)?;
        if !first.is_ascii_digit() {
            return None;
        }
        self.digits();
        if first == b'0' && self.at - start - usize::from(negative) > 1 {
            return None; // a leading zero
        }
        let mut integer = true;
        if self.text.get(self.at) == Some(&b'.') {
            self.at += 1;
            self.digits().then_some(())?;
            integer = false;
        }
        if matches!(self.text.get(self.at), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.text.get(self.at), Some(b'+' | b'-')) {
                self.at += 1;
            }
            self.digits().then_some(())?;
            integer = false;
        }
        let literal = std::str::from_utf8(&self.text[start..self.at]).ok()?;
        if integer {
            match int64(literal) {
                Some((negative, magnitude)) => {
                    if negative {
                        self.out.push(b'-');
                    }
                    push_u64(self.out, magnitude);
                }
                None if self.careful => push_string(self.out, literal.as_bytes()),
                None => return None,
            }
            return Some(());
        }
        let value: f64 = literal.parse().ok()?;
        if self.careful && !(value.is_finite() && exactly(literal, value)?) {
            push_string(self.out, literal.as_bytes());
            return Some(());
        }
        value.is_finite().then_some(())?;
        push_float(self.out, value).then_some(())
    }

    /// Skip digits; whether there was one.
    fn digits(&mut self) -> bool {
        let start = self.at;
        while self.text.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
        self.at > start
    }
}

/// An integer literal within `[-2^63, 2^64 - 1]` (what orjson writes as a number): its
/// sign (false for zero) and magnitude; None beyond.
fn int64(literal: &str) -> Option<(bool, u64)> {
    let (negative, digits) = match literal.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, literal),
    };
    let magnitude: u64 = digits.parse().ok()?;
    if negative && magnitude > 1 << 63 {
        return None;
    }
    Some((negative && magnitude != 0, magnitude))
}

/// Whether the decimal `literal` equals `value` written shortest, as the Python codec
/// checks (`Decimal(repr(value)) == Decimal(literal)`); None (Python decides) for an
/// exponent of more than 15 digits.
fn exactly(literal: &str, value: f64) -> Option<bool> {
    Some(decimal(literal)? == decimal(&format!("{value:e}"))?)
}

/// A decimal number as `(negative, significant digits, exponent of the last digit)`,
/// zero as `(false, [], 0)` (so `-0` equals `0`).
fn decimal(text: &str) -> Option<(bool, Vec<u8>, i64)> {
    let (negative, text) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match text.split_once(['e', 'E']) {
        Some((mantissa, exponent)) => (mantissa, exponent),
        None => (text, "0"),
    };
    let exponent = exponent.strip_prefix('+').unwrap_or(exponent);
    if exponent.trim_start_matches('-').len() > 15 {
        return None;
    }
    let mut exponent: i64 = exponent.parse().ok()?;
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    exponent -= i64::try_from(fraction.len()).ok()?;
    let mut digits: Vec<u8> = whole.bytes().chain(fraction.bytes()).collect();
    while digits.last() == Some(&b'0') {
        digits.pop();
        exponent += 1;
    }
    let first = digits
        .iter()
        .position(|&d| d != b'0')
        .unwrap_or(digits.len());
    digits.drain(..first);
    if digits.is_empty() {
        return Some((false, digits, 0));
    }
    Some((negative, digits, exponent))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(text: &str) -> Option<String> {
        let mut out = Vec::new();
        push_json(&mut out, text.as_bytes()).then(|| String::from_utf8(out).unwrap())
    }

    #[test]
    fn documents_are_rewritten_compactly() {
        assert_eq!(
            json(r#" {"a": [1, -0, 1.5e-7, 1E5, true, null], "b" : "\u00e9\/"} "#).unwrap(),
            r#"{"a":[1,0,1.5e-7,100000.0,true,null],"b":"é/"}"#
        );
        assert_eq!(json(r#""\ud83d\ude00""#).unwrap(), "\"😀\"");
        assert_eq!(json("[]").unwrap(), "[]");
        assert_eq!(json("{}").unwrap(), "{}");
    }

    #[test]
    fn the_careful_path_keeps_what_a_double_does_not_hold_as_text() {
        assert_eq!(json("1234567890123456").unwrap(), "1234567890123456");
        assert_eq!(
            json("[18446744073709551615,18446744073709551616,-9223372036854775809]").unwrap(),
            r#"[18446744073709551615,"18446744073709551616","-9223372036854775809"]"#
        );
        assert_eq!(
            json("[0.000000000000001,0.30000000000000004,0.1000000000000000055511]").unwrap(),
            r#"[1e-15,0.30000000000000004,"0.1000000000000000055511"]"#
        );
        // orjson refuses 1e400: the careful path takes the whole document
        assert_eq!(
            json(r#"{"a":1e400,"b":0.1,"c":1.10,"d":1e-400,"e":0e-5}"#).unwrap(),
            r#"{"a":"1e400","b":0.1,"c":1.1,"d":"1e-400","e":0.0}"#
        );
        assert_eq!(json("1e-400").unwrap(), "0.0"); // orjson reads it as 0.0
        assert_eq!(
            json("1e12345678901234567").unwrap(),
            r#""1e12345678901234567""#
        );
        assert_eq!(
            json(r#"{"x":"1234567890123456"}"#).unwrap(),
            r#"{"x":"1234567890123456"}"#
        );
    }

    #[test]
    fn decimals_compare_by_value() {
        assert_eq!(decimal("1.50e2"), decimal("150"));
        assert_eq!(decimal("-0.0"), decimal("0e7"));
        assert_ne!(decimal("0.1"), decimal("0.10000000000000001"));
        assert_eq!(decimal("1e1234567890123456"), None);
    }

    #[test]
    fn what_python_decides() {
        for text in [
            r#"{"a":1,"a":2}"#,
            r#""\ud800""#,
            "1e-12345678901234567",
            "01",
            "[1,]",
            "NaN",
            "",
            "\"\u{1}\"",
            "[1] x",
        ] {
            assert_eq!(json(text), None, "{text}");
        }
        let deep = "[".repeat(100) + &"]".repeat(100);
        assert_eq!(json(&deep), None);
    }
}
