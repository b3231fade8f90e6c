//! Writing one line (the reference: `encode_record`).

use super::{HEAD, VALUE_SEP};

/// A number as it goes into a line: `%d` of a Python int.
#[derive(Debug, Clone)]
pub enum Number {
    Unsigned(u64),
    Signed(i64),
    /// Digits already formatted (an int beyond 64 bits).
    Formatted(Vec<u8>),
}

/// Append the decimal digits of `n`.
pub fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[at..]);
}

fn push_number(out: &mut Vec<u8>, n: &Number) {
    match n {
        Number::Unsigned(u) => push_u64(out, *u),
        Number::Signed(i) => {
            if *i < 0 {
                out.push(b'-');
            }
            push_u64(out, i.unsigned_abs());
        }
        Number::Formatted(digits) => out.extend_from_slice(digits),
    }
}

/// The fields of one record to encode.
pub struct RecordFields<'a> {
    pub offset: u64,
    pub timestamp_ms: Number,
    pub commit_lsn: Number,
    pub seq: Number,
    pub tombstone: bool,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

/// Append one complete line (with its newline), byte-identical to `encode_record`.
pub fn encode_line(out: &mut Vec<u8>, record: &RecordFields<'_>) {
    let start = out.len();
    out.extend_from_slice(b"{\"crc\":\"00000000\",");
    let body_start = out.len();
    out.extend_from_slice(b"\"offset\":");
    push_u64(out, record.offset);
    out.extend_from_slice(b",\"ts\":");
    push_number(out, &record.timestamp_ms);
    out.extend_from_slice(b",\"lsn\":");
    push_number(out, &record.commit_lsn);
    out.extend_from_slice(b",\"seq\":");
    push_number(out, &record.seq);
    out.extend_from_slice(if record.tombstone {
        b",\"del\":true"
    } else {
        b",\"del\":false"
    });
    out.extend_from_slice(b",\"kl\":");
    push_u64(out, record.key.len() as u64);
    out.extend_from_slice(b",\"key\":");
    out.extend_from_slice(record.key);
    out.extend_from_slice(VALUE_SEP);
    out.extend_from_slice(record.value);
    let crc = crc32fast::hash(&out[body_start..]);
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, slot) in out[start + HEAD.len()..start + HEAD.len() + 8]
        .iter_mut()
        .enumerate()
    {
        *slot = HEX[(crc >> (28 - 4 * i)) as usize & 0xF];
    }
    out.extend_from_slice(b"}\n");
}
