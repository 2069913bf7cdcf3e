//! `turngate tools list | inspect | check | lock`: commands for tool authors and for pinning a tools
//! directory.

use std::path::Path;

use anyhow::Result;
use serde_json::{Value, json};
use turngate::lockfile::{LOCK_FILE, PinnedTool, ToolLock};
use turngate::{Access, LoadedTool, RunError, ToolError, ToolOrigin, Toolbox, ToolboxBuilder};

/// Prints every tool: name, origin, declared paths and access.
pub fn list(toolbox: &Toolbox) -> Result<()> {
    outln!("{:<16} {:<10} {:<28} origin", "tool", "access", "paths")?;
    for tool in toolbox.tools() {
        let d = tool.descriptor();
        let access = match d.filesystem_access() {
            None => "none",
            Some(Access::Read) => "read-only",
            Some(Access::Write) => "read-write",
        };
        let paths: Vec<String> = d
            .paths
            .iter()
            .map(|p| {
                format!(
                    "{} ({})",
                    p.pointer,
                    if p.access == Access::Read {
                        "read"
                    } else {
                        "write"
                    }
                )
            })
            .collect();
        let origin = match tool.registry() {
            Some(entry) => format!(
                "{} ({}, signed by {})",
                entry.source.as_deref().unwrap_or_default(),
                entry.manifest.map(|d| d.to_string()).unwrap_or_default(),
                entry.signer.as_ref().map_or_else(
                    || "nobody: installed unsigned".to_owned(),
                    |s| s.to_string()
                )
            ),
            None => tool.origin().to_string(),
        };
        outln!(
            "{:<16} {:<10} {:<28} {}",
            d.name,
            access,
            paths.join(", "),
            origin
        )?;
    }
    Ok(())
}

/// Pins every component of `dir` in `dir/turngate.lock` (written atomically) and prints the lock. An
/// entry already there for the same file and digest is kept as it is (a tool installed from a registry
/// keeps its source, manifest, signer and grants).
pub async fn lock(builder: ToolboxBuilder, dir: &Path) -> Result<()> {
    let toolbox = builder.without_bundled().tools_dir(dir).build().await?;
    let before = match std::fs::read_to_string(dir.join(LOCK_FILE)) {
        Ok(text) => ToolLock::parse(&text)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => ToolLock::default(),
        Err(e) => return Err(e.into()),
    };
    let pinned = toolbox.tools().filter_map(|tool| match tool.origin() {
        ToolOrigin::File(path) => {
            let file = path.file_name()?.to_string_lossy().into_owned();
            Some(match before.get(&file) {
                Some(kept) if kept.sha256 == tool.sha256() => kept.clone(),
                _ => PinnedTool::local(
                    file,
                    tool.descriptor().name.clone(),
                    tool.sha256().to_owned(),
                ),
            })
        }
        _ => None,
    });
    let text = ToolLock::new(pinned).render();
    let mut temp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut temp, text.as_bytes())?;
    temp.as_file().sync_all()?;
    temp.persist(dir.join(LOCK_FILE))?;
    out!("{text}")?;
    Ok(())
}

/// Loads one component on its own (no bundled tools).
async fn load_one(builder: ToolboxBuilder, file: &Path) -> Result<Toolbox, turngate::ToolboxError> {
    builder
        .without_bundled()
        .component_file(file)?
        .build()
        .await
}

/// Prints one component's descriptor, schema and imports.
pub async fn inspect(builder: ToolboxBuilder, file: &Path) -> Result<()> {
    let toolbox = load_one(builder, file).await?;
    let tool = toolbox.tools().next().expect("one component loaded");
    let d = tool.descriptor();
    let mut out = json!({
        "name": d.name,
        "description": d.description,
        "paths": d.paths,
        "sandbox_access": d.filesystem_access(),
        "input_schema": d.input_schema,
        "imports": tool.imports(),
        "wasi": tool.wasi(),
    });
    // A component installed from a registry: what its directory's lock records of it.
    if let Some(entry) = registry_entry(file) {
        out["source"] = json!(entry.source);
        out["manifest"] = json!(entry.manifest);
        out["signer"] = json!(entry.signer);
        out["unsigned"] = json!(entry.unsigned);
        out["grants_accepted"] = entry
            .grants
            .as_deref()
            .and_then(|g| serde_json::from_str(g).ok())
            .unwrap_or(Value::Null);
    }
    outln!("{}", serde_json::to_string_pretty(&out)?)?;
    Ok(())
}

