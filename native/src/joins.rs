//! The joined views' initial load (`connectors/joins`): a snapshot read (`op` `r`) as the
//! join state store keeps it, straight from the event's raw JSON — the key's stored form
//! (`connectors.joins.store.key_bytes`) and the row's JSON (`orjson.dumps(after)`, as
//! `redis_args::plain_event` renders it). Anything else, or anything `plain_event` leaves
//! to Python (a float key column, a non-empty `unchanged`, …), gives `None`: the sink
//! applies that event in Python. `tests/unit/connectors/test_joins_native_load.py` holds
//! both to the same bytes.

use crate::convert::json::push_string;
use crate::redis_args::{plain_event, KeyValue};

/// A first key column that is a non-negative integer of at most this many digits puts a
/// letter before the key's JSON (`_KEY_DIGITS`).
const KEY_DIGITS: usize = 26;
/// The letter of a one-digit number (`a`); two digits: `b`, and so on (`_KEY_LETTERS`).
const FIRST_KEY_LETTER: u8 = b'a';

/// A snapshot read of a joined table, as the join state store writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedRow {
    /// `source.schema`.
    pub schema: String,
    /// `source.table`.
    pub table: String,
    /// The key's stored form (`key_bytes`).
    pub key: Vec<u8>,
    /// `orjson.dumps(after)`.
    pub row: Vec<u8>,
}

/// The snapshot read of `raw` (a log record's value), or `None` when it is not one this
/// renders exactly as the Python path does.
pub fn loaded_row(raw: &[u8]) -> Option<LoadedRow> {
    let event = plain_event(raw)?;
    if event.op != b'r' {
        return None;
    }
    Some(LoadedRow {
        key: key_bytes(&event.key),
        row: event.value,
        schema: event.schema,
        table: event.table,
    })
}

/// `key_bytes`: the key's JSON as orjson writes it, after a letter when its first column
/// is a non-negative integer (the store then orders such keys by number).
pub fn key_bytes(key: &[(String, KeyValue)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(32);
    if let Some((_, KeyValue::Int(digits))) = key.first() {
        if !digits.starts_with('-') {
            if let Some(letter) = key_letter(digits.len()) {
                out.push(letter);
            }
        }
    }
    out.push(b'{');
    for (at, (name, value)) in key.iter().enumerate() {
        if at > 0 {
            out.push(b',');
        }
        push_string(&mut out, name.as_bytes());
        out.push(b':');
        match value {
            KeyValue::Text(text) => push_string(&mut out, text.as_bytes()),
            KeyValue::Int(digits) => out.extend_from_slice(digits.as_bytes()),
            KeyValue::Bool(true) => out.extend_from_slice(b"true"),
            KeyValue::Bool(false) => out.extend_from_slice(b"false"),
            KeyValue::Null => out.extend_from_slice(b"null"),
        }
    }
    out.push(b'}');
    out
}

/// The letter of a number of `digits` digits (1 → `a`); None past `KEY_DIGITS`.
fn key_letter(digits: usize) -> Option<u8> {
    if digits == 0 || digits > KEY_DIGITS {
        return None;
    }
    u8::try_from(digits - 1)
        .ok()
        .map(|offset| FIRST_KEY_LETTER + offset)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loaded(body: &str) -> Option<LoadedRow> {
        loaded_row(body.as_bytes())
    }

    const SOURCE: &str = r#""source":{"schema":"public","table":"orders"}"#;

    #[test]
    fn a_snapshot_read_gives_its_stored_key_and_row() {
        let body = format!(
            r#"{{"op":"r","key":{{"id":42,"line":"a\"b"}},"after":{{"id":42, "v":1.50}},{SOURCE}}}"#
        );
        let row = loaded(&body).unwrap();
        assert_eq!(row.key, br#"b{"id":42,"line":"a\"b"}"#.to_vec());
        assert_eq!(row.row, br#"{"id":42,"v":1.5}"#.to_vec());
        assert_eq!(
            (row.schema.as_str(), row.table.as_str()),
            ("public", "orders")
        );
    }

    #[test]
    fn only_non_negative_integer_first_columns_get_a_letter() {
        let key = |value: &str| {
            let body = format!(r#"{{"op":"r","key":{{"k":{value}}},"after":{{}},{SOURCE}}}"#);
            loaded(&body).unwrap().key
        };
        assert_eq!(key("-0"), br#"a{"k":0}"#.to_vec());
        assert_eq!(key("-7"), br#"{"k":-7}"#.to_vec());
        assert_eq!(key(r#""7""#), br#"{"k":"7"}"#.to_vec());
        assert_eq!(key("true"), br#"{"k":true}"#.to_vec());
        assert_eq!(key("null"), br#"{"k":null}"#.to_vec());
        assert_eq!(
            key("18446744073709551615"),
            br#"t{"k":18446744073709551615}"#.to_vec()
        );
        assert_eq!(key_letter(26), Some(b'z'));
        assert_eq!(key_letter(27), None);
    }

    #[test]
    fn other_events_are_left_to_python() {
        for op in ["c", "u", "d", "t"] {
            let body = format!(r#"{{"op":"{op}","key":{{"id":1}},"after":{{"id":1}},{SOURCE}}}"#);
            assert_eq!(loaded(&body), None, "{op}");
        }
        let float_key = format!(r#"{{"op":"r","key":{{"id":1.5}},"after":{{}},{SOURCE}}}"#);
        assert_eq!(loaded(&float_key), None);
        let past_64_bits = format!(
            r#"{{"op":"r","key":{{"id":{}}},"after":{{}},{SOURCE}}}"#,
            "9".repeat(21)
        );
        assert_eq!(loaded(&past_64_bits), None);
        assert_eq!(loaded("not json"), None);
    }
}
