//! `decode_interval` (`cdc/capture/codecs/interval.py`): `IntervalStyle=postgres` output
//! (`-1 years -2 mons +3 days -04:05:06.5`) into an ISO-8601 duration with a sign per
//! component (`P-1Y-2M3DT-4H-5M-6.5S`); `iso_8601` output and the infinities unchanged.

use super::json::push_string;
use super::temporal::Scan;

/// Append the JSON string of the interval `text`; false for text the codec refuses
/// (another IntervalStyle) or numbers past 18 digits (Python decides).
pub fn push_interval(out: &mut Vec<u8>, text: &[u8]) -> bool {
    if text.first() == Some(&b'P') || text == b"infinity" || text == b"-infinity" {
        push_string(out, text);
        return true;
    }
    match Parts::parse(text) {
        Some(parts) => {
            push_string(out, parts.iso().as_bytes());
            true
        }
        None => false,
    }
}

/// The fields of a postgres-style interval, signs applied.
#[derive(Default)]
struct Parts<'a> {
    years: i64,
    months: i64,
    days: i64,
    hours: i64,
    minutes: i64,
    seconds: i64,
    /// The digits after the seconds' decimal point, trailing zeros dropped.
    fraction: &'a [u8],
    /// The time part had a `-`.
    negative: bool,
}

impl<'a> Parts<'a> {
    /// `_POSTGRES.fullmatch(text)` of `interval.py`: `[N year[s] ][N mon[s] ][N day[s] ]
    /// [±H…:MM:SS[.f…]]`, each part optional, the text not empty.
    fn parse(text: &'a [u8]) -> Option<Parts<'a>> {
        if text.is_empty() || !text.is_ascii() {
            return None;
        }
        let mut scan = Scan { text, at: 0 };
        let mut parts = Parts::default();
        for (unit, field) in [(&b" year"[..], 0), (b" mon", 1), (b" day", 2)] {
            let mark = scan.at;
            match signed_before(&mut scan, unit) {
                Some(value) => match field {
                    0 => parts.years = value,
                    1 => parts.months = value,
                    _ => parts.days = value,
                },
                None => scan.at = mark,
            }
        }
        if scan.at < text.len() {
            parts.time(&mut scan)?;
        }
        (scan.at == text.len()).then_some(parts)
    }

    /// `([+-])?([0-9]+):([0-9]{2}):([0-9]{2})(?:\.([0-9]+))?`
    fn time(&mut self, scan: &mut Scan<'a>) -> Option<()> {
        self.negative = scan.take(b'-');
        if !self.negative {
            scan.take(b'+');
        }
        let sign = if self.negative { -1 } else { 1 };
        self.hours = sign * number(scan.digits(1, usize::MAX)?)?;
        scan.take(b':').then_some(())?;
        self.minutes = sign * number(scan.digits(2, 2)?)?;
        scan.take(b':').then_some(())?;
        self.seconds = sign * number(scan.digits(2, 2)?)?;
        if scan.take(b'.') {
            let digits = scan.digits(1, usize::MAX)?;
            let kept = digits
                .iter()
                .rposition(|&d| d != b'0')
                .map_or(0, |at| at + 1);
            self.fraction = &digits[..kept];
        }
        Some(())
    }

    /// `iso_duration` of `interval.py`.
    fn iso(&self) -> String {
        let time = self.hours != 0 || self.minutes != 0 || self.seconds != 0;
        if !(self.years != 0 || self.months != 0 || self.days != 0 || time)
            && self.fraction.is_empty()
        {
            return "PT0S".into();
        }
        let mut out = String::from("P");
        for (value, unit) in [(self.years, 'Y'), (self.months, 'M'), (self.days, 'D')] {
            if value != 0 {
                out.push_str(&format!("{value}{unit}"));
            }
        }
        if time || !self.fraction.is_empty() {
            out.push('T');
            for (value, unit) in [(self.hours, 'H'), (self.minutes, 'M')] {
                if value != 0 {
                    out.push_str(&format!("{value}{unit}"));
                }
            }
            if self.seconds != 0 || !self.fraction.is_empty() {
                if self.negative || self.seconds < 0 {
                    out.push('-');
                }
                out.push_str(&self.seconds.unsigned_abs().to_string());
                if !self.fraction.is_empty() {
                    out.push('.');
                    out.push_str(&String::from_utf8_lossy(self.fraction));
                }
                out.push('S');
            }
        }
        out
    }
}

/// `([+-]?[0-9]+) <unit>s? ?` at the cursor: the signed number (None: no match).
fn signed_before(scan: &mut Scan<'_>, unit: &[u8]) -> Option<i64> {
    let negative = scan.take(b'-');
    if !negative {
        scan.take(b'+');
    }
    let value = number(scan.digits(1, usize::MAX)?)?;
    let rest = &scan.text[scan.at..];
    rest.starts_with(unit).then_some(())?;
    scan.at += unit.len();
    scan.take(b's');
    scan.take(b' ');
    Some(if negative { -value } else { value })
}

/// ASCII digits' value; None past 18 digits.
fn number(digits: &[u8]) -> Option<i64> {
    (digits.len() <= 18).then(|| {
        digits
            .iter()
            .fold(0, |value, digit| value * 10 + i64::from(digit - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn interval(text: &str) -> Option<String> {
        let mut out = Vec::new();
        push_interval(&mut out, text.as_bytes()).then(|| String::from_utf8(out).unwrap())
    }

    #[test]
    fn postgres_style_becomes_iso_with_a_sign_per_component() {
        for (text, iso) in [
            (
                "-1 years -2 mons +3 days -04:05:06.5",
                "P-1Y-2M3DT-4H-5M-6.5S",
            ),
            ("1 year 2 mons", "P1Y2M"),
            ("3 days", "P3D"),
            ("00:00:00", "PT0S"),
            ("-00:00:00.500", "PT-0.5S"),
            ("1 day 01:00:00", "P1DT1H"),
            ("2562047788:00:54.775807", "PT2562047788H54.775807S"),
            ("1 years2 mons", "P1Y2M"),
            ("P1Y2M", "P1Y2M"),
            ("infinity", "infinity"),
        ] {
            assert_eq!(interval(text).unwrap(), format!("\"{iso}\""), "{text}");
        }
    }

    #[test]
    fn other_styles_are_refused() {
        for text in [
            "",
            "@ 1 year",
            "1-2",
            "1 year ago",
            "1:2:3",
            "1 days 1 mons",
            "1234567890123456789 days",
        ] {
            assert_eq!(interval(text), None, "{text}");
        }
    }
}
