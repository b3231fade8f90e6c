//! The Redis sink's plain rows straight from the log's event JSON: for one event, what
//! `connectors/redis/plain.py` reads from the decoded event (op, key columns, the
//! table's schema and name) and the value it writes, `orjson.dumps(event["after"])`,
//! rendered here byte for byte as orjson would (compact, keys in order, strings escaped
//! as orjson escapes them, floats in orjson's shortest form).
//!
//! Anything this does not render exactly as the Python path would (a float key column,
//! a duplicate object member, a non-empty `unchanged`, nesting deeper than
//! `MAX_DEPTH`, invalid JSON) gives `None`: the sink then takes its Python path, which
//! decides what such an event means. `tests/unit/connectors/test_redis_native_rows.py`
//! holds both paths to the same arguments.

use std::borrow::Cow;

use crate::convert::json::{push_float, push_string};

/// Deeper JSON is left to the Python path (orjson's own limit is higher).
const MAX_DEPTH: usize = 64;

/// What a key column holds, as `derived.keys.key_text` renders it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyValue {
    /// A string (its text as is).
    Text(String),
    /// An integer, as Python's `str(int)` writes it.
    Int(String),
    /// `true` or `false`.
    Bool(bool),
    /// JSON null (`\N`).
    Null,
}

/// What the plain path needs of one event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlainEvent {
    /// `op`: `c`, `u`, `r` or `d`.
    pub op: u8,
    /// An insert, update or snapshot row (`c`, `u`, `r`); false: a delete (`d`).
    pub upsert: bool,
    /// The `key` object's columns, in order (never empty).
    pub key: Vec<(String, KeyValue)>,
    /// `orjson.dumps(after)` for an upsert; empty for a delete.
    pub value: Vec<u8>,
    /// `source.schema`.
    pub schema: String,
    /// `source.table`.
    pub table: String,
}

/// The plain event of `raw` (a log record's value), or `None` when the Python path must
/// decide (see the module docs).
pub fn plain_event(raw: &[u8]) -> Option<PlainEvent> {
    let mut parser = Parser::new(raw)?;
    let event = parser.top_level()?;
    parser.blank();
    if parser.at != raw.len() {
        return None;
    }
    let (op, upsert) = match event.op.as_deref()? {
        "d" => (b'd', false),
        "c" => (b'c', true),
        "u" => (b'u', true),
        "r" => (b'r', true),
        _ => return None,
    };
    let key = event.key?;
    if key.is_empty() {
        return None;
    }
    let value = if upsert {
        if event.unchanged.unwrap_or(false) {
            return None;
        }
        event.after?
    } else {
        Vec::new()
    };
    let (schema, table) = event.source?;
    Some(PlainEvent {
        op,
        upsert,
        key,
        value,
        schema: schema?,
        table: table?,
    })
}

/// True when `raw` (a log record's value) is certainly a JSON object that orjson decodes:
/// valid UTF-8, JSON's grammar, strings without control characters or lone surrogates,
/// finite numbers, nesting within `MAX_DEPTH`. False when unsure (deeper nesting, say):
/// the connector runtime then decodes it in Python, which decides. Duplicate members are
/// fine (orjson keeps the last).
pub fn json_object(raw: &[u8]) -> bool {
    let Some(mut parser) = Parser::new(raw) else {
        return false;
    };
    parser.blank();
    if parser.peek() != Some(b'{') || parser.check(0).is_none() {
        return false;
    }
    parser.blank();
    parser.at == raw.len()
}

/// The text of one key column (`derived.keys.key_text`).
pub fn key_text(value: &KeyValue) -> &str {
    match value {
        KeyValue::Text(text) | KeyValue::Int(text) => text,
        KeyValue::Bool(true) => "true",
        KeyValue::Bool(false) => "false",
        KeyValue::Null => "\\N",
    }
}

