//! Distributary's native core (`distributary_native` in Python).
//!
//! This first slice holds the log's record codec (`record`) and Kafka's murmur2
//! (`murmur2`) as plain Rust, tested with `cargo test`, and their Python bindings
//! (`python`, feature `python`). Every binding takes a whole batch (a partition's
//! records to append, a chunk of a segment to read) so Python pays one call per batch.
//! The Python implementations in `cdc/` stay the reference; the differential tests in
//! `tests/unit/log/` hold both to the same bytes and the same errors.
//!
//! `snapshot` turns a chunk of the initial snapshot's `COPY … TO STDOUT` text rows into
//! their events (`tests/unit/capture/test_native_snapshot.py` holds it to
//! `cdc.capture.events.read_event`).
//!
//! `pgoutput` turns one streamed Insert, Update or Delete message into its event
//! (`tests/unit/capture/test_native_dml.py` holds it to the decoder and `events.py`).
#![deny(unsafe_code)]

pub mod murmur2;
pub mod opensearch;
pub mod pgoutput;
pub mod record;
pub mod redis_args;
pub mod snapshot;
pub mod spool;

#[cfg(feature = "python")]
mod python;
