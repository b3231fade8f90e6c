//! `CopyDrain`: the rows of a `COPY … TO STDOUT` taken from libpq in chunks of whole
//! lines, the GIL released, instead of one Python call per row
//! (`cdc/capture/snapshot/copy.py`, `cdc/capture/snapshot/copy_out.py`).
//!
//! The libpq is psycopg's own: Python hands over psycopg's `PGconn` object (whose
//! `pgconn_ptr` is the connection's `PGconn *`) and psycopg's `pq.version()`. The drain
//! asks the dynamic loader which objects are loaded (`dl_iterate_phdr`), takes the one
//! libpq among them (none, or several: an error naming them), and looks `PQgetCopyData`
//! and `PQfreemem` up in it (`dlopen` with `RTLD_NOLOAD`: a library already loaded, never
//! a new one) after checking its `PQlibVersion`, so no argument is an address and no
//! address is guessed: a wrong object or version is an error, not a crash. Waiting for the
//! socket and reading it (`PQconsumeInput`) stay in Python: a drain only takes the rows
//! libpq already holds.
#![allow(unsafe_code)] // calls into libpq and the dynamic loader; each call's soundness is argued where it is made

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::Mutex;

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTypeMethods};

/// `int PQgetCopyData(PGconn *conn, char **buffer, int async)` (libpq-fe.h).
type GetCopyData = unsafe extern "C" fn(*mut c_void, *mut *mut c_char, c_int) -> c_int;
/// `void PQfreemem(void *ptr)` (libpq-fe.h).
type FreeMem = unsafe extern "C" fn(*mut c_void);
/// `int PQlibVersion(void)` (libpq-fe.h).
type LibVersion = unsafe extern "C" fn() -> c_int;

/// The dynamic loader's interface (dlfcn.h; glibc's flag values: `Loaded::find` answers
/// None elsewhere).
mod dl {
    use std::ffi::{c_char, c_int, c_void};

    pub const RTLD_LAZY: c_int = 0x1;
    pub const RTLD_NOLOAD: c_int = 0x4;

    extern "C" {
        pub fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
        pub fn dlsym(handle: *mut c_void, symbol: *const c_char) -> *mut c_void;
        pub fn dlclose(handle: *mut c_void) -> c_int;
    }
}

/// The loader's list of the loaded objects (link.h, glibc only: other loaders are not
/// asked, `loaded_libraries` answers an error there).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod phdr {
    use std::ffi::{c_char, c_int, c_void};

    /// The leading fields of glibc's `struct dl_phdr_info`, the only ones read (the
    /// callback's `size` tells how many bytes the loader's struct holds).
    #[repr(C)]
    pub struct DlPhdrInfo {
        pub dlpi_addr: usize, // ElfW(Addr): pointer-sized on Linux
        pub dlpi_name: *const c_char,
    }

    pub type Callback = unsafe extern "C" fn(*mut DlPhdrInfo, usize, *mut c_void) -> c_int;

    extern "C" {
        pub fn dl_iterate_phdr(callback: Option<Callback>, data: *mut c_void) -> c_int;
    }
}

/// What the callback of `dl_iterate_phdr` gathers.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
struct Gathered<'a> {
    prefix: &'a [u8],
    names: Vec<CString>,
    failed: bool,
}

/// Called by the loader once per loaded object, on this thread, with its lock held: copies
/// the object's name out when its file name starts with `prefix` and holds `.so`. Never
/// unwinds (a panic is caught and ends the iteration, `failed` set); never calls the loader.
/// Safety: `data` must be a `&mut Gathered` no one else uses during the call, `info` null or
/// valid for `size` bytes (the loader's contract).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
unsafe extern "C" fn gather(info: *mut phdr::DlPhdrInfo, size: usize, data: *mut c_void) -> c_int {
    // SAFETY: `data` is the `&mut Gathered` `loaded_libraries` handed to `dl_iterate_phdr`,
    // alive and borrowed by nobody else until that call returns; the loader calls this
    // function synchronously on the calling thread, one call at a time.
    let gathered = unsafe { &mut *data.cast::<Gathered>() };
    let prefix = gathered.prefix;
    let names = &mut gathered.names;
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if info.is_null() || size < std::mem::size_of::<phdr::DlPhdrInfo>() {
            return;
        }
        // SAFETY: `info` is non-null and the loader's struct is valid for `size` bytes during
        // this call, which covers `DlPhdrInfo` (its leading fields, same layout: repr(C)).
        let name = unsafe { (*info).dlpi_name };
        if name.is_null() {
            return;
        }
        // SAFETY: `dlpi_name` is a NUL-terminated string the loader keeps valid at least
        // during this call; it is copied into an owned `CString` before returning.
        let name = unsafe { CStr::from_ptr(name) };
        let bytes = name.to_bytes();
        let file = bytes.rsplit(|&b| b == b'/').next().unwrap_or(bytes);
        if file.starts_with(prefix) && file.windows(3).any(|part| part == b".so") {
            names.push(name.to_owned());
        }
    }));
    if outcome.is_err() {
        gathered.failed = true;
        return 1; // stop the iteration
    }
    0
}

