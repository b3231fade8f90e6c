//! `snapshot_rows`: a chunk of `COPY … TO STDOUT` text rows → their events, in one call
//! (see `crate::snapshot`; the Python side is `cdc/capture/snapshot_native.py`).

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple, PyType};

use super::named_tuple::NamedTupleType;
use super::untrack::is_tracked;
use crate::snapshot::{convert_chunk, Plan, Row, Source};

/// A table's conversion plan: built once per table and schema version.
#[pyclass(frozen, module = "distributary_native")]
pub struct SnapshotPlan {
    pub(super) plan: Plan,
}

#[pymethods]
impl SnapshotPlan {
    /// `kinds`: each column's codec kind; `names`: the column names; `key_indexes`: the
    /// key columns; a ValueError says what does not fit.
    #[new]
    fn new(
        kinds: Vec<u8>,
        names: Vec<String>,
        key_indexes: Vec<usize>,
        schema_version: i64,
    ) -> PyResult<Self> {
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        Plan::new(&kinds, &names, &key_indexes, schema_version)
            .map(|plan| SnapshotPlan { plan })
            .map_err(PyValueError::new_err)
    }
}

/// The rows of `chunk` (whole COPY text lines), in order: `(key, value)` for each row
/// converted here, the raw line (`bytes`, no newline) for each row Python must convert.
/// With `source` `(prefix, suffix)` each value ends with `prefix`, its sequence number
/// (`first_seq` for the chunk's first row, counting every row) and `suffix`; without,
/// it is the event body. The work runs without the GIL.
#[pyfunction]
#[pyo3(signature = (chunk, plan, source=None, first_seq=0))]
pub fn snapshot_rows<'py>(
    py: Python<'py>,
    chunk: &Bound<'py, PyBytes>,
    plan: &Bound<'py, SnapshotPlan>,
    source: Option<(Vec<u8>, Vec<u8>)>,
    first_seq: u64,
) -> PyResult<Bound<'py, PyList>> {
    let data = chunk.as_bytes();
    let plan = &plan.get().plan;
    let rows = py.detach(|| {
        let source = source.as_ref().map(|(prefix, suffix)| Source {
            prefix,
            suffix,
            first_seq,
        });
        convert_chunk(data, plan, source.as_ref())
    });
    let out = PyList::empty(py);
    for row in rows {
        match row {
            Row::Event { key, value } => {
                let pair = PyTuple::new(py, [PyBytes::new(py, &key), PyBytes::new(py, &value)])?;
                out.append(pair)?;
            }
            Row::Fallback(range) => out.append(PyBytes::new(py, &data[range]))?,
        }
    }
    Ok(out)
}

/// `cdc.log.records.Record` and `Position`, and the defaults of Record's fields after
/// `position`, looked up once.
pub(super) struct Types {
    pub(super) record: NamedTupleType,
    pub(super) position: NamedTupleType,
    pub(super) defaults: Vec<Py<PyAny>>,
    /// Record's field after `position` is `tombstone` (`dml_record` sets it).
    pub(super) tombstone_next: bool,
}

static TYPES: PyOnceLock<Types> = PyOnceLock::new();

pub(super) fn types(py: Python<'_>) -> PyResult<&Types> {
    TYPES.get_or_try_init(py, || {
        let records = py.import(pyo3::intern!(py, "cdc.log.records"))?;
        let record = records.getattr("Record")?;
        let fields: Vec<String> = record.getattr("_fields")?.extract()?;
        let defaults = record.getattr("_field_defaults")?;
        if fields.len() < 4 || fields[..4] != ["topic", "key", "value", "position"] {
            return Err(PyTypeError::new_err(
                "Record's fields must start with topic, key, value, position",
            ));
        }
        let defaults = fields[4..]
            .iter()
            .map(|name| defaults.get_item(name).map(Bound::unbind))
            .collect::<PyResult<Vec<_>>>()?;
        Ok(Types {
            record: NamedTupleType::new(record.cast_into::<PyType>()?)?,
            position: NamedTupleType::new(records.getattr("Position")?.cast_into::<PyType>()?)?,
            tombstone_next: fields.get(4).is_some_and(|f| f == "tombstone"),
            defaults,
        })
    })
}

/// As `snapshot_rows` with a source block, but each converted row comes as its
/// `Record(topic, key, value, Position(lsn, seq))` (the other fields their defaults):
/// returns `(records, fallbacks)` where `records` holds None at the index of each row
/// Python must convert and `fallbacks` lists those as `(index, raw line)`.
#[pyfunction]
#[pyo3(signature = (chunk, plan, topic, lsn, source, first_seq))]
pub fn snapshot_records<'py>(
    py: Python<'py>,
    chunk: &Bound<'py, PyBytes>,
    plan: &Bound<'py, SnapshotPlan>,
    topic: &Bound<'py, PyString>,
    lsn: u64,
    source: (Vec<u8>, Vec<u8>),
    first_seq: u64,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>)> {
    let types = types(py)?;
    let data = chunk.as_bytes();
    let plan = &plan.get().plan;
    let rows = py.detach(|| {
        let source = Source {
            prefix: &source.0,
            suffix: &source.1,
            first_seq,
        };
        convert_chunk(data, plan, Some(&source))
    });
    let lsn = int(py, lsn);
    let untracked = !is_tracked(topic) && types.defaults.iter().all(|d| !is_tracked(d.bind(py)));
    let records = PyList::empty(py);
    let fallbacks = PyList::empty(py);
    for (index, row) in rows.into_iter().enumerate() {
        let seq = first_seq.saturating_add(index as u64);
        match row {
            Row::Event { key, value } => {
                let position = types
                    .position
                    .make(PyTuple::new(py, [lsn.clone(), int(py, seq)])?, true)?;
                let mut items = vec![
                    topic.clone().into_any(),
                    PyBytes::new(py, &key).into_any(),
                    PyBytes::new(py, &value).into_any(),
                    position,
                ];
                items.extend(types.defaults.iter().map(|d| d.bind(py).clone()));
                records.append(types.record.make(PyTuple::new(py, items)?, untracked)?)?;
            }
            Row::Fallback(range) => {
                records.append(py.None())?;
                fallbacks.append((index, PyBytes::new(py, &data[range])))?;
            }
        }
    }
    Ok((records, fallbacks))
}

pub(super) fn int(py: Python<'_>, value: u64) -> Bound<'_, PyAny> {
    value
        .into_pyobject(py)
        .map_or_else(|e| match e {}, Bound::into_any)
}
