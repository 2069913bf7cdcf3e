//! The WASI 0.2 interfaces a tool may import, and nothing else.
//!
//! Tools get `wasi:io`, `wasi:cli` (environment, exit, stdio, terminal), `wasi:clocks`, `wasi:filesystem`
//! and `wasi:random`; components that import `wasi:http` (types and outgoing-handler) get it too, in a
//! linker of their own, with every request checked by the call's network hooks. `wasi:sockets` is deliberately not linked (unlike `wasmtime_wasi::p2::add_to_linker_async`),
//! so a component that imports it is refused when it is loaded, with the imports named, rather than
//! denied one address at a time at run time. `wasi:filesystem` is turngate's own implementation over
//! the call's view (`filesystem.rs`), not wasmtime-wasi's over a host directory.

use wasmtime::component::{HasData, Linker, ResourceTable};
use wasmtime_wasi::WasiView;
use wasmtime_wasi::cli::{WasiCli, WasiCliView as _};
use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView as _};
use wasmtime_wasi::p2::bindings::{cli, clocks, random};
use wasmtime_wasi::random::WasiRandom;
use wasmtime_wasi_io::bindings::wasi::io;

use super::bindings::view;
use super::filesystem::{ViewCtx, ViewFilesystem};

/// Interface namespaces the sandbox grants (`wasi:io/streams@0.2.6` is granted, `wasi:sockets/tcp` is not).
pub(crate) const GRANTED: &[&str] = &[
    "wasi:io/",
    "wasi:cli/",
    "wasi:clocks/",
    "wasi:filesystem/",
    "wasi:random/",
    "wasi:http/types@",
    "wasi:http/outgoing-handler@",
];

/// Whether a component imports `wasi:http`, so it is linked with [`add_http_to_linker`].
pub(crate) fn imports_http(imports: &[String]) -> bool {
    imports.iter().any(|name| name.starts_with("wasi:http/"))
}

/// Links `wasi:http` (p2: types and outgoing-handler); every request goes to the store's hooks
/// (`network/hooks.rs`).
pub(crate) fn add_http_to_linker<T: wasmtime_wasi_http::WasiHttpView + 'static>(
    l: &mut Linker<T>,
) -> wasmtime::Result<()> {
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(l)
}

/// The tool world's own types interface, which carries no functions.
pub(crate) const TOOL_TYPES: &str = "turngate:tool/types";

/// Whether an import name is something the sandbox provides.
pub(crate) fn is_granted(import: &str) -> bool {
    !is_wasi_0_3(import)
        && (import.starts_with(TOOL_TYPES)
            || GRANTED.iter().any(|prefix| import.starts_with(prefix)))
}

/// Whether an import is a WASI 0.3 interface (`wasi:cli/stdout@0.3.0`, or one of 0.3's release
/// candidates): the sandbox serves WASI 0.2, so a component importing one is refused at load with the
/// imports named, not with the linker's "no matching implementation".
pub(crate) fn is_wasi_0_3(import: &str) -> bool {
    import.starts_with("wasi:")
        && import
            .split_once('@')
            .is_some_and(|(_, version)| version.starts_with("0.3."))
}

/// The WASI generation a component's imports target ("0.2"), or `None` when it imports nothing of WASI.
pub(crate) fn generation(imports: &[String]) -> Option<&'static str> {
    imports
        .iter()
        .any(|name| name.starts_with("wasi:"))
        .then_some("0.2")
}

/// `wasi:io` resources live in the store's resource table.
struct HasIo;

impl HasData for HasIo {
    type Data<'a> = &'a mut ResourceTable;
}

/// Links the granted interfaces into `linker`; `filesystem` reaches the call's view in the store.
pub(crate) fn add_to_linker<T: WasiView>(
    l: &mut Linker<T>,
    filesystem: fn(&mut T) -> ViewCtx<'_>,
) -> wasmtime::Result<()> {
    io::error::add_to_linker::<T, HasIo>(l, |t| t.ctx().table)?;
    io::poll::add_to_linker::<T, HasIo>(l, |t| t.ctx().table)?;
    io::streams::add_to_linker::<T, HasIo>(l, |t| t.ctx().table)?;
    clocks::wall_clock::add_to_linker::<T, WasiClocks>(l, T::clocks)?;
    clocks::monotonic_clock::add_to_linker::<T, WasiClocks>(l, T::clocks)?;
    view::wasi::filesystem::preopens::add_to_linker::<T, ViewFilesystem>(l, filesystem)?;
    view::wasi::filesystem::types::add_to_linker::<T, ViewFilesystem>(l, filesystem)?;
    random::random::add_to_linker::<T, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure::add_to_linker::<T, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure_seed::add_to_linker::<T, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    cli::exit::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::environment::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_input::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_output::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;
    Ok(())
}
