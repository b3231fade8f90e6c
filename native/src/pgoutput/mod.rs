//! The streaming capture's row changes: one pgoutput Insert, Update or Delete message
//! (protocol 1 layout, outside a streamed transaction: no xid) straight into its event,
//! as `cdc/capture/pgoutput/decoder.py` (reading the message) then `insert_events`,
//! `update_events` or `delete_events` and `complete` in `cdc/capture/events.py` do.
//!
//! Anything that would not be exactly the reference's bytes gives None, and Python
//! takes the message the reference way: a malformed message (the decoder's error), a
//! tuple whose column count is not the plan's, a binary (`b`) value, text that is not
//! UTF-8, a value `Codec::push` leaves to Python (the reference then keeps the text and
//! lists the column in `unparsed`), and an Update whose old key is not its new key (the
//! reference's `d` + `c` pair).

#[cfg(test)]
mod tests;
pub mod transaction;

use crate::convert::json::push_u64;
use crate::convert::Plan;

/// One row change's event.
#[derive(Debug, PartialEq, Eq)]
pub struct Change {
    /// The key's JSON.
    pub key: Vec<u8>,
    /// The event body, or with a `Source` the complete record value.
    pub value: Vec<u8>,
    /// A delete (`d`).
    pub tombstone: bool,
}

/// What `complete` splices in as the event's last field: `head` (`,"source":{"db":…,
/// "schema":…,"table":…,"lsn":"`), the message's `lsn` as `X/X`, `","commit_lsn":"`,
/// `commit_lsn` (its text), `","seq":`, `seq`, `,` and `tail` (`"txid":…}}`).
pub struct Source<'a> {
    pub head: &'a [u8],
    pub lsn: u64,
    pub commit_lsn: &'a [u8],
    pub seq: u64,
    pub tail: &'a [u8],
}

/// One value of a TupleData.
#[derive(Clone, Copy, Debug)]
enum Value<'a> {
    Null,
    /// `u`: a TOASTed value that did not change and was not sent.
    Unchanged,
    /// `t`: the value's text, valid UTF-8.
    Text(&'a [u8]),
}

/// The event of `payload` (a whole Insert, Update or Delete message, its type byte
/// first) for a relation converted with `plan`, or None (see the module docs).
pub fn convert_change(payload: &[u8], plan: &Plan, source: Option<&Source<'_>>) -> Option<Change> {
    convert(payload, plan, source, false)
}

/// `convert_change` for a message of a streamed transaction (protocol 2, inside a
/// stream block): its type byte is followed by the (sub)transaction's xid, which
/// `streamed_xid` reads.
pub fn convert_streamed_change(payload: &[u8], plan: &Plan) -> Option<Change> {
    convert(payload, plan, None, true)
}

/// The xid after the type byte of a streamed transaction's message.
pub fn streamed_xid(payload: &[u8]) -> Option<u32> {
    let xid = payload.get(1..5)?;
    Some(u32::from_be_bytes([xid[0], xid[1], xid[2], xid[3]]))
}

fn convert(
    payload: &[u8],
    plan: &Plan,
    source: Option<&Source<'_>>,
    streamed: bool,
) -> Option<Change> {
    let columns = plan.kinds.len();
    let mut reader = Reader {
        data: payload,
        pos: 0,
    };
    let message_type = reader.byte()?;
    if streamed {
        reader.take(4)?; // the xid
    }
    reader.take(4)?; // the relation OID: the caller chose the plan by it
    let marker = reader.byte()?;
    let mut old = Vec::new();
    let mut new = Vec::new();
    let (op, old_kind) = match message_type {
        b'I' if marker == b'N' => {
            reader.tuple(columns, &mut new)?;
            (b"c", None)
        }
        b'U' => {
            let mut marker = marker;
            let mut old_kind = None;
            if marker == b'K' || marker == b'O' {
                reader.tuple(columns, &mut old)?;
                old_kind = Some(marker);
                marker = reader.byte()?;
            }
            if marker != b'N' {
                return None;
            }
            reader.tuple(columns, &mut new)?;
            (b"u", old_kind)
        }
        b'D' if marker == b'K' || marker == b'O' => {
            reader.tuple(columns, &mut old)?;
            (b"d", Some(marker))
        }
        _ => return None,
    };
    if reader.pos != payload.len() {
        return None; // trailing bytes
    }
    let delete = message_type == b'D';
    let mut key = Vec::with_capacity(32);
    push_key(&mut key, plan, if delete { &old } else { &new })?;
    if message_type == b'U' && old_kind.is_some() {
        let mut old_key = Vec::with_capacity(key.len());
        push_key(&mut old_key, plan, &old)?;
        if old_key != key {
            return None; // the key changed: the reference writes `d` then `c`
        }
    }

    let mut value = Vec::with_capacity(payload.len() * 2 + key.len() + 160);
    value.extend_from_slice(b"{\"op\":\"");
    value.extend_from_slice(op);
    value.extend_from_slice(b"\",\"key\":");
    value.extend_from_slice(&key);
    value.extend_from_slice(b",\"before\":");
    if old_kind == Some(b'O') {
        push_row(&mut value, plan, &old, None)?;
    } else {
        value.extend_from_slice(b"null");
    }
    value.extend_from_slice(b",\"after\":");
    let mut unchanged = Vec::new();
    if delete {
        value.extend_from_slice(b"null");
    } else {
        push_row(&mut value, plan, &new, Some(&mut unchanged))?;
    }
    value.extend_from_slice(b",\"unchanged\":[");
    for (i, &index) in unchanged.iter().enumerate() {
        if i > 0 {
            value.push(b',');
        }
        let name = plan.names.get(index)?;
        value.extend_from_slice(name.strip_suffix(b":")?);
    }
    value.push(b']');
    value.extend_from_slice(&plan.version);
    match source {
        Some(source) => push_source(&mut value, source),
        None => value.push(b'}'),
    }
    Some(Change {
        key,
        value,
        tombstone: delete,
    })
}

