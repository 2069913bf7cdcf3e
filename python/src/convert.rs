//! JSON between the library and Python: the library's JSON values become Python objects through the
//! `json` module (so every field the library adds flows through), and Python dicts become JSON text.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;
use serde_json::Value;

/// `json.loads` and `json.dumps`, looked up once per interpreter.
static LOADS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static DUMPS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();

/// A JSON value as Python objects (dicts, lists, str, int, float, bool, None).
pub fn to_python<'py>(py: Python<'py>, value: &Value) -> PyResult<Bound<'py, PyAny>> {
    LOADS
        .import(py, "json", "loads")?
        .call1((value.to_string(),))
}

/// A Python value as JSON text: a `str` is taken as JSON text already (as the model sent it); anything
/// else goes through `json.dumps`.
pub fn json_text(value: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(text) = value.cast::<PyString>() {
        return Ok(text.to_str()?.to_owned());
    }
    DUMPS
        .import(value.py(), "json", "dumps")?
        .call1((value,))?
        .extract()
}
