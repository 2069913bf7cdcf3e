//! A Python callable as the library's [`Approver`]: it receives the request as a dict (the change set
//! with its diff) and answers `True` to let the call apply. Anything else denies: `False`, a value that is
//! not a bool, or an exception (reported through `sys.unraisablehook`). The `turngate` package turns an
//! async approver into such a callable.

use pyo3::prelude::*;
use pyo3::types::PyBool;
use turngate::{ApprovalFuture, ApprovalRequest, Approver};

use crate::convert::to_python;

/// An approver calling back into Python.
pub struct PyApprover(pub Py<PyAny>);

impl Approver for PyApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a> {
        let request = request.to_json();
        Box::pin(async move {
            Python::attach(|py| {
                let answer =
                    to_python(py, &request).and_then(|request| self.0.bind(py).call1((request,)));
                match answer {
                    Ok(answer) => answer.cast::<PyBool>().is_ok_and(|yes| yes.is_true()),
                    Err(error) => {
                        error.write_unraisable(py, Some(self.0.bind(py)));
                        false
                    }
                }
            })
        })
    }
}
