//! `encode_batch`: one partition's records → the bytes to append and the index entries.

use std::borrow::Cow;

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyList, PyTuple, PyType};

use super::bytes::bytes_of;
use super::ints::number;
use crate::record::{encode_line, Number, RecordFields};

/// `Record`'s fields by position (`tests/unit/log/test_native_codec.py` checks `Record._fields`).
const TOPIC: usize = 0;
const KEY: usize = 1;
const VALUE: usize = 2;
const POSITION: usize = 3;
const TOMBSTONE: usize = 4;
const TIMESTAMP_MS: usize = 5;
const PARTITION: usize = 6;

/// Encode `records` (a sequence of `cdc.log.Record`) as consecutive lines from
/// `first_offset`, the first one at byte `size` of the segment. A sparse-index entry
/// `(offset, byte position)` is due for a line that starts `index_interval` or more bytes
/// after `last_indexed`. Returns `(lines, index_entries, last_indexed)`, exactly as
/// `encode_batch_reference` in `tests/reference/log_codec.py`.
#[pyfunction]
#[pyo3(signature = (records, first_offset, now_ms, size, last_indexed, index_interval))]
pub fn encode_batch<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    first_offset: u64,
    now_ms: &Bound<'py, PyAny>,
    size: i64,
    last_indexed: i64,
    index_interval: i64,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyList>, i64)> {
    let at = Start {
        first_offset,
        size: i128::from(size),
        last_indexed,
        index_interval,
    };
    let (lines, entries, last_indexed) = encode_records(py, records, None, now_ms, &at)?
        .ok_or_else(|| PyTypeError::new_err("unreachable: no topic to check"))?;
    Ok((lines, PyList::new(py, entries)?, last_indexed))
}

/// `encode_batch` of a batch that `FileProducer.append` would put in one partition
/// whole: every record of `topic` (a topic of one partition), with no `partition` of its
/// own, its index entries packed as the index file holds them (big-endian u64 offset and
/// byte position each). None, and nothing encoded, when a record is not such a `Record`
/// (the producer then groups the batch), exactly as
/// `encode_topic_batch_reference` in `tests/reference/log_codec.py`.
/// Grouping and encoding in one pass, the common batch is read once. (A batch found not to
/// be one part way through has had its first records encoded for nothing.)
#[pyfunction]
#[pyo3(signature = (records, topic, first_offset, now_ms, size, last_indexed, index_interval))]
#[allow(clippy::too_many_arguments)] // encode_batch's, and the topic
pub fn encode_topic_batch<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyList>,
    topic: &Bound<'py, PyAny>,
    first_offset: u64,
    now_ms: &Bound<'py, PyAny>,
    size: u64,
    last_indexed: i64,
    index_interval: i64,
) -> PyResult<Option<PackedBatch<'py>>> {
    let at = Start {
        first_offset,
        size: i128::from(size),
        last_indexed,
        index_interval,
    };
    let Some((lines, entries, last_indexed)) =
        encode_records(py, records.as_any(), Some(topic), now_ms, &at)?
    else {
        return Ok(None);
    };
    let mut index = Vec::with_capacity(entries.len() * 16);
    for (offset, position) in entries {
        // a position is at least `size` (>= 0), and grows from there
        let position = u64::try_from(position)
            .map_err(|_| PyOverflowError::new_err("negative byte position"))?;
        index.extend_from_slice(&offset.to_be_bytes());
        index.extend_from_slice(&position.to_be_bytes());
    }
    Ok(Some((lines, PyBytes::new(py, &index), last_indexed)))
}

/// `(lines, packed index entries, last_indexed)`: `encode_topic_batch`.
type PackedBatch<'py> = (Bound<'py, PyBytes>, Bound<'py, PyBytes>, i64);

/// `(lines, index_entries, last_indexed)`.
type Encoded<'py> = (Bound<'py, PyBytes>, Vec<(u64, i64)>, i64);

/// Where a batch starts: see `encode_batch`.
struct Start {
    first_offset: u64,
    size: i128,
    last_indexed: i64,
    index_interval: i64,
}