/// A loaded library: `name` as the loader knows it (for `dlopen`), `file` its real path
/// (for messages).
#[derive(Debug, PartialEq)]
struct Library {
    name: CString,
    file: String,
}

/// The loaded libraries whose file name starts with `prefix` and holds `.so`, one per file
/// (by its real path), in the order of their paths.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn loaded_libraries(prefix: &str) -> Result<Vec<Library>, String> {
    use std::collections::BTreeMap;
    use std::path::PathBuf;

    let mut gathered = Gathered {
        prefix: prefix.as_bytes(),
        names: Vec::new(),
        failed: false,
    };
    // SAFETY: `gather` has the callback's C signature and never unwinds nor calls the
    // loader; `data` points to `gathered`, alive (and not otherwise used) until the call
    // returns, the callback's only use of it.
    unsafe {
        phdr::dl_iterate_phdr(Some(gather), std::ptr::addr_of_mut!(gathered).cast());
    }
    if gathered.failed {
        return Err("listing the loaded libraries failed".to_owned());
    }
    let mut files = BTreeMap::new();
    for name in gathered.names {
        let path = PathBuf::from(name.to_string_lossy().into_owned());
        let file = std::fs::canonicalize(&path).unwrap_or(path);
        files.entry(file).or_insert(name);
    }
    Ok(files
        .into_iter()
        .map(|(file, name)| Library {
            name,
            file: file.to_string_lossy().into_owned(),
        })
        .collect())
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn loaded_libraries(_prefix: &str) -> Result<Vec<Library>, String> {
    Err("the loaded libraries are only listed with glibc's loader".to_owned())
}

