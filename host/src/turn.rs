//! The provider-neutral result of decoding one streamed model turn.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The streaming protocol a turn was sent in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Provider {
    /// Anthropic Messages (`event:` + `data:`, ends with `message_stop`).
    #[serde(rename = "anthropic")]
    Anthropic,
    /// OpenAI Chat Completions (`data:` chunks, ends with `data: [DONE]`).
    #[serde(rename = "openai-chat")]
    OpenAiChat,
    /// OpenAI Responses (`event: response.*`, ends with `response.completed` / `.incomplete` / `.failed`).
    #[serde(rename = "openai-responses")]
    OpenAiResponses,
    /// Gemini `streamGenerateContent?alt=sse` (also Vertex AI).
    #[serde(rename = "gemini")]
    Gemini,
}

impl Provider {
    /// Every provider, in a stable order.
    pub const ALL: [Provider; 4] = [
        Provider::Anthropic,
        Provider::OpenAiChat,
        Provider::OpenAiResponses,
        Provider::Gemini,
    ];

    /// The CLI name: `anthropic`, `openai-chat`, `openai-responses`, `gemini`.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Anthropic => "anthropic",
            Provider::OpenAiChat => "openai-chat",
            Provider::OpenAiResponses => "openai-responses",
            Provider::Gemini => "gemini",
        }
    }
}

impl fmt::Display for Provider {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A provider name that is not one of [`Provider::as_str`]'s values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown provider `{0}` (expected one of: anthropic, openai-chat, openai-responses, gemini)"
)]
pub struct UnknownProvider(pub String);

impl FromStr for Provider {
    type Err = UnknownProvider;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Provider::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| UnknownProvider(s.to_owned()))
    }
}

/// One streamed turn, decoded and classified.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Turn {
    /// The protocol the turn was decoded as.
    pub provider: Provider,
    /// The complete assistant content exactly as the provider sent it, in the provider's own shape for the
    /// history:
    /// * Anthropic `{"role":"assistant","content":[blocks...]}`: every content block as started, with its deltas
    ///   applied (text, thinking with its signature, redacted_thinking, tool_use with `input` as the parsed
    ///   object, server_tool_use, server tool results, ...). When a tool_use buffer is not a JSON object, `input`
    ///   is `{}` and [`Ending::detail`] says so.
    /// * OpenAI Chat `{"role":"assistant","content":text-or-null,"refusal"?:text,"tool_calls"?:[{"id","type":
    ///   "function","function":{"name","arguments":raw text}}]}`.
    /// * OpenAI Responses: a JSON array of the output items (message, reasoning with encrypted content,
    ///   function_call with call_id / name / arguments as text, ...), taken from the terminal event's
    ///   `response.output` when it is a non-empty array, else from the streamed items.
    /// * Gemini `{"role":"model","parts":[...]}` with every part as sent (text, thought, functionCall with args
    ///   and id, thoughtSignature); adjacent text parts stay separate. A Vertex call streamed in pieces
    ///   (`partialArgs`) is stored as one `functionCall` part with the assembled `args` (and the first piece's
    ///   `thoughtSignature`).
    pub assistant: serde_json::Value,
    /// Every client call seen (tool calls, and the Responses items the client must answer), in stream order,
    /// whatever the ending (a turn that is not completed still lists its calls so the gate can mark them
    /// `not_run`). The IDs of a completed turn's calls are unique.
    pub calls: Vec<RawCall>,
    /// How the turn ended: the only input of the turn-level gate.
    pub ending: Ending,
    /// All visible text, concatenated (not thinking, not refusals).
    pub text: String,
}

/// A call or item as the provider streamed it, one that expects an answer from the client. Nothing here has
/// been validated: the gate parses `raw_input`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RawCall {
    /// What the provider asks the client to do, and so how the answer is shaped.
    pub kind: CallKind,
    /// The provider's call ID (Anthropic `tool_use.id`, OpenAI Chat `tool_calls[].id`, Responses `call_id`
    /// (an `mcp_approval_request`'s own `id`), Gemini `functionCall.id`, which is optional).
    pub id: Option<String>,
    /// The tool name as streamed (empty when the stream never named the call, which is malformed). For a
    /// Responses item without a name (a shell, patch, computer or tool search call), the item type.
    pub name: String,
    /// Argument text exactly as received: the concatenated fragments (Anthropic `partial_json`, OpenAI
    /// `arguments`); an empty Anthropic buffer is `{}`, a complete `tool_use` block carried in `message_start`
    /// gives its `input` serialized. For Gemini the raw text of `args` as it appeared in the chunk (taken with
    /// `serde_json::value::RawValue`, so duplicate keys and formatting survive; `{}` when `args` is absent); for
    /// Vertex `partialArgs`, the object assembled from the pieces, serialized in arrival order. For a Responses
    /// item that is not a function call, what it asks for, serialized (`action`, `operation`, `input`,
    /// `arguments`): it is never parsed, only audited.
    pub raw_input: String,
    /// Position of the call in [`Turn::assistant`]: Anthropic content block, OpenAI Chat `tool_calls` entry,
    /// Responses output item, Gemini part.
    pub index: usize,
}

