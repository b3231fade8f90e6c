//! `redis_rows`: a batch of sink events → the Redis sink's batch script arguments, in one
//! call, from the events' raw JSON (the Python side is `connectors/redis/plain.py`, whose
//! Python loop stays the reference).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyInt, PyList, PyString, PyTuple};

use crate::redis_args::{column_text, plain_event, push_encoded_key, PlainEvent};

/// `SinkEvent`'s and `Message`'s fields by position
/// (`tests/unit/connectors/test_redis_native_rows.py` checks them).
const EVENT_MESSAGE: usize = 0;
const EVENT_VERSION: usize = 2;
const MESSAGE_TOPIC: usize = 0;
const MESSAGE_VALUE: usize = 5;

/// Where a key template's key placeholder stands.
enum Field {
    /// `{key}`: the whole key.
    Whole,
    /// `{key.<column>}`.
    Column(String),
}

/// One table's keys, as `connectors.redis.keys.key_parts` gives them.
struct TableSpec {
    topic: String,
    schema: String,
    table: String,
    pieces: Vec<(String, Field)>,
    tail: String,
    marker: usize, // its number in the call (from 1)
}

impl TableSpec {
    fn key(&self, event: &PlainEvent) -> String {
        let mut key = String::with_capacity(64);
        for (literal, field) in &self.pieces {
            key.push_str(literal);
            match field {
                Field::Whole => push_encoded_key(&mut key, &event.key),
                Field::Column(name) => key.push_str(column_text(&event.key, name)),
            }
        }
        key.push_str(&self.tail);
        key
    }
}

/// What a call answers: `(rows, missing)`.
type Answer<'py> = (Option<Bound<'py, PyTuple>>, Option<(String, String, String)>);

/// The rows of `events` (a list of `SinkEvent`) as `ScriptBatch` would hold them after
/// `PlainRows.rows` added them: `((markers, keys, args, cuts), None)`, calls cut after
/// `chunk_rows` rows or about `chunk_bytes` of values as `ScriptBatch.row` cuts them.
///
/// `tables` maps `(topic, schema, table)` to `(pieces, tail, marker)` (the key
/// template's `(literal, "key" | "key.<column>")` pieces and trailing text, and the
/// table's truncate marker key) or to None (a view reads the table). A table not in it
/// answers `(None, (topic, schema, table))`: add it and call again. `(None, None)`: the
/// batch is not plain (or not one this renders), Python decides.
#[pyfunction]
#[pyo3(signature = (events, tables, version_prefix, max_value_bytes, chunk_rows, chunk_bytes))]
pub fn redis_rows<'py>(
    py: Python<'py>,
    events: &Bound<'py, PyList>,
    tables: &Bound<'py, PyDict>,
    version_prefix: &str,
    max_value_bytes: usize,
    chunk_rows: usize,
    chunk_bytes: usize,
) -> PyResult<Answer<'py>> {
    let mut specs: Vec<TableSpec> = Vec::new();
    let mut markers: Vec<String> = Vec::new();
    let mut keys: Vec<Bound<'py, PyAny>> = Vec::with_capacity(events.len() * 2);
    let mut args: Vec<Bound<'py, PyAny>> = Vec::with_capacity(events.len() * 4);
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    let (upsert, delete) = (PyString::new(py, "j"), PyString::new(py, "d"));
    let mut marker_numbers: Vec<Bound<'py, PyInt>> = Vec::new();
    let (mut call_rows, mut call_bytes) = (0usize, 0usize);
    let mut last = 0usize; // the spec of the previous event: a batch is mostly one table
    for item in events.iter() {
        let Some((topic, raw, version)) = fields(&item)? else {
            return Ok((None, None));
        };
        let Some(event) = plain_event(raw.as_bytes()) else {
            return Ok((None, None));
        };
        let topic = topic.to_str()?;
        let same = |s: &TableSpec| {
            s.topic == topic && s.schema == event.schema && s.table == event.table
        };
        let found = if specs.get(last).is_some_and(same) {
            Some(last)
        } else {
            specs.iter().position(same)
        };
        let index = match found {
            Some(index) => index,
            None => {
                let names = (topic, event.schema.as_str(), event.table.as_str());
                let Some(spec) = tables.get_item(names)? else {
                    let missing = (topic.to_owned(), event.schema.clone(), event.table.clone());
                    return Ok((None, Some(missing)));
                };
                let Some(spec) = table_spec(&spec, &event, topic, &mut markers)? else {
                    return Ok((None, None)); // a view reads the table, or a bad spec
                };
                while marker_numbers.len() < markers.len() {
                    marker_numbers.push(PyInt::new(py, marker_numbers.len() + 1));
                }
                specs.push(spec);
                specs.len() - 1
            }
        };
        last = index;
        let spec = &specs[index];
        let size = event.value.len();
        if size > max_value_bytes {
            return Ok((None, None));
        }
        if call_rows > 0 && (call_rows == chunk_rows || call_bytes + size > chunk_bytes) {
            cuts.push((keys.len(), args.len()));
            call_rows = 0;
            call_bytes = 0;
        }
        call_rows += 1;
        call_bytes += size;
        let key = spec.key(&event);
        let version_key = format!("{version_prefix}{key}");
        keys.push(PyString::new(py, &key).into_any());
        keys.push(PyString::new(py, &version_key).into_any());
        args.push(if event.upsert { &upsert } else { &delete }.clone().into_any());
        args.push(marker_numbers[spec.marker - 1].clone().into_any());
        args.push(PyString::new(py, &format!("{version:020}")).into_any());
        if event.upsert {
            args.push(PyBytes::new(py, &event.value).into_any());
        }
    }
    let rows = (
        PyList::new(py, markers)?,
        PyList::new(py, keys)?,
        PyList::new(py, args)?,
        PyList::new(py, cuts)?,
    )
        .into_pyobject(py)?;
    Ok((Some(rows), None))
}

