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
pub fn push_float(out: &mut Vec<u8>, value: f64) {
    // `{:e}` gives the shortest round-trip digits: "-1.2345e-7", "1e16", "0e0"
    let sci = format!("{value:e}");
    let (mantissa, exponent) = sci.split_once('e').unwrap_or((&sci, "0"));
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
        return;
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
        push_float(&mut out, value);
        String::from_utf8(out).unwrap()
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
