//! Leaves the interpreter's symbols to the process that loads the extension module. maturin tells the
//! linker so itself; this tells it for a plain `cargo build` (`cargo test --workspace` links the module
//! too), which on macOS fails without it (`-undefined dynamic_lookup`; elsewhere nothing is needed).
fn main() {
    pyo3_build_config::add_extension_module_link_args();
}
