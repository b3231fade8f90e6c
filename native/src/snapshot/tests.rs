//! Unit tests of the COPY row conversion (the byte-for-byte comparison with the Python
//! reference is `tests/unit/capture/test_native_snapshot.py`).

use super::*;

fn plan() -> Plan {
    // id int8, name text, price float8, at timestamptz; key (id)
    Plan::new(&[1, 0, 3, 7], &["id", "name", "price", "at"], &[0], 3).unwrap()
}

fn event(row: &Row) -> (String, String) {
    match row {
        Row::Event { key, value } => (
            String::from_utf8(key.clone()).unwrap(),
            String::from_utf8(value.clone()).unwrap(),
        ),
        Row::Fallback(range) => panic!("fell back: {range:?}"),
    }
}

#[test]
fn a_row_becomes_key_and_body() {
    let rows = convert_chunk(
        b"7\ta\\tb\\\\\t1.5\t2024-01-02 03:04:05+00\n",
        &plan(),
        None,
    );
    let (key, body) = event(&rows[0]);
    assert_eq!(key, r#"{"id":7}"#);
    assert_eq!(
        body,
        r#"{"op":"r","key":{"id":7},"before":null,"after":{"id":7,"name":"a\tb\\","price":1.5,"at":"2024-01-02T03:04:05Z"},"unchanged":[],"schema_version":3}"#
    );
}

#[test]
fn nulls_and_the_source_block() {
    let source = Source {
        prefix: b",\"source\":{\"seq\":",
        suffix: b"}}",
        first_seq: 41,
    };
    let rows = convert_chunk(
        b"1\t\\N\t\\N\t\\N\n2\tx\tNaN\tinfinity\n",
        &plan(),
        Some(&source),
    );
    assert_eq!(rows.len(), 2);
    assert!(event(&rows[0])
        .1
        .ends_with(r#""schema_version":3,"source":{"seq":41}}"#));
    assert!(event(&rows[1])
        .1
        .contains(r#""price":"NaN","at":"infinity""#));
}

#[test]
fn what_it_cannot_convert_goes_back_as_the_line() {
    let chunk = b"1\tx\t1\t2024-01-02 03:04:05+1\n2\t\xff\t1\t\\N\n3\tx\t1\n4\tx\t1\t\\N";
    let rows = convert_chunk(chunk, &plan(), None);
    assert_eq!(rows[0], Row::Fallback(0..27));
    assert!(matches!(rows[1], Row::Fallback(_)));
    assert!(matches!(rows[2], Row::Fallback(_)));
    event(&rows[3]);
}

#[test]
fn a_bad_plan_is_refused() {
    assert!(Plan::new(&[1, 12], &["a", "b"], &[0], 1).is_err());
    assert!(Plan::new(&[1], &["a"], &[1], 1).is_err());
    assert!(Plan::new(&[1, 1], &["a", "b"], &[0, 0], 1).is_err());
    assert!(Plan::new(&[], &[], &[], 1).is_err());
}

#[test]
fn escapes_as_the_reference() {
    let mut out = Vec::new();
    unescape(b"a\\b\\f\\n\\r\\t\\v\\x\\\\\\", &mut out);
    assert_eq!(out, b"a\x08\x0c\n\r\t\x0bx\\\\");
}
