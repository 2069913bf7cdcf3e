//! A JavaScript function as the library's [`Approver`]: it receives the request as JSON text (the
//! change set with its diff) and its promise answers `true` to let the call apply. Anything else denies:
//! `false`, a rejection, or a function that could not be called. `index.js` wraps the user's (async)
//! approver so that it parses the request and never throws.

use napi::bindgen_prelude::Promise;
use napi::threadsafe_function::ThreadsafeFunction;
use turngate::{ApprovalFuture, ApprovalRequest, Approver};

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
