//! Unit tests of the row change conversion, one per message shape (the byte-for-byte
//! comparison with the Python reference is `tests/unit/capture/test_native_dml.py`).

use super::*;

fn plan() -> Plan {
    // id int8, name text, price float8, doc json; key (id)
    Plan::new(&[1, 0, 3, 8], &["id", "name", "price", "doc"], &[0], 4).unwrap()
}

/// A TupleData value: Some(text), None (`n`), `U` (`u`) or `B` (binary).
enum V<'a> {
    T(&'a [u8]),
    N,
    U,
    B(&'a [u8]),
}

fn tuple(values: &[V<'_>]) -> Vec<u8> {
    let mut out = (values.len() as u16).to_be_bytes().to_vec();
    for value in values {
        match value {
            V::T(text) | V::B(text) => {
                out.push(if matches!(value, V::T(_)) { b't' } else { b'b' });
                out.extend_from_slice(&(text.len() as i32).to_be_bytes());
                out.extend_from_slice(text);
            }
            V::N => out.push(b'n'),
            V::U => out.push(b'u'),
        }
    }
    out
}

fn message(kind: u8, parts: &[(u8, &[V<'_>])]) -> Vec<u8> {
    let mut out = vec![kind];
    out.extend_from_slice(&16385u32.to_be_bytes());
    for (marker, values) in parts {
        out.push(*marker);
        out.extend_from_slice(&tuple(values));
    }
    out
}

fn row<'a>(id: &'a [u8], name: &'a [u8]) -> [V<'a>; 4] {
    [V::T(id), V::T(name), V::T(b"1.5"), V::T(b"[1, \"a\"]")]
}

fn convert(payload: &[u8]) -> Option<(String, String, bool)> {
    convert_change(payload, &plan(), None).map(|change| {
        (
            String::from_utf8(change.key).unwrap(),
            String::from_utf8(change.value).unwrap(),
            change.tombstone,
        )
    })
}

const AFTER: &str = r#"{"id":7,"name":"a\"b\\","price":1.5,"doc":[1,"a"]}"#;

#[test]
fn an_insert() {
    let (key, body, tombstone) = convert(&message(b'I', &[(b'N', &row(b"7", b"a\"b\\"))])).unwrap();
    assert_eq!(key, r#"{"id":7}"#);
    assert_eq!(
        body,
        format!(
            r#"{{"op":"c","key":{{"id":7}},"before":null,"after":{AFTER},"unchanged":[],"schema_version":4}}"#
        )
    );
    assert!(!tombstone);
}

#[test]
fn nulls_and_unchanged_toast() {
    let values = [V::T(b"7"), V::N, V::U, V::U];
    let (_, body, _) = convert(&message(b'I', &[(b'N', &values)])).unwrap();
    assert_eq!(
        body,
        r#"{"op":"c","key":{"id":7},"before":null,"after":{"id":7,"name":null},"unchanged":["price","doc"],"schema_version":4}"#
    );
    // an unchanged or NULL key column is null in the key
    let (key, _, _) = convert(&message(b'U', &[(b'N', &[V::U, V::N, V::N, V::N])])).unwrap();
    assert_eq!(key, r#"{"id":null}"#);
    let (_, body, _) = convert(&message(b'U', &[(b'N', &[V::U, V::U, V::U, V::U])])).unwrap();
    assert!(body.contains(r#""after":{},"unchanged":["id","name","price","doc"]"#));
}

#[test]
fn an_update_without_an_old_tuple() {
    let (key, body, tombstone) = convert(&message(b'U', &[(b'N', &row(b"7", b"a\"b\\"))])).unwrap();
    assert_eq!(key, r#"{"id":7}"#);
    assert_eq!(
        body,
        format!(
            r#"{{"op":"u","key":{{"id":7}},"before":null,"after":{AFTER},"unchanged":[],"schema_version":4}}"#
        )
    );
    assert!(!tombstone);
}

#[test]
fn an_update_with_the_old_key() {
    let old = [V::T(b"7"), V::N, V::N, V::N];
    let payload = message(b'U', &[(b'K', &old), (b'N', &row(b"7", b"a\"b\\"))]);
    let (_, body, _) = convert(&payload).unwrap();
    assert!(body.starts_with(r#"{"op":"u","key":{"id":7},"before":null,"after":{"id":7,"#));
    // the key changed: the reference's d + c pair
    let old = [V::T(b"6"), V::N, V::N, V::N];
    assert_eq!(
        convert(&message(b'U', &[(b'K', &old), (b'N', &row(b"7", b"x"))])),
        None
    );
}

#[test]
fn an_update_with_the_old_row() {
    let old = [V::T(b"7"), V::T(b"old"), V::N, V::U];
    let payload = message(b'U', &[(b'O', &old), (b'N', &row(b"7", b"a\"b\\"))]);
    let (_, body, _) = convert(&payload).unwrap();
    assert_eq!(
        body,
        format!(
            r#"{{"op":"u","key":{{"id":7}},"before":{{"id":7,"name":"old","price":null}},"after":{AFTER},"unchanged":[],"schema_version":4}}"#
        )
    );
}

#[test]
fn deletes() {
    let old = [V::T(b"-9"), V::N, V::N, V::N];
    let (key, body, tombstone) = convert(&message(b'D', &[(b'K', &old)])).unwrap();
    assert_eq!(key, r#"{"id":-9}"#);
    assert_eq!(
        body,
        r#"{"op":"d","key":{"id":-9},"before":null,"after":null,"unchanged":[],"schema_version":4}"#
    );
    assert!(tombstone);
    let (_, body, _) = convert(&message(b'D', &[(b'O', &row(b"7", b"a\"b\\"))])).unwrap();
    assert_eq!(
        body,
        format!(
            r#"{{"op":"d","key":{{"id":7}},"before":{AFTER},"after":null,"unchanged":[],"schema_version":4}}"#
        )
    );
}

#[test]
fn the_source_block_ends_the_record() {
    let source = Source {
        head: b",\"source\":{\"db\":\"app\",\"lsn\":\"",
        lsn: (0x1A << 32) + 0xBEEF,
        commit_lsn: b"1A/C0FFEE",
        seq: 12,
        tail: b"\"txid\":5}}",
    };
    let payload = message(b'D', &[(b'K', &[V::T(b"1"), V::N, V::N, V::N])]);
    let change = convert_change(&payload, &plan(), Some(&source)).unwrap();
    assert_eq!(
        String::from_utf8(change.value).unwrap(),
        r#"{"op":"d","key":{"id":1},"before":null,"after":null,"unchanged":[],"schema_version":4,"source":{"db":"app","lsn":"1A/BEEF","commit_lsn":"1A/C0FFEE","seq":12,"txid":5}}"#
    );
    let mut out = Vec::new();
    push_hex(&mut out, 0);
    push_hex(&mut out, u64::from(u32::MAX));
    assert_eq!(out, b"0FFFFFFFF");
}

#[test]
fn what_python_must_decide_gives_none() {
    let good = row(b"7", b"x");
    let cases: Vec<Vec<u8>> = vec![
        message(b'I', &[(b'N', &[V::T(b"7"), V::B(b"x"), V::N, V::N])]), // binary
        message(b'I', &[(b'N', &[V::T(b"7"), V::T(b"\xff"), V::N, V::N])]), // not UTF-8
        message(b'I', &[(b'N', &[V::T(b"x"), V::N, V::N, V::N])]),       // not an int
        message(b'I', &[(b'N', &[V::T(b"7"), V::N, V::T(b"1e999"), V::N])]), // float range
        message(b'I', &[(b'N', &[V::T(b"7"), V::N, V::N])]),             // 3 columns
        message(b'I', &[(b'K', &good)]),                                 // not 'N'
        message(b'D', &[(b'N', &good)]),                                 // not 'K'/'O'
        message(b'U', &[(b'O', &good), (b'K', &good)]),                  // not 'N' after old
        message(b'T', &[(b'N', &good)]),                                 // not a row change
        // the old row's value Python keeps as text
        message(
            b'U',
            &[(b'O', &[V::T(b"7"), V::N, V::T(b"x"), V::N]), (b'N', &good)],
        ),
    ];
    for payload in &cases {
        assert_eq!(convert(payload), None, "{payload:?}");
    }
    let mut trailing = message(b'I', &[(b'N', &good)]);
    trailing.push(0);
    assert_eq!(convert(&trailing), None);
    let whole = message(b'U', &[(b'O', &good), (b'N', &good)]);
    for end in 0..whole.len() {
        assert_eq!(convert(&whole[..end]), None, "truncated at {end}");
    }
    // a length past the end, a negative length, an unknown value kind
    let mut bad = message(b'I', &[(b'N', &good)]);
    assert_eq!(bad[8], b't');
    bad[9..13].copy_from_slice(&1000i32.to_be_bytes());
    assert_eq!(convert(&bad), None);
    bad[9..13].copy_from_slice(&(-1i32).to_be_bytes());
    assert_eq!(convert(&bad), None);
    bad[9..13].copy_from_slice(&1i32.to_be_bytes());
    assert!(convert(&bad).is_some());
    bad[8] = b'x';
    assert_eq!(convert(&bad), None);
}

#[test]
fn a_key_of_several_columns_in_plan_order() {
    let plan = Plan::new(&[0, 1, 2], &["a", "b", "c"], &[2, 0], 1).unwrap();
    let payload = message(b'I', &[(b'N', &[V::T(b"x"), V::T(b"0"), V::T(b"t")])]);
    let change = convert_change(&payload, &plan, None).unwrap();
    assert_eq!(change.key, br#"{"c":true,"a":"x"}"#);
}
