//! The WASI interfaces a tool may import, and nothing else.
//!
//! Tools get WASI 0.2's `wasi:io`, `wasi:cli` (environment, exit, stdio, terminal), `wasi:clocks`,
//! `wasi:filesystem` and `wasi:random`; components that import `wasi:http` (types and outgoing-handler)
//! get it too, in a linker of their own, with every request checked by the call's network hooks. Tools
//! built for WASI 0.3 get all of that (their toolchains' standard libraries still import 0.2) plus 0.3's
//! `wasi:cli`, `wasi:clocks` (no time zones), `wasi:filesystem` and `wasi:random`, and `wasi:http`'s
//! types and client through the same hooks. `wasi:sockets` is deliberately not linked in either generation (unlike
//! `wasmtime_wasi::p2::add_to_linker_async`), so a component that imports it is refused when it is
//! loaded, with the imports named, rather than denied one address at a time at run time; so is any 0.3
//! interface not listed here, and 0.3's release candidates, which no host serves. `wasi:filesystem` is
//! turngate's own implementation over the call's view (`filesystem/`, both generations), not
//! wasmtime-wasi's over a host directory.

use wasmtime::component::{HasData, Linker, ResourceTable};
use wasmtime_wasi::WasiView;
use wasmtime_wasi::cli::{WasiCli, WasiCliView as _};
use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView as _};
use wasmtime_wasi::p2::bindings::{cli, clocks, random};
use wasmtime_wasi::random::WasiRandom;
use wasmtime_wasi_io::bindings::wasi::io;

use super::bindings::{view, view_0_3};
use super::edition::is_wasi_0_3;
use super::filesystem::{ViewCtx, ViewFilesystem};

/// WASI 0.2 interface namespaces the sandbox grants (`wasi:io/streams@0.2.6` is granted,
/// `wasi:sockets/tcp` is not).
pub(crate) const GRANTED: &[&str] = &[
    "wasi:io/",
    "wasi:cli/",
    "wasi:clocks/",
    "wasi:filesystem/",
    "wasi:random/",
    "wasi:http/types@",
    "wasi:http/outgoing-handler@",
];

/// WASI 0.3 interfaces the sandbox grants, to components built for it (`wasi:cli/stdout@0.3.0` is
/// granted, `wasi:clocks/timezone@0.3.0` and `wasi:sockets/types@0.3.0` are not).
const GRANTED_0_3: &[&str] = &[
    "wasi:cli/",
    "wasi:clocks/types@",
    "wasi:clocks/monotonic-clock@",
    "wasi:clocks/system-clock@",
    "wasi:filesystem/",
    "wasi:random/",
    "wasi:http/types@",
    "wasi:http/client@",
];

/// Whether a component imports `wasi:http`, so it is linked with [`add_http_to_linker`].
pub(crate) fn imports_http(imports: &[String]) -> bool {
    imports.iter().any(|name| name.starts_with("wasi:http/"))
}

/// Links `wasi:http` (0.2: types and outgoing-handler; with `wasi_0_3`, 0.3's types and client too);
/// every request of either goes to the store's hooks (`network/hooks.rs`).
pub(crate) fn add_http_to_linker<T: wasmtime_wasi_http::WasiHttpView + 'static>(
    l: &mut Linker<T>,
    wasi_0_3: bool,
) -> wasmtime::Result<()> {
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(l)?;
    if wasi_0_3 {
        wasmtime_wasi_http::p3::add_to_linker(l)?;
    }
    Ok(())
}

/// The tool world's own types interface, which carries no functions.
pub(crate) const TOOL_TYPES: &str = "turngate:tool/types";

/// Whether an import name is something the sandbox provides (a 0.3 one only in a released version).
pub(crate) fn is_granted(import: &str) -> bool {
    if import.starts_with(TOOL_TYPES) {
        return true;
    }
    if is_wasi_0_3(import) {
        let released = import
            .split_once('@')
            .is_some_and(|(_, version)| !version.contains('-'));
        return released && GRANTED_0_3.iter().any(|prefix| import.starts_with(prefix));
    }
    GRANTED.iter().any(|prefix| import.starts_with(prefix))
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

/// Links the WASI 0.3 interfaces granted beside the 0.2 ones ([`add_to_linker`]), for components built
/// for 0.3: `wasi:cli`, `wasi:clocks` and `wasi:random` over the same `WasiCtx` as 0.2's, and
/// `wasi:filesystem` over the same view.
pub(crate) fn add_0_3_to_linker<T: WasiView + 'static>(
    l: &mut Linker<T>,
    filesystem: fn(&mut T) -> ViewCtx<'_>,
) -> wasmtime::Result<()> {
    wasmtime_wasi::p3::cli::add_to_linker(l)?;
    wasmtime_wasi::p3::clocks::add_to_linker(l)?;
    wasmtime_wasi::p3::random::add_to_linker(l)?;
    view_0_3::wasi::filesystem::types::add_to_linker::<T, ViewFilesystem>(l, filesystem)?;
    view_0_3::wasi::filesystem::preopens::add_to_linker::<T, ViewFilesystem>(l, filesystem)
}