/// `encode_batch`; with a `topic`, None as soon as a record is not one of it without a
/// partition of its own (`encode_topic_batch`).
fn encode_records<'py>(
    py: Python<'py>,
    records: &Bound<'py, PyAny>,
    topic: Option<&Bound<'py, PyAny>>,
    now_ms: &Bound<'py, PyAny>,
    at: &Start,
) -> PyResult<Option<Encoded<'py>>> {
    let mut out: Vec<u8> = Vec::with_capacity(records.len().unwrap_or(0) * 256);
    let mut entries = Vec::new();
    let mut last_indexed = at.last_indexed;
    let mut offset = at.first_offset;
    let mut position = at.size;
    let mut tuple_type = None;
    let mut known = Known {
        position_type: None,
        now_ms: number(now_ms),
    };
    for (index, item) in records.try_iter()?.enumerate() {
        let item = item?;
        let not_a_record =
            || PyTypeError::new_err(format!("record {index} is not a cdc.log.Record"));
        let record = as_tuple(&item, &mut tuple_type);
        let length = record.map_or(0, |r| r.len());
        if let Some(topic) = topic {
            // not one of the topic's records as the producer groups them: it will group them
            let Some(record) = record.filter(|_| length > PARTITION) else {
                return Ok(None);
            };
            if !record.get_borrowed_item(PARTITION)?.is_none() {
                return Ok(None);
            }
            let name = record.get_borrowed_item(TOPIC)?;
            if !name.is(topic) && !name.eq(topic)? {
                return Ok(None);
            }
        }
        let record = record.ok_or_else(not_a_record)?;
        if length <= TIMESTAMP_MS {
            return Err(not_a_record());
        }
        if position - i128::from(last_indexed) >= i128::from(at.index_interval) {
            last_indexed = i64::try_from(position).map_err(|_| {
                PyOverflowError::new_err(format!(
                    "record {index}: byte position {position} overflows"
                ))
            })?;
            entries.push((offset, last_indexed));
        }
        let key = record.get_borrowed_item(KEY)?;
        let key = bytes_fast(&key, &|| format!("record {index}: key"))?;
        let value = record.get_borrowed_item(VALUE)?;
        let value = bytes_fast(&value, &|| format!("record {index}: value"))?;
        let line = fields(record, index, &mut known, offset, &key, &value)?;
        let before = out.len();
        encode_line(&mut out, &line);
        position += (out.len() - before) as i128;
        offset = offset.checked_add(1).ok_or_else(|| {
            PyOverflowError::new_err(format!("record {index}: offset {offset} + 1 overflows"))
        })?;
    }
    Ok(Some((PyBytes::new(py, &out), entries, last_indexed)))
}

/// `item` as a tuple (a `Record` is a tuple subclass), None when it is not one. `known` is
/// a type already found to be a tuple subclass (None at first): the batch's records all
/// share one, so the subclass check (a C-API call under abi3) runs once, not per record.
#[allow(unsafe_code)]
pub(super) fn as_tuple<'a, 'py>(
    item: &'a Bound<'py, PyAny>,
    known: &mut Option<Bound<'py, PyType>>,
) -> Option<&'a Bound<'py, PyTuple>> {
    if known
        .as_ref()
        .is_some_and(|t| t.as_type_ptr() == item.get_type_ptr())
    {
        // SAFETY: `item`'s type is `known`, which passed `cast::<PyTuple>` below (it is
        // `tuple` or a subclass of it) for an earlier item. `known` holds a strong
        // reference, so that type object is alive and no other type can have its address.
        // A class's tuple base cannot be removed later (CPython refuses a `__bases__`
        // assignment that changes the instance layout), so `item` is a tuple exactly as
        // the checked cast would find.
        return Some(unsafe { item.cast_unchecked::<PyTuple>() });
    }
    let checked = item.cast::<PyTuple>().ok()?;
    *known = Some(item.get_type());
    Some(checked)
}

/// `bytes_of`, with `bytes` itself (what records hold) found by one pointer comparison
/// instead of a subclass check.
fn bytes_fast<'a>(obj: &'a Bound<'_, PyAny>, what: &dyn Fn() -> String) -> PyResult<Cow<'a, [u8]>> {
    match obj.cast_exact::<PyBytes>() {
        Ok(bytes) => Ok(Cow::Borrowed(bytes.as_bytes())),
        Err(_) => bytes_of(obj, what),
    }
}

/// What `fields` keeps from one record to the next: the types already found to be tuple
/// subclasses (see `as_tuple`) and `now_ms` converted (once, not per record without a
/// timestamp).
struct Known<'py> {
    position_type: Option<Bound<'py, PyType>>,
    now_ms: PyResult<Number>,
}

/// The fields of one record, converted; errors name the record's index and field.
fn fields<'a, 'py>(
    record: &Bound<'py, PyTuple>,
    index: usize,
    known: &mut Known<'py>,
    offset: u64,
    key: &'a [u8],
    value: &'a [u8],
) -> PyResult<RecordFields<'a>> {
    let py = record.py();
    let field = |name: &str, e: PyErr| {
        let err = PyTypeError::new_err(format!("record {index}: bad {name}: {e}"));
        err.set_cause(py, Some(e));
        err
    };
    let position = record.get_borrowed_item(POSITION)?;
    let Some(position) = as_tuple(&position, &mut known.position_type) else {
        let cause = match position.cast::<PyTuple>() {
            Err(e) => e.into(),
            Ok(_) => PyTypeError::new_err("not a tuple"), // as_tuple found it was not
        };
        return Err(field("position", cause));
    };
    let timestamp = record.get_borrowed_item(TIMESTAMP_MS)?;
    let timestamp_ms = if !timestamp.is_none() && timestamp.is_truthy()? {
        number(&timestamp)
    } else {
        match &known.now_ms {
            Ok(now) => Ok(now.clone()),
            Err(e) => Err(e.clone_ref(py)),
        }
    };
    let tombstone = record.get_borrowed_item(TOMBSTONE)?;
    let tombstone = if tombstone.is(&*PyBool::new(py, false)) {
        false
    } else {
        tombstone.is(&*PyBool::new(py, true)) || tombstone.is_truthy()?
    };
    Ok(RecordFields {
        offset,
        timestamp_ms: timestamp_ms.map_err(|e| field("timestamp_ms", e))?,
        commit_lsn: number(&*position.get_borrowed_item(0)?)
            .map_err(|e| field("position.commit_lsn", e))?,
        seq: number(&*position.get_borrowed_item(1)?).map_err(|e| field("position.seq", e))?,
        tombstone,
        key,
        value,
    })
}