/// The text of a whole key (`derived.keys.encode_key` with `:`), appended to `out`.
pub fn push_encoded_key(out: &mut String, key: &[(String, KeyValue)]) {
    if let [(_, value)] = key {
        out.push_str(key_text(value));
        return;
    }
    for (number, (_, value)) in key.iter().enumerate() {
        if number > 0 {
            out.push(':');
        }
        if *value == KeyValue::Null {
            out.push_str("\\N");
            continue;
        }
        for c in key_text(value).chars() {
            if c == '\\' || c == ':' {
                out.push('\\');
            }
            out.push(c);
        }
    }
}

/// The text of key column `name` (`\N` when the key lacks it).
pub fn column_text<'a>(key: &'a [(String, KeyValue)], name: &str) -> &'a str {
    key.iter()
        .find(|(column, _)| column == name)
        .map_or("\\N", |(_, value)| key_text(value))
}

/// The fields of the top-level object the plain path reads; `None` inside: present but
/// not usable (the Python path decides).
#[derive(Default)]
struct TopLevel {
    op: Option<String>,
    key: Option<Vec<(String, KeyValue)>>,
    after: Option<Vec<u8>>,
    unchanged: Option<bool>,
    source: Option<(Option<String>, Option<String>)>,
}

struct Parser<'a> {
    text: &'a str, // the JSON, checked UTF-8 once: slices of it need no check again
    raw: &'a [u8], // its bytes
    at: usize,
}

/// The bytes that end a run of plain string characters: `"`, `\\` and control characters.
const STRING_END: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 0x20 {
        table[byte] = true;
        byte += 1;
    }
    table[b'"' as usize] = true;
    table[b'\\' as usize] = true;
    table
};

impl<'a> Parser<'a> {
    /// A parser at the start of `raw`; None if it is not UTF-8.
    fn new(raw: &'a [u8]) -> Option<Self> {
        let text = std::str::from_utf8(raw).ok()?;
        Some(Parser { text, raw, at: 0 })
    }

