//! Where and how to ask each provider for a streamed turn: endpoint URL, headers (the API key among
//! them), and the request body with the tool definitions taken from the toolbox's descriptors.
//!
//! * Anthropic: `POST {base}/v1/messages`, `x-api-key`, `anthropic-version: 2023-06-01`;
//!   `{"model", "max_tokens", "stream": true, "messages", "tools": [{"name", "description", "input_schema"}]}`.
//! * OpenAI Chat: `POST {base}/v1/chat/completions`, `Authorization: Bearer`; `{"model", "stream": true,
//!   "stream_options": {"include_usage": true}` (the usage is compared with the output limit),
//!   "max_completion_tokens", "messages", "tools": [{"type": "function", "function": {"name", "description",
//!   "parameters"}}]}`.
//! * OpenAI Responses: `POST {base}/v1/responses`, `Authorization: Bearer`; `{"model", "stream": true,
//!   "store": false, "include": ["reasoning.encrypted_content"], "max_output_tokens", "input", "tools":
//!   [{"type": "function", "name", "description", "parameters"}]}` (stateless: the whole item list is sent).
//! * Gemini: `POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse`, `x-goog-api-key`;
//!   `{"contents", "tools": [{"functionDeclarations": [{"name", "description", "parametersJsonSchema"}]}],
//!   "generationConfig": {"maxOutputTokens"}}` (`parametersJsonSchema` takes full JSON Schema, which the
//!   tools' schemas are; `parameters` accepts only an OpenAPI subset).

use std::fmt;

use serde_json::{Value, json};

use crate::toolbox::Toolbox;
use crate::turn::Provider;

use super::conversation::Conversation;

/// An API key. `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> ApiKey {
        ApiKey(key.into())
    }

    /// The key from the provider's environment variable ([`api_key_var`]), if set and not empty.
    pub fn from_env(provider: Provider) -> Option<ApiKey> {
        std::env::var(api_key_var(provider))
            .ok()
            .filter(|k| !k.is_empty())
            .map(ApiKey)
    }

    /// The key itself, for the request header only.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(***)")
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// The environment variable holding a provider's key: `ANTHROPIC_API_KEY`, `OPENAI_API_KEY` (both
/// OpenAI protocols), `GEMINI_API_KEY`.
pub fn api_key_var(provider: Provider) -> &'static str {
    match provider {
        Provider::Anthropic => "ANTHROPIC_API_KEY",
        Provider::OpenAiChat | Provider::OpenAiResponses => "OPENAI_API_KEY",
        Provider::Gemini => "GEMINI_API_KEY",
    }
}

/// The provider's public API base URL.
pub fn default_base_url(provider: Provider) -> &'static str {
    match provider {
        Provider::Anthropic => "https://api.anthropic.com",
        Provider::OpenAiChat | Provider::OpenAiResponses => "https://api.openai.com",
        Provider::Gemini => "https://generativelanguage.googleapis.com",
    }
}

/// Where requests go and who sends them.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The protocol.
    pub provider: Provider,
    /// Base URL without a trailing slash (any compatible endpoint; may carry a path prefix).
    pub base_url: String,
    /// The model name.
    pub model: String,
    /// The key.
    pub api_key: ApiKey,
}

impl Endpoint {
    /// An endpoint; a trailing `/` of `base_url` is dropped.
    pub fn new(
        provider: Provider,
        base_url: impl Into<String>,
        model: impl Into<String>,
        api_key: ApiKey,
    ) -> Endpoint {
        let mut base_url = base_url.into();
        while base_url.ends_with('/') {
            base_url.pop();
        }
        Endpoint {
            provider,
            base_url,
            model: model.into(),
            api_key,
        }
    }

    /// The streaming endpoint's URL.
    pub fn url(&self) -> String {
        let base = &self.base_url;
        match self.provider {
            Provider::Anthropic => format!("{base}/v1/messages"),
            Provider::OpenAiChat => format!("{base}/v1/chat/completions"),
            Provider::OpenAiResponses => format!("{base}/v1/responses"),
            Provider::Gemini => format!(
                "{base}/v1beta/models/{}:streamGenerateContent?alt=sse",
                self.model
            ),
        }
    }

