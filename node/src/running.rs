//! Where the addon's asynchronous work runs: each call, turn, journal read or undo on a thread of the
//! runtime's blocking pool, which drives it to the end with `block_on` and settles its promise from
//! there, as the Python package's calling thread does.
//!
//! Not as a task on a runtime worker: a tool without a view runs on the task that polls it, and a
//! worker polling it (between its other tasks and its I/O driver) made a no-op call 127 µs against 51
//! µs driven by `block_on`, in a dev-profile probe (BENCHMARKS.md, below the bindings table). Not on libuv's pool either: an approver
//! can hold a call for minutes, and that pool's four threads also decode. The blocking pool grows with
//! the calls waiting at once and lets its idle threads go.

use std::future::Future;

use napi::bindgen_prelude::{PromiseRaw, ToNapiValue, spawn_blocking};
use napi::{Env, JsValue};

use crate::errors::panics_caught;

/// A promise of `work`'s answer; `work` runs on a thread of the blocking pool, its panics caught.
pub fn promise_of<'env, T>(
    env: &'env Env,
    work: impl Future<Output = napi::Result<T>> + Send + 'static,
) -> napi::Result<PromiseRaw<'env, T>>
where
    T: ToNapiValue + Send + 'static,
{
    let (deferred, promise) = env.create_deferred()?;
    spawn_blocking(move || {
        let runtime = tokio::runtime::Handle::current();
        match runtime.block_on(panics_caught(work)) {
            Ok(value) => deferred.resolve(move |_| Ok(value)),
            Err(error) => deferred.reject(error),
        }
    });
    Ok(PromiseRaw::new(env.raw(), promise.raw()))
}
