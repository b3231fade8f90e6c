//! Round trips, the documented layout, and every way a line can be spoilt.

use super::*;

fn line(offset: u64, tombstone: bool, key: &[u8], value: &[u8]) -> Vec<u8> {
    line_with_seq(offset, Number::Signed(3), tombstone, key, value)
}

fn line_with_seq(offset: u64, seq: Number, tombstone: bool, key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    encode_line(
        &mut out,
        &RecordFields {
            offset,
            timestamp_ms: Number::Unsigned(1_700_000_000_000),
            commit_lsn: Number::Unsigned(23_803_808),
            seq,
            tombstone,
            key,
            value,
        },
    );
    out
}

#[test]
fn encodes_the_documented_layout() {
    let got = line_with_seq(
        7,
        Number::Signed(-3),
        true,
        b"{\"id\":42}",
        b"{\"op\":\"d\"}",
    );
    let body: &[u8] = b"\"offset\":7,\"ts\":1700000000000,\"lsn\":23803808,\"seq\":-3,\
\"del\":true,\"kl\":9,\"key\":{\"id\":42},\"value\":{\"op\":\"d\"}";
    let expected = format!("{{\"crc\":\"{:08x}\",", crc32fast::hash(body));
    assert!(got.starts_with(expected.as_bytes()));
    assert_eq!(&got[BODY_START..got.len() - 2], body);
    assert!(got.ends_with(b"}\n"));
}

#[test]
fn decodes_what_it_encodes() {
    let got = line(12, false, b"\"k\"", b"{\"a\":[1,2]}");
    let decoded = decode_line(&got[..got.len() - 1]).expect("a valid line");
    assert_eq!(decoded.offset, b"12");
    assert_eq!(decoded.timestamp_ms, b"1700000000000");
    assert!(!decoded.tombstone);
    assert_eq!(decoded.key, b"\"k\"");
    assert_eq!(decoded.value, b"{\"a\":[1,2]}");
}

#[test]
fn seq_must_be_digits_so_a_negative_one_is_a_framing_error() {
    let got = line_with_seq(1, Number::Signed(-1), false, b"1", b"2");
    assert_eq!(
        decode_line(&got[..got.len() - 1]),
        Err(FormatError::Framing)
    );
}

#[test]
fn every_flipped_bit_is_caught_and_nothing_panics() {
    let mut out = Vec::new();
    encode_line(
        &mut out,
        &RecordFields {
            offset: 1,
            timestamp_ms: Number::Unsigned(2),
            commit_lsn: Number::Unsigned(3),
            seq: Number::Unsigned(4),
            tombstone: false,
            key: b"{\"id\":1}",
            value: b"{\"op\":\"c\"}",
        },
    );
    out.pop();
    assert!(decode_line(&out).is_ok());
    for i in 0..out.len() {
        for bit in 0..8 {
            let mut bad = out.clone();
            bad[i] ^= 1 << bit;
            assert!(decode_line(&bad).is_err(), "byte {i} bit {bit}");
        }
        assert!(decode_line(&out[..i]).is_err(), "truncated at {i}");
    }
}

#[test]
fn a_wrong_key_length_is_named() {
    let mut good = line(1, false, b"12", b"3");
    good.pop();
    let text = String::from_utf8(good).expect("ascii");
    let body = text[BODY_START..text.len() - 1].replace("\"kl\":2", "\"kl\":1");
    let bad = format!(
        "{{\"crc\":\"{:08x}\",{body}}}",
        crc32fast::hash(body.as_bytes())
    );
    assert_eq!(decode_line(bad.as_bytes()), Err(FormatError::KeyLength));
    let huge = body.replace("\"kl\":1", "\"kl\":99999999999999999999999");
    let bad = format!(
        "{{\"crc\":\"{:08x}\",{huge}}}",
        crc32fast::hash(huge.as_bytes())
    );
    assert_eq!(decode_line(bad.as_bytes()), Err(FormatError::KeyLength));
}

#[test]
fn digits_beyond_u64_do_not_fit() {
    assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
    assert_eq!(parse_u64(b"18446744073709551616"), None);
    assert_eq!(parse_u64(b"007"), Some(7));
}

#[test]
fn numbers_of_every_width_are_written_as_format_writes_them() {
    // the line is sized before it is written: every digit count, both signs, the extremes
    let mut values: Vec<u64> = vec![0, 1, 9, 10, 11, 99, 100, 101, 999, u64::MAX - 1, u64::MAX];
    let mut power = 1u64;
    while let Some(next) = power.checked_mul(10) {
        values.extend([power - 1, power, power + 1, next - 1]);
        power = next;
    }
    for &n in &values {
        let mut digits = Vec::new();
        push_u64(&mut digits, n);
        assert_eq!(digits, n.to_string().into_bytes());
        let signed = i64::try_from(n).map_or(i64::MIN, |i| -i);
        let offset = n;
        let got = line_with_seq(offset, Number::Signed(signed), n % 2 == 0, b"1", b"2");
        let want = format!(
            "\"offset\":{offset},\"ts\":1700000000000,\"lsn\":23803808,\"seq\":{signed},\"del\":{},\"kl\":1,\"key\":1,\"value\":2}}\n",
            n % 2 == 0
        );
        assert_eq!(&got[BODY_START..], want.as_bytes());
        let crc = crc32fast::hash(&got[BODY_START..got.len() - 2]);
        assert_eq!(
            &got[..BODY_START],
            format!("{{\"crc\":\"{crc:08x}\",").as_bytes()
        );
    }
}