    /// The request headers (the key included), besides `content-type: application/json`.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        let key = self.api_key.expose().to_owned();
        let mut headers = vec![("accept", "text/event-stream".to_owned())];
        match self.provider {
            Provider::Anthropic => {
                headers.push(("x-api-key", key));
                headers.push(("anthropic-version", "2023-06-01".to_owned()));
            }
            Provider::OpenAiChat | Provider::OpenAiResponses => {
                headers.push(("authorization", format!("Bearer {key}")));
            }
            Provider::Gemini => headers.push(("x-goog-api-key", key)),
        }
        headers
    }
}

/// The tool definitions in the provider's shape, one per loaded tool, from its descriptor.
pub fn tool_definitions(provider: Provider, toolbox: &Toolbox) -> Value {
    let tools = toolbox.tools().map(|t| t.descriptor());
    match provider {
        Provider::Anthropic => Value::Array(
            tools
                .map(|d| json!({"name": d.name, "description": d.description, "input_schema": d.input_schema}))
                .collect(),
        ),
        Provider::OpenAiChat => Value::Array(
            tools
                .map(|d| json!({"type": "function", "function": {"name": d.name, "description": d.description, "parameters": d.input_schema}}))
                .collect(),
        ),
        Provider::OpenAiResponses => Value::Array(
            tools
                // `strict: false` said outright: the Responses API's strict mode rewrites what a schema
                // may say (every property required, no other properties), and the gate checks each
                // call against the tool's own schema anyway.
                .map(|d| json!({"type": "function", "name": d.name, "description": d.description, "parameters": d.input_schema, "strict": false}))
                .collect(),
        ),
        Provider::Gemini => {
            let declarations: Vec<Value> = tools
                .map(|d| json!({"name": d.name, "description": d.description, "parametersJsonSchema": d.input_schema}))
                .collect();
            json!([{"functionDeclarations": declarations}])
        }
    }
}

/// The request body for the next turn of `conversation`, asking for at most `max_output_tokens`.
pub fn body(
    endpoint: &Endpoint,
    conversation: &Conversation,
    tools: &Value,
    max_output_tokens: u32,
) -> Value {
    let messages = Value::Array(conversation.messages().to_vec());
    let has_tools = tools.as_array().is_some_and(|t| !t.is_empty());
    let mut body = match endpoint.provider {
        Provider::Anthropic => json!({
            "model": endpoint.model,
            "max_tokens": max_output_tokens,
            "stream": true,
            "messages": messages,
        }),
        Provider::OpenAiChat => json!({
            "model": endpoint.model,
            "max_completion_tokens": max_output_tokens,
            "stream": true,
            "stream_options": {"include_usage": true},
            "messages": messages,
        }),
        Provider::OpenAiResponses => json!({
            "model": endpoint.model,
            "max_output_tokens": max_output_tokens,
            "stream": true,
            "store": false,
            "include": ["reasoning.encrypted_content"],
            "input": messages,
        }),
        Provider::Gemini => json!({
            "contents": messages,
            "generationConfig": {"maxOutputTokens": max_output_tokens},
        }),
    };
    if has_tools {
        body["tools"] = tools.clone();
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_key_is_masked() {
        let key = ApiKey::new("sk-secret-123");
        assert_eq!(format!("{key:?}"), "ApiKey(***)");
        assert_eq!(format!("{key}"), "***");
        let endpoint = Endpoint::new(Provider::Anthropic, "http://x/", "m", key);
        assert!(!format!("{endpoint:?}").contains("secret"));
        assert_eq!(endpoint.url(), "http://x/v1/messages");
    }

    #[test]
    fn urls_and_auth_headers_per_provider() {
        let e = |p| Endpoint::new(p, "http://h", "gem-1", ApiKey::new("k"));
        assert_eq!(
            e(Provider::Gemini).url(),
            "http://h/v1beta/models/gem-1:streamGenerateContent?alt=sse"
        );
        assert_eq!(
            e(Provider::OpenAiChat).url(),
            "http://h/v1/chat/completions"
        );
        assert_eq!(e(Provider::OpenAiResponses).url(), "http://h/v1/responses");
        assert!(
            e(Provider::OpenAiChat)
                .headers()
                .contains(&("authorization", "Bearer k".into()))
        );
        assert!(
            e(Provider::Gemini)
                .headers()
                .contains(&("x-goog-api-key", "k".into()))
        );
        let a = e(Provider::Anthropic).headers();
        assert!(a.contains(&("x-api-key", "k".into())));
        assert!(a.contains(&("anthropic-version", "2023-06-01".into())));
    }
}
