//! A JavaScript function as the library's [`Approver`]: it receives the request as JSON text (the
//! change set with its diff) and its promise answers `true` to let the call apply. Anything else denies:
//! `false`, a rejection, or a function that could not be called. `index.js` wraps the user's (async)
//! approver so that it parses the request and never throws. `approver: "console"` instead asks through
//! the root's recorded approvals (the options' `"recordedApprovals": true`), as the CLI's
//! `--approve-in console` does.

use napi::bindgen_prelude::Promise;
use napi::threadsafe_function::ThreadsafeFunction;
use turngate::{
    ApprovalFuture, ApprovalRequest, Approver, DurableApprover, PendingApprovals, Policy, Root,
};

use crate::errors::{Class, error};

/// The JavaScript approver, callable from the runtime's threads. The `#[napi]` signatures that take one
/// spell the type out: napi's type generator does not see through an alias.
pub type JsApprover = ThreadsafeFunction<String, Promise<bool>, String, napi::Status, false>;

/// An approver calling back into JavaScript.
pub struct NodeApprover(pub JsApprover);

impl Approver for NodeApprover {
    fn approve<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a> {
        let request = request.to_json().to_string();
        Box::pin(async move {
            match self.0.call_async_catch(request).await {
                Ok(answer) => answer.await.unwrap_or(false),
                Err(_) => false,
            }
        })
    }
}

/// The approver of a call: `function` when one was given (calling back into JavaScript), the
/// recorded approvals of `root` when `recorded`, else none.
pub fn given(
    function: Option<JsApprover>,
    recorded: bool,
    root: &Root,
    policy: &Policy,
) -> napi::Result<Option<Box<dyn Approver>>> {
    match (function, recorded) {
        (Some(_), true) => Err(error(
            Class::Usage,
            "give an approver function or \"console\", not both",
        )),
        (Some(function), false) => Ok(Some(Box::new(NodeApprover(function)))),
        (None, true) => {
            let approvals =
                PendingApprovals::open(root).map_err(|e| error(Class::Usage, e.to_string()))?;
            Ok(Some(Box::new(DurableApprover::new(
                approvals,
                policy.approval_timeout(),
            ))))
        }
        (None, false) => Ok(None),
    }
}
