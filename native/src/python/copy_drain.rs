//! `CopyDrain`: the rows of a `COPY … TO STDOUT` taken from libpq in chunks of whole
//! lines, the GIL released, instead of one Python call per row
//! (`cdc/capture/snapshot/copy.py`, `cdc/capture/snapshot/libpq.py`).
//!
//! The libpq is psycopg's own: Python hands over the connection's `PGconn *`
//! (`psycopg.pq.PGconn.pgconn_ptr`) and the addresses of that same library's
//! `PQgetCopyData` and `PQfreemem`. Waiting for the socket and reading it
//! (`PQconsumeInput`) stay in Python: a drain only takes the rows libpq already holds.
#![allow(unsafe_code)] // calls into libpq; each call's soundness is argued where it is made

use std::ffi::{c_char, c_int, c_void};
use std::sync::Mutex;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// `int PQgetCopyData(PGconn *conn, char **buffer, int async)` (libpq-fe.h).
type GetCopyData = unsafe extern "C" fn(*mut c_void, *mut *mut c_char, c_int) -> c_int;
/// `void PQfreemem(void *ptr)` (libpq-fe.h).
type FreeMem = unsafe extern "C" fn(*mut c_void);

/// What a drain ended on (the first item of `drain`'s answer; `CopyDrain.MORE`, … in Python).
const MORE: i32 = 1; // a chunk is ready; call again at once
const WAIT: i32 = 0; // libpq holds no whole row: wait for the socket, consume input, call again
const DONE: i32 = -1; // the COPY ended (its result is next)
const FAILED: i32 = -2; // libpq reported an error (`PQerrorMessage`)

/// One COPY's rows, drained from libpq (see the module doc).
#[pyclass(frozen, module = "distributary_native")]
pub struct CopyDrain {
    conn: usize,
    get_copy_data: GetCopyData,
    free_mem: FreeMem,
    pending: Mutex<Vec<u8>>,
}

#[pymethods]
impl CopyDrain {
    #[classattr]
    const MORE: i32 = MORE;
    #[classattr]
    const WAIT: i32 = WAIT;
    #[classattr]
    const DONE: i32 = DONE;
    #[classattr]
    const FAILED: i32 = FAILED;

    /// `conn`: the `PGconn *` of a connection in the COPY OUT state, used by no one else
    /// while this drain lives (and kept open by the caller); `get_copy_data`, `free_mem`:
    /// the addresses of `PQgetCopyData` and `PQfreemem` in the libpq that made `conn`.
    #[new]
    fn new(conn: usize, get_copy_data: usize, free_mem: usize) -> PyResult<Self> {
        if conn == 0 || get_copy_data == 0 || free_mem == 0 {
            return Err(PyValueError::new_err(
                "CopyDrain needs a connection and the addresses of PQgetCopyData and \
                 PQfreemem (got a null one): pass PGconn.pgconn_ptr and libpq's functions",
            ));
        }
        // SAFETY: the caller (cdc/capture/snapshot/libpq.py) passes the addresses of
        // libpq's `PQgetCopyData` and `PQfreemem`, looked up by name with ctypes in the
        // library psycopg loaded, whose C signatures are the two types above; a non-null
        // function address transmuted to a fn pointer of its own signature is valid.
        let (get_copy_data, free_mem) = unsafe {
            (
                std::mem::transmute::<usize, GetCopyData>(get_copy_data),
                std::mem::transmute::<usize, FreeMem>(free_mem),
            )
        };
        Ok(CopyDrain {
            conn,
            get_copy_data,
            free_mem,
            pending: Mutex::new(Vec::new()),
        })
    }

    /// Take the rows libpq holds until about `chunk_bytes` are gathered: `(state,
    /// chunk)`, `chunk` whole lines (each ending with its newline) or None; `state` 1: call
    /// again; 0: wait for the socket and `consume_input` first; -1: the COPY ended (the
    /// last lines are in `chunk`); -2: libpq failed (its error message says why).
    fn drain<'py>(
        &self,
        py: Python<'py>,
        chunk_bytes: usize,
    ) -> PyResult<(i32, Option<Bound<'py, PyBytes>>)> {
        let (state, chunk) = py.detach(|| {
            let mut pending = self
                .pending
                .lock()
                .map_err(|_| PyRuntimeError::new_err("a COPY drain failed earlier"))?;
            Ok::<_, PyErr>(self.take(&mut pending, chunk_bytes.max(1)))
        })?;
        Ok((state, chunk.map(|data| PyBytes::new(py, &data))))
    }
}

impl CopyDrain {
    /// Rows into `pending` until it holds `chunk_bytes` or libpq has no whole row; the
    /// chunk (whole lines) when one is due.
    fn take(&self, pending: &mut Vec<u8>, chunk_bytes: usize) -> (i32, Option<Vec<u8>>) {
        loop {
            let mut buffer: *mut c_char = std::ptr::null_mut();
            // SAFETY: `conn` is a live `PGconn *` of the libpq `get_copy_data` belongs to,
            // used by no other thread meanwhile (the constructor's contract); `buffer` is
            // a valid out-pointer; async mode (1) never blocks.
            let length = unsafe { (self.get_copy_data)(self.conn as *mut c_void, &mut buffer, 1) };
            if length > 0 && !buffer.is_null() {
                // SAFETY: libpq returned `length` bytes at `buffer` (a row it allocated);
                // they are copied out before `PQfreemem` releases them, exactly once.
                unsafe {
                    let row = std::slice::from_raw_parts(buffer.cast::<u8>(), length as usize);
                    pending.extend_from_slice(row);
                    (self.free_mem)(buffer.cast::<c_void>());
                }
                if pending.len() >= chunk_bytes {
                    if let Some(chunk) = whole_lines(pending) {
                        return (MORE, Some(chunk));
                    }
                }
                continue;
            }
            return match length {
                0 => (WAIT, None),
                -1 => (DONE, whole_lines(pending)), // anything after the last newline: dropped
                _ => (FAILED, None),
            };
        }
    }
}

/// The whole lines at the start of `pending` (through its last newline), taken out of it;
/// None when it holds no newline.
fn whole_lines(pending: &mut Vec<u8>) -> Option<Vec<u8>> {
    let end = memchr::memrchr(b'\n', pending)? + 1;
    if end == pending.len() {
        return Some(std::mem::take(pending));
    }
    let rest = pending.split_off(end);
    Some(std::mem::replace(pending, rest))
}

#[cfg(test)]
mod tests {
    use super::whole_lines;

    #[test]
    fn whole_lines_end_at_the_last_newline() {
        let mut pending = b"a\tb\nc\td\ne".to_vec();
        assert_eq!(
            whole_lines(&mut pending).as_deref(),
            Some(&b"a\tb\nc\td\n"[..])
        );
        assert_eq!(pending, b"e");
        assert_eq!(whole_lines(&mut pending), None);
        pending.extend_from_slice(b"f\n");
        assert_eq!(whole_lines(&mut pending).as_deref(), Some(&b"ef\n"[..]));
        assert!(pending.is_empty());
    }
}
