//! Python ints of any size, in and out, with a 64-bit fast path.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyInt};

use crate::record::{parse_u64, Number};

/// `obj` as it prints with `%d` (the reference formats with `b"%d" % obj`).
pub fn number(obj: &Bound<'_, PyAny>) -> PyResult<Number> {
    if let Ok(u) = obj.extract::<u64>() {
        return Ok(Number::Unsigned(u));
    }
    if let Ok(i) = obj.extract::<i64>() {
        return Ok(Number::Signed(i));
    }
    let formatted = PyBytes::new(obj.py(), b"%d").rem(obj)?;
    Ok(Number::Formatted(
        formatted.cast::<PyBytes>()?.as_bytes().to_vec(),
    ))
}

/// An int read from a line: a u64 when it fits, else the Python int of its digits.
#[derive(Debug)]
pub enum LineInt<'py> {
    Small(u64),
    Big(Bound<'py, PyAny>),
}

impl<'py> LineInt<'py> {
    /// The int whose ASCII digits are `digits`.
    pub fn parse(py: Python<'py>, digits: &[u8]) -> PyResult<Self> {
        match parse_u64(digits) {
            Some(small) => Ok(LineInt::Small(small)),
            None => Ok(LineInt::Big(
                py.get_type::<PyInt>().call1((PyBytes::new(py, digits),))?,
            )),
        }
    }

    /// A Python int given by the caller.
    pub fn from_py(obj: &Bound<'py, PyAny>) -> PyResult<Self> {
        match obj.extract::<u64>() {
            Ok(small) => Ok(LineInt::Small(small)),
            Err(_) => Ok(LineInt::Big(
                obj.call_method0(pyo3::intern!(obj.py(), "__index__"))?,
            )),
        }
    }

    pub fn to_py(&self, py: Python<'py>) -> Bound<'py, PyAny> {
        match self {
            LineInt::Small(small) => small
                .into_pyobject(py)
                .map_or_else(|e| match e {}, Bound::into_any),
            LineInt::Big(big) => big.clone(),
        }
    }

    /// `self >= other`, as Python compares ints.
    pub fn at_least(&self, other: &LineInt<'py>, py: Python<'py>) -> PyResult<bool> {
        match (self, other) {
            (LineInt::Small(a), LineInt::Small(b)) => Ok(a >= b),
            _ => self.to_py(py).ge(other.to_py(py)),
        }
    }

    /// `self + 1`.
    pub fn successor(&self, py: Python<'py>) -> PyResult<LineInt<'py>> {
        match self {
            LineInt::Small(small) if *small < u64::MAX => Ok(LineInt::Small(small + 1)),
            _ => Ok(LineInt::Big(self.to_py(py).add(1)?)),
        }
    }

    /// The decimal digits, as Python's `f"{n}"` prints them.
    pub fn display(&self) -> PyResult<String> {
        match self {
            LineInt::Small(small) => Ok(small.to_string()),
            LineInt::Big(big) => Ok(big.str()?.to_string()),
        }
    }
}
