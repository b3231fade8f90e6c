//! Snapshot rows: `COPY … TO STDOUT` text rows straight into `r` events, as
//! `cdc/capture/snapshot/copy.py` (parsing) and `cdc.capture.events.read_event` (the
//! event) do, one call per chunk of rows.
//!
//! A row this module cannot turn into exactly the reference's bytes (a value its codec
//! here does not handle, bytes that are not UTF-8, a field count that is not the
//! table's) is handed back as its raw line: Python builds that event.

pub mod batch;

#[cfg(test)]
mod tests;

use crate::convert::json;
pub use crate::convert::Plan;

/// One row's result.
#[derive(Debug, PartialEq, Eq)]
pub enum Row {
    /// The key's JSON and the event: its body, then the source block when one was given.
    Event { key: Vec<u8>, value: Vec<u8> },
    /// The row's raw line (without its newline), for Python to convert.
    Fallback(std::ops::Range<usize>),
}

/// The source block to end each event with: `prefix`, the row's sequence number, then
/// `suffix` (`complete` in `cdc/capture/events.py`); without one, the body ends with `}`.
pub struct Source<'a> {
    pub prefix: &'a [u8],
    pub suffix: &'a [u8],
    pub first_seq: u64,
}

/// Buffers reused from row to row.
#[derive(Default)]
pub(crate) struct Scratch {
    /// The row's `after` object.
    after: Vec<u8>,
    /// Where each column's value is in `after`.
    spans: Vec<std::ops::Range<usize>>,
    /// A value with its COPY escapes undone.
    text: Vec<u8>,
    /// The key and event of the row (`convert_line`).
    out: Vec<u8>,
}

/// The rows of `chunk` (COPY text lines, each ending with `\n`; a last line without one
/// counts as a row too), in order.
pub fn convert_chunk(chunk: &[u8], plan: &Plan, source: Option<&Source<'_>>) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut scratch = Scratch::default();
    let mut start = 0;
    while start < chunk.len() {
        let end = memchr::memchr(b'\n', &chunk[start..]).map_or(chunk.len(), |i| start + i);
        let seq = source.map(|s| s.first_seq.saturating_add(rows.len() as u64));
        let row = convert_line(&chunk[start..end], plan, source.zip(seq), &mut scratch)
            .unwrap_or(Row::Fallback(start..end));
        rows.push(row);
        start = end + 1;
    }
    rows
}

fn convert_line(
    line: &[u8],
    plan: &Plan,
    source: Option<(&Source<'_>, u64)>,
    scratch: &mut Scratch,
) -> Option<Row> {
    let mut out = std::mem::take(&mut scratch.out);
    out.clear();
    let row =
        convert_line_into(line, plan, source, scratch, &mut out).map(|(key, value)| Row::Event {
            key: out[key].to_vec(),
            value: out[value].to_vec(),
        });
    scratch.out = out;
    row
}

/// Append the row's key JSON, then its event (as `convert_line` makes them), to `out`;
/// returns where each is in `out`. None (with `out` as it was) when Python must convert
/// the row.
pub(crate) fn convert_line_into(
    line: &[u8],
    plan: &Plan,
    source: Option<(&Source<'_>, u64)>,
    scratch: &mut Scratch,
    out: &mut Vec<u8>,
) -> Option<(std::ops::Range<usize>, std::ops::Range<usize>)> {
    std::str::from_utf8(line).ok()?;
    let Scratch {
        after, spans, text, ..
    } = scratch;
    after.clear();
    spans.clear();
    after.push(b'{');
    for (index, raw) in line.split(|&b| b == b'\t').enumerate() {
        let kind = *plan.kinds.get(index)?;
        if index > 0 {
            after.push(b',');
        }
        after.extend_from_slice(&plan.names[index]);
        let begin = after.len();
        if raw == b"\\N" {
            after.extend_from_slice(b"null");
        } else if raw.contains(&b'\\') {
            unescape(raw, text);
            if !kind.push(after, text) {
                return None;
            }
        } else if !kind.push(after, raw) {
            return None;
        }
        spans.push(begin..after.len());
    }
    if spans.len() != plan.kinds.len() {
        return None;
    }
    after.push(b'}');
    let source_len = source.map_or(1, |(s, _)| s.prefix.len() + s.suffix.len() + 20);
    out.reserve(2 * (after.len() + 2) + plan.head.len() + plan.tail.len() + source_len + 24);
    let key_start = out.len();
    out.push(b'{');
    for (i, &index) in plan.key_indexes.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&plan.names[index]);
        out.extend_from_slice(&after[spans[index].clone()]);
    }
    out.push(b'}');
    let key = key_start..out.len();
    out.extend_from_slice(&plan.head);
    out.extend_from_within(key.clone());
    out.extend_from_slice(b",\"before\":null,\"after\":");
    out.extend_from_slice(after);
    out.extend_from_slice(&plan.tail);
    match source {
        Some((source, seq)) => {
            out.extend_from_slice(source.prefix);
            json::push_u64(out, seq);
            out.extend_from_slice(source.suffix);
        }
        None => out.push(b'}'),
    }
    let value_start = key.end;
    Some((key, value_start..out.len()))
}

/// COPY's text escapes, as `snapshot_copy._copy_field`: `\b \f \n \r \t \v` are those
/// characters, a backslash before any other character stands for that character, and a
/// backslash that ends the field stays.
fn unescape(raw: &[u8], out: &mut Vec<u8>) {
    out.clear();
    let mut bytes = raw.iter();
    while let Some(&byte) = bytes.next() {
        if byte != b'\\' {
            out.push(byte);
            continue;
        }
        match bytes.next() {
            Some(b'b') => out.push(0x08),
            Some(b'f') => out.push(0x0c),
            Some(b'n') => out.push(b'\n'),
            Some(b'r') => out.push(b'\r'),
            Some(b't') => out.push(b'\t'),
            Some(b'v') => out.push(0x0b),
            Some(&other) => out.push(other),
            None => out.push(b'\\'),
        }
    }
}
