//! A Python callable as the library's [`Approver`]: it receives the request as a dict (the change set
//! with its diff) and answers `True` to let the call apply. Anything else denies: `False`, a value that is
//! not a bool, or an exception (reported through `sys.unraisablehook`). The `turngate` package turns an
//! async approver into such a callable. `"console"` instead asks through the root's recorded approvals
//! (`turngate console`, or `Toolbox.answer_approval`), as the CLI's `--approve-in console` does.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyString};
use turngate::{
    ApprovalFuture, ApprovalRequest, Approver, DurableApprover, PendingApprovals, Policy, Root,
};

use crate::convert::to_python;
use crate::errors::UsageError;

/// The approver a call was given: a callable (calling back into Python), or `"console"`: the
/// root's recorded approvals, on `root` under `policy`.
pub fn given(
    py: Python<'_>,
    approver: Py<PyAny>,
    root: &Root,
    policy: &Policy,
) -> PyResult<Box<dyn Approver>> {
    let Ok(text) = approver.bind(py).cast::<PyString>() else {
        return Ok(Box::new(PyApprover(approver)));
    };
    if text.to_str()? != "console" {
        return Err(UsageError::new_err(format!(
            "approver={:?}: give a callable, or \"console\" to ask through turngate console",
            text.to_str()?
        )));
    }
    let approvals = PendingApprovals::open(root).map_err(|e| UsageError::new_err(e.to_string()))?;
    Ok(Box::new(DurableApprover::new(
        approvals,
        policy.approval_timeout(),
    )))
}

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