/// `_key`: `{"name":value,…}` over the key columns, NULL and unchanged values as null.
fn push_key(out: &mut Vec<u8>, plan: &Plan, values: &[Value<'_>]) -> Option<()> {
    out.push(b'{');
    for (i, &index) in plan.key_indexes.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(plan.names.get(index)?);
        push_one(out, plan, index, *values.get(index)?)?;
    }
    out.push(b'}');
    Some(())
}

/// `_decode_row`: `{"name":value,…}` over every column but the unchanged ones, whose
/// indexes go to `unchanged` (when given).
fn push_row(
    out: &mut Vec<u8>,
    plan: &Plan,
    values: &[Value<'_>],
    mut unchanged: Option<&mut Vec<usize>>,
) -> Option<()> {
    out.push(b'{');
    let mut first = true;
    for (index, &value) in values.iter().enumerate() {
        if let Value::Unchanged = value {
            if let Some(list) = unchanged.as_deref_mut() {
                list.push(index);
            }
            continue;
        }
        if !first {
            out.push(b',');
        }
        first = false;
        out.extend_from_slice(plan.names.get(index)?);
        push_one(out, plan, index, value)?;
    }
    out.push(b'}');
    Some(())
}

fn push_one(out: &mut Vec<u8>, plan: &Plan, index: usize, value: Value<'_>) -> Option<()> {
    match value {
        Value::Null | Value::Unchanged => out.extend_from_slice(b"null"),
        Value::Text(text) => {
            if !plan.kinds.get(index)?.push(out, text) {
                return None;
            }
        }
    }
    Some(())
}

/// `complete`'s source block, the body's closing brace replaced by it.
fn push_source(out: &mut Vec<u8>, source: &Source<'_>) {
    out.extend_from_slice(source.head);
    push_hex(out, source.lsn >> 32);
    out.push(b'/');
    push_hex(out, source.lsn & 0xFFFF_FFFF);
    out.extend_from_slice(b"\",\"commit_lsn\":\"");
    out.extend_from_slice(source.commit_lsn);
    out.extend_from_slice(b"\",\"seq\":");
    push_u64(out, source.seq);
    out.push(b',');
    out.extend_from_slice(source.tail);
}

/// `%X`: upper-case hexadecimal, no leading zeros.
pub(crate) fn push_hex(out: &mut Vec<u8>, number: u64) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut digits = [0u8; 16];
    let mut at = digits.len();
    let mut rest = number;
    loop {
        at -= 1;
        digits[at] = HEX[(rest & 0xF) as usize];
        rest >>= 4;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

/// Bounds-checked reads over a message.
struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, size: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(size)?;
        let bytes = self.data.get(self.pos..end)?;
        self.pos = end;
        Some(bytes)
    }

    fn byte(&mut self) -> Option<u8> {
        self.take(1)?.first().copied()
    }

    /// TupleData with exactly `columns` values (`read_tuple`), into `out`.
    fn tuple(&mut self, columns: usize, out: &mut Vec<Value<'a>>) -> Option<()> {
        let count = self.take(2)?;
        if usize::from(u16::from_be_bytes([count[0], count[1]])) != columns {
            return None;
        }
        out.reserve(columns);
        for _ in 0..columns {
            let value = match self.byte()? {
                b't' => {
                    let length = self.take(4)?;
                    let length = i32::from_be_bytes([length[0], length[1], length[2], length[3]]);
                    let text = self.take(usize::try_from(length).ok()?)?;
                    std::str::from_utf8(text).ok()?;
                    Value::Text(text)
                }
                b'n' => Value::Null,
                b'u' => Value::Unchanged,
                _ => return None, // `b` (binary, never requested) or not a value kind
            };
            out.push(value);
        }
        Some(())
    }
}
