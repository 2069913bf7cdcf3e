//! The bundled tools' code, compiled when turngate was built (`build.rs`, with the settings of
//! `settings.rs`), so that a process loads a bundled tool instead of compiling it at its first call.
//!
//! Each entry is found by the SHA-256 of the component it was compiled from, so it stands only for
//! those exact bytes. It is native code for a baseline CPU of the target's architecture (x86-64-v2 on
//! x86_64), loaded only by an engine whose CPU has every feature it uses (wasmtime checks); a build for
//! another architecture than the build machine's embeds none.

include!(concat!(env!("OUT_DIR"), "/precompiled.rs"));

/// The code compiled when turngate was built for the component whose SHA-256 is `sha256`, if it is a
/// bundled one.
pub(super) fn code_of(sha256: &str) -> Option<&'static [u8]> {
    if crate::test_hooks::ignore_precompiled() {
        return None;
    }
    PRECOMPILED
        .iter()
        .find(|(digest, _)| *digest == sha256)
        .map(|(_, code)| *code)
}

/// Drops the pages of `code` (an entry of [`code_of`]) that this process read, once the code is in
/// the cache or loaded: the binary's pages would otherwise stay in its resident memory (10 MiB for
/// every bundled tool) though nothing reads them again.
pub(super) fn release(code: &'static [u8]) {
    crate::platform::release_read_only(code);
}
