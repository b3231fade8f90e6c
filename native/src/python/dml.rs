//! `dml_event` and `dml_record`: one streamed Insert, Update or Delete message → its
//! event (see `crate::pgoutput`; the Python side is `cdc/capture/stream/native.py`).

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyString, PyTuple};

use super::snapshot::{int, types, SnapshotPlan};
use super::untrack::is_tracked;
use crate::pgoutput::{convert_change, Change, Source};

/// `(key, body, tombstone)` of the row change `payload` (the whole message, type byte
/// first) for a relation of `plan`, as `insert_events`/`update_events`/`delete_events`
/// give them; None when Python must convert it (see `crate::pgoutput`).
#[pyfunction]
pub fn dml_event<'py>(
    py: Python<'py>,
    payload: &[u8],
    plan: &Bound<'py, SnapshotPlan>,
) -> Option<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, bool)> {
    let change = convert_change(payload, &plan.get().plan, None)?;
    Some((
        PyBytes::new(py, &change.key),
        PyBytes::new(py, &change.value),
        change.tombstone,
    ))
}

/// The log record of the row change `payload` that arrived at `lsn`, numbered
/// `Position(commit_lsn, seq)` in its transaction: `Record(topic, key, value, position,
/// tombstone)` whose value is what `complete` makes of the event with the source block
/// `head` (`,"source":{"db":…,"schema":…,"table":…,"lsn":"`), the message's LSN,
/// `commit_lsn_text`, `seq` and `tail` (`CommitInfo.tail`). None when Python must
/// convert it.
#[pyfunction]
#[pyo3(signature = (payload, plan, topic, lsn, head, commit_lsn, commit_lsn_text, tail, seq))]
#[allow(clippy::too_many_arguments)] // one call per message: no tuple to build and unpack
pub fn dml_record<'py>(
    py: Python<'py>,
    payload: &[u8],
    plan: &Bound<'py, SnapshotPlan>,
    topic: &Bound<'py, PyString>,
    lsn: u64,
    head: &[u8],
    commit_lsn: u64,
    commit_lsn_text: &[u8],
    tail: &[u8],
    seq: u64,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let source = Source {
        head,
        lsn,
        commit_lsn: commit_lsn_text,
        seq,
        tail,
    };
    let Some(change) = convert_change(payload, &plan.get().plan, Some(&source)) else {
        return Ok(None);
    };
    record(py, topic, &change, commit_lsn, seq).map(Some)
}

/// `Record(topic, change.key, change.value, Position(commit_lsn, seq), change.tombstone)`.
pub(super) fn record<'py>(
    py: Python<'py>,
    topic: &Bound<'py, PyString>,
    change: &Change,
    commit_lsn: u64,
    seq: u64,
) -> PyResult<Bound<'py, PyAny>> {
    let types = types(py)?;
    if !types.tombstone_next {
        return Err(PyTypeError::new_err(
            "Record's field after position must be tombstone",
        ));
    }
    let position = types
        .position
        .make(PyTuple::new(py, [int(py, commit_lsn), int(py, seq)])?, true)?;
    let mut items = Vec::with_capacity(4 + types.defaults.len());
    items.extend([
        topic.clone().into_any(),
        PyBytes::new(py, &change.key).into_any(),
        PyBytes::new(py, &change.value).into_any(),
        position,
        PyBool::new(py, change.tombstone).to_owned().into_any(),
    ]);
    items.extend(types.defaults.iter().skip(1).map(|d| d.bind(py).clone()));
    let untracked = !is_tracked(topic) && types.defaults.iter().all(|d| !is_tracked(d.bind(py)));
    types.record.make(PyTuple::new(py, items)?, untracked)
}
