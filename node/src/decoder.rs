//! A turn from the raw response body, decoded off the JavaScript thread: [`NativeDecoder`] hands each
//! chunk to the library's [`TurnDecoder`] as a task on libuv's thread pool, one chunk at a time, and
//! finishes into a [`DecodedTurn`], whose [`NativeTurn`] the toolbox gates. The decoder tells SSE from a
//! whole JSON body itself; nothing here looks at the bytes.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use napi::bindgen_prelude::{AsyncTask, Uint8Array};
use napi::{Env, Task};
use napi_derive::napi;
use turngate::Turn;
use turngate::providers::{DecoderOptions, TextDelta, TurnDecoder};
use turngate::turn::Provider;

use crate::errors::{Class, error, guarded};

/// Parses a provider name: `anthropic`, `openai-chat`, `openai-responses` or `gemini`.
pub fn parse_provider(name: &str) -> napi::Result<Provider> {
    name.parse()
        .map_err(|e: turngate::turn::UnknownProvider| error(Class::Usage, e.to_string()))
}

/// Where the library's decoder is between tasks.
enum Slot {
    /// Waiting for the next chunk.
    Idle(TurnDecoder),
    /// A task on the pool holds it.
    Busy,
    /// Finished, or lost to a panic.
    Done,
}

/// The slot, shared with the decoder's tasks (which must be `Send`) though only the JavaScript thread
/// touches it.
type SharedSlot = Arc<Mutex<Slot>>;

/// The slot, held only to move the decoder in or out, never while it decodes.
fn lock(slot: &SharedSlot) -> MutexGuard<'_, Slot> {
    slot.lock().unwrap_or_else(PoisonError::into_inner)
}

// The tasks come before the methods that answer them: napi's type generator learns a task's
// JavaScript type from its `#[napi] impl Task` as it goes.

fn texts(deltas: Vec<TextDelta>) -> Vec<String> {
    deltas.into_iter().map(|d| d.text).collect()
}

/// One chunk through the library's decoder on the pool; the decoder goes back to its slot when the
/// result reaches the JavaScript thread (or is dropped, the slot done, after a panic).
pub struct Feed {
    slot: SharedSlot,
    /// `None` once back in its slot.
    decoder: Option<TurnDecoder>,
    chunk: Vec<u8>,
}

#[napi]
impl Task for Feed {
    type Output = Vec<String>;
    type JsValue = Vec<String>;

    fn compute(&mut self) -> napi::Result<Vec<String>> {
        let decoder = self
            .decoder
            .as_mut()
            .ok_or_else(|| error(Class::Internal, "a feed task ran without its decoder"))?;
        let chunk = std::mem::take(&mut self.chunk);
        guarded(|| Ok(texts(decoder.feed(&chunk))))
    }

    fn resolve(&mut self, _env: Env, texts: Vec<String>) -> napi::Result<Vec<String>> {
        let decoder = self
            .decoder
            .take()
            .ok_or_else(|| error(Class::Internal, "a feed task resolved twice"))?;
        *lock(&self.slot) = Slot::Idle(decoder);
        Ok(texts)
    }

    fn reject(&mut self, _env: Env, panicked: napi::Error) -> napi::Result<Vec<String>> {
        *lock(&self.slot) = Slot::Done;
        Err(panicked)
    }
}

/// A decoded turn: how it ended and what it asked for.
#[napi]
pub struct NativeTurn(pub(crate) Turn);

/// What finishing the body gives.
#[napi(object, object_from_js = false)]
pub struct DecodedTurn {
    /// The turn, for the toolbox to gate.
    pub turn: NativeTurn,
    /// The whole decoded turn as the library serializes it (assistant content, calls, ending), as JSON
    /// text.
    pub json: String,
    /// The visible text only the end of the body completed (a whole JSON body's text; none for a
    /// stream), to echo after the text the feeds returned.
    pub text: Vec<String>,
}

/// The end of the body, on the pool: the turn classified and serialized, with the text only the end
/// completed.
pub struct Finish {
    /// `None` once computed.
    decoder: Option<TurnDecoder>,
}

#[napi]
impl Task for Finish {
    type Output = (Turn, String, Vec<String>);
    type JsValue = DecodedTurn;

    fn compute(&mut self) -> napi::Result<Self::Output> {
        let decoder = self
            .decoder
            .take()
            .ok_or_else(|| error(Class::Internal, "a finish task ran twice"))?;
        guarded(move || {
            let (turn, deltas) = decoder.finish_with_deltas();
            let json = serde_json::to_string(&turn)
                .map_err(|e| error(Class::Internal, format!("turn not serializable: {e}")))?;
            Ok((turn, json, texts(deltas)))
        })
    }

    fn resolve(
        &mut self,
        _env: Env,
        (turn, json, text): Self::Output,
    ) -> napi::Result<DecodedTurn> {
        Ok(DecodedTurn {
            turn: NativeTurn(turn),
            json,
            text,
        })
    }
}

/// Decodes one streamed (or whole) response body, chunk by chunk, off the JavaScript thread.
#[napi]
pub struct NativeDecoder {
    slot: SharedSlot,
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
        let decoder = TurnDecoder::with_options(parse_provider(&provider)?, options);
        Ok(NativeDecoder {
            slot: Arc::new(Mutex::new(Slot::Idle(decoder))),
        })
    }

    /// Decodes the next chunk on the pool (the chunk is copied first, so the caller may reuse its
    /// buffer at once); resolves with the visible text it completed. A chunk given before the previous
    /// one's promise settled is refused: chunks go in one at a time, in order.
    #[napi]
    pub fn feed(&self, chunk: Uint8Array) -> napi::Result<AsyncTask<Feed>> {
        let decoder = self.take(Slot::Busy)?;
        Ok(AsyncTask::new(Feed {
            slot: Arc::clone(&self.slot),
            decoder: Some(decoder),
            chunk: chunk.to_vec(),
        }))
    }

    /// Ends the body and classifies the turn on the pool.
    #[napi]
    pub fn finish(&self) -> napi::Result<AsyncTask<Finish>> {
        let decoder = self.take(Slot::Done)?;
        Ok(AsyncTask::new(Finish {
            decoder: Some(decoder),
        }))
    }
}

impl NativeDecoder {
    /// Takes the decoder out for a task, leaving `instead` in its place.
    fn take(&self, instead: Slot) -> napi::Result<TurnDecoder> {
        let mut slot = lock(&self.slot);
        match std::mem::replace(&mut *slot, instead) {
            Slot::Idle(decoder) => Ok(decoder),
            Slot::Busy => {
                *slot = Slot::Busy;
                Err(error(
                    Class::Usage,
                    "the previous chunk is still being decoded: await each feed before the next",
                ))
            }
            Slot::Done => {
                *slot = Slot::Done;
                Err(error(Class::Usage, "this decoder is finished"))
            }
        }
    }
}
