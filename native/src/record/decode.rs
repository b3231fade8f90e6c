//! Checking and splitting one line (the reference: `decode_record`).

use super::{BODY_START, HEAD, VALUE_SEP};

/// Why a line is not a record; the reasons are the reference's, word for word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormatError {
    Framing,
    Checksum,
    KeyLength,
}

impl FormatError {
    /// The reason as `RecordFormatError` words it.
    pub fn reason(self) -> &'static str {
        match self {
            FormatError::Framing => "not a record line (bad framing or field order)",
            FormatError::Checksum => "checksum mismatch",
            FormatError::KeyLength => "key length does not match",
        }
    }
}

/// One decoded line; numbers are their (ASCII, non-empty) digits, key and value slices.
#[derive(Debug, PartialEq, Eq)]
pub struct Line<'a> {
    pub offset: &'a [u8],
    pub timestamp_ms: &'a [u8],
    pub commit_lsn: &'a [u8],
    pub seq: &'a [u8],
    pub tombstone: bool,
    pub key: &'a [u8],
    pub value: &'a [u8],
}

/// A cursor over a line that matches the fixed field order piece by piece.
struct Cursor<'a> {
    line: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn literal(&mut self, expected: &[u8]) -> Result<(), FormatError> {
        let end = self.at + expected.len();
        if self.line.get(self.at..end) == Some(expected) {
            self.at = end;
            Ok(())
        } else {
            Err(FormatError::Framing)
        }
    }

    /// One or more ASCII digits (Python's `\d` on bytes).
    fn digits(&mut self) -> Result<&'a [u8], FormatError> {
        let rest = self.line.get(self.at..).unwrap_or_default();
        let count = rest.iter().take_while(|b| b.is_ascii_digit()).count();
        if count == 0 {
            return Err(FormatError::Framing);
        }
        self.at += count;
        Ok(&rest[..count])
    }

    fn crc_hex(&mut self) -> Result<u32, FormatError> {
        let hex = self
            .line
            .get(self.at..self.at + 8)
            .ok_or(FormatError::Framing)?;
        let mut crc = 0u32;
        for &b in hex {
            let nibble = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                _ => return Err(FormatError::Framing),
            };
            crc = crc << 4 | u32::from(nibble);
        }
        self.at += 8;
        Ok(crc)
    }

    fn boolean(&mut self) -> Result<bool, FormatError> {
        if self.literal(b"true").is_ok() {
            return Ok(true);
        }
        self.literal(b"false").map(|()| false)
    }
}

/// Parse and check one line (without its newline), exactly as `decode_record` does:
/// framing first, then the checksum, then the key length.
pub fn decode_line(line: &[u8]) -> Result<Line<'_>, FormatError> {
    let mut f = Cursor { line, at: 0 };
    f.literal(HEAD)?;
    let crc = f.crc_hex()?;
    f.literal(b"\",\"offset\":")?;
    let offset = f.digits()?;
    f.literal(b",\"ts\":")?;
    let timestamp_ms = f.digits()?;
    f.literal(b",\"lsn\":")?;
    let commit_lsn = f.digits()?;
    f.literal(b",\"seq\":")?;
    let seq = f.digits()?;
    f.literal(b",\"del\":")?;
    let tombstone = f.boolean()?;
    f.literal(b",\"kl\":")?;
    let key_length = f.digits()?;
    f.literal(b",\"key\":")?;
    let key_start = f.at;
    let last = match line.split_last() {
        Some((b'}', _)) => line.len() - 1,
        _ => return Err(FormatError::Framing),
    };
    // the match above reached past BODY_START, and `last` is after it
    let body = line.get(BODY_START..last).ok_or(FormatError::Framing)?;
    if crc32fast::hash(body) != crc {
        return Err(FormatError::Checksum);
    }
    let key_end = parse_u64(key_length)
        .and_then(|length| usize::try_from(length).ok())
        .and_then(|length| key_start.checked_add(length))
        .ok_or(FormatError::KeyLength)?;
    let value_start = key_end
        .checked_add(VALUE_SEP.len())
        .ok_or(FormatError::KeyLength)?;
    if line.get(key_end..value_start) != Some(VALUE_SEP) {
        return Err(FormatError::KeyLength);
    }
    Ok(Line {
        offset,
        timestamp_ms,
        commit_lsn,
        seq,
        tombstone,
        key: &line[key_start..key_end],
        // `}` is last and the separator ends in `:`, so value_start <= last
        value: line.get(value_start..last).ok_or(FormatError::KeyLength)?,
    })
}

/// The value of ASCII digits, or None when it does not fit in a u64.
pub fn parse_u64(digits: &[u8]) -> Option<u64> {
    digits.iter().try_fold(0u64, |acc, &d| {
        acc.checked_mul(10)?
            .checked_add(u64::from(d.wrapping_sub(b'0')))
    })
}
