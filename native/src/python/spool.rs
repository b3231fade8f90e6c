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

/// Up to `limit` records (and no more once their values add up to `max_bytes`) of the
/// spool frames in `chunk` from byte `start`, skipping the
/// frames of the subtransactions in `aborted`: each `Record(topic, key, value,
/// Position(commit_lsn, seq), tombstone)` with the value `complete` makes of the event
/// (source block: `db`, `commit_lsn_text`, `tail`), numbered from `first_seq`. Returns
/// `(records, end, next_seq, value_bytes)`: `end` is where the first frame not consumed
/// starts (a frame cut short by the end of `chunk` is not consumed), `value_bytes` the
/// records' values' length in all.
#[pyfunction]
#[pyo3(signature = (chunk, start, limit, max_bytes, aborted, db, commit_lsn, commit_lsn_text, tail, first_seq))]
#[allow(clippy::too_many_arguments)] // one call per chunk of thousands of records
pub fn spool_records<'py>(
    py: Python<'py>,
    chunk: &Bound<'py, PyBytes>,
    start: usize,
    limit: usize,
    max_bytes: usize,
    aborted: HashSet<u32>,
    db: &[u8],
    commit_lsn: u64,
    commit_lsn_text: &[u8],
    tail: &[u8],
    first_seq: u64,
) -> PyResult<(Bound<'py, PyList>, usize, u64, usize)> {
    let types = types(py)?;
    if !types.tombstone_next {
        return Err(PyTypeError::new_err(
            "Record's field after position must be tombstone",
        ));
    }
    let data = chunk.as_bytes();
    let commit = Commit {
        db,
        commit_lsn: commit_lsn_text,
        tail,
    };
    let commit_lsn = int(py, commit_lsn);
    let defaults_untracked = types.defaults.iter().all(|d| !is_tracked(d.bind(py)));
    let records = PyList::empty(py);
    let mut topic: Option<(&[u8], Bound<'py, PyString>)> = None;
    let mut at = start;
    let mut seq = first_seq;
    let mut value = Vec::new();
    let mut total = 0usize;
    while records.len() < limit && total < max_bytes {
        let frame_start = at;
        let Some((frame, next)) = read_frame(data, at) else {
            break;
        };
        at = next;
        if aborted.contains(&frame.subxid) {
            continue;
        }
        let name = match &topic {
            Some((bytes, name)) if *bytes == frame.topic => name.clone(),
            _ => {
                let text = std::str::from_utf8(frame.topic).map_err(|e| {
                    PyValueError::new_err(format!(
                        "the spool frame at byte {frame_start} has a topic that is not \
                         UTF-8 ({e}): the spool file is damaged"
                    ))
                })?;
                let name = PyString::new(py, text);
                topic = Some((frame.topic, name.clone()));
                name
            }
        };
        value.clear();
        push_completed(&mut value, &frame, &commit, seq);
        total = total.saturating_add(value.len());
        let position = types
            .position
            .make(PyTuple::new(py, [commit_lsn.clone(), int(py, seq)])?, true)?;
        let mut items = Vec::with_capacity(4 + types.defaults.len());
        items.extend([
            name.into_any(),
            PyBytes::new(py, frame.key).into_any(),
            PyBytes::new(py, &value).into_any(),
            position,
            PyBool::new(py, frame.tombstone).to_owned().into_any(),
        ]);
        items.extend(types.defaults.iter().skip(1).map(|d| d.bind(py).clone()));
        records.append(
            types
                .record
                .make(PyTuple::new(py, items)?, defaults_untracked)?,
        )?;
        seq = seq.saturating_add(1);
    }
    Ok((records, at, seq, total))
}
