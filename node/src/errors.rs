//! Errors as the JavaScript side sees them, and the panic boundary.
//!
//! Every error crosses as a `napi::Error` whose message is `{"class": ..., "message": ...}`; `index.js`
//! throws the `Error` subclass of that name. A Rust panic becomes an `InternalError`, never an abort of
//! the Node process.

use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};

use futures_util::FutureExt;
use serde_json::json;

/// The error classes `index.js` knows, one per class of the library's errors.
#[derive(Debug, Clone, Copy)]
pub enum Class {
    /// A bad argument, provider name, root or option.
    Usage,
    /// The policy is not valid.
    Policy,
    /// A tool component could not be loaded.
    ToolLoad,
    /// The turn broke its protocol (status `malformed`); nothing ran.
    StreamParse,
    /// An undo was refused or the journal failed; nothing was restored.
    Undo,
    /// A bug in turngate (a Rust panic), caught at the boundary.
    Internal,
}

impl Class {
    fn name(self) -> &'static str {
        match self {
            Class::Usage => "UsageError",
            Class::Policy => "PolicyError",
            Class::ToolLoad => "ToolLoadError",
            Class::StreamParse => "StreamParseError",
            Class::Undo => "UndoError",
            Class::Internal => "InternalError",
        }
    }
}

/// An error of `class` with `message`, plus `extra` fields (a malformed turn's `report`).
pub fn error_with(
    class: Class,
    message: impl Into<String>,
    extra: serde_json::Value,
) -> napi::Error {
    let text = json!({"class": class.name(), "message": message.into(), "extra": extra});
    napi::Error::from_reason(text.to_string())
}

/// An error of `class` with `message`.
pub fn error(class: Class, message: impl Into<String>) -> napi::Error {
    error_with(class, message, serde_json::Value::Null)
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let message = panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned());
    format!("turngate panicked: {message}")
}

/// Runs `work` where it stands (on the JavaScript thread, or on libuv's pool in a task's `compute`); a
/// panic in it becomes an `InternalError`.
pub fn guarded<T>(work: impl FnOnce() -> napi::Result<T>) -> napi::Result<T> {
    catch_unwind(AssertUnwindSafe(work))
        .unwrap_or_else(|panic| Err(error(Class::Internal, panic_message(&*panic))))
}

/// Runs `work` where it is polled (no task of its own: a second task would be one more hand-off between
/// threads per call); a panic in it becomes an `InternalError`.
pub async fn panics_caught<T: Send + 'static>(
    work: impl Future<Output = napi::Result<T>> + Send + 'static,
) -> napi::Result<T> {
    AssertUnwindSafe(work)
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| Err(error(Class::Internal, panic_message(&*panic))))
}

/// Panics inside the boundaries of the JavaScript thread and of the runtime, as every entry point runs
/// the library: lets the tests check that a panic reaches JavaScript as an `InternalError`.
#[napi_derive::napi(js_name = "_panicForTest")]
pub fn panic_for_test(
    env: &napi::Env,
    in_task: bool,
) -> napi::Result<napi::bindgen_prelude::PromiseRaw<'_, ()>> {
    if !in_task {
        guarded(|| -> napi::Result<()> { panic!("panic requested by the test") })?;
    }
    crate::running::promise_of(env, async { panic!("panic requested by the test") })
}

/// A task whose `compute` panics inside [`guarded`], as the decoder's tasks run the library on libuv's
/// pool.
pub struct PanicOnPool;

#[napi_derive::napi]
impl napi::Task for PanicOnPool {
    type Output = ();
    type JsValue = ();

    fn compute(&mut self) -> napi::Result<()> {
        guarded(|| -> napi::Result<()> { panic!("panic requested by the test") })
    }

    fn resolve(&mut self, _env: napi::Env, (): ()) -> napi::Result<()> {
        Ok(())
    }
}

/// Panics inside the boundary of a task on libuv's pool: lets the tests check that such a panic
/// reaches JavaScript as an `InternalError` and does not abort the process.
#[napi_derive::napi(js_name = "_panicOnPoolForTest")]
pub fn panic_on_pool_for_test() -> napi::bindgen_prelude::AsyncTask<PanicOnPool> {
    napi::bindgen_prelude::AsyncTask::new(PanicOnPool)
}
