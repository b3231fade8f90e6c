//! `decode_lines`: a chunk of a segment → its records, checked, in one call.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBool, PyBytes, PyList, PyTuple, PyType};

use super::ints::LineInt;
use super::named_tuple::{Builder, NamedTupleType};
use super::untrack::is_tracked;
use crate::record::decode_line;

/// `cdc.log.records.Message` and `Position`, looked up once.
struct Types {
    message: NamedTupleType,
    position: NamedTupleType,
}

static TYPES: PyOnceLock<Types> = PyOnceLock::new();

fn types(py: Python<'_>) -> PyResult<&Types> {
    TYPES.get_or_try_init(py, || {
        let records = py.import(pyo3::intern!(py, "cdc.log.records"))?;
        Ok(Types {
            message: NamedTupleType::new(records.getattr("Message")?.cast_into::<PyType>()?)?,
            position: NamedTupleType::new(records.getattr("Position")?.cast_into::<PyType>()?)?,
        })
    })
}

/// Decode the complete lines of `chunk` from byte `start`, as
/// `decode_lines_reference` (`tests/reference/log_codec.py`) does: at most `limit` records at or after
/// `next_offset` are kept (while `skipping`, those below it are passed over; otherwise an
/// offset that does not grow is an error). Returns
/// `(messages, end, next_offset, skipping, error)`: `end` is where the first line not
/// consumed starts; `error` is `None` or `(reason, byte position of the bad line)`, and
/// then `end` is that position and `messages` what came before it.
#[pyfunction]
#[pyo3(signature = (chunk, start, limit, topic, partition, next_offset, skipping))]
#[allow(clippy::too_many_arguments)]
pub fn decode_lines<'py>(
    py: Python<'py>,
    chunk: &Bound<'py, PyBytes>,
    start: usize,
    limit: isize,
    topic: &Bound<'py, PyAny>,
    partition: &Bound<'py, PyAny>,
    next_offset: &Bound<'py, PyAny>,
    skipping: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    let types = types(py)?;
    let data = chunk.as_bytes();
    let messages = PyList::empty(py);
    let mut next = LineInt::from_py(next_offset)?;
    let mut skipping = skipping;
    let mut at = start;
    let mut error: Option<(String, usize)> = None;
    let limit = usize::try_from(limit).unwrap_or(0);
    // the other items of a record are made here: ints, bytes, a bool, the Position
    let untracked_items = !is_tracked(topic) && !is_tracked(partition);
    let builder = Builder::new(py, 8)?;
    let positions = Builder::new(py, 2)?;
    // the lines of a batch share their timestamp and commit LSN: one int for each run
    let mut timestamp = LastInt::default();
    let mut lsn = LastInt::default();
    while messages.len() < limit {
        let Some(length) = data.get(at..).and_then(|rest| memchr::memchr(b'\n', rest)) else {
            break;
        };
        let line = match decode_line(&data[at..at + length]) {
            Ok(line) => line,
            Err(e) => {
                error = Some((e.reason().to_owned(), at));
                break;
            }
        };
        let offset = LineInt::parse(py, line.offset)?;
        if offset.at_least(&next, py)? {
            skipping = false;
            let position = positions.make(
                &types.position,
                [lsn.get(py, line.commit_lsn)?, int(py, line.seq)?],
                true,
            )?;
            let fields = [
                topic.clone(),
                partition.clone(),
                offset.to_py(py),
                timestamp.get(py, line.timestamp_ms)?,
                PyBytes::new(py, line.key).into_any(),
                PyBytes::new(py, line.value).into_any(),
                position,
                PyBool::new(py, line.tombstone).to_owned().into_any(),
            ];
            messages.append(builder.make(&types.message, fields, untracked_items)?)?;
            next = offset.successor(py)?;
        } else if !skipping {
            let reason = format!("offset {} repeats or goes backwards", offset.display()?);
            error = Some((reason, at));
            break;
        }
        at += length + 1;
    }
    let error = error
        .map(|(reason, position)| (reason, position).into_pyobject(py))
        .transpose()?;
    (messages, at, next.to_py(py), skipping, error).into_pyobject(py)
}

fn int<'py>(py: Python<'py>, digits: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    Ok(LineInt::parse(py, digits)?.to_py(py))
}

/// The int of the digits seen last, reused while the same digits come again.
#[derive(Default)]
struct LastInt<'a, 'py> {
    last: Option<(&'a [u8], Bound<'py, PyAny>)>,
}

impl<'a, 'py> LastInt<'a, 'py> {
    fn get(&mut self, py: Python<'py>, digits: &'a [u8]) -> PyResult<Bound<'py, PyAny>> {
        if let Some((seen, value)) = &self.last {
            if *seen == digits {
                return Ok(value.clone());
            }
        }
        let value = int(py, digits)?;
        self.last = Some((digits, value.clone()));
        Ok(value)
    }
}
