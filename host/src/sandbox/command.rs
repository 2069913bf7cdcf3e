//! A WASI 0.3 command (`wasi:cli/run@0.3.0`) run over a view, for the standard's own filesystem tests
//! (`tests/wasi_testsuite.rs`): the engine, linker, view and limits of a tool's call, with the command's
//! `run` in place of the tool world's `call`. What the command writes is staged in its view and dropped
//! with it, never applied.

use std::sync::Arc;

use bytes::Bytes;
use wasmtime::component::Component;

use super::edition::Edition;
use super::{CacheSetting, CompileIn, Instances, Limits, RunError, Sandbox, classify};
use crate::descriptor::Access;
use crate::policy::Policy;
use crate::resolve::RelPath;
use crate::root::Root;
use crate::view::staging::STAGING_DIR;
use crate::view::{CallView, Grant};

/// The export a WASI 0.3 command runs through.
const RUN_INTERFACE: &str = "wasi:cli/run@0.3.0";

/// How a command ended.
#[derive(Debug)]
pub struct CommandRun {
    /// Its exit status: 0 when `run` returned `ok`, 1 for `err`, else what it passed to `exit`.
    pub exit: i32,
    /// What it wrote to stdout.
    pub stdout: Bytes,
    /// What it wrote to stderr.
    pub stderr: Bytes,
}

/// Runs the command `component` over a view of `root` whose only grant is the whole root, writable (its
/// one preopened directory), under `limits`. An error is a command that could not be run, trapped or
/// ran out of a limit.
pub async fn run_wasi_command(
    component: &[u8],
    root: &Root,
    limits: Limits,
) -> Result<CommandRun, RunError> {
    let setup = |what: &str, e: &dyn std::fmt::Display| RunError::Setup(format!("{what}: {e}"));
    let staging = root
        .staging_dir(STAGING_DIR)
        .map_err(|e| setup("the staging directory", &e))?;
    let view = CallView::new(
        root,
        Some(staging),
        "wasi-testsuite",
        &Policy::allow_all(),
        vec![Grant {
            location: RelPath::root(),
            access: Access::Write,
        }],
        limits.staged_bytes,
    );
    let sandbox = Sandbox::new(
        limits,
        &CacheSetting::Disabled,
        1,
        Instances::OnDemand,
        CompileIn::ThisProcess,
    )
    .map_err(|e| setup("the engine", &e))?;
    sandbox.run_command(component, view).await
}

impl Sandbox {
    /// Runs a WASI 0.3 command over `view` within the wall-time limit.
    async fn run_command(&self, bytes: &[u8], view: CallView) -> Result<CommandRun, RunError> {
        let setup = |e: wasmtime::Error| RunError::Setup(format!("{e:#}"));
        let runtime = self.runtime(Edition::Wasi03).map_err(setup)?;
        let component = Component::new(&runtime.engine, bytes).map_err(setup)?;
        let linker = runtime.linker_for(&[]).map_err(setup)?;
        runtime.start_ticker();
        let (mut store, stdout, stderr, _network) =
            self.new_store(&runtime.engine, Some(view), None, &[], Arc::default());
        let work = async {
            let instance = linker.instantiate_async(&mut store, &component).await?;
            let interface = instance
                .get_export_index(&mut store, None, RUN_INTERFACE)
                .ok_or_else(|| wasmtime::format_err!("the component exports no {RUN_INTERFACE}"))?;
            let run = instance
                .get_export_index(&mut store, Some(&interface), "run")
                .ok_or_else(|| wasmtime::format_err!("{RUN_INTERFACE} has no `run`"))?;
            let run = instance.get_typed_func::<(), (Result<(), ()>,)>(&mut store, run)?;
            let (ran,) = run.call_async(&mut store, ()).await?;
            wasmtime::Result::Ok(ran)
        };
        let exit = match tokio::time::timeout(self.limits.wall_time, work).await {
            Err(_) => {
                return Err(RunError::Timeout {
                    limit: self.limits.wall_time,
                });
            }
            Ok(Ok(Ok(()))) => 0,
            Ok(Ok(Err(()))) => 1,
            Ok(Err(error)) => match wasmtime::Error::downcast_ref::<wasmtime_wasi::I32Exit>(&error)
            {
                Some(exit) => exit.0,
                None => return Err(classify(error, &stderr.contents(), self.limits)),
            },
        };
        // The view (with whatever the command staged) is dropped with the store, never applied.
        drop(store);
        Ok(CommandRun {
            exit,
            stdout: stdout.contents(),
            stderr: stderr.contents(),
        })
    }
}
