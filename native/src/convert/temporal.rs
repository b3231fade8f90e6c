//! The temporal codecs of `cdc/capture/codecs/temporal.py`: `date`, `timestamp`,
//! `timestamptz` and `timetz` text (DateStyle ISO) into ISO-8601 strings. Years before 1 AD take
//! astronomical numbering with a sign (`0044-03-15 BC` is `-0043-03-15`), years past 9999
//! a `+`, and a `timestamptz` is moved to UTC (`Z`) whatever its offset. Text the Python
//! codec refuses (another DateStyle, an offset on a `timestamp`) is refused here too, and
//! years of more than 9 digits are left to it.

use super::json::{push_string, push_string_parts};
use super::values::Kind;

/// Append the JSON string of `text` decoded as the temporal `kind`; false when Python
/// must decide (the codec refuses it, or a year too long for 64-bit arithmetic).
pub fn push_temporal(out: &mut Vec<u8>, text: &[u8], kind: Kind) -> bool {
    if !text.is_ascii() {
        return false; // the Python checks index characters, these bytes
    }
    let fast = match kind {
        Kind::Date => date_fast(text),
        Kind::Timestamp => timestamp_fast(text),
        _ => timestamptz_fast(text),
    };
    if let Some([a, b, c]) = fast {
        let zone: &[u8] = if kind == Kind::Timestamptz { b"Z" } else { b"" };
        push_string_parts(out, &[a, b, c, zone]);
        return true;
    }
    if text == b"infinity" || text == b"-infinity" {
        push_string(out, text);
        return true;
    }
    let Some(moment) = Moment::parse(text, kind != Kind::Date) else {
        return false;
    };
    let iso = match (kind, &moment.time, &moment.offset) {
        (Kind::Date, None, None) => moment.date(),
        (Kind::Timestamp, Some(time), None) => format!("{}T{}", moment.date(), time.text()),
        (Kind::Timestamptz, Some(time), Some(offset)) => moment.utc(time, *offset),
        _ => return false,
    };
    push_string(out, iso.as_bytes());
    true
}

/// `decode_timetz`: `HH:MM:SS[.f…]±HH[:MM[:SS]]` → `HH:MM:SS[.f…]±HH:MM[:SS]`; false
/// for any other text (the codec refuses it).
pub fn push_timetz(out: &mut Vec<u8>, text: &[u8]) -> bool {
    let mut scan = Scan { text, at: 0 };
    let Some(time) = scan.time() else {
        return false;
    };
    let Some(sign @ (b'+' | b'-')) = text.get(scan.at).copied() else {
        return false;
    };
    scan.at += 1;
    let Some(hours) = scan.digits(2, 2) else {
        return false;
    };
    let mut parts = [&b"00"[..], &b""[..]];
    for part in &mut parts {
        let mark = scan.at;
        if scan.take(b':') {
            match scan.digits(2, 2) {
                Some(digits) => *part = digits,
                None => {
                    scan.at = mark;
                    break;
                }
            }
        } else {
            break;
        }
    }
    if scan.at != text.len() {
        return false;
    }
    let [minutes, seconds] = parts;
    let colon: &[u8] = if seconds.is_empty() { b"" } else { b":" };
    push_string_parts(
        out,
        &[time.text, &[sign], hours, b":", minutes, colon, seconds],
    );
    true
}

/// The fast path of `decode_date`: `YYYY-MM-DD` unchanged.
fn date_fast(text: &[u8]) -> Option<[&[u8]; 3]> {
    (text.len() == 10 && text[4] == b'-' && text[7] == b'-').then_some([text, b"", b""])
}

/// The fast path of `decode_timestamp`: the space becomes `T`.
fn timestamp_fast(text: &[u8]) -> Option<[&[u8]; 3]> {
    (text.len() >= 19 && text[10] == b' ' && text[4] == b'-' && text[text.len() - 1] != b'C')
        .then(|| [&text[..10], b"T", &text[11..]])
}

/// The fast path of `decode_timestamptz`: a `+00` offset becomes `Z`.
fn timestamptz_fast(text: &[u8]) -> Option<[&[u8]; 3]> {
    (text.len() >= 22 && text.ends_with(b"+00") && text[10] == b' ' && text[4] == b'-')
        .then(|| [&text[..10], b"T", &text[11..text.len() - 3]])
}

/// `HH:MM:SS[.fraction]` of a timestamp, as written.
struct Time<'a> {
    hour: i64,
    minute: i64,
    second: i64,
    text: &'a [u8],
    fraction: &'a [u8],
}

impl Time<'_> {
    fn text(&self) -> String {
        String::from_utf8_lossy(self.text).into_owned()
    }
}

/// A date or timestamp as `_DATE`/`_TIMESTAMP` of `temporal.py` match it: the year as
/// an astronomical number (`bc` applied), the month and day as written.
struct Moment<'a> {
    year: i64,
    month: &'a [u8],
    day: &'a [u8],
    time: Option<Time<'a>>,
    /// The offset east of UTC in seconds, when one was written.
    offset: Option<i64>,
}

