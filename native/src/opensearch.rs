//! The OpenSearch sink's bulk actions straight from the log's event JSON: for one plain
//! event (what `redis_args::plain_event` reads: op, key, `orjson.dumps(after)`, table),
//! the bytes `connectors/opensearch/bulk.py` writes (`index_action` / `delete_action`:
//! an external-versioned action line, and the document for an index), and what kinds of
//! values the document's top-level fields hold (for the mapping check), and every value's
//! kind by its path below them (`deep_kinds`, for the unindexed check:
//! `connectors/opensearch/native_actions.py` makes both from them).
//!
//! `tests/unit/connectors/test_opensearch_native_actions.py` holds these bytes and kinds
//! to the Python path's.

use crate::convert::json::push_string;

/// A field's value kinds, as bits (the module exports them as `FIELD_KINDS`, which
/// `connectors/opensearch/native_actions.py` reads).
pub type Kind = u16;
/// A string.
pub const KIND_STR: Kind = 1;
/// An integer within a signed 64-bit `long`.
pub const KIND_INT: Kind = 2;
/// An integer past a `long` (up to `u64::MAX`).
pub const KIND_BIG_INT: Kind = 4;
/// A float.
pub const KIND_FLOAT: Kind = 8;
/// `true` or `false`.
pub const KIND_BOOL: Kind = 16;
/// An object.
pub const KIND_OBJECT: Kind = 32;
/// An array.
pub const KIND_ARRAY: Kind = 64;
/// `null`.
pub const KIND_NULL: Kind = 128;
/// The string `infinity` or `-infinity` (reported with `KIND_STR`): PostgreSQL's
/// infinite timestamps and dates, which a `date` field cannot index (every other
/// string the sink leaves to OpenSearch's date parsing).
pub const KIND_INFINITE_TEXT: Kind = 256;
/// Every kind by the name Python knows it by.
pub const FIELD_KINDS: [(&str, Kind); 9] = [
    ("str", KIND_STR),
    ("int", KIND_INT),
    ("big_int", KIND_BIG_INT),
    ("float", KIND_FLOAT),
    ("bool", KIND_BOOL),
    ("object", KIND_OBJECT),
    ("array", KIND_ARRAY),
    ("null", KIND_NULL),
    ("infinite_text", KIND_INFINITE_TEXT),
];

/// What joins the names of a path in `deep_kinds` (a control character: never in a
/// name read without escapes).
pub const PATH_SEPARATOR: char = '\u{1}';
/// How deep `deep_kinds` reads (recursion bounded: deeper documents are not read).
const MAX_DEPTH: usize = 48;

/// Append the action of one event to `out`: `alias_json` is the alias as a JSON string,
/// `after` the document (`orjson.dumps(after)`) for an index, `None` for a delete.
/// The same bytes as `bulk._INDEX_LINES` / `bulk._DELETE_LINE` filled in.
pub fn push_action(
    out: &mut Vec<u8>,
    alias_json: &[u8],
    doc_id: &str,
    version: u64,
    after: Option<&[u8]>,
) {
    out.extend_from_slice(if after.is_some() {
        b"{\"index\":{\"_index\":"
    } else {
        b"{\"delete\":{\"_index\":"
    });
    out.extend_from_slice(alias_json);
    out.extend_from_slice(b",\"_id\":");
    push_string(out, doc_id.as_bytes());
    out.extend_from_slice(b",\"version\":");
    out.extend_from_slice(version.to_string().as_bytes());
    out.extend_from_slice(b",\"version_type\":\"external_gte\"");
    match after {
        Some(document) => {
            out.extend_from_slice(b",\"require_alias\":true}}\n");
            out.extend_from_slice(document);
            out.push(b'\n');
        }
        None => out.extend_from_slice(b"}}\n"),
    }
}

/// The top-level fields of `document` (compact JSON as orjson writes it: no blanks) with
/// the kind of each value, in order; `None` for what this does not read (not an object,
/// a field name with an escape, malformed input): the Python path decides then.
pub fn field_kinds(document: &[u8]) -> Option<Vec<(&str, Kind)>> {
    let mut scan = Scan {
        raw: document,
        at: 0,
    };
    let mut fields = Vec::new();
    scan.object(|scan, name| {
        fields.push((name, scan.value()?));
        Some(())
    })?;
    scan.done().then_some(fields)
}

/// Every value of `document` (compact JSON as orjson writes it) by its path: `report`
/// gets the path (names joined by `PATH_SEPARATOR`, from a top-level field's) and kind
/// of each value; an array's elements are reported at the array's own path, as a mapping
/// applies to each of them. False for what this does not read (the `field_kinds` cases,
/// a name with an escape at any depth, nesting past `MAX_DEPTH`): the reports made are
/// then incomplete.
pub fn deep_kinds(document: &[u8], path: &mut String, report: &mut impl FnMut(&str, Kind)) -> bool {
    let mut scan = Scan {
        raw: document,
        at: 0,
    };
    path.clear();
    scan.members(path, report, 0).is_some() && scan.done()
}

