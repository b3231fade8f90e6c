//! `snapshot_rows`: a chunk of `COPY … TO STDOUT` text rows → their events, in one call
//! (see `crate::snapshot`; the Python side is `cdc/capture/snapshot/native.py`).

use std::sync::{Mutex, MutexGuard};

use pyo3::exceptions::{PyOverflowError, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::{MutexExt, PyOnceLock};
use pyo3::types::{PyBytes, PyList, PyString, PyTuple, PyType};

use super::ints::number;
use super::named_tuple::NamedTupleType;
use super::untrack::is_tracked;
use crate::convert::Plan;
use crate::snapshot::batch::{Batch, Encoded, Group};
use crate::snapshot::{convert_chunk, Row, Source};

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
    /// Record's field after `position` is `tombstone` (`feed_batch`'s records set it).
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

pub(super) fn int(py: Python<'_>, value: u64) -> Bound<'_, PyAny> {
    value
        .into_pyobject(py)
        .map_or_else(|e| match e {}, Bound::into_any)
}

/// A chunk's rows converted for the log with no Python object per row
/// (`crate::snapshot::batch`): filled in by Python where it converts a row, then grouped
/// by partition and encoded as each partition's lines, byte for byte what `Record`s of
/// the same events through the producer's grouping and `encode_batch` become.
#[pyclass(frozen, module = "distributary_native")]
pub struct SnapshotBatch {
    state: Mutex<BatchState>,
    /// The topic the rows go to.
    #[pyo3(get)]
    topic: Py<PyString>,
    /// The commit position of every row (`Position(lsn, seq)`).
    #[pyo3(get)]
    lsn: u64,
    /// The sequence number of the first row.
    #[pyo3(get)]
    first_seq: u64,
}

struct BatchState {
    batch: Batch,
    groups: Vec<Group>,
    /// Counts the groupings: a part encodes only from the grouping that made it.
    grouping: u64,
    encoded: Encoded,
}

impl SnapshotBatch {
    /// The state, from a thread detached from Python.
    fn state(&self) -> PyResult<MutexGuard<'_, BatchState>> {
        self.state.lock().map_err(|_| poisoned())
    }

    /// The state, from a thread attached to Python: detaches while it waits, so a thread
    /// holding the lock can attach again (no deadlock on the GIL).
    fn state_attached(&self, py: Python<'_>) -> PyResult<MutexGuard<'_, BatchState>> {
        self.state.lock_py_attached(py).map_err(|_| poisoned())
    }
}

fn poisoned() -> PyErr {
    PyRuntimeError::new_err("a snapshot batch failed earlier")
}

/// The rows of `chunk` (whole COPY text lines) of a table with `plan`, for `topic`,
/// numbered from `first_seq` at commit position `lsn`, each event ending with `source`
/// `(prefix, suffix)` around its sequence number: returns the batch and, for each row
/// Python must convert (then `fill`), `(index, raw line)`. The work runs without the GIL.
#[pyfunction]
#[pyo3(signature = (chunk, plan, topic, lsn, source, first_seq))]
pub fn snapshot_batch<'py>(
    py: Python<'py>,
    chunk: &Bound<'py, PyBytes>,
    plan: &Bound<'py, SnapshotPlan>,
    topic: &Bound<'py, PyString>,
    lsn: u64,
    source: (Vec<u8>, Vec<u8>),
    first_seq: u64,
) -> PyResult<(SnapshotBatch, Bound<'py, PyList>)> {
    let data = chunk.as_bytes();
    let plan = &plan.get().plan;
    let (batch, lines) = py.detach(|| {
        let source = Source {
            prefix: &source.0,
            suffix: &source.1,
            first_seq,
        };
        Batch::convert(data, plan, &source, lsn)
    });
    let fallbacks = PyList::empty(py);
    for (index, range) in lines {
        fallbacks.append((index, PyBytes::new(py, &data[range])))?;
    }
    let state = BatchState {
        batch,
        groups: Vec::new(),
        grouping: 0,
        encoded: Encoded::default(),
    };
    Ok((
        SnapshotBatch {
            state: Mutex::new(state),
            topic: topic.clone().unbind(),
            lsn,
            first_seq,
        },
        fallbacks,
    ))
}

#[pymethods]
impl SnapshotBatch {
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        Ok(self.state_attached(py)?.batch.len())
    }

    /// Convert one more chunk of the same table into this batch, its rows numbered on
    /// from the batch's last (`first_seq` must be the next number): returns
    /// `snapshot_batch`'s fallbacks, indexes counting every row of the batch.
    #[pyo3(signature = (chunk, plan, source, first_seq))]
    fn extend<'py>(
        &self,
        py: Python<'py>,
        chunk: &Bound<'py, PyBytes>,
        plan: &Bound<'py, SnapshotPlan>,
        source: (Vec<u8>, Vec<u8>),
        first_seq: u64,
    ) -> PyResult<Bound<'py, PyList>> {
        let data = chunk.as_bytes();
        let plan = &plan.get().plan;
        let lines = py.detach(|| {
            let source = Source {
                prefix: &source.0,
                suffix: &source.1,
                first_seq,
            };
            let mut state = self.state()?;
            state.groups.clear();
            state.grouping += 1;
            state
                .batch
                .extend(data, plan, &source)
                .map_err(PyValueError::new_err)
        })?;
        let fallbacks = PyList::empty(py);
        for (index, range) in lines {
            fallbacks.append((index, PyBytes::new(py, &data[range])))?;
        }
        Ok(fallbacks)
    }

    /// The key and event of row `index`, which Python converted.
    fn fill(&self, py: Python<'_>, index: usize, key: &[u8], value: &[u8]) -> PyResult<()> {
        self.state_attached(py)?
            .batch
            .fill(index, key, value)
            .map_err(PyValueError::new_err)
    }

    /// Each row's `Record(topic, key, value, Position(lsn, seq))` (the other fields their
    /// defaults), for a log that takes records (Kafka's).
    fn records<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyList>> {
        let py = slf.py();
        let this = slf.get();
        let types = types(py)?;
        let topic = this.topic.bind(py);
        let untracked =
            !is_tracked(topic) && types.defaults.iter().all(|d| !is_tracked(d.bind(py)));
        let lsn = int(py, this.lsn);
        let state = this.state_attached(py)?;
        let records = PyList::empty(py);
        for index in 0..state.batch.len() {
            let (key, value) = state.batch.row(index).ok_or_else(|| {
                PyValueError::new_err(format!("row {index} is still to be converted"))
            })?;
            let position = types.position.make(
                PyTuple::new(py, [lsn.clone(), int(py, state.batch.seq(index))])?,
                true,
            )?;
            let mut items = vec![
                topic.clone().into_any(),
                PyBytes::new(py, key).into_any(),
                PyBytes::new(py, value).into_any(),
                position,
            ];
            items.extend(types.defaults.iter().map(|d| d.bind(py).clone()));
            records.append(types.record.make(PyTuple::new(py, items)?, untracked)?)?;
        }
        Ok(records)
    }

    /// The rows grouped for a topic of `partitions` partitions, one part per partition in
    /// order of first appearance (as the file producer groups records).
    fn parts(slf: &Bound<'_, Self>, partitions: u32) -> PyResult<Vec<SnapshotPart>> {
        let this = slf.get();
        let groups = slf.py().detach(|| {
            let mut state = this.state()?;
            let groups = state
                .batch
                .group(partitions)
                .map_err(PyValueError::new_err)?;
            let out: Vec<(u32, usize, u64)> = groups
                .iter()
                .map(|g| {
                    let last = g.rows.last().map_or(0, |&i| state.batch.seq(i));
                    (g.partition, g.rows.len(), last)
                })
                .collect();
            state.groups = groups;
            state.grouping += 1;
            Ok::<_, PyErr>((state.grouping, out))
        })?;
        let (grouping, groups) = groups;
        Ok(groups
            .into_iter()
            .enumerate()
            .map(|(group, (partition, count, last_seq))| SnapshotPart {
                batch: slf.clone().unbind(),
                grouping,
                group,
                partition,
                count,
                last_seq,
            })
            .collect())
    }
}

