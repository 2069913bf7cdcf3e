//! `turngate._turngate`: the turngate library for Python, as thin as the CLI. Every function here
//! translates Python values into the library's types, calls the library with the GIL released, and
//! translates the answer back; the gate, the sandbox, approval and the journal are the library's.
//!
//! The pure-Python package `turngate` (`python/turngate/`) re-exports this module and adds what is
//! Python's own: iterating chunks (sync or async), asyncio variants, wrapping async approvers.

mod approver;
mod convert;
mod decoder;
mod errors;
mod toolbox;

use pyo3::prelude::*;

/// The module Python imports as `turngate._turngate`.
#[pymodule]
fn _turngate(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<toolbox::PyToolbox>()?;
    m.add_class::<decoder::PyTurnDecoder>()?;
    m.add_class::<decoder::PyTurn>()?;
    m.add_class::<toolbox::PyCancel>()?;
    m.add_function(wrap_pyfunction!(errors::raise_panic_for_test, m)?)?;
    errors::register(m)?;
    Ok(())
}
