//! `redis_calls`: a batch of sink events → the Redis sink's batch script calls, packed for
//! the wire, in one call, from the events' raw JSON (the Python side is
//! `connectors/redis/native_rows.py`; the loop of `connectors/redis/plain.py` stays the
//! reference). `sink_event_checks`: the connector runtime's versions and JSON checks of
//! a polled batch (`connectors/runtime/events.py`).

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};
use std::io::Write;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use crate::redis_args::{column_text, json_object, push_encoded_key, PlainEvent};

use super::sink_event::{plain, Lookup, Tables, MESSAGE_POSITION, MESSAGE_VALUE};

/// `connectors.contract.version_of`: `commit_lsn << SEQ_BITS | min(seq, SEQ_MAX)`.
const SEQ_BITS: u32 = 10;
const SEQ_MAX: u64 = (1 << SEQ_BITS) - 1;
/// `connectors.redis.scripts.VERSION_DIGITS`: versions travel as 20 digits.
const VERSION_DIGITS: usize = 20;

/// Where a key template's key placeholder stands.
enum Field {
    /// `{key}`: the whole key.
    Whole,
    /// `{key.<column>}`.
    Column(String),
}

/// One table's keys, as `connectors.redis.keys.key_parts` gives them.
struct TableSpec {
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
type Answer<'py> = (
    Option<Bound<'py, PyTuple>>,
    Option<(String, String, String)>,
);

/// One script call being rendered: its rows' keys and arguments as RESP bulk strings.
#[derive(Default)]
struct Call {
    rows: usize,
    bytes: usize, // of values
    keys: usize,
    key_bytes: Vec<u8>,
    args: usize,
    arg_bytes: Vec<u8>,
    held: HashSet<String, BuildHasherDefault<KeyHasher>>, // its value and version keys: a
                                                          // call never holds one twice
}

/// FxHash (rustc's): a fast hash of the keys a call holds (no adversary to fear: a
/// collision only costs a comparison).
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(SEED);
        }
        for &byte in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(byte)).wrapping_mul(SEED);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl Call {
    fn key(&mut self, key: String) {
        push_bulk(&mut self.key_bytes, key.as_bytes());
        self.keys += 1;
        self.held.insert(key);
    }

    fn arg(&mut self, arg: &[u8]) {
        push_bulk(&mut self.arg_bytes, arg);
        self.args += 1;
    }

    /// An argument of `number`'s decimal digits, zero-padded to `width` (at most 20).
    fn number_arg(&mut self, number: u64, width: usize) {
        let mut text = [b'0'; 20]; // a u64 has at most 20 digits
        let mut at = text.len();
        let mut left = number;
        while at > 0 && (left > 0 || at == text.len()) {
            at -= 1;
            text[at] = b'0' + (left % 10) as u8;
            left /= 10;
        }
        self.arg(&text[at.min(text.len() - width.min(text.len()))..]);
    }
}

