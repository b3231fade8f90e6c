//! `dml_event`: one streamed Insert, Update or Delete message → its event (see
//! `crate::pgoutput`), and the record `feed_batch` makes of a converted change.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyString, PyTuple};

use super::snapshot::{int, types, SnapshotPlan};
use super::untrack::is_tracked;
use crate::pgoutput::{convert_change, Change};

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
