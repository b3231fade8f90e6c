//! `encode_batch`: one partition's records → the bytes to append and the index entries.

use pyo3::exceptions::{PyOverflowError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use super::bytes::bytes_of;
use super::ints::number;
use crate::record::{encode_line, RecordFields};

/// `Record`'s fields by position (`tests/unit/log/test_native_codec.py` checks `Record._fields`).
const KEY: usize = 1;
const VALUE: usize = 2;
const POSITION: usize = 3;
const TOMBSTONE: usize = 4;
const TIMESTAMP_MS: usize = 5;

/// Encode `records` (a sequence of `cdc.log.Record`) as consecutive lines from
/// `first_offset`, the first one at byte `size` of the segment. A sparse-index entry
/// `(offset, byte position)` is due for a line that starts `index_interval` or more bytes
/// after `last_indexed`. Returns `(lines, index_entries, last_indexed)`, exactly as
/// `cdc.log.file.codec.encode_batch_reference`.
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
    let mut out: Vec<u8> = Vec::with_capacity(records.len().unwrap_or(0) * 256);
    let entries = PyList::empty(py);
    let mut last_indexed = last_indexed;
    let mut offset = first_offset;
    let mut position = i128::from(size);
    for (index, item) in records.try_iter()?.enumerate() {
        let item = item?;
        let record = item
            .cast::<PyTuple>()
            .ok()
            .filter(|t| t.len() > TIMESTAMP_MS)
            .ok_or_else(|| {
                PyTypeError::new_err(format!("record {index} is not a cdc.log.Record"))
            })?;
        if position - i128::from(last_indexed) >= i128::from(index_interval) {
            last_indexed = i64::try_from(position).map_err(|_| {
                PyOverflowError::new_err(format!(
                    "record {index}: byte position {position} overflows"
                ))
            })?;
            entries.append((offset, last_indexed))?;
        }
        let key = record.get_borrowed_item(KEY)?;
        let key = bytes_of(&key, &|| format!("record {index}: key"))?;
        let value = record.get_borrowed_item(VALUE)?;
        let value = bytes_of(&value, &|| format!("record {index}: value"))?;
        let line = fields(record, index, now_ms, offset, &key, &value)?;
        let before = out.len();
        encode_line(&mut out, &line);
        position += (out.len() - before) as i128;
        offset = offset.checked_add(1).ok_or_else(|| {
            PyOverflowError::new_err(format!("record {index}: offset {offset} + 1 overflows"))
        })?;
    }
    Ok((PyBytes::new(py, &out), entries, last_indexed))
}

/// The fields of one record, converted; errors name the record's index and field.
fn fields<'a>(
    record: &Bound<'_, PyTuple>,
    index: usize,
    now_ms: &Bound<'_, PyAny>,
    offset: u64,
    key: &'a [u8],
    value: &'a [u8],
) -> PyResult<RecordFields<'a>> {
    let field = |name: &str, e: PyErr| {
        let err = PyTypeError::new_err(format!("record {index}: bad {name}: {e}"));
        err.set_cause(record.py(), Some(e));
        err
    };
    let position = record.get_borrowed_item(POSITION)?;
    let position = position
        .cast::<PyTuple>()
        .map_err(|e| field("position", e.into()))?;
    let timestamp = record.get_borrowed_item(TIMESTAMP_MS)?;
    let timestamp_ms = if timestamp.is_none() {
        number(now_ms)
    } else if timestamp.is_truthy()? {
        number(&timestamp)
    } else {
        number(now_ms)
    };
    Ok(RecordFields {
        offset,
        timestamp_ms: timestamp_ms.map_err(|e| field("timestamp_ms", e))?,
        commit_lsn: number(&*position.get_borrowed_item(0)?)
            .map_err(|e| field("position.commit_lsn", e))?,
        seq: number(&*position.get_borrowed_item(1)?).map_err(|e| field("position.seq", e))?,
        tombstone: record.get_borrowed_item(TOMBSTONE)?.is_truthy()?,
        key,
        value,
    })
}