/// The one libpq loaded in this process, or why not.
fn loaded_libpq() -> Result<Library, String> {
    let mut found = loaded_libraries("libpq")?;
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err("no libpq is loaded in this process".to_owned()),
        n => Err(format!(
            "{n} libpq are loaded in this process, not one: {}",
            found
                .iter()
                .map(|library| library.file.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// A reference to a library already loaded in the process, released on drop (the
/// loader counts references: the library stays loaded at least while this lives).
struct Loaded {
    handle: usize, // `void *` from `dlopen`, never null
}

impl Loaded {
    /// The library at `path` if the process has it loaded, else None (nothing is loaded).
    fn find(path: &CStr) -> Option<Loaded> {
        if !cfg!(all(target_os = "linux", target_env = "gnu")) {
            return None; // other loaders number their flags otherwise
        }
        // SAFETY: `path` is a NUL-terminated string; with RTLD_NOLOAD the loader never
        // loads anything (it may open the file to compare it with what is loaded, no
        // initializer runs) and returns a counted handle to a loaded object, or null.
        let handle = unsafe { dl::dlopen(path.as_ptr(), dl::RTLD_LAZY | dl::RTLD_NOLOAD) };
        (!handle.is_null()).then(|| Loaded {
            handle: handle as usize,
        })
    }

    /// The address of the exported symbol `name`, or None.
    fn symbol(&self, name: &CStr) -> Option<usize> {
        // SAFETY: `handle` came from `dlopen` and is not closed before drop; `name` is
        // NUL-terminated. `dlsym` only reads the library's symbol table.
        let address = unsafe { dl::dlsym(self.handle as *mut c_void, name.as_ptr()) };
        (!address.is_null()).then_some(address as usize)
    }
}

impl Drop for Loaded {
    fn drop(&mut self) {
        // SAFETY: `handle` came from a successful `dlopen` and is closed exactly once.
        unsafe {
            dl::dlclose(self.handle as *mut c_void);
        }
    }
}

/// What a drain ended on (the first item of `drain`'s answer; `CopyDrain.MORE`, … in Python).
const MORE: i32 = 1; // a chunk is ready; call again at once
const WAIT: i32 = 0; // libpq holds no whole row: wait for the socket, consume input, call again
const DONE: i32 = -1; // the COPY ended (its result is next)
const FAILED: i32 = -2; // libpq reported an error (`PQerrorMessage`)

/// One COPY's rows, drained from libpq (see the module doc).
#[pyclass(frozen, module = "distributary_native")]
pub struct CopyDrain {
    pgconn: Py<PyAny>, // psycopg's PGconn: `conn` is drained only while it still holds it
    conn: usize,
    get_copy_data: GetCopyData,
    free_mem: FreeMem,
    pending: Mutex<Vec<u8>>,
    _libpq: Loaded, // keeps the library of the two functions loaded
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

    /// `pgconn`: psycopg's `PGconn` of a connection in the COPY OUT state, used by no one
    /// else while this drain lives (and kept open by the caller); `version`: psycopg's
    /// `pq.version()`, which the libpq loaded in this process (the only one) must return
    /// from its `PQlibVersion`.
    #[new]
    fn new(pgconn: &Bound<'_, PyAny>, version: i32) -> PyResult<Self> {
        let kind = pgconn.get_type();
        let module: String = kind.module()?.extract()?;
        if !(module.split('.').next() == Some("psycopg") || module.starts_with("psycopg_"))
            || kind.qualname()?.to_str()? != "PGconn"
        {
            return Err(PyTypeError::new_err(format!(
                "CopyDrain takes psycopg's PGconn (connection.pgconn), not {module}.{}",
                kind.qualname()?
            )));
        }
        let conn = match pgconn.getattr("pgconn_ptr")?.extract::<Option<usize>>()? {
            Some(pointer) if pointer != 0 => pointer,
            _ => return Err(PyValueError::new_err("the connection is closed")),
        };
        let Library { name, file: libpq } = loaded_libpq().map_err(PyValueError::new_err)?;
        let library = Loaded::find(&name).ok_or_else(|| {
            PyValueError::new_err(format!(
                "{libpq} is listed by the loader but not found by dlopen"
            ))
        })?;
        let symbol = |name: &str| {
            CString::new(name)
                .ok()
                .and_then(|name| library.symbol(&name))
                .ok_or_else(|| {
                    PyValueError::new_err(format!("{libpq} has no {name}: it is not libpq"))
                })
        };
        let (lib_version, get_copy_data, free_mem) = (
            symbol("PQlibVersion")?,
            symbol("PQgetCopyData")?,
            symbol("PQfreemem")?,
        );
        // SAFETY: the three addresses are the symbols of those names exported by a loaded
        // library, which are libpq's functions of the C signatures above (libpq-fe.h); a
        // non-null function address as a fn pointer of its own signature is valid.
        let (lib_version, get_copy_data, free_mem) = unsafe {
            (
                std::mem::transmute::<usize, LibVersion>(lib_version),
                std::mem::transmute::<usize, GetCopyData>(get_copy_data),
                std::mem::transmute::<usize, FreeMem>(free_mem),
            )
        };
        // SAFETY: `PQlibVersion` takes nothing and only returns a constant.
        let found = unsafe { lib_version() };
        if found != version {
            return Err(PyValueError::new_err(format!(
                "{libpq} is libpq {found}, not psycopg's {version}"
            )));
        }
        Ok(CopyDrain {
            pgconn: pgconn.clone().unbind(),
            conn,
            get_copy_data,
            free_mem,
            pending: Mutex::new(Vec::new()),
            _libpq: library,
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
        let now = self.pgconn.bind(py).getattr("pgconn_ptr")?;
        if now.extract::<Option<usize>>()? != Some(self.conn) {
            return Err(PyValueError::new_err(
                "the connection was closed during the COPY: nothing more to drain",
            ));
        }
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
            // SAFETY: `conn` is the `PGconn *` psycopg's connection still held when `drain`
            // began (checked with the GIL held; the connection is used by no other thread
            // meanwhile: the constructor's contract), made by the libpq `get_copy_data`
            // belongs to (its version is psycopg's); `buffer` is a valid out-pointer; async
            // mode (1) never blocks.
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

    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn the_loader_lists_its_libraries() {
        use super::{loaded_libpq, loaded_libraries, Loaded};

        let libc = loaded_libraries("libc").expect("the loaded libraries");
        assert_eq!(libc.len(), 1, "{libc:?}"); // glibc's libc.so.6, once
        assert!(libc[0].name.to_bytes().ends_with(b"libc.so.6"), "{libc:?}");
        assert!(libc[0].file.starts_with('/'), "{libc:?}");
        assert!(Loaded::find(&libc[0].name).is_some());
        assert_eq!(loaded_libraries("nosuchlibrary"), Ok(vec![]));
        // the test binary does not link libpq
        assert_eq!(
            loaded_libpq(),
            Err("no libpq is loaded in this process".to_owned())
        );
    }

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
