//! The Wasm OCI artifact a tool is published as (the CNCF TAG Runtime "Wasm OCI Artifact layout", what
//! wkg, Wassette and wasm-to-oci read and write): an OCI image manifest whose config has the media type
//! [`WASM_CONFIG`] and whose one layer, [`WASM_LAYER`], is the component. Reading one refuses anything
//! else; [`build`] writes one, with the tool's descriptor and requested grants as annotations.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::grants::{GRANTS_ANNOTATION, Grants, GrantsError};
use crate::digest::{DigestError, Sha256Digest};

/// The OCI image manifest media type.
pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
/// The OCI image index media type (a layout's `index.json`, a referrers list).
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
/// The config media type of a Wasm artifact.
pub const WASM_CONFIG: &str = "application/vnd.wasm.config.v0+json";
/// The layer media type of a Wasm component.
pub const WASM_LAYER: &str = "application/wasm";
/// The annotation that holds the tool's self-description (name, description, schema) for people and
/// indexes; what turngate runs is what the component itself describes once it is verified.
pub const DESCRIPTOR_ANNOTATION: &str = "dev.turngate.tool";

/// The most bytes a manifest (or an index) may take: what registries accept by default.
pub const MAX_MANIFEST_BYTES: u64 = 4 << 20;
/// The most bytes a component may take.
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;

/// A content descriptor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// The media type of what it points at.
    pub media_type: String,
    /// `ALGORITHM:ENCODED` as received (see [`Descriptor::sha256`]).
    pub digest: String,
    /// Its size in bytes.
    pub size: u64,
    /// The manifest's own artifact type, as a referrers index lists it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// What names a manifest within a repository: a tag, or the digest of its bytes (a tag cannot hold
/// `:`, so `Source::parse` takes text that does for a digest, which must be a SHA-256 one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagOrDigest {
    /// A tag (`[A-Za-z0-9_][A-Za-z0-9_.-]*`).
    Tag(String),
    /// A manifest's digest.
    Digest(Sha256Digest),
}

impl TagOrDigest {
    /// The digest, when it is one.
    pub fn digest(&self) -> Option<Sha256Digest> {
        match self {
            TagOrDigest::Digest(digest) => Some(*digest),
            TagOrDigest::Tag(_) => None,
        }
    }

    /// The tag, when it is one.
    pub fn tag(&self) -> Option<&str> {
        match self {
            TagOrDigest::Tag(tag) => Some(tag),
            TagOrDigest::Digest(_) => None,
        }
    }
}

impl fmt::Display for TagOrDigest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TagOrDigest::Tag(tag) => f.write_str(tag),
            TagOrDigest::Digest(digest) => write!(f, "{digest}"),
        }
    }
}

impl Descriptor {
    /// The digest it names, if it is a SHA-256 one (the only kind turngate fetches by).
    pub fn sha256(&self) -> Result<Sha256Digest, DigestError> {
        self.digest.parse()
    }
}

/// An OCI image manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Manifest {
    /// Always 2.
    pub schema_version: u32,
    /// [`OCI_MANIFEST`] (optional in the spec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The artifact type (referrers set it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    /// The config blob.
    pub config: Descriptor,
    /// The layers.
    pub layers: Vec<Descriptor>,
    /// The manifest this one refers to (a signature's subject).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Descriptor>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// An OCI image index.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Index {
    /// Always 2.
    pub schema_version: u32,
    /// [`OCI_INDEX`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// The manifests it lists.
    #[serde(default)]
    pub manifests: Vec<Descriptor>,
}

