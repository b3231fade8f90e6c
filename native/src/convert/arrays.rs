//! `parse_array` of `cdc/capture/codecs/arrays.py`: an array literal as `array_out`
//! writes it (`{1,2,NULL}`, `{{1,2},{3,4}}`, `[0:1]={1,2}`) into nested JSON lists, each
//! element through its kind's codec. Arrays of the `,` delimiter only (every native kind's).

use super::values::{push_value, Kind};

/// Append the JSON list of the array literal `text` of `kind` elements; false when the
/// codec refuses it or an element's codec leaves it to Python.
pub fn push_array(out: &mut Vec<u8>, kind: Kind, text: &[u8]) -> bool {
    let mut text = text;
    if text.first() == Some(&b'[') {
        let Some(end) = dimensions_end(text) else {
            return false;
        };
        text = &text[end..];
    }
    if text.len() < 2 || text[0] != b'{' || text[text.len() - 1] != b'}' {
        return false;
    }
    let inner = &text[1..text.len() - 1];
    if inner.is_empty() {
        out.extend_from_slice(b"[]");
        return true;
    }
    if !inner
        .iter()
        .any(|b| matches!(b, b'"' | b'{' | b'}' | b'\\'))
    {
        // flat and unquoted: the common case, split as it is
        out.push(b'[');
        for (index, item) in inner.split(|&b| b == b',').enumerate() {
            if index > 0 {
                out.push(b',');
            }
            if item.is_empty() || !push_element(out, kind, item) {
                return false;
            }
        }
        out.push(b']');
        return true;
    }
    nested(out, kind, text).is_some()
}

/// `(?:\[-?[0-9]+:-?[0-9]+\])+=` at the start: where the elements begin.
fn dimensions_end(text: &[u8]) -> Option<usize> {
    let mut at = 0;
    let bound = |at: &mut usize| -> Option<()> {
        *at += usize::from(text.get(*at) == Some(&b'-'));
        let start = *at;
        while text.get(*at).is_some_and(u8::is_ascii_digit) {
            *at += 1;
        }
        (*at > start).then_some(())
    };
    while text.get(at) == Some(&b'[') {
        at += 1;
        bound(&mut at)?;
        (text.get(at) == Some(&b':')).then_some(())?;
        at += 1;
        bound(&mut at)?;
        (text.get(at) == Some(&b']')).then_some(())?;
        at += 1;
    }
    (at > 0 && text.get(at) == Some(&b'=')).then_some(at + 1)
}

/// An element: unquoted `NULL` is null, anything else its kind's JSON.
fn push_element(out: &mut Vec<u8>, kind: Kind, item: &[u8]) -> bool {
    if item == b"NULL" {
        out.extend_from_slice(b"null");
        true
    } else {
        push_value(out, kind, item)
    }
}

/// `array_isspace`: ASCII white space.
fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

/// The tokenizer path of `_parse_nested`: braces, delimiters, quoted and bare elements,
/// white space around each; None where the Python codec raises.
fn nested(out: &mut Vec<u8>, kind: Kind, text: &[u8]) -> Option<()> {
    let mut open: Vec<usize> = Vec::new(); // items so far in each list still open
    let mut root_done = false;
    let mut expect_item = true; // after '{' or a delimiter
    let mut at = 0;
    let mut unescaped = Vec::new();
    while at < text.len() {
        while text.get(at).copied().is_some_and(is_space) {
            at += 1;
        }
        let byte = *text.get(at)?;
        match byte {
            b'{' => {
                if !expect_item || (root_done && open.is_empty()) {
                    return None;
                }
                next_item(out, &mut open);
                out.push(b'[');
                open.push(0);
                at += 1;
            }
            b'}' => {
                let items = *open.last()?;
                if expect_item && items > 0 {
                    return None;
                }
                open.pop();
                root_done = true;
                out.push(b']');
                expect_item = false;
                at += 1;
            }
            b',' => {
                if expect_item || open.is_empty() {
                    return None;
                }
                expect_item = true;
                at += 1;
            }
            b'"' => {
                at += 1;
                unescaped.clear();
                loop {
                    match *text.get(at)? {
                        b'"' => break,
                        b'\\' => {
                            unescaped.push(*text.get(at + 1)?);
                            at += 2;
                        }
                        other => {
                            unescaped.push(other);
                            at += 1;
                        }
                    }
                }
                at += 1;
                if !expect_item || open.is_empty() {
                    return None;
                }
                next_item(out, &mut open);
                push_value(out, kind, &unescaped).then_some(())?;
                expect_item = false;
            }
            _ => {
                let start = at;
                while text.get(at).is_some_and(|&b| {
                    !matches!(b, b'{' | b'}' | b'"' | b'\\' | b',') && !is_space(b)
                }) {
                    at += 1;
                }
                if at == start || !expect_item || open.is_empty() {
                    return None;
                }
                next_item(out, &mut open);
                push_element(out, kind, &text[start..at]).then_some(())?;
                expect_item = false;
            }
        }
        while text.get(at).copied().is_some_and(is_space) {
            at += 1;
        }
    }
    (open.is_empty() && root_done).then_some(())
}

/// A comma before every item of the innermost open list but its first.
fn next_item(out: &mut Vec<u8>, open: &mut [usize]) {
    if let Some(items) = open.last_mut() {
        if *items > 0 {
            out.push(b',');
        }
        *items += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn array(kind: Kind, text: &str) -> Option<String> {
        let mut out = Vec::new();
        push_array(&mut out, kind, text.as_bytes()).then(|| String::from_utf8(out).unwrap())
    }

    #[test]
    fn arrays_become_nested_lists() {
        for (kind, text, json) in [
            (Kind::Int, "{1,2,NULL}", "[1,2,null]"),
            (Kind::Int, "{}", "[]"),
            (Kind::Int, "{{1,2},{3,4}}", "[[1,2],[3,4]]"),
            (Kind::Int, "[0:1]={1,2}", "[1,2]"),
            (Kind::Int, "[-1:0][1:1]={{1},{2}}", "[[1],[2]]"),
            (
                Kind::Text,
                r#"{"a b","NULL",NULL,"q\"\\",x}"#,
                r#"["a b","NULL",null,"q\"\\","x"]"#,
            ),
            (Kind::Text, r#"{ "a" , b }"#, r#"["a","b"]"#),
            (Kind::Text, r#"{{"{}"},{""}}"#, r#"[["{}"],[""]]"#),
            (Kind::Bool, "{t,f}", "[true,false]"),
        ] {
            assert_eq!(array(kind, text).unwrap(), json, "{text}");
        }
    }

    #[test]
    fn what_the_codec_refuses_is_refused() {
        for text in [
            "",
            "{",
            "1,2",
            "{1,,2}",
            "{,}",
            "{1,2}}",
            "{{1},2}x",
            "{1}{2}",
            "[1]={1}",
            "[1:2]{1}",
            "{\"a}",
            "{a\\b}",
            "{{1,2}",
            "{x}",
            "{\"NULL\"}",
            "{1 2}",
        ] {
            assert_eq!(array(Kind::Int, text), None, "{text}");
        }
    }
}
