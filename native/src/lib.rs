//! Distributary's native core (`distributary_native` in Python).
//!
//! This first slice holds the log's record codec (`record`) and Kafka's murmur2
//! (`murmur2`) as plain Rust, tested with `cargo test`, and their Python bindings
//! (`python`, feature `python`). Every binding takes a whole batch (a partition's
//! records to append, a chunk of a segment to read) so Python pays one call per batch.
//! The Python implementations in `cdc/` stay the reference; the differential tests in
//! `tests/unit/log/` hold both to the same bytes and the same errors.
#![deny(unsafe_code)]

pub mod murmur2;
pub mod record;

#[cfg(feature = "python")]
mod python;