/// Why a manifest is not a tool this host installs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ArtifactError {
    /// The manifest is not JSON of an OCI image manifest.
    #[error("the manifest is not an OCI image manifest: {0}")]
    NotAManifest(String),
    /// The config does not say it is a Wasm artifact.
    #[error("the manifest's config is `{0}`, not a Wasm artifact's `{WASM_CONFIG}`")]
    NotWasm(String),
    /// Not exactly one component layer.
    #[error("the manifest has {count} `{WASM_LAYER}` layers among {layers}: a tool is exactly one")]
    Layers {
        /// The wasm layers.
        count: usize,
        /// All layers.
        layers: usize,
    },
    /// A layer is larger than allowed.
    #[error("the component layer has {size} bytes, more than the {MAX_COMPONENT_BYTES} allowed")]
    TooLarge {
        /// Its size.
        size: u64,
    },
    /// A digest is not `sha256:<64 hex>`.
    #[error(transparent)]
    Digest(#[from] DigestError),
    /// The grants annotation is not valid.
    #[error(transparent)]
    Grants(#[from] GrantsError),
}

/// A manifest checked to be a tool: its component layer and the grants it asks for.
#[derive(Debug, Clone)]
pub struct ToolArtifact {
    /// The manifest as parsed.
    pub manifest: Manifest,
    /// The one component layer.
    pub layer: Descriptor,
    /// Its digest.
    pub layer_digest: Sha256Digest,
    /// The grants the tool asks for (empty when it asks for none).
    pub grants: Grants,
}

impl ToolArtifact {
    /// Checks `bytes` (a manifest, already held to its digest) to be a Wasm component tool.
    pub fn from_manifest(bytes: &[u8]) -> Result<ToolArtifact, ArtifactError> {
        let manifest: Manifest = serde_json::from_slice(bytes)
            .map_err(|e| ArtifactError::NotAManifest(e.to_string()))?;
        if manifest.schema_version != 2
            || manifest
                .media_type
                .as_deref()
                .is_some_and(|t| t != OCI_MANIFEST)
        {
            return Err(ArtifactError::NotAManifest(format!(
                "schema version {}, media type {:?}",
                manifest.schema_version, manifest.media_type
            )));
        }
        if manifest.config.media_type != WASM_CONFIG {
            return Err(ArtifactError::NotWasm(manifest.config.media_type.clone()));
        }
        let wasm: Vec<&Descriptor> = manifest
            .layers
            .iter()
            .filter(|layer| layer.media_type == WASM_LAYER)
            .collect();
        if wasm.len() != 1 || manifest.layers.len() != 1 {
            return Err(ArtifactError::Layers {
                count: wasm.len(),
                layers: manifest.layers.len(),
            });
        }
        let layer = wasm[0].clone();
        let layer_digest = layer.sha256()?;
        if layer.size > MAX_COMPONENT_BYTES {
            return Err(ArtifactError::TooLarge { size: layer.size });
        }
        let grants = match manifest.annotations.get(GRANTS_ANNOTATION) {
            Some(text) => Grants::parse(text)?,
            None => Grants::default(),
        };
        Ok(ToolArtifact {
            manifest,
            layer,
            layer_digest,
            grants,
        })
    }
}

/// The names a component imports and exports at its top level (nested modules and components
/// aside), as the v0 Wasm config lists them; empty for bytes that do not parse.
fn world_of(component: &[u8]) -> (Vec<String>, Vec<String>) {
    use wasmparser::Payload;
    let (mut imports, mut exports) = (Vec::new(), Vec::new());
    let mut depth = 0usize;
    for payload in wasmparser::Parser::new(0).parse_all(component) {
        match payload {
            Ok(Payload::ModuleSection { .. } | Payload::ComponentSection { .. }) => depth += 1,
            Ok(Payload::End(_)) => depth = depth.saturating_sub(1),
            Ok(Payload::ComponentImportSection(section)) if depth == 0 => {
                imports.extend(
                    section
                        .into_iter()
                        .flatten()
                        .map(|i| i.name.name.to_owned()),
                );
            }
            Ok(Payload::ComponentExportSection(section)) if depth == 0 => {
                exports.extend(
                    section
                        .into_iter()
                        .flatten()
                        .map(|e| e.name.name.to_owned()),
                );
            }
            Ok(_) => {}
            Err(_) => return (Vec::new(), Vec::new()),
        }
    }
    (imports, exports)
}

/// The bytes of a Wasm artifact for `component`: its config (the v0 Wasm config: architecture, OS,
/// the layer's digest, the component's imports and exports) and its manifest, annotated with the tool's descriptor (JSON text) and its
/// requested grants. Answers `(config, manifest)`.
pub fn build(
    component: &[u8],
    descriptor: &str,
    grants: &Grants,
    created: &str,
) -> (Vec<u8>, Vec<u8>) {
    let layer_digest = Sha256Digest::of(component).to_string();
    let (imports, exports) = world_of(component);
    let config = serde_json::to_vec(&serde_json::json!({
        "created": created,
        "architecture": "wasm",
        "os": "wasip2",
        "layerDigests": [layer_digest],
        "component": {"imports": imports, "exports": exports},
    }))
    .expect("the config serializes");
    let mut annotations = BTreeMap::from([
        (DESCRIPTOR_ANNOTATION.to_owned(), descriptor.to_owned()),
        (
            "org.opencontainers.image.created".to_owned(),
            created.to_owned(),
        ),
    ]);
    if !grants.is_empty() {
        annotations.insert(GRANTS_ANNOTATION.to_owned(), grants.to_json());
    }
    let manifest = Manifest {
        schema_version: 2,
        media_type: Some(OCI_MANIFEST.to_owned()),
        artifact_type: None,
        config: Descriptor {
            media_type: WASM_CONFIG.to_owned(),
            digest: Sha256Digest::of(&config).to_string(),
            size: config.len() as u64,
            artifact_type: None,
            annotations: BTreeMap::new(),
        },
        layers: vec![Descriptor {
            media_type: WASM_LAYER.to_owned(),
            digest: layer_digest,
            size: component.len() as u64,
            artifact_type: None,
            annotations: BTreeMap::new(),
        }],
        subject: None,
        annotations,
    };
    let manifest = serde_json::to_vec(&manifest).expect("the manifest serializes");
    (config, manifest)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest_with(layers: &[(&str, u64)], config: &str) -> Vec<u8> {
        let layers: Vec<serde_json::Value> = layers
            .iter()
            .map(|(media, size)| {
                serde_json::json!({"mediaType": media, "digest": format!("sha256:{}", "a".repeat(64)), "size": size})
            })
            .collect();
        serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2, "mediaType": OCI_MANIFEST,
            "config": {"mediaType": config, "digest": format!("sha256:{}", "b".repeat(64)), "size": 2},
            "layers": layers,
        }))
        .unwrap()
    }

    #[test]
    fn only_one_component_layer_under_a_wasm_config_is_a_tool() {
        assert!(
            ToolArtifact::from_manifest(&manifest_with(&[(WASM_LAYER, 10)], WASM_CONFIG)).is_ok()
        );
        let refused = |layers: &[(&str, u64)], config: &str| {
            ToolArtifact::from_manifest(&manifest_with(layers, config)).unwrap_err()
        };
        assert!(matches!(
            refused(&[], WASM_CONFIG),
            ArtifactError::Layers { count: 0, .. }
        ));
        assert!(matches!(
            refused(&[(WASM_LAYER, 1), (WASM_LAYER, 1)], WASM_CONFIG),
            ArtifactError::Layers { count: 2, .. }
        ));
        assert!(matches!(
            refused(&[(WASM_LAYER, 1), ("text/yaml", 1)], WASM_CONFIG),
            ArtifactError::Layers {
                count: 1,
                layers: 2
            }
        ));
        assert!(matches!(
            refused(
                &[(WASM_LAYER, 1)],
                "application/vnd.oci.image.config.v1+json"
            ),
            ArtifactError::NotWasm(_)
        ));
        assert!(matches!(
            refused(&[(WASM_LAYER, MAX_COMPONENT_BYTES + 1)], WASM_CONFIG),
            ArtifactError::TooLarge { .. }
        ));
        assert!(matches!(
            ToolArtifact::from_manifest(b"{\"schemaVersion\": 2}"),
            Err(ArtifactError::NotAManifest(_))
        ));
    }

    #[test]
    fn a_built_artifact_reads_back_with_its_grants() {
        let grants = Grants::parse(r#"{"env": ["LANG"]}"#).unwrap();
        let (config, manifest) = build(b"\0asm\x0d\0\x01\0", "{}", &grants, "2026-12-05T00:00:00Z");
        let tool = ToolArtifact::from_manifest(&manifest).unwrap();
        assert_eq!(tool.grants, grants);
        assert_eq!(tool.layer.size, 8);
        assert_eq!(tool.manifest.config.size, config.len() as u64);
        assert_eq!(Ok(tool.layer_digest), tool.layer.sha256());
    }

    #[test]
    fn the_config_lists_the_component_s_own_imports_and_exports() {
        let component = std::fs::read(env!("TURNGATE_TEST_GUEST_NET_PROBE")).unwrap();
        let (imports, exports) = world_of(&component);
        assert!(
            imports
                .iter()
                .any(|i| i.starts_with("wasi:http/outgoing-handler@0.2")),
            "{imports:?}"
        );
        assert!(imports.iter().any(|i| i == "descriptor"), "{imports:?}");
        assert_eq!(exports, ["describe", "call"]);
        assert_eq!(world_of(b"not wasm"), (Vec::new(), Vec::new()));
    }
}
