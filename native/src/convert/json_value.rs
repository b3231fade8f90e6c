//! `decode_json` (json/jsonb): the document re-written compactly, exactly as
//! `orjson.dumps(orjson.loads(text))` writes it. What orjson would not read the same
//! way, or where the Python codec takes its careful path, is left to Python: a run of 16
//! or more digits and dots anywhere (a number a double may not hold exactly), a
//! duplicate key, a lone surrogate escape, a number out of a double's range, invalid
//! JSON, nesting deeper than `MAX_DEPTH`.

use super::json::{push_float, push_string, push_u64};

const MAX_DEPTH: usize = 64;

/// Append the JSON of `text` decoded as json/jsonb; false when Python must decide.
pub fn push_json(out: &mut Vec<u8>, text: &[u8]) -> bool {
    if has_long_number(text) {
        return false;
    }
    let mut parser = Parser { text, at: 0, out };
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

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`: an integer (at most 15 digits
    /// here: longer runs went to Python) or a double.
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
            let value: i64 = literal.parse().ok()?;
            if value < 0 {
                self.out.push(b'-');
            }
            push_u64(self.out, value.unsigned_abs());
        } else {
            let value: f64 = literal.parse().ok()?;
            value.is_finite().then_some(())?;
            push_float(self.out, value).then_some(())?;
        }
        Some(())
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
    fn what_python_decides() {
        for text in [
            r#"{"a":1,"a":2}"#,
            "1234567890123456",
            "0.000000000000001",
            r#""\ud800""#,
            "1e400",
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