/// What a call asks the client to do. Every provider's tool call is a [`CallKind::Function`]; the other kinds
/// are OpenAI Responses output items that the client, not OpenAI, must answer. This host runs only function
/// calls (no loaded tool maps to the other kinds), so each of those gets an error answer in its own protocol
/// shape and nothing runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    /// A tool call (Anthropic `tool_use`, OpenAI Chat `tool_calls[]`, Responses `function_call`, Gemini
    /// `functionCall`): gated, then run.
    Function,
    /// Responses `local_shell_call`, answered by `local_shell_call_output`.
    LocalShell,
    /// Responses `shell_call` in a local environment, answered by `shell_call_output`.
    Shell,
    /// Responses `apply_patch_call`, answered by `apply_patch_call_output`.
    ApplyPatch,
    /// Responses `custom_tool_call`, answered by `custom_tool_call_output`.
    CustomTool,
    /// Responses `tool_search_call` with `execution: "client"`, answered by `tool_search_output`.
    ToolSearch,
    /// Responses `computer_call`, answered by `computer_call_output`.
    Computer,
    /// Responses `mcp_approval_request`, answered by `mcp_approval_response`.
    McpApproval,
}

impl CallKind {
    /// The name in the CLI output: `function`, `local_shell`, `shell`, `apply_patch`, `custom_tool`,
    /// `tool_search`, `computer`, `mcp_approval`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallKind::Function => "function",
            CallKind::LocalShell => "local_shell",
            CallKind::Shell => "shell",
            CallKind::ApplyPatch => "apply_patch",
            CallKind::CustomTool => "custom_tool",
            CallKind::ToolSearch => "tool_search",
            CallKind::Computer => "computer",
            CallKind::McpApproval => "mcp_approval",
        }
    }
}

impl fmt::Display for CallKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How the turn ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Ending {
    /// The classification.
    pub status: TurnStatus,
    /// The raw provider value: Anthropic `stop_reason`, OpenAI Chat `finish_reason`, Responses terminal
    /// `response.status` (or `incomplete_details.reason` when incomplete), Gemini `finishReason` (or
    /// `promptFeedback.blockReason`). `None` when the stream never carried one.
    pub stop_reason: Option<String>,
    /// Human-readable explanation.
    pub detail: String,
}

/// Classification of a turn. Only `Completed` allows any tool call to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TurnStatus {
    /// The provider's normal ending, terminator received: the calls are complete.
    Completed,
    /// Cut by a token or context limit.
    Truncated,
    /// The model refused.
    Refused,
    /// A content filter or safety block ended the turn.
    Filtered,
    /// The provider reported an error.
    Errored,
    /// The stream broke the protocol (or a decoder limit).
    Malformed,
    /// The stream ended early, or with a reason that does not allow execution.
    Incomplete,
}

impl TurnStatus {
    /// The lowercase name, as in the CLI output.
    pub fn as_str(self) -> &'static str {
        match self {
            TurnStatus::Completed => "completed",
            TurnStatus::Truncated => "truncated",
            TurnStatus::Refused => "refused",
            TurnStatus::Filtered => "filtered",
            TurnStatus::Errored => "errored",
            TurnStatus::Malformed => "malformed",
            TurnStatus::Incomplete => "incomplete",
        }
    }
}

impl fmt::Display for TurnStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Turn {
    /// Whether the turn ended normally (the only case in which calls may run).
    pub fn is_completed(&self) -> bool {
        self.ending.status == TurnStatus::Completed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_names_round_trip() {
        for p in Provider::ALL {
            assert_eq!(p.as_str().parse::<Provider>(), Ok(p));
            assert_eq!(
                serde_json::to_value(p).unwrap(),
                serde_json::json!(p.as_str())
            );
        }
        assert!("openai".parse::<Provider>().is_err());
    }

    #[test]
    fn call_kinds_serialize_as_their_names() {
        for kind in [
            CallKind::Function,
            CallKind::LocalShell,
            CallKind::Shell,
            CallKind::ApplyPatch,
            CallKind::CustomTool,
            CallKind::ToolSearch,
            CallKind::Computer,
            CallKind::McpApproval,
        ] {
            assert_eq!(
                serde_json::to_value(kind).unwrap(),
                serde_json::json!(kind.as_str())
            );
        }
    }

    #[test]
    fn status_serializes_lowercase() {
        assert_eq!(
            serde_json::to_value(TurnStatus::Malformed).unwrap(),
            serde_json::json!("malformed")
        );
        assert_eq!(TurnStatus::Incomplete.as_str(), "incomplete");
    }
}
