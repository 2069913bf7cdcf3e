//! A turn from the raw response body: [`NativeDecoder`] feeds chunks to the library's [`TurnDecoder`]
//! and finishes into a [`NativeTurn`], which the toolbox gates. The decoder tells SSE from a whole JSON
//! body itself; nothing here looks at the bytes.

use napi::bindgen_prelude::Uint8Array;
use napi_derive::napi;
use turngate::Turn;
use turngate::providers::{DecoderOptions, TurnDecoder};
use turngate::turn::Provider;

use crate::errors::{Class, error, guarded};

/// Parses a provider name: `anthropic`, `openai-chat`, `openai-responses` or `gemini`.
pub fn parse_provider(name: &str) -> napi::Result<Provider> {
    name.parse()
        .map_err(|e: turngate::turn::UnknownProvider| error(Class::Usage, e.to_string()))
}

/// Decodes one streamed (or whole) response body, chunk by chunk.
#[napi]
pub struct NativeDecoder {
    /// `None` once finished.
    decoder: Option<TurnDecoder>,
}

#[napi]
impl NativeDecoder {
    /// A decoder for `provider`'s protocol; `forced_tool_choice` and `max_output_tokens` as the request
    /// asked (see `turngate run`).
    #[napi(constructor)]
    pub fn new(
        provider: String,
        forced_tool_choice: bool,
        max_output_tokens: Option<f64>,
    ) -> napi::Result<Self> {
        let options = DecoderOptions {
            forced_tool_choice,
            max_output_tokens: max_output_tokens.map(|n| n.max(0.0) as u64),
            ..DecoderOptions::default()
        };
        Ok(NativeDecoder {
            decoder: Some(TurnDecoder::with_options(
                parse_provider(&provider)?,
                options,
            )),
        })
    }

    /// Feeds the next chunk; returns the visible text it completed.
    #[napi]
    pub fn feed(&mut self, chunk: Uint8Array) -> napi::Result<Vec<String>> {
        let decoder = self
            .decoder
            .as_mut()
            .ok_or_else(|| error(Class::Usage, "this decoder is finished"))?;
        guarded(|| Ok(decoder.feed(&chunk)))
            .map(|deltas| deltas.into_iter().map(|d| d.text).collect())
    }

    /// Ends the body and classifies the turn.
    #[napi]
    pub fn finish(&mut self) -> napi::Result<NativeTurn> {
        let decoder = self
            .decoder
            .take()
            .ok_or_else(|| error(Class::Usage, "this decoder is finished"))?;
        guarded(|| Ok(NativeTurn(decoder.finish())))
    }
}

/// A decoded turn: how it ended and what it asked for.
#[napi]
pub struct NativeTurn(pub(crate) Turn);

#[napi]
impl NativeTurn {
    /// The whole decoded turn as the library serializes it (assistant content, calls, ending), as JSON.
    #[napi]
    pub fn to_json_text(&self) -> napi::Result<String> {
        serde_json::to_string(&self.0)
            .map_err(|e| error(Class::Internal, format!("turn not serializable: {e}")))
    }
}