/// `$<length>\r\n<data>\r\n`: one RESP bulk string, as redis-py packs an argument.
fn push_bulk(out: &mut Vec<u8>, data: &[u8]) {
    // writing to a Vec cannot fail
    let _ = write!(out, "${}\r\n", data.len());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// The rows of `events` (a list of `SinkEvent`) as `ScriptBatch` would hold them after
/// `PlainRows.rows` added them, packed for the wire: `((markers, calls), None)` where each
/// call is `(rows, keys, key_bytes, args, arg_bytes)`: its rows' value and version keys
/// and its rows' arguments, each as RESP bulk strings (`$<length>\r\n<data>\r\n`, as
/// redis-py packs them) and counted. Calls are cut where `ScriptBatch.row` cuts them:
/// after `chunk_rows` rows, about `chunk_bytes` of values, or before a key the call holds.
///
/// `tables` maps `(topic, schema, table)` to `(pieces, tail, marker)` (the key
/// template's `(literal, "key" | "key.<column>")` pieces and trailing text, and the
/// table's truncate marker key) or to None (a view reads the table). A table not in it
/// answers `(None, (topic, schema, table))`: add it and call again. `(None, None)`: the
/// batch is not plain (or not one this renders), Python decides.
#[pyfunction]
#[pyo3(signature = (events, tables, version_prefix, max_value_bytes, chunk_rows, chunk_bytes))]
pub fn redis_calls<'py>(
    py: Python<'py>,
    events: &Bound<'py, PyList>,
    tables: &Bound<'py, PyDict>,
    version_prefix: &str,
    max_value_bytes: usize,
    chunk_rows: usize,
    chunk_bytes: usize,
) -> PyResult<Answer<'py>> {
    let mut specs: Tables<TableSpec> = Tables::new();
    let mut markers: Vec<String> = Vec::new();
    let mut done: Vec<Call> = Vec::new();
    let mut call = Call::default();
    for item in events.iter() {
        let Some((topic, event, version)) = plain(&item)? else {
            return Ok((None, None));
        };
        let spec = |entry: &Bound<'py, PyAny>| table_spec(entry, &mut markers);
        let spec = match specs.number(tables, topic.to_str()?, &event, spec)? {
            Lookup::Found(number) => specs.spec(number),
            Lookup::Missing(table) => return Ok((None, Some(table))),
            Lookup::Declined => return Ok((None, None)), // a view reads it, or a bad entry
        };
        let size = event.value.len();
        if size > max_value_bytes {
            return Ok((None, None));
        }
        let key = spec.key(&event);
        let version_key = format!("{version_prefix}{key}");
        if call.rows > 0
            && (call.rows == chunk_rows
                || call.bytes + size > chunk_bytes
                || call.held.contains(&key)
                || call.held.contains(&version_key))
        {
            done.push(std::mem::take(&mut call));
        }
        call.rows += 1;
        call.bytes += size;
        call.key(key);
        call.key(version_key);
        call.arg(if event.upsert { b"j" } else { b"d" });
        call.number_arg(spec.marker as u64, 1);
        call.number_arg(version, VERSION_DIGITS);
        if event.upsert {
            call.arg(&event.value);
        }
    }
    if call.rows > 0 {
        done.push(call);
    }
    let calls: Vec<_> = done
        .into_iter()
        .map(|c| {
            (
                c.rows,
                c.keys,
                PyBytes::new(py, &c.key_bytes),
                c.args,
                PyBytes::new(py, &c.arg_bytes),
            )
        })
        .collect();
    let rows = (PyList::new(py, markers)?, PyList::new(py, calls)?).into_pyobject(py)?;
    Ok((Some(rows), None))
}

/// For a batch of log messages: each one's sink version (`version_of(commit_lsn, seq)`)
/// and the indexes of those whose value is not certainly a JSON object orjson decodes
/// (`json_object`): `(versions, doubtful)`. None when a message is not shaped as one or a
/// version would not fit 64 bits: Python does it all (`connectors/runtime/events.py`,
/// the reference).
#[pyfunction]
pub fn sink_event_checks<'py>(
    py: Python<'py>,
    messages: &Bound<'py, PyList>,
) -> PyResult<Option<(Bound<'py, PyList>, Bound<'py, PyList>)>> {
    let mut versions: Vec<u64> = Vec::with_capacity(messages.len());
    let mut doubtful: Vec<usize> = Vec::new();
    for (index, item) in messages.iter().enumerate() {
        let Ok(message) = item.cast::<PyTuple>() else {
            return Ok(None);
        };
        if message.len() <= MESSAGE_POSITION {
            return Ok(None);
        }
        let Ok(value) = message.get_item(MESSAGE_VALUE)?.cast_into::<PyBytes>() else {
            return Ok(None);
        };
        let Ok((commit_lsn, seq)) = message.get_item(MESSAGE_POSITION)?.extract::<(u64, u64)>()
        else {
            return Ok(None);
        };
        if commit_lsn >> (63 - SEQ_BITS) != 0 {
            return Ok(None);
        }
        versions.push((commit_lsn << SEQ_BITS) | seq.min(SEQ_MAX));
        if !json_object(value.as_bytes()) {
            doubtful.push(index);
        }
    }
    Ok(Some((
        PyList::new(py, versions)?,
        PyList::new(py, doubtful)?,
    )))
}

/// The spec of a `tables` entry (None: a view reads the table, or the entry is not
/// `(pieces, tail, marker)`), numbering its marker in `markers`.
fn table_spec(entry: &Bound<'_, PyAny>, markers: &mut Vec<String>) -> PyResult<Option<TableSpec>> {
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
        pieces,
        tail,
        marker: number,
    }))
}
