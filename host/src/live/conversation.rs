//! The conversation sent with each request, in the provider's own shape: Anthropic and OpenAI Chat
//! `messages`, OpenAI Responses `input` items, Gemini `contents`. It starts with the user's prompt and
//! grows by each completed turn's history (the assistant turn, then one result per call ID), exactly as
//! [`history::render`](crate::history::render) produced it. A turn that did not complete has no history
//! and never enters the conversation.

use serde_json::{Value, json};

use crate::pipeline::TurnReport;
use crate::turn::Provider;

/// The message list of one session.
#[derive(Debug, Clone)]
pub struct Conversation {
    provider: Provider,
    messages: Vec<Value>,
}

impl Conversation {
    /// A conversation opened by the user's `prompt`.
    pub fn new(provider: Provider, prompt: &str) -> Conversation {
        let first = match provider {
            Provider::Anthropic | Provider::OpenAiChat => {
                json!({"role": "user", "content": prompt})
            }
            Provider::OpenAiResponses => {
                json!({"type": "message", "role": "user", "content": prompt})
            }
            Provider::Gemini => json!({"role": "user", "parts": [{"text": prompt}]}),
        };
        Conversation {
            provider,
            messages: vec![first],
        }
    }

    /// The protocol.
    pub fn provider(&self) -> Provider {
        self.provider
    }

    /// The messages (or items, or contents), oldest first.
    pub fn messages(&self) -> &[Value] {
        &self.messages
    }

    /// Appends a completed turn's history: the assistant turn and its results. Returns `false` and
    /// appends nothing when the turn did not complete (its history is empty by construction).
    pub fn append(&mut self, report: &TurnReport) -> bool {
        if !report.turn.is_completed() || report.history.is_empty() {
            return false;
        }
        debug_assert_eq!(report.turn.provider, self.provider);
        self.messages.extend(report.history.iter().cloned());
        true
    }
}
