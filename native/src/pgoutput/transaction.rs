//! Begin and Commit of a normal transaction (outside a stream block), as
//! `cdc/capture/pgoutput/decoder.py` reads them, and the source fields a Begin gives its
//! transaction's events (`CommitInfo` in `cdc/capture/events.py`).

use super::push_hex;
use crate::convert::json::push_u64;

/// Microseconds from 1970-01-01 to 2000-01-01, pgoutput's epoch.
const PG_EPOCH_UNIX_US: i64 = 946_684_800_000_000;
const DAY_US: i64 = 86_400_000_000;

/// A Begin message: `B`, final (commit) LSN, commit time, xid.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct Begin {
    pub final_lsn: u64,
    pub commit_ts: i64,
    pub xid: u32,
}

/// A Commit message: `C`, flags, commit LSN, end LSN, commit time.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct Commit {
    pub flags: u8,
    pub commit_lsn: u64,
    pub end_lsn: u64,
    pub commit_ts: i64,
}

fn u64_at(data: &[u8], at: usize) -> Option<u64> {
    let bytes: [u8; 8] = data.get(at..at + 8)?.try_into().ok()?;
    Some(u64::from_be_bytes(bytes))
}

/// The Begin in `payload`, or None unless it is exactly one (the decoder's size check).
pub fn read_begin(payload: &[u8]) -> Option<Begin> {
    if payload.len() != 21 || payload[0] != b'B' {
        return None;
    }
    let xid: [u8; 4] = payload.get(17..21)?.try_into().ok()?;
    Some(Begin {
        final_lsn: u64_at(payload, 1)?,
        commit_ts: u64_at(payload, 9)? as i64,
        xid: u32::from_be_bytes(xid),
    })
}

/// The Commit in `payload`, or None unless it is exactly one.
pub fn read_commit(payload: &[u8]) -> Option<Commit> {
    if payload.len() != 26 || payload[0] != b'C' {
        return None;
    }
    Some(Commit {
        flags: payload[1],
        commit_lsn: u64_at(payload, 2)?,
        end_lsn: u64_at(payload, 10)?,
        commit_ts: u64_at(payload, 18)? as i64,
    })
}

/// `format_lsn`: `X/X`, upper-case hexadecimal.
pub fn push_lsn(out: &mut Vec<u8>, lsn: u64) {
    push_hex(out, lsn >> 32);
    out.push(b'/');
    push_hex(out, lsn & 0xFFFF_FFFF);
}

/// `pg_micros_to_iso`: `YYYY-MM-DDTHH:MM:SS.ffffffZ`, or None outside the years 1 to
/// 9999 (where Python's datetime raises).
pub fn push_iso(out: &mut Vec<u8>, pg_micros: i64) -> Option<()> {
    let unix = pg_micros.checked_add(PG_EPOCH_UNIX_US)?;
    let days = unix.div_euclid(DAY_US);
    let micros = unix.rem_euclid(DAY_US);
    let (year, month, day) = civil_from_days(days);
    if !(1..=9999).contains(&year) {
        return None;
    }
    let seconds = micros / 1_000_000;
    let fields = [
        (year, 4),
        (i64::from(month), 2),
        (i64::from(day), 2),
        (seconds / 3600, 2),
        (seconds / 60 % 60, 2),
        (seconds % 60, 2),
        (micros % 1_000_000, 6),
    ];
    for (index, (value, width)) in fields.into_iter().enumerate() {
        out.extend_from_slice(["", "-", "-", "T", ":", ":", "."][index].as_bytes());
        let digits = value.to_string();
        for _ in digits.len()..width {
            out.push(b'0');
        }
        out.extend_from_slice(digits.as_bytes());
    }
    out.push(b'Z');
    Some(())
}

/// The proleptic Gregorian date of `days` since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// `CommitInfo(db, final_lsn, xid, commit_ts).tail`: `"txid":…,"commit_ts":"…",
/// "snapshot":false}}`; None when the time is out of range.
pub fn commit_tail(begin: &Begin) -> Option<Vec<u8>> {
    let mut tail = Vec::with_capacity(80);
    tail.extend_from_slice(b"\"txid\":");
    push_u64(&mut tail, u64::from(begin.xid));
    tail.extend_from_slice(b",\"commit_ts\":\"");
    push_iso(&mut tail, begin.commit_ts)?;
    tail.extend_from_slice(b"\",\"snapshot\":false}}");
    Some(tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iso(micros: i64) -> Option<String> {
        let mut out = Vec::new();
        push_iso(&mut out, micros).map(|()| String::from_utf8(out).unwrap())
    }

    #[test]
    fn times_print_as_python_prints_them() {
        assert_eq!(iso(0).unwrap(), "2000-01-01T00:00:00.000000Z");
        assert_eq!(iso(-1).unwrap(), "1999-12-31T23:59:59.999999Z");
        assert_eq!(iso(7_000_123).unwrap(), "2000-01-01T00:00:07.000123Z");
        // 2024-02-29 10:11:12.5 UTC
        assert_eq!(
            iso(762_516_672_500_000).unwrap(),
            "2024-02-29T10:11:12.500000Z"
        );
        assert_eq!(
            iso(-63_082_281_600_000_000).unwrap(),
            "0001-01-01T00:00:00.000000Z"
        );
        assert!(iso(-63_082_281_600_000_001).is_none());
        assert!(iso(i64::MAX).is_none());
        assert!(iso(i64::MIN).is_none());
    }

    #[test]
    fn begin_and_commit_need_their_exact_size() {
        let mut begin = vec![b'B'];
        begin.extend_from_slice(&5u64.to_be_bytes());
        begin.extend_from_slice(&7i64.to_be_bytes());
        begin.extend_from_slice(&42u32.to_be_bytes());
        assert_eq!(
            read_begin(&begin),
            Some(Begin {
                final_lsn: 5,
                commit_ts: 7,
                xid: 42
            })
        );
        assert_eq!(read_begin(&begin[..20]), None);
        begin.push(0);
        assert_eq!(read_begin(&begin), None);
        let mut commit = vec![b'C', 0];
        commit.extend_from_slice(&5u64.to_be_bytes());
        commit.extend_from_slice(&13u64.to_be_bytes());
        commit.extend_from_slice(&(-7i64).to_be_bytes());
        assert_eq!(read_commit(&commit).map(|c| c.commit_ts), Some(-7));
        assert_eq!(read_commit(&commit[..25]), None);
    }
}
