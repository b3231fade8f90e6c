//! Building instances of a NamedTuple class (`Message`, `Position`) from native code.
//!
//! A NamedTuple's own constructor is a Python function that calls `tuple.__new__(cls,
//! items)`. Calling that from here still pays for Python's call machinery twice per
//! record (the method wrapper checks its arguments and slices them into a new tuple), so
//! this calls the same C function, tuple's `tp_new` slot, directly, after checking once
//! what the wrapper would check on every call.

use std::ffi::c_void;
use std::ptr;

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyTuple, PyType};

use super::untrack::{is_tracked, untrack};

/// One NamedTuple class and tuple's constructor for it.
pub struct NamedTupleType {
    class: Py<PyType>,
    tuple_new: ffi::newfunc,
    /// Instances hold no `__dict__`, so one whose items are untracked cannot be in a cycle.
    no_dict: bool,
}

impl NamedTupleType {
    /// Check that `class` derives from tuple directly (its MRO is `(class, tuple,
    /// object)`, as for every NamedTuple) and look up tuple's constructor.
    pub fn new(class: Bound<'_, PyType>) -> PyResult<Self> {
        let py = class.py();
        let tuple = py.get_type::<PyTuple>();
        let mro = class
            .getattr(pyo3::intern!(py, "__mro__"))?
            .cast_into::<PyTuple>()?;
        let direct = mro.len() == 3
            && mro.get_item(0)?.is(&class)
            && mro.get_item(1)?.is(&tuple)
            && mro.get_item(2)?.is(py.get_type::<pyo3::types::PyAny>());
        if !direct {
            return Err(PyTypeError::new_err(format!(
                "{} must be a NamedTuple (a direct subclass of tuple)",
                class.name()?
            )));
        }
        let no_dict = class
            .getattr(pyo3::intern!(py, "__dictoffset__"))?
            .extract::<isize>()?
            == 0;
        Ok(NamedTupleType {
            tuple_new: tuple_tp_new(&tuple)?,
            class: class.unbind(),
            no_dict,
        })
    }

    /// `tuple.__new__(class, items)`. With `untracked_items` (the caller knows no item is
    /// tracked by the cycle collector) the new instance is not tracked either.
    #[allow(unsafe_code)]
    pub fn make<'py>(
        &self,
        items: Bound<'py, PyTuple>,
        untracked_items: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = items.py();
        let args = PyTuple::new(py, [items])?;
        // SAFETY: `tuple_new` is tuple's tp_new slot (non-null, checked in
        // `tuple_tp_new`), a C function of the `newfunc` signature. It is called exactly
        // as `tuple.__new__(class, items)` calls it: with a type that `new` checked to be
        // a direct subclass of tuple (so tuple's constructor is the right one for it, the
        // check the method wrapper makes), a tuple of positional arguments that we own,
        // and NULL keyword arguments, which it accepts. The GIL is held (`py`). It returns
        // a new reference, or NULL with an exception set, which `from_owned_ptr_or_err`
        // turns into a PyErr.
        let made = unsafe {
            let raw = (self.tuple_new)(
                self.class.as_ptr().cast::<ffi::PyTypeObject>(),
                args.as_ptr(),
                ptr::null_mut(),
            );
            Bound::from_owned_ptr_or_err(py, raw)?
        };
        if untracked_items && self.no_dict && is_tracked(&made) {
            untrack(&made);
        }
        Ok(made)
    }
}

/// Instances of one NamedTuple class made one after the other, through one argument
/// tuple `(items,)` kept across calls: `make` fills `items` in place instead of building
/// two new tuples per instance (tuple's constructor copies the items out of it, and
/// keeps no reference to either tuple once it returns).
pub struct Builder<'py> {
    /// `(items,)`: the only reference to `items` is this tuple's.
    args: Bound<'py, PyTuple>,
    size: usize,
}

impl<'py> Builder<'py> {
    /// A builder of instances of `size` items.
    pub fn new(py: Python<'py>, size: usize) -> PyResult<Self> {
        let items = PyTuple::new(py, (0..size).map(|_| py.None()))?;
        Ok(Builder {
            args: PyTuple::new(py, [items])?,
            size,
        })
    }

    /// `tuple.__new__(kind's class, items)`, as `NamedTupleType::make`.
    #[allow(unsafe_code)]
    pub fn make<const N: usize>(
        &self,
        kind: &NamedTupleType,
        items: [Bound<'py, PyAny>; N],
        untracked_items: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = self.args.py();
        if N != self.size {
            return Err(PyTypeError::new_err("a NamedTuple of the wrong size"));
        }
        let target = self.args.get_item(0)?; // a second reference while we fill it
        let raw = target.as_ptr();
        drop(target); // back to the one reference `args` holds
        for (index, item) in items.into_iter().enumerate() {
            // SAFETY: `raw` is the tuple of `size` items that `args` owns and keeps alive
            // (we hold `args`); PyTuple_SetItem checks that it is a tuple whose only
            // reference is that one (else it fails with SystemError, which we return)
            // and that `index` is in range; it steals the new reference `into_ptr`
            // gives it and releases the item it replaces. The GIL is held (`py`).
            let index = ffi::Py_ssize_t::try_from(index).unwrap_or(ffi::Py_ssize_t::MAX);
            let status = unsafe { ffi::PyTuple_SetItem(raw, index, item.into_ptr()) };
            if status != 0 {
                return Err(PyErr::fetch(py));
            }
        }
        // SAFETY: as in `NamedTupleType::make`, with `args` as the positional arguments:
        // a tuple we own whose one item is a tuple; the constructor reads the items and
        // keeps no reference to either tuple after it returns.
        let made = unsafe {
            let raw = (kind.tuple_new)(
                kind.class.as_ptr().cast::<ffi::PyTypeObject>(),
                self.args.as_ptr(),
                ptr::null_mut(),
            );
            Bound::from_owned_ptr_or_err(py, raw)?
        };
        if untracked_items && kind.no_dict && is_tracked(&made) {
            untrack(&made);
        }
        Ok(made)
    }
}

/// tuple's tp_new slot function.
#[allow(unsafe_code)]
fn tuple_tp_new(tuple: &Bound<'_, PyType>) -> PyResult<ffi::newfunc> {
    // SAFETY: PyType_GetSlot accepts any type object since Python 3.10 (this module
    // needs 3.11); `tuple` is alive for the call.
    let slot: *mut c_void = unsafe { ffi::PyType_GetSlot(tuple.as_type_ptr(), ffi::Py_tp_new) };
    if slot.is_null() {
        return Err(PyTypeError::new_err("tuple has no tp_new slot"));
    }
    // SAFETY: the Py_tp_new slot of a type holds a `newfunc` (CPython's type slot
    // table); a function pointer and a data pointer have the same size on every platform
    // CPython supports, and the pointer is not null.
    Ok(unsafe { std::mem::transmute::<*mut c_void, ffi::newfunc>(slot) })
}
