//! `join_loaded_rows`: a batch of sink events → the snapshot reads among them as the
//! joined views' state store keeps them (`crate::joins`), in one call. The Python side is
//! `connectors/joins/sink.py`; its Python path stays the reference.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::joins::loaded_row;

use super::sink_event::fields;

/// For each of `events` (a list of `SinkEvent`), `(schema, table, key, row)` when it is a
/// snapshot read rendered here (`key`: its stored form, `row`: `orjson.dumps(after)`), or
/// None: the sink applies it in Python.
#[pyfunction]
pub fn join_loaded_rows<'py>(
    py: Python<'py>,
    events: &Bound<'py, PyList>,
) -> PyResult<Bound<'py, PyList>> {
    let found = PyList::empty(py);
    for item in events.iter() {
        let loaded = match fields(&item)? {
            Some((_, raw, _)) => loaded_row(raw.as_bytes()),
            None => None,
        };
        match loaded {
            Some(row) => found.append((
                row.schema,
                row.table,
                PyBytes::new(py, &row.key),
                PyBytes::new(py, &row.row),
            ))?,
            None => found.append(py.None())?,
        }
    }
    Ok(found)
}
