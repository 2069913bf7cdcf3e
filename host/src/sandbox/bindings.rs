//! Host bindings of the tool world (`wit/tool.wit`), generated once here.

wasmtime::component::bindgen!({
    world: "tool",
    path: "../wit",
    exports: { default: async },
});

pub(crate) use turngate::tool::types::Access;
