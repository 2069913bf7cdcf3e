//! The tools as `tools/list` shows them: name, description and input schema from each tool's checked
//! descriptor, and annotations from the access it declares.
//!
//! The hints say what the sandbox lets a tool do, not what the tool claims: a tool that declares no
//! path, or only paths it reads, gets a read-only view (`readOnlyHint`); a tool that declares a path it
//! writes may create, replace or delete files there (`destructiveHint`). A tool that imports `wasi:http`
//! may reach the network where its policy grants it (`openWorldHint`, and not `readOnlyHint`: what a
//! request changes is the server's business); no other tool does (`openWorldHint: false`).
//!
//! A tool installed from a registry says where it came from in `_meta` (`dev.turngate/source`,
//! `dev.turngate/manifest`, `dev.turngate/signer`, `dev.turngate/unsigned`), as its lock records it.

use std::sync::Arc;

use rmcp::model::{MetaObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use crate::descriptor::{Access, ToolDescriptor};
use crate::toolbox::{LoadedTool, Toolbox};

/// Every tool of the toolbox, in the toolbox's order.
pub fn tools(toolbox: &Toolbox) -> Vec<Tool> {
    toolbox.tools().map(tool).collect()
}

/// One tool's listing.
pub fn tool(loaded: &LoadedTool) -> Tool {
    let descriptor: &ToolDescriptor = loaded.descriptor();
    let network = loaded.reaches_network();
    let schema = match &descriptor.input_schema {
        Value::Object(schema) => schema.clone(),
        // Descriptors are checked at load: the schema is an object schema.
        _ => serde_json::Map::new(),
    };
    let writes = descriptor.filesystem_access() == Some(Access::Write);
    let annotations = ToolAnnotations::new()
        .read_only(!writes && !network)
        .destructive(writes)
        .open_world(network);
    let listed = Tool::new(
        descriptor.name.clone(),
        descriptor.description.clone(),
        Arc::new(schema),
    )
    .with_annotations(annotations);
    match loaded.registry() {
        Some(entry) => {
            let mut meta = serde_json::Map::new();
            meta.insert("dev.turngate/source".into(), json!(entry.source));
            meta.insert("dev.turngate/manifest".into(), json!(entry.manifest));
            meta.insert("dev.turngate/signer".into(), json!(entry.signer));
            meta.insert("dev.turngate/unsigned".into(), json!(entry.unsigned));
            listed.with_meta(MetaObject(meta))
        }
        None => listed,
    }
}
