//! The exception hierarchy, one class per class of the library's errors, and the panic boundary: a Rust
//! panic becomes an [`InternalError`], never an abort and never a bare `PanicException`.

use std::panic::{AssertUnwindSafe, catch_unwind};

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    turngate,
    TurngateError,
    PyException,
    "Every error turngate raises."
);
create_exception!(
    turngate,
    UsageError,
    TurngateError,
    "A usage or configuration error: a bad argument, provider name, root or tools directory option."
);
create_exception!(
    turngate,
    PolicyError,
    UsageError,
    "The policy (a file, TOML text or a dict) is not valid; nothing was loaded or run."
);
create_exception!(
    turngate,
    ToolLoadError,
    UsageError,
    "A tool component could not be loaded (not a tool, a bad descriptor, not pinned by the lock)."
);
create_exception!(
    turngate,
    StreamParseError,
    TurngateError,
    "The streamed turn broke its protocol (status `malformed`): nothing ran. The report is `.report`."
);
create_exception!(
    turngate,
    UndoError,
    TurngateError,
    "An undo was refused (a file changed since, or nothing to undo) or the journal failed; nothing was restored."
);
create_exception!(
    turngate,
    InternalError,
    TurngateError,
    "A bug in turngate (a Rust panic), caught at the boundary."
);

/// Adds the exception classes to the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("TurngateError", py.get_type::<TurngateError>())?;
    m.add("UsageError", py.get_type::<UsageError>())?;
    m.add("PolicyError", py.get_type::<PolicyError>())?;
    m.add("ToolLoadError", py.get_type::<ToolLoadError>())?;
    m.add("StreamParseError", py.get_type::<StreamParseError>())?;
    m.add("UndoError", py.get_type::<UndoError>())?;
    m.add("InternalError", py.get_type::<InternalError>())?;
    Ok(())
}

/// Runs `work` with the GIL released; a panic in it becomes an [`InternalError`].
pub fn detached<T: Send>(py: Python<'_>, work: impl FnOnce() -> T + Send) -> PyResult<T> {
    py.detach(|| catch_unwind(AssertUnwindSafe(work)))
        .map_err(|panic| {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            InternalError::new_err(format!("turngate panicked: {message}"))
        })
}

/// Panics inside [`detached`], as every entry point runs the library: lets the tests check that a
/// panic reaches Python as an exception.
#[pyfunction]
#[pyo3(name = "_panic_for_test")]
pub fn raise_panic_for_test(py: Python<'_>) -> PyResult<()> {
    detached(py, || panic!("panic requested by the test"))
}
