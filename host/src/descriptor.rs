//! What a tool says about itself, checked once when the tool is loaded.
//!
//! The guest's `describe` answer arrives as untrusted data; `ToolDescriptor::from_guest` turns it into
//! a descriptor with a valid name, a schema that is valid JSON Schema for an object, and path parameters
//! that are well-formed JSON Pointers, or says exactly what is wrong. A descriptor remembered in the
//! cache (it passed all of that when it was first loaded) is checked again except for compiling its
//! schema, which waits for the tool's first call: a process that calls one tool compiles one schema.

use std::sync::OnceLock;

use serde::Serialize;
use serde_json::Value;

use crate::json::parse_strict;

/// Access a tool needs to a path it is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// The tool only reads.
    Read,
    /// The tool may create, replace or delete.
    Write,
}

/// One input field holding a path relative to the root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct PathParam {
    /// JSON Pointer to the field, such as `/path`.
    pub pointer: String,
    /// Access the tool needs to it.
    pub access: Access,
}

/// A loaded tool's checked self-description.
#[derive(Debug, Clone, Serialize)]
pub struct ToolDescriptor {
    /// Unique name, `^[A-Za-z0-9_-]{1,64}$`.
    pub name: String,
    /// Description shown to the model.
    pub description: String,
    /// The JSON Schema of the input object.
    pub input_schema: Value,
    /// Input fields that are paths.
    pub paths: Vec<PathParam>,
    /// JSON Pointers of the input fields that are URLs the tool requests (`url-fields`).
    pub urls: Vec<String>,
}

/// What the gate checks a call against: a tool's descriptor and its compiled input schema.
pub struct ToolContract {
    descriptor: ToolDescriptor,
    /// Compiled at load for a fresh descriptor, at first use for a remembered one.
    validator: OnceLock<jsonschema::Validator>,
}

impl std::fmt::Debug for ToolContract {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContract")
            .field("name", &self.descriptor.name)
            .finish()
    }
}

impl ToolContract {
    /// What the tool said about itself.
    pub fn descriptor(&self) -> &ToolDescriptor {
        &self.descriptor
    }

    /// The compiled input schema (compiled now if this is its first use).
    pub fn validator(&self) -> Result<&jsonschema::Validator, DescriptorError> {
        if let Some(validator) = self.validator.get() {
            return Ok(validator);
        }
        let validator = compile(&self.descriptor.input_schema)?;
        Ok(self.validator.get_or_init(|| validator))
    }
}

fn compile(schema: &Value) -> Result<jsonschema::Validator, DescriptorError> {
    jsonschema::validator_for(schema).map_err(|e| DescriptorError::SchemaInvalid(e.to_string()))
}

impl ToolDescriptor {
    /// Checks a guest's raw descriptor, its schema compiled.
    pub(crate) fn from_guest(
        name: String,
        description: String,
        input_schema: &str,
        paths: Vec<PathParam>,
        urls: Vec<String>,
    ) -> Result<ToolContract, DescriptorError> {
        let contract = Self::remembered(name, description, input_schema, paths, urls)?;
        let validator = compile(&contract.descriptor.input_schema)?;
        let _ = contract.validator.set(validator);
        Ok(contract)
    }

    /// Checks a descriptor that passed [`ToolDescriptor::from_guest`] when it was first loaded: every
    /// check but compiling the schema, which happens at the tool's first call.
    pub(crate) fn remembered(
        name: String,
        description: String,
        input_schema: &str,
        paths: Vec<PathParam>,
        urls: Vec<String>,
    ) -> Result<ToolContract, DescriptorError> {
        let name_ok = (1..=64).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !name_ok {
            return Err(DescriptorError::Name(name));
        }
        let schema =
            parse_strict(input_schema).map_err(|e| DescriptorError::SchemaJson(e.to_string()))?;
        if schema.get("type").and_then(Value::as_str) != Some("object") {
            return Err(DescriptorError::SchemaNotObject);
        }
        for param in &paths {
            if !param.pointer.starts_with('/') || param.pointer.len() < 2 {
                return Err(DescriptorError::PathPointer(param.pointer.clone()));
            }
        }
        if let Some(bad) = urls.iter().find(|p| !p.starts_with('/') || p.len() < 2) {
            return Err(DescriptorError::UrlPointer(bad.clone()));
        }
        let descriptor = ToolDescriptor {
            name,
            description,
            input_schema: schema,
            paths,
            urls,
        };
        Ok(ToolContract {
            descriptor,
            validator: OnceLock::new(),
        })
    }

    /// The access the sandbox grants: `None` when the tool declares no path (no filesystem at all), read
    /// when every path is read-only, write when any path is written.
    pub fn filesystem_access(&self) -> Option<Access> {
        self.paths
            .iter()
            .map(|p| p.access)
            .max_by_key(|a| *a == Access::Write)
    }
}

/// Why a descriptor was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DescriptorError {
    /// The name is empty, too long or has characters providers reject.
    #[error("tool name `{0}` must match ^[A-Za-z0-9_-]{{1,64}}$")]
    Name(String),
    /// The schema text is not strict JSON.
    #[error("input schema is not valid JSON: {0}")]
    SchemaJson(String),
    /// The schema does not describe an object.
    #[error("input schema must have \"type\": \"object\"")]
    SchemaNotObject,
    /// The schema is not valid JSON Schema (or uses a remote reference, which is not fetched).
    #[error("input schema is not a valid JSON Schema: {0}")]
    SchemaInvalid(String),
    /// A path parameter's pointer is not a JSON Pointer to a field.
    #[error("path parameter `{0}` is not a JSON Pointer to a field (such as /path)")]
    PathPointer(String),
    /// A URL field's pointer is not a JSON Pointer to a field.
    #[error("URL field `{0}` is not a JSON Pointer to a field (such as /url)")]
    UrlPointer(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(schema: &str) -> Result<(), DescriptorError> {
        ToolDescriptor::from_guest("t".into(), "d".into(), schema, Vec::new(), Vec::new())
            .map(|_| ())
    }

    #[test]
    fn file_references_are_not_fetched() {
        // A referenced schema that exists and is valid: only a validator that never reads files refuses it.
        let mut referenced = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(&mut referenced, br#"{"type":"string"}"#).unwrap();
        let url = format!("file://{}", referenced.path().display());
        let schema = format!(r#"{{"type":"object","properties":{{"a":{{"$ref":"{url}"}}}}}}"#);
        assert!(
            matches!(check(&schema), Err(DescriptorError::SchemaInvalid(_))),
            "{url}"
        );
        let remote =
            r#"{"type":"object","properties":{"a":{"$ref":"http://127.0.0.1:9/schema.json"}}}"#;
        assert!(matches!(
            check(remote),
            Err(DescriptorError::SchemaInvalid(_))
        ));
    }

    #[test]
    fn a_schema_must_describe_an_object_and_names_must_fit_providers() {
        assert!(matches!(
            check(r#"{"type":"string"}"#),
            Err(DescriptorError::SchemaNotObject)
        ));
        assert!(check(r#"{"type":"object","additionalProperties":false}"#).is_ok());
        let bad_name = ToolDescriptor::from_guest(
            "no spaces".into(),
            String::new(),
            r#"{"type":"object"}"#,
            vec![],
            vec![],
        );
        assert!(matches!(bad_name, Err(DescriptorError::Name(_))));
    }
}