impl<'a> Moment<'a> {
    /// `YYYY…-MM-DD[ HH:MM:SS[.f…][±HH[:MM[:SS]]]][ BC]`, the time part only `timed`;
    /// None when the text does not match, or its year has more than 9 digits (PostgreSQL
    /// writes 7 at most; the arithmetic of `utc` stays within 64 bits).
    fn parse(text: &'a [u8], timed: bool) -> Option<Moment<'a>> {
        let mut scan = Scan { text, at: 0 };
        let year = scan.digits(4, usize::MAX)?;
        if year.len() > 9 {
            return None;
        }
        scan.expect(b'-')?;
        let month = scan.digits(2, 2)?;
        scan.expect(b'-')?;
        let day = scan.digits(2, 2)?;
        let (time, offset) = if timed {
            scan.expect(b' ')?;
            let time = scan.time()?;
            (Some(time), scan.offset()?)
        } else {
            (None, None)
        };
        let bc = scan.rest(b" BC");
        if scan.at != text.len() {
            return None;
        }
        let year = number(year);
        Some(Moment {
            year: if bc { 1 - year } else { year },
            month,
            day,
            time,
            offset,
        })
    }

    /// `_year(…)-MM-DD`.
    fn date(&self) -> String {
        format!(
            "{}-{}-{}",
            year_text(self.year),
            String::from_utf8_lossy(self.month),
            String::from_utf8_lossy(self.day)
        )
    }

    /// The moment in UTC, as `decode_timestamptz` computes it.
    fn utc(&self, time: &Time<'_>, offset: i64) -> String {
        let days = days_from_civil(self.year, number(self.month), number(self.day));
        let seconds = days * 86_400 + time.hour * 3600 + time.minute * 60 + time.second - offset;
        let (days, seconds) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
        let (year, month, day) = civil_from_days(days);
        format!(
            "{}-{month:02}-{day:02}T{:02}:{:02}:{:02}{}Z",
            year_text(year),
            seconds / 3600,
            seconds % 3600 / 60,
            seconds % 60,
            String::from_utf8_lossy(time.fraction)
        )
    }
}

/// A cursor over the text of a date, a timestamp or an interval.
pub(super) struct Scan<'a> {
    pub(super) text: &'a [u8],
    pub(super) at: usize,
}

impl<'a> Scan<'a> {
    /// Between `min` and `max` ASCII digits (as many as there are, up to `max`).
    pub(super) fn digits(&mut self, min: usize, max: usize) -> Option<&'a [u8]> {
        let start = self.at;
        while self.at - start < max && self.text.get(self.at).is_some_and(u8::is_ascii_digit) {
            self.at += 1;
        }
        (self.at - start >= min).then(|| &self.text[start..self.at])
    }

    /// Step over `byte` if it comes next.
    pub(super) fn take(&mut self, byte: u8) -> bool {
        let found = self.text.get(self.at) == Some(&byte);
        self.at += usize::from(found);
        found
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        self.take(byte).then_some(())
    }

    /// Step over `tail` if the text ends with it here.
    fn rest(&mut self, tail: &[u8]) -> bool {
        let found = &self.text[self.at..] == tail;
        if found {
            self.at = self.text.len();
        }
        found
    }

    /// `HH:MM:SS(\.[0-9]+)?`.
    fn time(&mut self) -> Option<Time<'a>> {
        let start = self.at;
        let hour = self.digits(2, 2)?;
        self.expect(b':')?;
        let minute = self.digits(2, 2)?;
        self.expect(b':')?;
        let second = self.digits(2, 2)?;
        let fraction_start = self.at;
        if self.take(b'.') {
            self.digits(1, usize::MAX)?;
        }
        Some(Time {
            hour: number(hour),
            minute: number(minute),
            second: number(second),
            text: &self.text[start..self.at],
            fraction: &self.text[fraction_start..self.at],
        })
    }

    /// `([+-])HH(:MM)?(:SS)?` if a sign comes next: the offset east of UTC in seconds.
    fn offset(&mut self) -> Option<Option<i64>> {
        let sign = match self.text.get(self.at) {
            Some(b'+') => 1,
            Some(b'-') => -1,
            _ => return Some(None),
        };
        self.at += 1;
        let mut seconds = number(self.digits(2, 2)?) * 3600;
        for scale in [60, 1] {
            let mark = self.at;
            if self.take(b':') {
                match self.digits(2, 2) {
                    Some(part) => seconds += number(part) * scale,
                    None => {
                        self.at = mark;
                        break;
                    }
                }
            }
        }
        Some(Some(sign * seconds))
    }
}

/// The value of ASCII digits (at most 18 of them).
fn number(digits: &[u8]) -> i64 {
    digits
        .iter()
        .fold(0, |value, digit| value * 10 + i64::from(digit - b'0'))
}

