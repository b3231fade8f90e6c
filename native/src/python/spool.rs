//! `spool_records`: a committed streamed transaction's spool frames (`feed_batch` writes
//! them) into its log records, in batches (see `crate::spool`; the Python side is
//! `cdc/capture/stream/spool.py` and `cdc/capture/stream/native.py`).

use std::collections::HashSet;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyList, PyString, PyTuple};

use super::snapshot::{int, types};
use super::untrack::is_tracked;
use crate::spool::{push_completed, read_frame, Commit};

/// The source block of a committed transaction's records: `(db, commit_lsn,
/// commit_lsn_text, tail)` (`CommitInfo`'s).
type CommitArg = (Vec<u8>, u64, Vec<u8>, Vec<u8>);

/// Read a committed streamed transaction's spool `file` (from where the last call
/// stopped, with the bytes it left over, `leftover`) and append up to `limit` of its
/// records to `ready` (and no more once their values add up to `max_bytes`), skipping the
/// frames of the subtransactions in `aborted`: each `Record(topic, key, value,
/// Position(commit_lsn, seq), tombstone)` with the value `complete` makes of the event,
/// numbered from `first_seq`. The file is read `chunk_bytes` at a time (`file` None:
/// nothing was spooled). Returns `(leftover, next_seq, done)`: the bytes read but not
/// consumed (for the next call), and whether the file is exhausted. A file ending inside
/// a frame, or a frame whose topic is not UTF-8, is a ValueError naming the byte.
#[pyfunction]
#[pyo3(signature = (file, leftover, ready, limit, max_bytes, aborted, commit, first_seq, chunk_bytes))]
#[allow(clippy::too_many_arguments)] // one call per batch of thousands of records
pub fn spool_records<'py>(
    py: Python<'py>,
    file: Option<&Bound<'py, PyAny>>,
    leftover: &[u8],
    ready: &Bound<'py, PyList>,
    limit: usize,
    max_bytes: usize,
    aborted: HashSet<u32>,
    commit: CommitArg,
    first_seq: u64,
    chunk_bytes: usize,
) -> PyResult<(Bound<'py, PyBytes>, u64, bool)> {
    let mut reader = Reader {
        buffer: leftover.to_vec(),
        at: 0,
        // the file offset of `buffer[0]`, for errors
        base: match file {
            Some(file) => file
                .call_method0("tell")?
                .extract::<u64>()?
                .saturating_sub(leftover.len() as u64),
            None => 0,
        },
    };
    let mut taken = Taken {
        count: 0,
        seq: first_seq,
        bytes: 0,
    };
    let done = loop {
        push_records(
            py,
            &mut reader,
            ready,
            limit,
            max_bytes,
            &aborted,
            &commit,
            &mut taken,
        )?;
        if taken.count >= limit || taken.bytes >= max_bytes {
            break false;
        }
        let read = match file {
            Some(file) => Some(
                file.call_method1("read", (chunk_bytes,))?
                    .cast_into::<PyBytes>()?,
            ),
            None => None,
        };
        let more = read.as_ref().map_or(&[][..], |bytes| bytes.as_bytes());
        if more.is_empty() {
            if reader.at < reader.buffer.len() {
                return Err(PyValueError::new_err(format!(
                    "the stream spool file ends inside the frame at byte {}: it is damaged",
                    reader.base + reader.at as u64
                )));
            }
            break true;
        }
        reader.buffer.drain(..reader.at);
        reader.base += reader.at as u64;
        reader.at = 0;
        reader.buffer.extend_from_slice(more);
    };
    Ok((
        PyBytes::new(py, &reader.buffer[reader.at..]),
        taken.seq,
        done,
    ))
}

/// The spool bytes read and not yet consumed.
struct Reader {
    buffer: Vec<u8>,
    /// Where the first frame not consumed starts in `buffer`.
    at: usize,
    /// The file offset of `buffer[0]`.
    base: u64,
}

/// What a `spool_records` call appended so far.
struct Taken {
    count: usize,
    seq: u64,
    bytes: usize,
}

/// Append the records of the whole frames of `reader`'s buffer to `ready`, within
/// `limit` records and `max_bytes` of values (counting what `taken` holds).
#[allow(clippy::too_many_arguments)] // the state of one `spool_records` call
fn push_records<'py>(
    py: Python<'py>,
    reader: &mut Reader,
    ready: &Bound<'py, PyList>,
    limit: usize,
    max_bytes: usize,
    aborted: &HashSet<u32>,
    commit: &CommitArg,
    taken: &mut Taken,
) -> PyResult<()> {
    let types = types(py)?;
    if !types.tombstone_next {
        return Err(PyTypeError::new_err(
            "Record's field after position must be tombstone",
        ));
    }
    let (db, commit_lsn, commit_lsn_text, tail) = commit;
    let source = Commit {
        db,
        commit_lsn: commit_lsn_text,
        tail,
    };
    let commit_lsn = int(py, *commit_lsn);
    let defaults_untracked = types.defaults.iter().all(|d| !is_tracked(d.bind(py)));
    let data = &reader.buffer;
    let mut topic: Option<(&[u8], Bound<'py, PyString>)> = None;
    let mut value = Vec::new();
    while taken.count < limit && taken.bytes < max_bytes {
        let frame_start = reader.at;
        let Some((frame, next)) = read_frame(data, reader.at) else {
            break;
        };
        reader.at = next;
        if aborted.contains(&frame.subxid) {
            continue;
        }
        let name = match &topic {
            Some((bytes, name)) if *bytes == frame.topic => name.clone(),
            _ => {
                let text = std::str::from_utf8(frame.topic).map_err(|e| {
                    PyValueError::new_err(format!(
                        "the stream spool frame at byte {} has a topic that is not UTF-8 \
                         ({e}): the spool file is damaged",
                        reader.base + frame_start as u64
                    ))
                })?;
                let name = PyString::new(py, text);
                topic = Some((frame.topic, name.clone()));
                name
            }
        };
        value.clear();
        push_completed(&mut value, &frame, &source, taken.seq);
        taken.bytes = taken.bytes.saturating_add(value.len());
        let position = types.position.make(
            PyTuple::new(py, [commit_lsn.clone(), int(py, taken.seq)])?,
            true,
        )?;
        let mut items = Vec::with_capacity(4 + types.defaults.len());
        items.extend([
            name.into_any(),
            PyBytes::new(py, frame.key).into_any(),
            PyBytes::new(py, &value).into_any(),
            position,
            PyBool::new(py, frame.tombstone).to_owned().into_any(),
        ]);
        items.extend(types.defaults.iter().skip(1).map(|d| d.bind(py).clone()));
        ready.append(
            types
                .record
                .make(PyTuple::new(py, items)?, defaults_untracked)?,
        )?;
        taken.count += 1;
        taken.seq = taken.seq.saturating_add(1);
    }
    Ok(())
}
