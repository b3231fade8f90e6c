//! JSON output written exactly as orjson writes it (`orjson.dumps`): strings escaped
//! the same way, floats in the same layout.

/// Append `text` as a JSON string: `"` and `\` escaped, `\b \t \n \f \r` by name, the
/// other control characters as `\u00XX` (lower-case hex); everything else (DEL and
/// non-ASCII included) unchanged, as orjson does.
pub fn push_string(out: &mut Vec<u8>, text: &[u8]) {
    push_string_parts(out, &[text]);
}

/// Append the concatenation of `parts` as one JSON string (see `push_string`).
pub fn push_string_parts(out: &mut Vec<u8>, parts: &[&[u8]]) {
    out.push(b'"');
    for text in parts {
        push_escaped(out, text);
    }
    out.push(b'"');
}

fn push_escaped(out: &mut Vec<u8>, text: &[u8]) {
    let mut start = 0;
    for (i, &byte) in text.iter().enumerate() {
        let escape: &[u8] = match byte {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            b'\n' => b"\\n",
            b'\t' => b"\\t",
            b'\r' => b"\\r",
            0x08 => b"\\b",
            0x0c => b"\\f",
            0..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&text[start..i]);
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(byte >> 4)]);
            out.push(HEX[usize::from(byte & 0xf)]);
        } else {
            out.extend_from_slice(escape);
        }
        start = i + 1;
    }
    out.extend_from_slice(&text[start..]);
}

/// Append a finite `value` as orjson writes a float: the shortest digits that read back
/// as `value`, in decimal notation when the decimal exponent is in `-5..16` (`1.0`,
/// `0.00001`, `1234567890123456.0`), else in scientific notation (`1e+16`, `1.5e-7`).
///
/// False (nothing appended) when another decimal of as few digits reads back as `value`
/// too: Rust and Python may then pick different ones (Python's `repr` takes the even last
/// digit on an exact tie, e.g. `562949953421312.2`, where Rust writes `…312.3`), so the
/// caller leaves the value to the Python reference.
#[must_use]
pub fn push_float(out: &mut Vec<u8>, value: f64) -> bool {
    // `{:e}` gives the shortest round-trip digits: "-1.2345e-7", "1e16", "0e0"
    let sci = format!("{value:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
    if value != 0.0 && shortest_is_ambiguous(value, mantissa, exponent) {
        return false;
    }
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let (negative, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, mantissa),
    };
    let digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    if negative {
        out.push(b'-');
    }
    if value == 0.0 {
        out.extend_from_slice(b"0.0");
        return true;
    }
    if (-5..16).contains(&exponent) {
        if exponent >= 0 {
            let whole = usize::try_from(exponent).unwrap_or(0) + 1;
            for i in 0..whole {
                out.push(digits.get(i).copied().unwrap_or(b'0'));
            }
            out.push(b'.');
            if digits.len() > whole {
                out.extend_from_slice(&digits[whole..]);
            } else {
                out.push(b'0');
            }
        } else {
            out.extend_from_slice(b"0.");
            for _ in 0..(-exponent - 1) {
                out.push(b'0');
            }
            out.extend_from_slice(&digits);
        }
    } else {
        out.push(digits[0]);
        if digits.len() > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.push(b'e');
        out.push(if exponent > 0 { b'+' } else { b'-' });
        out.extend_from_slice(exponent.unsigned_abs().to_string().as_bytes());
    }
    true
}