/// The lock entry of `file` when its directory's lock records it as installed from a registry.
fn registry_entry(file: &Path) -> Option<PinnedTool> {
    let dir = file.parent()?;
    let text = std::fs::read_to_string(dir.join(LOCK_FILE)).ok()?;
    let lock = ToolLock::parse(&text).ok()?;
    lock.get(&file.file_name()?.to_string_lossy())
        .filter(|e| e.from_registry())
        .cloned()
}

/// An input the tool's schema forbids: a missing required field, an unknown field, or a wrong type.
fn forbidden_input(tool: &LoadedTool) -> Option<Value> {
    let schema = &tool.descriptor().input_schema;
    let mut candidates = vec![json!({}), json!({"turngate_conformance_probe": true})];
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            let wrong = match property.get("type").and_then(Value::as_str) {
                Some("string") => json!(12345),
                Some(_) => json!("turngate conformance probe"),
                None => continue,
            };
            candidates.push(json!({ name: wrong }));
        }
    }
    candidates.into_iter().find(|c| !tool.accepts(c))
}

/// Runs the conformance check; returns whether the component passed.
pub async fn check(builder: ToolboxBuilder, file: &Path) -> Result<bool> {
    outln!("checking {}", file.display())?;
    let toolbox = match load_one(builder, file).await {
        Ok(toolbox) => toolbox,
        Err(error) => {
            outln!("  FAIL  load: {error}")?;
            return Ok(false);
        }
    };
    let tool = toolbox.tools().next().expect("one component loaded");
    let d = tool.descriptor();
    let generation = match tool.wasi() {
        Some(version) => format!("built for WASI {version}"),
        None => "importing nothing of WASI".to_owned(),
    };
    // A component that imports WASI 0.3 loads only with `call` an async func (`async-tool`).
    let world = match tool.wasi() {
        Some("0.3") => "turngate:tool/async-tool@0.1.0",
        _ => "turngate:tool/tool@0.1.0",
    };
    outln!("  ok    loads as a component of the tool world ({world}), {generation}")?;
    outln!(
        "  ok    describes itself as `{}`; its input schema is valid JSON Schema for an object",
        d.name
    )?;
    outln!(
        "  ok    imports only what the sandbox grants: {}",
        tool.imports().join(", ")
    )?;
    let mut passed = true;
    let strict = d.input_schema.get("additionalProperties") == Some(&Value::Bool(false));
    if !strict {
        outln!(
            "  warn  the schema allows properties it does not list (set \"additionalProperties\": false)"
        )?;
    }
    let Some(input) = forbidden_input(tool) else {
        outln!(
            "  FAIL  the schema accepts every probe input; it should constrain the input object"
        )?;
        return Ok(false);
    };
    let outcome = toolbox
        .probe(&d.name, &input.to_string())
        .await
        .expect("the tool is loaded");
    match outcome.result {
        Err(turngate::CallError::Run(RunError::Tool(ToolError::InvalidInput(message)))) => {
            outln!(
                "  ok    answers {input}, which its schema forbids, with invalid-input ({message})"
            )?;
        }
        other => {
            passed = false;
            let got = match other {
                Ok(output) => format!("success: {output}"),
                Err(e) => e.to_string(),
            };
            outln!(
                "  FAIL  answers {input}, which its schema forbids, with {got}; expected invalid-input"
            )?;
        }
    }
    outln!("{}", if passed { "passed" } else { "failed" })?;
    Ok(passed)
}
