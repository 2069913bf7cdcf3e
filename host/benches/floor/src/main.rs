//! The floor of a one-shot tool call: what any host pays to run one precompiled tool in wasmtime from a
//! new process, and nothing else. It loads the component from a precompiled cache entry, instantiates it
//! in a pool of one slot on a current-thread runtime with the root preopened read-write (the engine
//! configured as turngate's, so the entry is compatible), calls `call` with the input, then flushes the
//! file the tool wrote and the root, as a durable write does. No gate, no schema, no view, no journal.
//!
//! `turngate-bench-floor <entry.cwasm> <root> <file the call writes> <input JSON>`; prints the result.

use wasmtime::component::{Component, Linker, ResourceTable, Val};
use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig, Store};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxView, WasiView};

struct Call {
    ctx: WasiCtx,
    table: ResourceTable,
}

impl WasiView for Call {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.ctx,
            table: &mut self.table,
        }
    }
}

#[tokio::main(flavor = "current_thread")]
#[allow(clippy::disallowed_methods)] // a plain process: its flushes go through std::fs on purpose
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, entry, root, written, input] = args.as_slice() else {
        panic!(
            "usage: turngate-bench-floor <entry.cwasm> <root> <file the call writes> <input JSON>"
        );
    };
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(1)
        .total_stacks(1)
        .total_core_instances(4)
        .total_memories(4)
        .total_tables(4);
    let mut config = Config::new();
    config
        .wasm_component_model(true)
        .epoch_interruption(true)
        .signals_based_traps(false)
        .memory_guard_size(0)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    let engine = Engine::new(&config).unwrap();
    // SAFETY: the entry is one turngate compiled into the bench's own cache.
    let component = unsafe { Component::deserialize_file(&engine, entry) }.unwrap();
    let mut linker = Linker::<Call>::new(&engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).unwrap();
    let ctx = WasiCtx::builder()
        .preopened_dir(root, "/", FsPerms::ReadWrite)
        .unwrap()
        .build();
    let mut store = Store::new(
        &engine,
        Call {
            ctx,
            table: ResourceTable::new(),
        },
    );
    store.set_epoch_deadline(u64::MAX);
    let instance = linker
        .instantiate_async(&mut store, &component)
        .await
        .unwrap();
    let call = instance.get_func(&mut store, "call").unwrap();
    let mut result = [Val::Bool(false)];
    call.call_async(&mut store, &[Val::String(input.clone())], &mut result)
        .await
        .unwrap();
    let written = std::path::Path::new(root).join(written);
    std::fs::File::open(written).unwrap().sync_all().unwrap();
    std::fs::File::open(root).unwrap().sync_all().unwrap();
    println!("{:?}", result[0]);
}
