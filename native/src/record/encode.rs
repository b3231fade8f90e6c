//! Writing one line (the reference: `encode_record`).

use super::{BODY_START, HEAD, VALUE_SEP};

/// A number as it goes into a line: `%d` of a Python int.
#[derive(Debug, Clone)]
pub enum Number {
    Unsigned(u64),
    Signed(i64),
    /// Digits already formatted (an int beyond 64 bits).
    Formatted(Vec<u8>),
}

/// Pairs of decimal digits "00" to "99", two digits written per division.
const PAIRS: &[u8; 200] = b"0001020304050607080910111213141516171819\
2021222324252627282930313233343536373839\
4041424344454647484950515253545556575859\
6061626364656667686970717273747576777879\
8081828384858687888990919293949596979899";

/// How many decimal digits `n` has.
fn digit_count(n: u64) -> usize {
    n.checked_ilog10().map_or(1, |log| log as usize + 1)
}

/// Write the decimal digits of `n` into `dst`, which is exactly `digit_count(n)` long.
fn put_u64(dst: &mut [u8], mut n: u64) {
    let mut at = dst.len();
    while n >= 100 {
        let pair = (n % 100) as usize * 2;
        n /= 100;
        at -= 2;
        dst[at..at + 2].copy_from_slice(&PAIRS[pair..pair + 2]);
    }
    if n >= 10 {
        let pair = n as usize * 2;
        dst[at - 2..at].copy_from_slice(&PAIRS[pair..pair + 2]);
    } else {
        dst[at - 1] = b'0' + n as u8;
    }
}

/// Append the decimal digits of `n`.
pub fn push_u64(out: &mut Vec<u8>, n: u64) {
    let start = out.len();
    out.resize(start + digit_count(n), 0);
    put_u64(&mut out[start..], n);
}

/// How many bytes `n` takes in a line.
fn number_len(n: &Number) -> usize {
    match n {
        Number::Unsigned(u) => digit_count(*u),
        Number::Signed(i) => usize::from(*i < 0) + digit_count(i.unsigned_abs()),
        Number::Formatted(digits) => digits.len(),
    }
}

/// Writes a line into a slice of exactly its length, left to right.
struct Cursor<'a> {
    line: &'a mut [u8],
    at: usize,
}

impl Cursor<'_> {
    fn bytes(&mut self, bytes: &[u8]) {
        self.line[self.at..self.at + bytes.len()].copy_from_slice(bytes);
        self.at += bytes.len();
    }

    fn unsigned(&mut self, n: u64) {
        self.digits(n, digit_count(n));
    }

    /// `n`, of `count` digits (`digit_count(n)`, known already).
    fn digits(&mut self, n: u64, count: usize) {
        let end = self.at + count;
        put_u64(&mut self.line[self.at..end], n);
        self.at = end;
    }

    fn number(&mut self, n: &Number) {
        match n {
            Number::Unsigned(u) => self.unsigned(*u),
            Number::Signed(i) => {
                if *i < 0 {
                    self.bytes(b"-");
                }
                self.unsigned(i.unsigned_abs());
            }
            Number::Formatted(digits) => self.bytes(digits),
        }
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

const OPEN: &[u8] = b"{\"crc\":\"00000000\",\"offset\":";
const TS: &[u8] = b",\"ts\":";
const LSN: &[u8] = b",\"lsn\":";
const SEQ: &[u8] = b",\"seq\":";
const DELETED: &[u8] = b",\"del\":true";
const KEPT: &[u8] = b",\"del\":false";
const KL: &[u8] = b",\"kl\":";
const KEY: &[u8] = b",\"key\":";
const CLOSE: &[u8] = b"}\n";

/// Append one complete line (with its newline), byte-identical to `encode_record`. The
/// line is sized first and written in place (no growth, no digit buffers).
pub fn encode_line(out: &mut Vec<u8>, record: &RecordFields<'_>) {
    let offset_digits = digit_count(record.offset);
    let key_length = record.key.len() as u64;
    let key_length_digits = digit_count(key_length);
    let length = OPEN.len()
        + offset_digits
        + TS.len()
        + number_len(&record.timestamp_ms)
        + LSN.len()
        + number_len(&record.commit_lsn)
        + SEQ.len()
        + number_len(&record.seq)
        + if record.tombstone {
            DELETED.len()
        } else {
            KEPT.len()
        }
        + KL.len()
        + key_length_digits
        + KEY.len()
        + record.key.len()
        + VALUE_SEP.len()
        + record.value.len()
        + CLOSE.len();
    let start = out.len();
    out.resize(start + length, 0);
    let mut line = Cursor {
        line: &mut out[start..],
        at: 0,
    };
    line.bytes(OPEN);
    line.digits(record.offset, offset_digits);
    line.bytes(TS);
    line.number(&record.timestamp_ms);
    line.bytes(LSN);
    line.number(&record.commit_lsn);
    line.bytes(SEQ);
    line.number(&record.seq);
    line.bytes(if record.tombstone { DELETED } else { KEPT });
    line.bytes(KL);
    line.digits(key_length, key_length_digits);
    line.bytes(KEY);
    line.bytes(record.key);
    line.bytes(VALUE_SEP);
    line.bytes(record.value);
    line.bytes(CLOSE);
    debug_assert_eq!(line.at, line.line.len());
    let line = line.line;
    let body_end = line.len() - CLOSE.len();
    let crc = crc32fast::hash(&line[BODY_START..body_end]);
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, slot) in line[HEAD.len()..HEAD.len() + 8].iter_mut().enumerate() {
        *slot = HEX[(crc >> (28 - 4 * i)) as usize & 0xF];
    }
}
