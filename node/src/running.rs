//! Where the addon's asynchronous work runs: each call, turn, journal read or undo on one of the
//! addon's threads ([`turngate::threads::Threads`]), which drives it to the end with `block_on` and
//! answers from there, as the Python package's calling thread does.
//!
//! Not as a task on a runtime worker: a tool without a view runs on the task that polls it, and a
//! worker polling it (between its other tasks and its I/O driver) made a no-op call 127 µs against 51
//! µs driven by `block_on`, in a dev-profile probe (BENCHMARKS.md, below the bindings table). Not on
//! libuv's pool either: an approver can hold a call for minutes, and that pool's four threads also
//! decode. The pool grows with the work waiting at once and keeps its idle threads looking for the
//! next job for a moment before they sleep.
//!
//! A call whose tool answered quickly last time is looked for on the JavaScript thread for at most
//! [`LINGER`] before it becomes a promise ([`answer_or_promise`]): settling a promise wakes the event
//! loop, which costs about 50 µs on a virtual machine whose idle CPUs halt, several times a small
//! call. The event loop is held that long at most, and only for tools that answer within it.

use std::sync::{LazyLock, Mutex};
use std::time::Instant;

use napi::bindgen_prelude::{Either, PromiseRaw, ToNapiValue, within_runtime_if_available};
use napi::{Env, JsDeferred, JsValue};
use turngate::threads::{LINGER, Threads};

use crate::errors::{Class, error, panics_caught};

/// The addon's threads.
static THREADS: LazyLock<Threads> = LazyLock::new(|| Threads::new("turngate-node"));

/// Runs `work` to its end on one of the addon's threads, its panics caught; `answer` gets the result
/// there.
fn run<T: Send + 'static>(
    work: impl Future<Output = napi::Result<T>> + Send + 'static,
    answer: impl FnOnce(napi::Result<T>) + Send + 'static,
) -> napi::Result<()> {
    let runtime = within_runtime_if_available(tokio::runtime::Handle::current);
    THREADS
        .spawn(move || answer(runtime.block_on(panics_caught(work))))
        .map_err(|e| error(Class::Internal, format!("cannot start a thread: {e}")))
}

/// A promise of `work`'s answer.
pub fn promise_of<'env, T>(
    env: &'env Env,
    work: impl Future<Output = napi::Result<T>> + Send + 'static,
) -> napi::Result<PromiseRaw<'env, T>>
where
    T: ToNapiValue + Send + 'static,
{
    let (deferred, promise) = env.create_deferred()?;
    run(work, move |result| settle(deferred, result))?;
    Ok(PromiseRaw::new(env.raw(), promise.raw()))
}

/// `work`'s answer itself when it comes within [`LINGER`] and `look` is set (the JavaScript thread
/// looks for it that long, yielding the CPU between looks), else a promise of it.
pub fn answer_or_promise<'env, T>(
    env: &'env Env,
    look: bool,
    work: impl Future<Output = napi::Result<T>> + Send + 'static,
) -> napi::Result<Either<T, PromiseRaw<'env, T>>>
where
    T: ToNapiValue + Send + 'static,
{
    let slot = std::sync::Arc::new(Mutex::new(Slot::Running));
    let answered = slot.clone();
    run(work, move |result| {
        let mut slot = answered.lock().unwrap_or_else(|e| e.into_inner());
        match std::mem::replace(&mut *slot, Slot::Running) {
            Slot::Promised(deferred) => {
                drop(slot);
                settle(deferred, result);
            }
            _ => *slot = Slot::Done(result),
        }
    })?;
    let since = Instant::now();
    loop {
        let mut taken = slot.lock().unwrap_or_else(|e| e.into_inner());
        if let Slot::Done(_) = &*taken {
            let Slot::Done(result) = std::mem::replace(&mut *taken, Slot::Running) else {
                unreachable!("just matched")
            };
            return result.map(Either::A);
        }
        if !look || since.elapsed() >= LINGER {
            // The worker settles the promise when it finishes; it waits for this lock to see it.
            let (deferred, promise) = env.create_deferred()?;
            *taken = Slot::Promised(deferred);
            return Ok(Either::B(PromiseRaw::new(env.raw(), promise.raw())));
        }
        drop(taken);
        std::thread::yield_now();
    }
}

type Resolver<T> = Box<dyn FnOnce(Env) -> napi::Result<T> + Send>;

/// Where a job's answer meets the JavaScript thread.
enum Slot<T: ToNapiValue + 'static> {
    /// Neither has come yet.
    Running,
    /// The answer came first.
    Done(napi::Result<T>),
    /// The JavaScript thread stopped looking first: the answer settles this.
    Promised(JsDeferred<T, Resolver<T>>),
}

fn settle<T: ToNapiValue + Send + 'static>(
    deferred: JsDeferred<T, Resolver<T>>,
    result: napi::Result<T>,
) {
    match result {
        Ok(value) => deferred.resolve(Box::new(move |_| Ok(value))),
        Err(error) => deferred.reject(error),
    }
}
