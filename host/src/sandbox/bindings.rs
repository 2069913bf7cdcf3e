//! Every `bindgen!` of the host, generated once here: the tool world (`wit/tool.wit`), and the
//! `wasi:filesystem` interfaces of both WASI generations that turngate implements itself over a call's
//! view (`host/wit/`, `host/wit/p3/`).

wasmtime::component::bindgen!({
    world: "tool",
    path: "../wit",
    exports: { default: async },
});

pub(crate) use turngate::tool::types::Access;

/// The `network-tool` world: the tool world plus `url-fields`, which older tools do not export.
pub(crate) mod network_tool {
    wasmtime::component::bindgen!({
        world: "network-tool",
        path: "../wit",
        exports: { default: async },
        with: {
            "turngate:tool/types": super::turngate::tool::types,
        },
    });
}

/// `wasi:filesystem@0.2` with turngate's own descriptor types; `wasi:io` and `wasi:clocks` are
/// wasmtime-wasi's, so streams and pollables are shared with the rest of the WASI context.
pub(crate) mod view {
    wasmtime::component::bindgen!({
        world: "turngate:host/view-filesystem",
        path: "wit",
        imports: { default: trappable },
        require_store_data_send: true,
        trappable_error_type: {
            "wasi:filesystem/types.error-code" => crate::sandbox::filesystem::p2::FsError,
        },
        with: {
            "wasi:io": wasmtime_wasi_io::bindings::wasi::io,
            "wasi:clocks/wall-clock": wasmtime_wasi::p2::bindings::clocks::wall_clock,
            "wasi:filesystem/types.descriptor": crate::sandbox::filesystem::Descriptor,
            "wasi:filesystem/types.directory-entry-stream": crate::sandbox::filesystem::p2::DirectoryEntries,
        },
    });
}

/// `wasi:filesystem@0.3` with turngate's own descriptor type (the same as 0.2's); `wasi:clocks` is
/// wasmtime-wasi's. Reads, writes and listings take the store (they make streams and futures); every
/// other method is an `async func`.
pub(crate) mod view_0_3 {
    wasmtime::component::bindgen!({
        world: "turngate:host-p3/view-filesystem",
        path: "wit/p3",
        imports: {
            "wasi:filesystem/types.[method]descriptor.read-via-stream": store | trappable,
            "wasi:filesystem/types.[method]descriptor.write-via-stream": store | trappable,
            "wasi:filesystem/types.[method]descriptor.append-via-stream": store | trappable,
            "wasi:filesystem/types.[method]descriptor.read-directory": store | trappable,
            default: trappable,
        },
        require_store_data_send: true,
        trappable_error_type: {
            "wasi:filesystem/types.error-code" => crate::sandbox::filesystem::p3::FsError,
        },
        with: {
            "wasi:clocks": wasmtime_wasi::p3::bindings::clocks,
            "wasi:filesystem/types.descriptor": crate::sandbox::filesystem::Descriptor,
        },
    });
}