/// True when `value` lies exactly halfway between `mantissa` (`{:e}`'s shortest digits
/// of it, times 10^`exponent`) and its neighbour in the last digit, and both read back as
/// `value`: two shortest decimals equally close, where Python's `repr` and Rust may
/// choose differently. Unsure cases (numbers too large for the exact check) count as ties.
fn shortest_is_ambiguous(value: f64, mantissa: &str, exponent: &str) -> bool {
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let (Ok(shortest), Ok(exponent)) = (digits.parse::<u128>(), exponent.parse::<i32>()) else {
        return true;
    };
    // the neighbours are shortest ± 1, the midpoints (10 · shortest ± 5) · 10^power
    let power = exponent - i32::try_from(digits.len()).unwrap_or(i32::MAX);
    let magnitude = value.abs();
    let reads_back =
        |neighbour: u128| format!("{neighbour}e{}", power + 1).parse::<f64>() == Ok(magnitude);
    (equals_decimal(magnitude, shortest * 10 + 5, power) && reads_back(shortest + 1))
        || (shortest > 0
            && equals_decimal(magnitude, shortest * 10 - 5, power)
            && reads_back(shortest - 1))
}

/// Whether the finite `value` ≥ 0 is exactly `digits` · 10^`power` (true when unsure).
fn equals_decimal(value: f64, digits: u128, power: i32) -> bool {
    if power >= 0 {
        // value = digits · 5^p · 2^p needs 5^p to divide value's 53-bit significand
        let p = power.unsigned_abs();
        if p > 22 {
            return false;
        }
        let Some(odd) = 5u128.pow(p).checked_mul(digits) else {
            return true;
        };
        let scaled = value / 2f64.powi(power); // exact: a power of two
        return scaled < 3.0e38 && scaled.fract() == 0.0 && scaled as u128 == odd;
    }
    let k = power.unsigned_abs();
    if k >= 28 {
        return false; // 5^k divides no number of 19 digits: the decimal is not binary
    }
    let fives = 5u128.pow(k);
    if digits % fives != 0 {
        return false;
    }
    // digits · 10^-k = (digits / 5^k) / 2^k: compare value · 2^k (exact) with the quotient
    let whole = digits / fives;
    let scaled = value * 2f64.powi(i32::try_from(k).unwrap_or(0));
    scaled < 3.0e38 && scaled.fract() == 0.0 && scaled as u128 == whole
}

/// Append `number` in decimal.
pub fn push_u64(out: &mut Vec<u8>, mut number: u64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (number % 10) as u8;
        number /= 10;
        if number == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn float(value: f64) -> String {
        let mut out = Vec::new();
        assert!(push_float(&mut out, value), "{value} refused");
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn two_shortest_decimals_are_left_to_the_reference() {
        // 562949953421312.2 reads as …312.25, halfway between …312.2 and …312.3 (repr: .2)
        let mut out = Vec::new();
        assert!(!push_float(&mut out, 562_949_953_421_312.2));
        assert!(out.is_empty());
        assert!(push_float(&mut out, 562_949_953_421_312.5));
        assert_eq!(out, b"562949953421312.5");
        // 2^-24 is halfway between …062e-8 and …063e-8, but only …063 reads back
        assert_eq!(float(2f64.powi(-24)), "5.960464477539063e-8");
    }

    fn string(text: &str) -> String {
        let mut out = Vec::new();
        push_string(&mut out, text.as_bytes());
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn floats_as_orjson() {
        assert_eq!(float(1.0), "1.0");
        assert_eq!(float(0.1), "0.1");
        assert_eq!(float(-0.0), "-0.0");
        assert_eq!(float(1e16), "1e+16");
        assert_eq!(float(1e15), "1000000000000000.0");
        assert_eq!(float(1e-5), "0.00001");
        assert_eq!(float(2.5e-5), "0.000025");
        assert_eq!(float(1e-6), "1e-6");
        assert_eq!(float(1.2345e-7), "1.2345e-7");
        assert_eq!(float(5e-324), "5e-324");
        assert_eq!(float(1.7976931348623157e308), "1.7976931348623157e+308");
        assert_eq!(float(-123.456), "-123.456");
    }

    #[test]
    fn strings_as_orjson() {
        assert_eq!(string("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(string("\n\t\r\u{8}\u{c}"), "\"\\n\\t\\r\\b\\f\"");
        assert_eq!(string("\u{1}\u{1f}\u{7f}é"), "\"\\u0001\\u001f\u{7f}é\"");
    }
}
