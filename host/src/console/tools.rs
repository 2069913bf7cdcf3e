//! The tools the console was started with, and where each came from: `GET /api/tools` answers
//! `{"loaded": bool, "tools": [{"name", "description", "sha256", "origin", "wasi", "network",
//! "paths": [{"pointer", "access"}], "registry": null | {"source", "manifest", "signer", "unsigned",
//! "grants"}}]}`, by name. `origin` is `bundled`, the component's file, or an embedding program's label;
//! `registry` is what the tools directory's `turngate.lock` records for a tool installed from a
//! registry (the manifest it was pulled by, who signed it as the install verified, the grants the
//! user accepted).

use hyper::{Response, StatusCode};
use serde_json::json;

use super::{Body, State, json};

/// `GET /api/tools`.
pub(super) fn listing(state: &State) -> Response<Body> {
    let Some(toolbox) = &state.tools else {
        return json(StatusCode::OK, &json!({"loaded": false, "tools": []}));
    };
    let mut tools: Vec<_> = toolbox.tools().collect();
    tools.sort_by(|a, b| a.descriptor().name.cmp(&b.descriptor().name));
    let tools: Vec<_> = tools
        .into_iter()
        .map(|tool| {
            let descriptor = tool.descriptor();
            json!({
                "name": descriptor.name,
                "description": descriptor.description,
                "sha256": tool.sha256(),
                "origin": tool.origin().to_string(),
                "wasi": tool.wasi(),
                "network": tool.reaches_network(),
                "paths": descriptor.paths.iter().map(|p| json!({"pointer": p.pointer, "access": p.access})).collect::<Vec<_>>(),
                "registry": tool.registry().map(|entry| json!({
                    "source": entry.source,
                    "manifest": entry.manifest,
                    "signer": entry.signer.as_ref().map(ToString::to_string),
                    "unsigned": entry.unsigned,
                    "grants": entry.grants,
                })),
            })
        })
        .collect();
    json(StatusCode::OK, &json!({"loaded": true, "tools": tools}))
}