/// One partition's rows of a `SnapshotBatch` (`cdc.log.file.encoded.EncodedPart`), valid
/// until the batch is grouped again or extended (then `encode` raises ValueError).
#[pyclass(frozen, module = "distributary_native")]
pub struct SnapshotPart {
    batch: Py<SnapshotBatch>,
    grouping: u64,
    group: usize,
    #[pyo3(get)]
    partition: u32,
    /// How many rows (lines).
    #[pyo3(get)]
    count: usize,
    last_seq: u64,
}

#[pymethods]
impl SnapshotPart {
    /// `Position(lsn, seq)` of the part's last row.
    #[getter]
    fn last_position<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let lsn = self.batch.get().lsn;
        types(py)?.position.make(
            PyTuple::new(py, [int(py, lsn), int(py, self.last_seq)])?,
            true,
        )
    }

    /// The part's lines, the first at byte `size` of the segment: `(lines, index entries,
    /// last indexed)`, as `encode_batch` of the same arguments.
    #[pyo3(signature = (first_offset, now_ms, size, last_indexed, index_interval))]
    fn encode<'py>(
        &self,
        py: Python<'py>,
        first_offset: u64,
        now_ms: Bound<'py, PyAny>,
        size: i64,
        last_indexed: i64,
        index_interval: i64,
    ) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyList>, i64)> {
        let now_ms = number(&now_ms)?;
        let mut state = self.batch.get().state_attached(py)?;
        let state = &mut *state;
        let rows = &state
            .groups
            .get(self.group)
            .filter(|_| state.grouping == self.grouping)
            .ok_or_else(|| PyValueError::new_err("the batch was grouped or extended since"))?
            .rows;
        let (batch, encoded) = (&state.batch, &mut state.encoded);
        py.detach(|| {
            batch.encode(
                rows,
                first_offset,
                &now_ms,
                size,
                last_indexed,
                index_interval,
                encoded,
            )
        })
        .map_err(PyOverflowError::new_err)?;
        let entries = PyList::empty(py);
        for entry in &encoded.entries {
            entries.append(*entry)?;
        }
        Ok((
            PyBytes::new(py, &encoded.data),
            entries,
            encoded.last_indexed,
        ))
    }
}

/// Where the first `count` lines of `data` end (just after the newline of the last), or
/// `len(data)` when it holds fewer: the byte where a snapshot batch is cut in a chunk
/// (`after_lines_reference` in `tests/reference/copy_lines.py` is the reference).
#[pyfunction]
pub fn after_lines(data: &[u8], count: usize) -> usize {
    if count == 0 {
        return 0;
    }
    memchr::memchr_iter(b'\n', data)
        .nth(count - 1)
        .map_or(data.len(), |at| at + 1)
}
