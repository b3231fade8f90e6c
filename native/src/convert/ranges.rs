//! `parse_range` of `cdc/capture/codecs/records.py`: a range literal as `range_out`
//! writes it (`[1,10)`, `("2024-01-01 00:00:00",)`, `empty`) into
//! `{"lower":…,"upper":…,"lower_inc":…,"upper_inc":…,"empty":…}`, each bound through
//! its kind's codec.

use super::values::{push_value, Kind};

/// Append the JSON object of the range literal `text` of `kind` bounds; false when the
/// codec refuses it or a bound's codec leaves it to Python.
pub fn push_range(out: &mut Vec<u8>, kind: Kind, text: &[u8]) -> bool {
    if text == b"empty" {
        out.extend_from_slice(
            br#"{"lower":null,"upper":null,"lower_inc":false,"upper_inc":false,"empty":true}"#,
        );
        return true;
    }
    let (Some(&open), Some(&close)) = (text.first(), text.last()) else {
        return false;
    };
    if text.len() < 3 || !matches!(open, b'[' | b'(') || !matches!(close, b']' | b')') {
        return false;
    }
    let Some(fields) = split_fields(&text[1..text.len() - 1]) else {
        return false;
    };
    let [lower, upper] = fields.as_slice() else {
        return false;
    };
    out.extend_from_slice(br#"{"lower":"#);
    if !push_bound(out, kind, lower.as_deref()) {
        return false;
    }
    out.extend_from_slice(br#","upper":"#);
    if !push_bound(out, kind, upper.as_deref()) {
        return false;
    }
    let inclusive = |bound: &Option<Vec<u8>>, inclusive: bool| -> &[u8] {
        if bound.is_some() && inclusive {
            b"true"
        } else {
            b"false"
        }
    };
    out.extend_from_slice(br#","lower_inc":"#);
    out.extend_from_slice(inclusive(lower, open == b'['));
    out.extend_from_slice(br#","upper_inc":"#);
    out.extend_from_slice(inclusive(upper, close == b']'));
    out.extend_from_slice(br#","empty":false}"#);
    true
}

/// A bound: null when there is none, else its kind's JSON.
fn push_bound(out: &mut Vec<u8>, kind: Kind, bound: Option<&[u8]>) -> bool {
    match bound {
        None => {
            out.extend_from_slice(b"null");
            true
        }
        Some(text) => push_value(out, kind, text),
    }
}

/// `split_fields`: the comma-separated fields of `text`, each made of quoted chunks
/// (`"…"`, `""` and `\x` escapes inside), bare chunks and `\x` escapes; an empty field
/// (nothing, not even `""`) is None. None where the Python codec raises.
fn split_fields(text: &[u8]) -> Option<Vec<Option<Vec<u8>>>> {
    let mut fields = Vec::new();
    let mut at = 0;
    loop {
        let mut field = Vec::new();
        let mut quoted = false;
        while at < text.len() && text[at] != b',' {
            match text[at] {
                b'"' => {
                    at = quoted_chunk(text, at + 1, &mut field)?;
                    quoted = true;
                }
                b'\\' => {
                    field.push(*text.get(at + 1)?);
                    at += 2;
                }
                b'(' | b')' => return None,
                _ => {
                    let start = at;
                    while at < text.len() && !matches!(text[at], b',' | b'(' | b')' | b'"' | b'\\')
                    {
                        at += 1;
                    }
                    field.extend_from_slice(&text[start..at]);
                }
            }
        }
        fields.push((!field.is_empty() || quoted).then_some(field));
        if at >= text.len() {
            return Some(fields);
        }
        at += 1;
    }
}

/// The content of a quoted chunk from `at` (just after its opening quote) into `field`,
/// unescaped; where the chunk ends (after its closing quote).
fn quoted_chunk(text: &[u8], mut at: usize, field: &mut Vec<u8>) -> Option<usize> {
    loop {
        match *text.get(at)? {
            b'"' if text.get(at + 1) == Some(&b'"') => {
                field.push(b'"');
                at += 2;
            }
            b'"' => return Some(at + 1),
            b'\\' => {
                field.push(*text.get(at + 1)?);
                at += 2;
            }
            other => {
                field.push(other);
                at += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(kind: Kind, text: &str) -> Option<String> {
        let mut out = Vec::new();
        push_range(&mut out, kind, text.as_bytes()).then(|| String::from_utf8(out).unwrap())
    }

    #[test]
    fn ranges_become_objects() {
        let object = |lower: &str, upper: &str, li: bool, ui: bool| {
            format!(
                r#"{{"lower":{lower},"upper":{upper},"lower_inc":{li},"upper_inc":{ui},"empty":false}}"#
            )
        };
        assert_eq!(
            range(Kind::Int, "[1,10)").unwrap(),
            object("1", "10", true, false)
        );
        assert_eq!(
            range(Kind::Int, "(,5]").unwrap(),
            object("null", "5", false, true)
        );
        assert_eq!(
            range(Kind::Int, "[3,)").unwrap(),
            object("3", "null", true, false)
        );
        assert_eq!(
            range(
                Kind::Timestamp,
                r#"["2024-01-01 00:00:00","2024-01-02 10:00:00.5")"#
            )
            .unwrap(),
            object(
                "\"2024-01-01T00:00:00\"",
                "\"2024-01-02T10:00:00.5\"",
                true,
                false
            )
        );
        assert_eq!(
            range(Kind::Text, r#"["a""b\,",c\)d]"#).unwrap(),
            object(r#""a\"b,""#, "\"c)d\"", true, true)
        );
        assert_eq!(
            range(Kind::Text, r#"["",x)"#).unwrap(),
            object("\"\"", "\"x\"", true, false)
        );
        assert_eq!(
            range(Kind::Int, "empty").unwrap(),
            r#"{"lower":null,"upper":null,"lower_inc":false,"upper_inc":false,"empty":true}"#
        );
    }

    #[test]
    fn what_the_codec_refuses_is_refused() {
        for text in [
            "", "[1)", "1,2", "[1,2,3)", "[1]", "[(1,2)", "[\"1,2)", "[x,2)", "[1,2\\)",
        ] {
            assert_eq!(range(Kind::Int, text), None, "{text}");
        }
    }
}
