//! Distributary's native core (`distributary_native` in Python), in layers whose
//! dependencies point one way (`tests/unit/architecture/test_native_layers.py` holds them):
//!
//! - `record` (the log's record codec) and `murmur2` (Kafka's partitioner): plain Rust on
//!   bytes, depending on nothing;
//! - `convert`: values into JSON exactly as the Python capture writes them (orjson's
//!   layout, the type codecs, a table's `Plan`), depending on nothing;
//! - `snapshot` (COPY text rows into events and encoded log lines), `pgoutput` (a streamed
//!   row change into its event) and `spool` (streamed transactions' frames): the capture,
//!   on `convert`, `record`, `murmur2`;
//! - `redis_args` and `opensearch`: the sinks' renderers, on `convert`; `joins` (the
//!   joined views' initial load), on `redis_args`' reading of plain events;
//! - `python` (feature `python`): the PyO3 bindings over all of them, each taking a whole
//!   batch so Python pays one call per batch.
//!
//! The readable definitions of what they compute are the Python reference in
//! `tests/reference/` and the capture's decoder and codecs; the differential tests in
//! `tests/unit/` hold both to the same bytes and the same errors.
#![deny(unsafe_code)]

pub mod convert;
pub mod joins;
pub mod murmur2;
pub mod opensearch;
pub mod pgoutput;
pub mod record;
pub mod redis_args;
pub mod snapshot;
pub mod spool;

#[cfg(feature = "python")]
mod python;
