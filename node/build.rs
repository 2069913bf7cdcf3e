//! Link flags an N-API addon needs (on macOS, Node's symbols are looked up at load time).
fn main() {
    napi_build::setup();
}
