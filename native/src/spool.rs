//! The stream spool's frames (`cdc/capture/stream/spool.py`): a streamed transaction's events
//! written to disk as they arrive, read back and completed with the source block at its
//! Stream Commit.
//!
//! A frame is `subxid u32 | topic length u32 | key length u32 | body length u32 |
//! source names length u32 | lsn u64 | tombstone u8` (big-endian, Python's
//! `struct.Struct(">IIIIIQ?")`), then the topic, key, body and source names.

#[cfg(test)]
mod tests;

use crate::convert::json::push_u64;
use crate::pgoutput::push_hex;

/// The fixed part of a frame.
pub const FRAME_HEAD: usize = 29;

/// One spooled event.
#[derive(Debug, PartialEq, Eq)]
pub struct Frame<'a> {
    pub subxid: u32,
    pub topic: &'a [u8],
    pub key: &'a [u8],
    pub body: &'a [u8],
    pub source_names: &'a [u8],
    pub lsn: u64,
    pub tombstone: bool,
}

/// Append `frame` to `out`, as `StreamSpool.add` writes it. None when a length does not
/// fit its u32 (the Python reference's `struct.error`).
pub fn push_frame(out: &mut Vec<u8>, frame: &Frame<'_>) -> Option<()> {
    let length = |part: &[u8]| u32::try_from(part.len()).ok();
    let lengths = [
        frame.subxid,
        length(frame.topic)?,
        length(frame.key)?,
        length(frame.body)?,
        length(frame.source_names)?,
    ];
    out.reserve(FRAME_HEAD + frame.topic.len() + frame.key.len() + frame.body.len());
    for value in lengths {
        out.extend_from_slice(&value.to_be_bytes());
    }
    out.extend_from_slice(&frame.lsn.to_be_bytes());
    out.push(u8::from(frame.tombstone));
    for part in [frame.topic, frame.key, frame.body, frame.source_names] {
        out.extend_from_slice(part);
    }
    Some(())
}

/// The frame starting at `data[at..]` and where the next one starts, or None when the
/// data ends before the frame does.
pub fn read_frame(data: &[u8], at: usize) -> Option<(Frame<'_>, usize)> {
    let head = data.get(at..at.checked_add(FRAME_HEAD)?)?;
    let u32_at = |i: usize| u32::from_be_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
    let mut lsn = [0u8; 8];
    lsn.copy_from_slice(&head[20..28]);
    let mut pos = at + FRAME_HEAD;
    let mut part = |index: usize| -> Option<&[u8]> {
        let length = usize::try_from(u32_at(index)).ok()?;
        let end = pos.checked_add(length)?;
        let bytes = data.get(pos..end)?;
        pos = end;
        Some(bytes)
    };
    let topic = part(4)?;
    let key = part(8)?;
    let body = part(12)?;
    let source_names = part(16)?;
    let frame = Frame {
        subxid: u32_at(0),
        topic,
        key,
        body,
        source_names,
        lsn: u64::from_be_bytes(lsn),
        tombstone: head[28] != 0,
    };
    Some((frame, pos))
}

/// What the events of one committed transaction share (`CommitInfo`).
pub struct Commit<'a> {
    /// The database name as a JSON string.
    pub db: &'a [u8],
    /// The commit LSN as `X/X`.
    pub commit_lsn: &'a [u8],
    /// `CommitInfo.tail`: the source fields after `seq`.
    pub tail: &'a [u8],
}

/// `complete`: the event's body with the `source` block as its last field.
pub fn push_completed(out: &mut Vec<u8>, frame: &Frame<'_>, commit: &Commit<'_>, seq: u64) {
    let body = frame.body;
    out.extend_from_slice(&body[..body.len().saturating_sub(1)]);
    out.extend_from_slice(b",\"source\":{\"db\":");
    out.extend_from_slice(commit.db);
    out.push(b',');
    out.extend_from_slice(frame.source_names);
    out.extend_from_slice(b",\"lsn\":\"");
    push_hex(out, frame.lsn >> 32);
    out.push(b'/');
    push_hex(out, frame.lsn & 0xFFFF_FFFF);
    out.extend_from_slice(b"\",\"commit_lsn\":\"");
    out.extend_from_slice(commit.commit_lsn);
    out.extend_from_slice(b"\",\"seq\":");
    push_u64(out, seq);
    out.push(b',');
    out.extend_from_slice(commit.tail);
}
