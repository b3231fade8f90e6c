//! Borrowing the bytes of a Python `bytes` (or copying a `bytearray`).

use std::borrow::Cow;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes};

/// The bytes of `obj` (`bytes` borrowed, `bytearray` copied), or a TypeError that says
/// which `what` was wrong.
pub fn bytes_of<'a>(
    obj: &'a Bound<'_, PyAny>,
    what: &dyn Fn() -> String,
) -> PyResult<Cow<'a, [u8]>> {
    if let Ok(bytes) = obj.cast::<PyBytes>() {
        return Ok(Cow::Borrowed(bytes.as_bytes()));
    }
    if let Ok(array) = obj.cast::<PyByteArray>() {
        return Ok(Cow::Owned(array.to_vec()));
    }
    let type_name = obj
        .get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string());
    Err(PyTypeError::new_err(format!(
        "{} must be bytes, not {type_name}",
        what()
    )))
}
