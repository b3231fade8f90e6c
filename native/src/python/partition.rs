//! `murmur2` and `partition_for`, as `tests/reference/partitioner.py` defines them, and
//! `crc32` (zlib's, for the batch journal).

use pyo3::prelude::*;

use super::bytes::bytes_of;
use crate::murmur2::{murmur2 as hash, positive_hash};

/// Kafka's `Utils.murmur2` of `data` (bytes): a signed 32-bit hash.
#[pyfunction]
pub fn murmur2(data: &Bound<'_, PyAny>) -> PyResult<i32> {
    Ok(hash(&bytes_of(data, &|| "data".to_owned())?))
}

/// `toPositive(murmur2(key)) % partitions`, with Python's `%` for any `partitions`.
#[pyfunction]
pub fn partition_for<'py>(
    key: &Bound<'py, PyAny>,
    partitions: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let positive = positive_hash(&bytes_of(key, &|| "key".to_owned())?);
    let py = key.py();
    match partitions.extract::<u32>() {
        Ok(count) if count > 0 => Ok((positive % count)
            .into_pyobject(py)
            .map_or_else(|e| match e {}, Bound::into_any)),
        // zero, negative or huge: Python's own `%` (ZeroDivisionError, sign of the divisor)
        _ => positive
            .into_pyobject(py)
            .map_or_else(|e| match e {}, Bound::into_any)
            .rem(partitions),
    }
}

/// `zlib.crc32(data, value)`: the CRC-32 of `data` continuing from `value` (the work runs
/// without the GIL).
#[pyfunction]
#[pyo3(signature = (data, value=0))]
pub fn crc32(py: Python<'_>, data: &[u8], value: u32) -> u32 {
    py.detach(|| {
        let mut hasher = crc32fast::Hasher::new_with_initial(value);
        hasher.update(data);
        hasher.finalize()
    })
}