    /// The text between `start` and `end` (None unless both are character boundaries,
    /// which they are next to the ASCII bytes the parser stops at).
    fn slice(&self, start: usize, end: usize) -> Option<&'a str> {
        self.text.get(start..end)
    }

    fn peek(&self) -> Option<u8> {
        self.raw.get(self.at).copied()
    }

    fn blank(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        self.blank();
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// Members of an object whose `{` is next: calls `member` with each name (the parser
    /// then at its value); refuses duplicate names.
    fn members(
        &mut self,
        mut member: impl FnMut(&mut Self, Cow<'a, str>) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        self.blank();
        if self.peek()? == b'}' {
            self.at += 1;
            return Some(());
        }
        loop {
            self.blank();
            let name = self.string()?;
            self.eat(b':')?;
            self.blank();
            member(self, name)?;
            self.blank();
            match self.peek()? {
                b',' => self.at += 1,
                b'}' => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn top_level(&mut self) -> Option<TopLevel> {
        let mut found = TopLevel::default();
        let mut seen: Vec<Cow<'a, str>> = Vec::new();
        self.members(|parser, name| {
            if seen.contains(&name) {
                return None; // a duplicate member: orjson keeps the last, leave it to Python
            }
            match name.as_ref() {
                "op" => found.op = Some(parser.string_or_skip()?),
                "key" => found.key = Some(parser.key()?),
                "after" => {
                    let mut value = Vec::with_capacity(256);
                    if parser.peek()? == b'{' {
                        parser.render(&mut value, 0)?;
                        found.after = Some(value);
                    } else {
                        parser.skip()?;
                    }
                }
                "unchanged" => found.unchanged = Some(parser.unchanged()?),
                "source" => found.source = Some(parser.source()?),
                _ => parser.skip()?,
            }
            seen.push(name);
            Some(())
        })?;
        Some(found)
    }

    /// A string value (`""` for any other value: not an op the plain path takes).
    fn string_or_skip(&mut self) -> Option<String> {
        if self.peek()? == b'"' {
            return Some(self.string()?.into_owned());
        }
        self.skip()?;
        Some(String::new())
    }

    /// True unless `unchanged` is null or an empty list (the Python path decides the rest).
    fn unchanged(&mut self) -> Option<bool> {
        let start = self.at;
        self.skip()?;
        let bare = || {
            self.raw[start..self.at]
                .iter()
                .filter(|b| !b.is_ascii_whitespace())
        };
        Some(!(bare().eq(b"null") || bare().eq(b"[]")))
    }

    fn source(&mut self) -> Option<(Option<String>, Option<String>)> {
        let (mut schema, mut table) = (None, None);
        if self.peek()? != b'{' {
            self.skip()?;
            return Some((None, None));
        }
        let mut seen: Vec<Cow<'a, str>> = Vec::new();
        self.members(|parser, name| {
            if seen.contains(&name) {
                return None;
            }
            let slot = match name.as_ref() {
                "schema" => &mut schema,
                "table" => &mut table,
                _ => {
                    seen.push(name);
                    return parser.skip();
                }
            };
            if parser.peek()? == b'"' {
                *slot = Some(parser.string()?.into_owned());
            } else {
                return None; // str(None), str(1): left to Python
            }
            seen.push(name);
            Some(())
        })?;
        Some((schema, table))
    }

    /// The key object's columns; `None` for anything else or a column that is not a
    /// string, an integer, a boolean or null.
    fn key(&mut self) -> Option<Vec<(String, KeyValue)>> {
        let mut columns: Vec<(String, KeyValue)> = Vec::with_capacity(1);
        self.members(|parser, name| {
            if columns
                .iter()
                .any(|(column, _)| column.as_str() == name.as_ref())
            {
                return None;
            }
            let value = match parser.peek()? {
                b'"' => KeyValue::Text(parser.string()?.into_owned()),
                b't' => parser.literal(b"true", KeyValue::Bool(true))?,
                b'f' => parser.literal(b"false", KeyValue::Bool(false))?,
                b'n' => parser.literal(b"null", KeyValue::Null)?,
                _ => {
                    let mut text = Vec::new();
                    match parser.number(&mut text)? {
                        Number::Int => KeyValue::Int(String::from_utf8(text).ok()?),
                        Number::Float => return None, // Python's repr of a float: not here
                    }
                }
            };
            columns.push((name.into_owned(), value));
            Some(())
        })?;
        Some(columns)
    }

    fn literal<T>(&mut self, word: &[u8], value: T) -> Option<T> {
        let end = self.at + word.len();
        (self.raw.get(self.at..end)? == word).then(|| {
            self.at = end;
            value
        })
    }

    /// Skip one value, checking it is JSON orjson decodes (`check`).
    fn skip(&mut self) -> Option<()> {
        self.check(0)
    }

    /// Check the value at the cursor is JSON orjson decodes (see `json_object`),
    /// rendering nothing.
    fn check(&mut self, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.blank();
        match self.peek()? {
            b'{' => self.checked_items(b'}', |parser| {
                parser.blank();
                parser.string()?;
                parser.eat(b':')?;
                parser.check(depth + 1)
            }),
            b'[' => self.checked_items(b']', |parser| parser.check(depth + 1)),
            b'"' => self.string().map(drop),
            b't' => self.literal(b"true", ()),
            b'f' => self.literal(b"false", ()),
            b'n' => self.literal(b"null", ()),
            _ => self.finite_number(),
        }
    }

    /// Check the items of the object or array whose opening bracket is at the cursor, up
    /// to its `close`, each with `item` (a member `"name": value`, or a value).
    fn checked_items(
        &mut self,
        close: u8,
        mut item: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
        self.at += 1;
        self.blank();
        if self.peek()? == close {
            self.at += 1;
            return Some(());
        }
        loop {
            item(self)?;
            self.blank();
            match self.peek()? {
                b',' => self.at += 1,
                found if found == close => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Skip the number at the cursor: JSON's grammar, and finite as a double unless it
    /// is a 64-bit integer (orjson refuses what overflows to infinity).
    fn finite_number(&mut self) -> Option<()> {
        let start = self.at;
        let float = self.number_syntax()?;
        if !float && self.at - start <= 18 {
            return Some(()); // an integer of at most 18 digits
        }
        let text = self.slice(start, self.at)?;
        text.parse::<f64>()
            .ok()
            .filter(|value| value.is_finite())
            .map(drop)
    }

    /// Move past the number at the cursor, JSON's grammar; whether it has a fraction or
    /// an exponent (None: not a number).
    fn number_syntax(&mut self) -> Option<bool> {
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.peek()? {
            b'0' => self.at += 1,
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        let mut float = false;
        if self.peek() == Some(b'.') {
            self.at += 1;
            self.peek().filter(u8::is_ascii_digit)?;
            self.digits();
            float = true;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            self.peek().filter(u8::is_ascii_digit)?;
            self.digits();
            float = true;
        }
        Some(float)
    }

    /// Write the value at the cursor as orjson writes it once decoded.
    fn render(&mut self, out: &mut Vec<u8>, depth: usize) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.blank();
        match self.peek()? {
            b'{' => {
                out.push(b'{');
                let mut names: Vec<Cow<'a, str>> = Vec::new();
                self.members(|parser, name| {
                    if names.contains(&name) {
                        return None;
                    }
                    if !names.is_empty() {
                        out.push(b',');
                    }
                    push_json_string(out, &name);
                    out.push(b':');
                    names.push(name);
                    parser.render(out, depth + 1)
                })?;
                out.push(b'}');
            }
            b'[' => {
                self.at += 1;
                out.push(b'[');
                self.blank();
                if self.peek()? == b']' {
                    self.at += 1;
                } else {
                    loop {
                        self.render(out, depth + 1)?;
                        self.blank();
                        match self.peek()? {
                            b',' => {
                                self.at += 1;
                                out.push(b',');
                            }
                            b']' => {
                                self.at += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
                out.push(b']');
            }
            b'"' => push_json_string(out, &self.string()?),
            b't' => out.extend_from_slice(self.literal(b"true", b"true")?),
            b'f' => out.extend_from_slice(self.literal(b"false", b"false")?),
            b'n' => out.extend_from_slice(self.literal(b"null", b"null")?),
            _ => {
                self.number(out)?;
            }
        }
        Some(())
    }

    /// The string whose `"` is at the cursor, unescaped.
    fn string(&mut self) -> Option<Cow<'a, str>> {
        (self.peek()? == b'"').then_some(())?;
        self.at += 1;
        let start = self.at;
        let run = self.raw[start..]
            .iter()
            .position(|&b| STRING_END[usize::from(b)])?;
        self.at += run;
        match self.raw[self.at] {
            b'"' => {
                let text = self.slice(start, self.at)?;
                self.at += 1;
                return Some(Cow::Borrowed(text));
            }
            b'\\' => {}
            _ => return None,
        }
        let mut text = String::from(self.slice(start, self.at)?);
        loop {
            let run = self.at;
            while !matches!(self.peek()?, b'"' | b'\\' | 0..=0x1f) {
                self.at += 1;
            }
            text.push_str(self.slice(run, self.at)?);
            match self.peek()? {
                b'"' => {
                    self.at += 1;
                    return Some(Cow::Owned(text));
                }
                b'\\' => {
                    self.at += 1;
                    let escaped = self.peek()?;
                    self.at += 1;
                    text.push(match escaped {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return None,
                    });
                }
                _ => return None,
            }
        }
    }

    /// The character of a `\u` escape (the cursor after the `u`), joining a surrogate
    /// pair; a lone surrogate is refused (as orjson refuses it).
    fn unicode_escape(&mut self) -> Option<char> {
        let first = self.hex4()?;
        if (0xD800..0xDC00).contains(&first) {
            (self.raw.get(self.at..self.at + 2)? == b"\\u").then_some(())?;
            self.at += 2;
            let second = self.hex4()?;
            if !(0xDC00..0xE000).contains(&second) {
                return None;
            }
            return char::from_u32(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00));
        }
        char::from_u32(first)
    }

    fn hex4(&mut self) -> Option<u32> {
        let digits = self.text.get(self.at..self.at + 4)?;
        if !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        self.at += 4;
        u32::from_str_radix(digits, 16).ok()
    }

    /// The number at the cursor, written to `out` as orjson writes it once decoded.
    fn number(&mut self, out: &mut Vec<u8>) -> Option<Number> {
        let start = self.at;
        let float = self.number_syntax()?;
        let text = self.slice(start, self.at)?;
        if !float && text.len() <= 18 {
            // JSON allows no leading zeros: the text is Python's, but for `-0`
            out.extend_from_slice(if text == "-0" { b"0" } else { text.as_bytes() });
            return Some(Number::Int);
        }
        if !float {
            if let Ok(int) = text.parse::<i64>() {
                out.extend_from_slice(int.to_string().as_bytes());
                return Some(Number::Int);
            }
            if let Ok(int) = text.parse::<u64>() {
                out.extend_from_slice(int.to_string().as_bytes());
                return Some(Number::Int);
            }
        }
        let value: f64 = text.parse().ok()?;
        if !value.is_finite() {
            return None;
        }
        // a float whose shortest digits are ambiguous is left to the Python reference
        push_float(out, value).then_some(Number::Float)
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.at += 1;
        }
    }
}

/// Append `text` (a string's text) as orjson writes it: as it is when it came borrowed
/// from the raw JSON (no escape there, so no `"`, `\\` or control character to escape).
#[allow(clippy::ptr_arg)] // whether it is borrowed is the point
fn push_json_string(out: &mut Vec<u8>, text: &Cow<'_, str>) {
    match text {
        Cow::Borrowed(plain) => {
            out.push(b'"');
            out.extend_from_slice(plain.as_bytes());
            out.push(b'"');
        }
        Cow::Owned(unescaped) => push_string(out, unescaped.as_bytes()),
    }
}

/// What a number decoded to in Python.
enum Number {
    Int,
    Float,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(body: &str) -> Option<PlainEvent> {
        plain_event(body.as_bytes())
    }

    const SOURCE: &str = r#""source":{"schema":"public","table":"orders","lsn":"0/1"}"#;

    #[test]
    fn an_upsert_gives_its_key_value_and_table() {
        let raw = format!(
            r#"{{"op":"u","key":{{"id":7}},"before":null,"after":{{"id":7,"t":"a\u00e9\/"}},"unchanged":[],{SOURCE}}}"#
        );
        let found = event(&raw).unwrap();
        assert!(found.upsert);
        assert_eq!(found.key, vec![("id".into(), KeyValue::Int("7".into()))]);
        assert_eq!(found.value, r#"{"id":7,"t":"aé/"}"#.as_bytes());
        assert_eq!(
            (found.schema.as_str(), found.table.as_str()),
            ("public", "orders")
        );
    }

    #[test]
    fn a_delete_needs_no_after() {
        let raw = format!(r#"{{"op":"d","key":{{"a":"x:y","b":null}},"after":null,{SOURCE}}}"#);
        let found = event(&raw).unwrap();
        assert!(!found.upsert && found.value.is_empty());
        let mut key = String::new();
        push_encoded_key(&mut key, &found.key);
        assert_eq!(key, "x\\:y:\\N");
        assert_eq!(column_text(&found.key, "b"), "\\N");
        assert_eq!(column_text(&found.key, "c"), "\\N");
    }

    #[test]
    fn what_python_must_decide_is_refused() {
        for raw in [
            format!(
                r#"{{"op":"u","key":{{"id":1}},"after":{{"id":1}},"unchanged":["b"],{SOURCE}}}"#
            ),
            format!(r#"{{"op":"u","key":{{"id":1.5}},"after":{{"id":1}},{SOURCE}}}"#),
            format!(r#"{{"op":"u","key":{{}},"after":{{"id":1}},{SOURCE}}}"#),
            format!(r#"{{"op":"t","key":{{"id":1}},"after":null,{SOURCE}}}"#),
            format!(r#"{{"op":"u","key":{{"id":1}},"after":{{"a":1,"a":2}},{SOURCE}}}"#),
            format!(r#"{{"op":"u","op":"u","key":{{"id":1}},"after":{{}},{SOURCE}}}"#),
            format!(r#"{{"op":"u","key":{{"id":1}},"after":{{"a":"\ud800"}},{SOURCE}}}"#),
            format!(r#"{{"op":"u","key":{{"id":1}},"after":{{"a":1e400}},{SOURCE}}}"#),
            r#"{"op":"u","key":{"id":1},"after":{}}"#.to_owned(),
            format!(r#"{{"op":"u","key":{{"id":1}},"after":{{}},{SOURCE}}} x"#),
        ] {
            assert_eq!(event(&raw), None, "{raw}");
        }
    }

    #[test]
    fn values_are_written_as_orjson_writes_them() {
        let raw = format!(
            "{{\"op\":\"c\",\"key\":{{\"id\":-0}},\"after\":{{ \"n\" : [1.50, -0, 1E5, 1e-7, 18446744073709551616], \"s\":\"\\u001b\\t\\\"\" }},{SOURCE}}}"
        );
        let found = event(&raw).unwrap();
        assert_eq!(found.key[0].1, KeyValue::Int("0".into()));
        assert_eq!(
            String::from_utf8(found.value).unwrap(),
            r#"{"n":[1.5,0,100000.0,1e-7,1.8446744073709552e+19],"s":"\u001b\t\""}"#
        );
    }

    #[test]
    fn json_objects_are_confirmed_and_anything_doubtful_is_not() {
        for raw in [
            r#"{}"#,
            " {\"a\" : [1, -0, 1.5e3, 18446744073709551616, true, false, null, {}]}\n",
            r#"{"a":1,"a":2}"#,
            r#"{"s":"\u00e9\ud83d\ude00\n\"","t":"é"}"#,
        ] {
            assert!(json_object(raw.as_bytes()), "{raw}");
        }
        let deep = format!("{{\"a\":{}1{}}}", "[".repeat(70), "]".repeat(70));
        for raw in [
            "",
            "[]",
            "1",
            "\"a\"",
            "{",
            "{}}",
            "{} x",
            "{\"a\":01}",
            "{\"a\":1e400}",
            "{\"a\":\"\\ud800\"}",
            "{\"a\":\"\u{1}\"}",
            "{\"a\":NaN}",
            "{\"a\":1,}",
            "{\"a\" 1}",
            "{a:1}",
            "\u{feff}{}",
            "{\"a\":-}",
            "{\"a\":1.}",
            &deep,
        ] {
            assert!(!json_object(raw.as_bytes()), "{raw}");
        }
        assert!(!json_object(b"{\"a\":\"\xff\"}"));
    }

    #[test]
    fn floats_follow_orjson() {
        for (value, text) in [
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (1.2345e-5, "0.000012345"),
            (-1.5e-6, "-1.5e-6"),
            (123_456_789.125, "123456789.125"),
            (-0.0, "-0.0"),
            (5e-324, "5e-324"),
        ] {
            let mut out = Vec::new();
            assert!(push_float(&mut out, value));
            assert_eq!(String::from_utf8(out).unwrap(), text);
        }
    }
}