/// A `SinkEvent`'s topic, raw value and version.
type EventFields<'py> = (Bound<'py, PyString>, Bound<'py, PyBytes>, u64);

/// The topic, raw value and version of a `SinkEvent`; None if it is not shaped as one.
fn fields<'py>(
    item: &Bound<'py, PyAny>,
) -> PyResult<Option<EventFields<'py>>> {
    let Ok(event) = item.cast::<PyTuple>() else {
        return Ok(None);
    };
    if event.len() <= EVENT_VERSION {
        return Ok(None);
    }
    let Ok(version) = event.get_item(EVENT_VERSION)?.extract::<u64>() else {
        return Ok(None);
    };
    let message = event.get_item(EVENT_MESSAGE)?;
    let Ok(message) = message.cast::<PyTuple>() else {
        return Ok(None);
    };
    if message.len() <= MESSAGE_VALUE {
        return Ok(None);
    }
    let Ok(topic) = message.get_item(MESSAGE_TOPIC)?.cast_into::<PyString>() else {
        return Ok(None);
    };
    let Ok(value) = message.get_item(MESSAGE_VALUE)?.cast_into::<PyBytes>() else {
        return Ok(None);
    };
    Ok(Some((topic, value, version)))
}

/// The spec of a `tables` entry (None: a view reads the table, or the entry is not
/// `(pieces, tail, marker)`), numbering its marker in `markers`.
fn table_spec(
    entry: &Bound<'_, PyAny>,
    event: &PlainEvent,
    topic: &str,
    markers: &mut Vec<String>,
) -> PyResult<Option<TableSpec>> {
    if entry.is_none() {
        return Ok(None);
    }
    let Ok((raw_pieces, tail, marker)) = entry.extract::<(Vec<(String, String)>, String, String)>()
    else {
        return Ok(None);
    };
    let mut pieces = Vec::with_capacity(raw_pieces.len());
    for (literal, field) in raw_pieces {
        let field = match field.strip_prefix("key.") {
            Some(column) => Field::Column(column.to_owned()),
            None if field == "key" => Field::Whole,
            None => return Ok(None),
        };
        pieces.push((literal, field));
    }
    let number = match markers.iter().position(|m| *m == marker) {
        Some(at) => at + 1,
        None => {
            markers.push(marker);
            markers.len()
        }
    };
    Ok(Some(TableSpec {
        topic: topic.to_owned(),
        schema: event.schema.clone(),
        table: event.table.clone(),
        pieces,
        tail,
        marker: number,
    }))
}
