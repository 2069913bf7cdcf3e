//! Embedding turngate: build a toolbox, open a root, run one call, print its outcome.
//!
//! `cargo run --example embed -- DIR` writes `notes.txt` in DIR through the sandboxed `write_file` tool.

use turngate::{Policy, Root, Toolbox};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::args().nth(1).ok_or("usage: embed DIR")?;
    let toolbox = Toolbox::builder().build().await?;
    let root = Root::open(dir)?;
    let outcome = toolbox
        .call(
            &root,
            &Policy::allow_all(),
            "write_file",
            r#"{"path":"notes.txt","content":"hi"}"#,
        )
        .await;
    println!("{}", outcome.to_json());
    Ok(())
}
