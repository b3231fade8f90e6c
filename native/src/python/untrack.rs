//! Records the cycle collector need not watch.
//!
//! A `Message` holds only atoms (str, int, bytes, bool) and a `Position` of two ints, so
//! it can never be part of a reference cycle. CPython notices that by itself, but only
//! when a collection runs over it (`_PyTuple_MaybeUntrack`); until then every record read
//! is one more object for the young generation to traverse, which costs about as much as
//! decoding it. Untracking right away saves that work and changes nothing else.

use pyo3::ffi;
use pyo3::prelude::*;

/// Whether `obj` is watched by the cycle collector (str, int and bytes never are).
#[allow(unsafe_code)]
pub fn is_tracked(obj: &Bound<'_, PyAny>) -> bool {
    // SAFETY: `obj` is a live object (we hold a reference to it for the whole call), and
    // PyObject_GC_IsTracked accepts any object, GC type or not (it answers 0 for those).
    unsafe { ffi::PyObject_GC_IsTracked(obj.as_ptr()) != 0 }
}

/// Stop the cycle collector from tracking `obj`.
///
/// The caller guarantees that `obj` is tracked (so its type has a GC header), that it has
/// no `__dict__` and that none of its items is tracked: then it cannot be part of a cycle,
/// exactly the condition under which CPython untracks a tuple itself.
#[allow(unsafe_code)]
pub fn untrack(obj: &Bound<'_, PyAny>) {
    // SAFETY: `obj` is alive (we hold a strong reference) and tracked, so it carries the
    // GC header PyObject_GC_UnTrack works on. Untracking neither frees nor moves the
    // object. With the GIL held (a `Bound` proves it) no collection runs meanwhile.
    unsafe { ffi::PyObject_GC_UnTrack(obj.as_ptr().cast()) }
}