/// `_astronomical_year`: `-0043`, `0044`, `+10000`.
fn year_text(year: i64) -> String {
    if year < 0 {
        format!("-{:04}", -year)
    } else if year > 9999 {
        format!("+{year}")
    } else {
        format!("{year:04}")
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (astronomical years), as
/// `days_from_civil` in `temporal.py` (floor division throughout).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = year - i64::from(month <= 2);
    let era = year.div_euclid(400);
    let yoe = year - era * 400;
    let doy = (153 * (month + if month > 2 { -3 } else { 9 }) + 2).div_euclid(5) + day - 1;
    let doe = yoe * 365 + yoe.div_euclid(4) - yoe.div_euclid(100) + doy;
    era * 146_097 + doe - 719_468
}

/// The inverse of `days_from_civil`: `(year, month, day)`.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let doe = days - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = mp + if mp < 10 { 3 } else { -9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(kind: Kind, text: &str) -> Option<String> {
        let mut out = Vec::new();
        push_temporal(&mut out, text.as_bytes(), kind).then(|| String::from_utf8(out).unwrap())
    }

    #[test]
    fn fast_paths_and_infinities() {
        assert_eq!(value(Kind::Date, "2024-03-15").unwrap(), "\"2024-03-15\"");
        assert_eq!(
            value(Kind::Timestamp, "2024-03-15 12:00:00.5").unwrap(),
            "\"2024-03-15T12:00:00.5\""
        );
        assert_eq!(value(Kind::Timestamp, "infinity").unwrap(), "\"infinity\"");
        assert_eq!(
            value(Kind::Timestamptz, "2024-03-15 12:00:00+00").unwrap(),
            "\"2024-03-15T12:00:00Z\""
        );
    }

    #[test]
    fn bc_and_large_years_take_astronomical_numbering() {
        assert_eq!(
            value(Kind::Date, "0044-03-15 BC").unwrap(),
            "\"-0043-03-15\""
        );
        assert_eq!(
            value(Kind::Date, "0001-01-01 BC").unwrap(),
            "\"0000-01-01\""
        );
        assert_eq!(
            value(Kind::Date, "10000-01-01").unwrap(),
            "\"+10000-01-01\""
        );
        assert_eq!(
            value(Kind::Timestamp, "4713-11-24 00:00:00.25 BC").unwrap(),
            "\"-4712-11-24T00:00:00.25\""
        );
        assert_eq!(
            value(Kind::Timestamptz, "0001-01-01 00:30:00+00 BC").unwrap(),
            "\"0000-01-01T00:30:00Z\""
        );
    }

    #[test]
    fn offsets_move_to_utc_across_days_and_years() {
        assert_eq!(
            value(Kind::Timestamptz, "2024-03-15 12:00:00+01").unwrap(),
            "\"2024-03-15T11:00:00Z\""
        );
        assert_eq!(
            value(Kind::Timestamptz, "2024-01-01 00:10:00.5+05:30").unwrap(),
            "\"2023-12-31T18:40:00.5Z\""
        );
        assert_eq!(
            value(Kind::Timestamptz, "2023-12-31 23:00:00-01:00:15").unwrap(),
            "\"2024-01-01T00:00:15Z\""
        );
        assert_eq!(
            value(Kind::Timestamptz, "2024-02-29 23:59:59-12").unwrap(),
            "\"2024-03-01T11:59:59Z\""
        );
    }

    #[test]
    fn what_the_codecs_refuse_is_refused() {
        for (kind, text) in [
            (Kind::Date, "03/15/2024"),
            (Kind::Date, "2024-3-15"),
            (Kind::Date, "2024-03-15 AD"),
            (Kind::Timestamp, "10000-03-15 12:00:00+01"),
            (Kind::Timestamp, "2024-03-15T12:00:00 BC"),
            (Kind::Timestamptz, "2024-03-15 12:00:00 BC"),
            (Kind::Timestamptz, "2024-03-15 12:00:00.+00 BC"),
            (Kind::Timestamptz, "2024-03-15 12:00:00+1 BC"),
            (Kind::Date, "1234567890-01-01"),
            (Kind::Timestamptz, "999999999999-01-01 00:00:00+01"),
            (Kind::Date, "2024-03-15é"),
        ] {
            assert_eq!(value(kind, text), None, "{text}");
        }
    }

    #[test]
    fn timetz_keeps_its_offset() {
        let timetz = |text: &str| {
            let mut out = Vec::new();
            push_timetz(&mut out, text.as_bytes()).then(|| String::from_utf8(out).unwrap())
        };
        assert_eq!(timetz("10:11:12+02").unwrap(), "\"10:11:12+02:00\"");
        assert_eq!(timetz("10:11:12.5-05:30").unwrap(), "\"10:11:12.5-05:30\"");
        assert_eq!(
            timetz("00:00:00+00:53:28").unwrap(),
            "\"00:00:00+00:53:28\""
        );
        for refused in ["10:11:12", "10:11:12+2", "10:11+02", "10:11:12+02:3", "x"] {
            assert_eq!(timetz(refused), None, "{refused}");
        }
    }

    #[test]
    fn civil_days_round_trip() {
        for days in [-2_000_000, -719_468, -1, 0, 59, 60, 365, 11_016, 2_000_000] {
            let (year, month, day) = civil_from_days(days);
            assert_eq!(days_from_civil(year, month, day), days);
        }
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(civil_from_days(19_797), (2024, 3, 15));
    }
}
