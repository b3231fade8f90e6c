//! The Python module `distributary_native`: batch entry points over `record` and
//! `murmur2`. Nothing here panics on any input: bad input is a Python `TypeError`,
//! `OverflowError` or `ValueError` naming the record (by index) and the field.

mod batch;
mod bytes;
mod copy_drain;
mod decode;
mod dml;
mod encode;
mod group;
mod ints;
mod joins;
mod named_tuple;
mod opensearch;
mod partition;
mod redis_args;
mod sink_event;
mod snapshot;
mod spool;
mod untrack;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::values::{Kind, ARRAY_OF, RANGE_OF};

#[pymodule]
fn distributary_native(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    let value_kinds = PyDict::new(py); // codec function name → the code a SnapshotPlan takes
    for (code, kind) in Kind::ALL.iter().enumerate() {
        value_kinds.set_item(kind.codec(), code)?;
    }
    module.add("VALUE_KINDS", value_kinds)?;
    module.add("ARRAY_OF", ARRAY_OF)?; // a kind's code | ARRAY_OF: an array of that kind
    module.add("RANGE_OF", RANGE_OF)?; // a kind's code | RANGE_OF: a range of that kind
    let field_kinds = PyDict::new(py); // JSON value kind → its bit in opensearch_actions' fields
    for (name, bit) in crate::opensearch::FIELD_KINDS {
        field_kinds.set_item(name, bit)?;
    }
    module.add("FIELD_KINDS", field_kinds)?;
    // what joins the names of a path in opensearch_actions' deep kinds
    module.add("PATH_SEPARATOR", crate::opensearch::PATH_SEPARATOR.to_string())?;
    module.add_function(wrap_pyfunction!(encode::encode_batch, module)?)?;
    module.add_function(wrap_pyfunction!(encode::encode_topic_batch, module)?)?;
    module.add_function(wrap_pyfunction!(decode::decode_lines, module)?)?;
    module.add_function(wrap_pyfunction!(partition::murmur2, module)?)?;
    module.add_function(wrap_pyfunction!(partition::partition_for, module)?)?;
    module.add_function(wrap_pyfunction!(partition::crc32, module)?)?;
    module.add_function(wrap_pyfunction!(snapshot::snapshot_rows, module)?)?;
    module.add_class::<snapshot::SnapshotPlan>()?;
    module.add_class::<batch::BatchTables>()?;
    module.add_function(wrap_pyfunction!(snapshot::snapshot_batch, module)?)?;
    module.add_class::<snapshot::SnapshotBatch>()?;
    module.add_class::<snapshot::SnapshotPart>()?;
    module.add_class::<copy_drain::CopyDrain>()?;
    module.add_function(wrap_pyfunction!(snapshot::after_lines, module)?)?;
    module.add_function(wrap_pyfunction!(dml::dml_event, module)?)?;
    module.add_function(wrap_pyfunction!(spool::spool_records, module)?)?;
    module.add_function(wrap_pyfunction!(group::group_records, module)?)?;
    module.add_function(wrap_pyfunction!(batch::feed_batch, module)?)?;
    module.add_function(wrap_pyfunction!(redis_args::redis_calls, module)?)?;
    module.add_function(wrap_pyfunction!(redis_args::sink_event_checks, module)?)?;
    module.add_function(wrap_pyfunction!(opensearch::opensearch_actions, module)?)?;
    module.add_function(wrap_pyfunction!(joins::join_loaded_rows, module)?)?;
    Ok(())
}