struct Scan<'a> {
    raw: &'a [u8],
    at: usize,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.raw.get(self.at).copied()
    }

    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    fn done(&self) -> bool {
        self.at == self.raw.len()
    }

    /// A string without escapes (its text), the cursor at its `"`.
    fn plain_string(&mut self) -> Option<&'a str> {
        self.eat(b'"')?;
        let start = self.at;
        let length = memchr::memchr2(b'"', b'\\', &self.raw[start..])?;
        self.at = start + length;
        self.eat(b'"')?; // a backslash first: not a plain string
        std::str::from_utf8(&self.raw[start..start + length]).ok()
    }

    /// Skip a string, escapes included, the cursor at its `"`.
    fn skip_string(&mut self) -> Option<()> {
        self.eat(b'"')?;
        loop {
            let length = memchr::memchr2(b'"', b'\\', self.raw.get(self.at..)?)?;
            self.at += length;
            if self.peek()? == b'"' {
                self.at += 1;
                return Some(());
            }
            self.at += 2; // a backslash and the character it escapes
        }
    }

    /// Skip one value; its kind.
    fn value(&mut self) -> Option<Kind> {
        match self.peek()? {
            b'"' => {
                let start = self.at;
                self.skip_string()?;
                Some(match &self.raw[start..self.at] {
                    b"\"infinity\"" | b"\"-infinity\"" => KIND_STR | KIND_INFINITE_TEXT,
                    _ => KIND_STR,
                })
            }
            b'{' | b'[' => {
                let kind = if self.peek()? == b'{' {
                    KIND_OBJECT
                } else {
                    KIND_ARRAY
                };
                self.skip_container().map(|()| kind)
            }
            b't' => self.word(b"true").map(|()| KIND_BOOL),
            b'f' => self.word(b"false").map(|()| KIND_BOOL),
            b'n' => self.word(b"null").map(|()| KIND_NULL),
            _ => self.number(),
        }
    }

    /// An object (the cursor at its `{`): `member` reads each member's value, given its
    /// name (one without escapes).
    fn object(
        &mut self,
        mut member: impl FnMut(&mut Self, &'a str) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        if self.eat(b'}').is_some() {
            return Some(());
        }
        loop {
            let name = self.plain_string()?;
            self.eat(b':')?;
            member(self, name)?;
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

    /// The members of an object (the cursor at its `{`), each value read by `deep`
    /// under `path`.
    fn members(
        &mut self,
        path: &mut String,
        report: &mut impl FnMut(&str, Kind),
        depth: usize,
    ) -> Option<()> {
        self.object(|scan, name| {
            let length = path.len();
            if depth > 0 {
                path.push(PATH_SEPARATOR);
            }
            path.push_str(name);
            scan.deep(path, report, depth)?;
            path.truncate(length);
            Some(())
        })
    }

    /// Read one value at `path`, reporting its kind and those of the values in it.
    fn deep(
        &mut self,
        path: &mut String,
        report: &mut impl FnMut(&str, Kind),
        depth: usize,
    ) -> Option<()> {
        if depth >= MAX_DEPTH {
            return None;
        }
        let kind = match self.peek()? {
            b'{' => {
                self.members(path, report, depth + 1)?;
                KIND_OBJECT
            }
            b'[' => {
                self.at += 1;
                if self.eat(b']').is_none() {
                    loop {
                        self.deep(path, report, depth + 1)?; // at the array's path
                        match self.peek()? {
                            b',' => self.at += 1,
                            b']' => {
                                self.at += 1;
                                break;
                            }
                            _ => return None,
                        }
                    }
                }
                KIND_ARRAY
            }
            _ => self.value()?,
        };
        report(path, kind);
        Some(())
    }

    fn word(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.raw.get(self.at..end)? == word).then(|| self.at = end)
    }

    /// Skip an object or array (balanced brackets outside strings).
    fn skip_container(&mut self) -> Option<()> {
        let mut depth = 0usize;
        loop {
            match self.peek()? {
                b'"' => {
                    self.skip_string()?;
                    continue;
                }
                b'{' | b'[' => depth += 1,
                b'}' | b']' => {
                    depth = depth.checked_sub(1)?;
                    if depth == 0 {
                        self.at += 1;
                        return Some(());
                    }
                }
                _ => {}
            }
            self.at += 1;
        }
    }

    /// A number's kind as Python decodes it: an integer unless it has a fraction or an
    /// exponent (orjson writes every float so), a `long` when it fits one.
    fn number(&mut self) -> Option<Kind> {
        let start = self.at;
        while self
            .peek()
            .is_some_and(|b| matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E'))
        {
            self.at += 1;
        }
        let text = std::str::from_utf8(&self.raw[start..self.at]).ok()?;
        if text.is_empty() {
            return None;
        }
        if text.contains(['.', 'e', 'E']) {
            return text.parse::<f64>().ok().map(|_| KIND_FLOAT);
        }
        if text.parse::<i64>().is_ok() {
            return Some(KIND_INT);
        }
        text.parse::<u64>().ok().map(|_| KIND_BIG_INT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_are_the_python_templates_filled() {
        let mut out = Vec::new();
        push_action(&mut out, b"\"orders\"", "a\"1", 42, Some(b"{\"x\":1}"));
        push_action(&mut out, b"\"orders\"", "7", 43, None);
        assert_eq!(
            out,
            b"{\"index\":{\"_index\":\"orders\",\"_id\":\"a\\\"1\",\"version\":42,\
\"version_type\":\"external_gte\",\"require_alias\":true}}\n{\"x\":1}\n\
{\"delete\":{\"_index\":\"orders\",\"_id\":\"7\",\"version\":43,\
\"version_type\":\"external_gte\"}}\n"
                .to_vec()
        );
    }

    #[test]
    fn field_kinds_follow_python_types() {
        let document = br#"{"s":"a\"}b","i":-9223372036854775808,"b":18446744073709551615,"f":1.5,"e":1e16,"t":true,"o":{"x":[1,"]"]},"a":[],"n":null}"#;
        assert_eq!(
            field_kinds(document),
            Some(vec![
                ("s", KIND_STR),
                ("i", KIND_INT),
                ("b", KIND_BIG_INT),
                ("f", KIND_FLOAT),
                ("e", KIND_FLOAT),
                ("t", KIND_BOOL),
                ("o", KIND_OBJECT),
                ("a", KIND_ARRAY),
                ("n", KIND_NULL)
            ])
        );
        assert_eq!(field_kinds(b"{}"), Some(vec![]));
    }

    #[test]
    fn infinite_text_is_told_apart() {
        let document =
            br#"{"a":"infinity","b":"-infinity","c":"Infinity","d":"infinity ","e":["infinity"]}"#;
        let infinite = KIND_STR | KIND_INFINITE_TEXT;
        assert_eq!(
            field_kinds(document),
            Some(vec![
                ("a", infinite),
                ("b", infinite),
                ("c", KIND_STR),
                ("d", KIND_STR),
                ("e", KIND_ARRAY)
            ])
        );
        let found = deep(document).unwrap();
        assert!(found.contains(&("e".to_owned(), infinite)));
    }

    fn deep(document: &[u8]) -> Option<Vec<(String, Kind)>> {
        let mut found: Vec<(String, Kind)> = Vec::new();
        let mut path = String::new();
        deep_kinds(document, &mut path, &mut |at, kind| {
            found.push((at.replace(PATH_SEPARATOR, "."), kind))
        })
        .then_some(found)
    }

    #[test]
    fn deep_kinds_name_every_value_by_its_path() {
        let document = br#"{"i":1,"o":{"s":"}","l":[{"f":1.5},null,[2]]},"a":[],"e":{}}"#;
        assert_eq!(
            deep(document),
            Some(
                [
                    ("i", KIND_INT),
                    ("o.s", KIND_STR),
                    ("o.l.f", KIND_FLOAT),
                    ("o.l", KIND_OBJECT),
                    ("o.l", KIND_NULL),
                    ("o.l", KIND_INT),
                    ("o.l", KIND_ARRAY),
                    ("o.l", KIND_ARRAY),
                    ("o", KIND_OBJECT),
                    ("a", KIND_ARRAY),
                    ("e", KIND_OBJECT),
                ]
                .map(|(path, kind)| (path.to_owned(), kind))
                .to_vec()
            )
        );
        assert_eq!(deep(b"{}"), Some(vec![]));
    }

    #[test]
    fn deep_kinds_refuse_escaped_names_and_deep_nesting() {
        assert_eq!(deep(br#"{"o":{"a\"b":1}}"#), None);
        assert_eq!(deep(br#"{"o":[1}"#), None);
        assert_eq!(deep(br#"{"o":1}x"#), None);
        let nested = format!("{{\"o\":{}1{}}}", "[".repeat(60), "]".repeat(60));
        assert_eq!(deep(nested.as_bytes()), None);
        let shallow = format!("{{\"o\":{}1{}}}", "[".repeat(40), "]".repeat(40));
        assert!(deep(shallow.as_bytes()).is_some());
    }

    #[test]
    fn what_this_does_not_read_is_refused() {
        for document in [
            &b"[]"[..],
            b"{\"a\\\"b\":1}",
            b"{\"a\":1",
            b"{\"a\":}",
            b"{\"a\":1}x",
            b"{\"a\":[1}",
            b"",
            b"{\"a\":\"x",
            b"{\"a\":1.2.3e}",
            b"{\"a\":-}",
        ] {
            assert_eq!(
                field_kinds(document),
                None,
                "{:?}",
                String::from_utf8_lossy(document)
            );
        }
    }
}
