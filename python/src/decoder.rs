//! A turn from the raw response body: [`PyTurnDecoder`] feeds chunks (bytes, bytearray, memoryview or
//! str) to the library's [`TurnDecoder`] and finishes into a [`PyTurn`], which the toolbox gates.
//! The decoder tells SSE from a whole JSON body itself; nothing here looks at the bytes.

use std::sync::Mutex;

use pyo3::prelude::*;
use pyo3::pybacked::{PyBackedBytes, PyBackedStr};
use pyo3::types::PyMemoryView;
use turngate::Turn;
use turngate::providers::{DecoderOptions, TurnDecoder};
use turngate::turn::Provider;

use crate::convert::to_python;
use crate::errors::{UsageError, detached};

/// Parses a provider name: `anthropic`, `openai-chat`, `openai-responses` or `gemini`.
pub fn parse_provider(name: &str) -> PyResult<Provider> {
    name.parse()
        .map_err(|e: turngate::turn::UnknownProvider| UsageError::new_err(e.to_string()))
}

/// Decodes one streamed (or whole) response body, chunk by chunk.
#[pyclass(name = "TurnDecoder", module = "turngate")]
pub struct PyTurnDecoder {
    /// `None` once finished.
    decoder: Mutex<Option<TurnDecoder>>,
}

#[pymethods]
impl PyTurnDecoder {
    /// A decoder for `provider`'s protocol; `forced_tool_choice` and `max_output_tokens` as the request
    /// asked (a turn whose usage reached `max_output_tokens` is truncated, whatever its stop reason).
    #[new]
    #[pyo3(signature = (provider, *, forced_tool_choice = false, max_output_tokens = None))]
    fn new(
        provider: &str,
        forced_tool_choice: bool,
        max_output_tokens: Option<u64>,
    ) -> PyResult<Self> {
        let options = DecoderOptions {
            forced_tool_choice,
            max_output_tokens,
            ..DecoderOptions::default()
        };
        Ok(PyTurnDecoder {
            decoder: Mutex::new(Some(TurnDecoder::with_options(
                parse_provider(provider)?,
                options,
            ))),
        })
    }

    /// Feeds the next chunk; returns the visible text it completed.
    fn feed(&self, py: Python<'_>, chunk: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
        let bytes = chunk_bytes(chunk)?;
        let mut guard = self.decoder.lock().unwrap_or_else(|e| e.into_inner());
        let decoder = guard
            .as_mut()
            .ok_or_else(|| UsageError::new_err("this decoder is finished"))?;
        let deltas = detached(py, || decoder.feed(bytes.as_ref()))?;
        Ok(deltas.into_iter().map(|d| d.text).collect())
    }

    /// Ends the body and classifies the turn. `read_error`: the exception reading the body ended with
    /// (a dropped connection), kept on the turn; the turn is what the bytes fed so far make it.
    #[pyo3(signature = (*, read_error = None))]
    fn finish(&self, py: Python<'_>, read_error: Option<Py<PyAny>>) -> PyResult<PyTurn> {
        Ok(self.finish_with_text(py, read_error)?.0)
    }

    /// Ends the body and classifies the turn; also returns the visible text only the end of the body
    /// completed (a whole JSON body's text, which `feed` cannot return before the body is whole).
    #[pyo3(signature = (*, read_error = None))]
    fn finish_with_text(
        &self,
        py: Python<'_>,
        read_error: Option<Py<PyAny>>,
    ) -> PyResult<(PyTurn, Vec<String>)> {
        let decoder = self
            .decoder
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
            .ok_or_else(|| UsageError::new_err("this decoder is finished"))?;
        let (turn, deltas) = detached(py, || decoder.finish_with_deltas())?;
        let turn = PyTurn { turn, read_error };
        Ok((turn, deltas.into_iter().map(|d| d.text).collect()))
    }
}

/// A chunk's bytes: `bytes`, `bytearray`, `memoryview` (copied by `tobytes`) or `str` (UTF-8).
enum Chunk {
    Bytes(PyBackedBytes),
    Text(PyBackedStr),
}

impl AsRef<[u8]> for Chunk {
    fn as_ref(&self) -> &[u8] {
        match self {
            Chunk::Bytes(b) => b.as_ref(),
            Chunk::Text(s) => s.as_bytes(),
        }
    }
}

fn chunk_bytes(chunk: &Bound<'_, PyAny>) -> PyResult<Chunk> {
    if let Ok(bytes) = chunk.extract::<PyBackedBytes>() {
        return Ok(Chunk::Bytes(bytes));
    }
    if let Ok(text) = chunk.extract::<PyBackedStr>() {
        return Ok(Chunk::Text(text));
    }
    if let Ok(view) = chunk.cast::<PyMemoryView>() {
        return Ok(Chunk::Bytes(view.call_method0("tobytes")?.extract()?));
    }
    Err(UsageError::new_err(format!(
        "a response chunk must be bytes, bytearray, memoryview or str, not {}",
        chunk.get_type().name()?
    )))
}

/// A decoded turn: how it ended and what it asked for. Gate it with `Toolbox.process_turn`.
#[pyclass(name = "Turn", module = "turngate", frozen)]
pub struct PyTurn {
    /// The turn as decoded.
    pub turn: Turn,
    /// The exception reading its body ended with, if it did.
    read_error: Option<Py<PyAny>>,
}

#[pymethods]
impl PyTurn {
    /// `completed`, `truncated`, `refused`, `filtered`, `errored`, `malformed` or `incomplete`.
    #[getter]
    fn status(&self) -> &'static str {
        self.turn.ending.status.as_str()
    }

    /// The provider's own stop reason, when the stream carried one.
    #[getter]
    fn stop_reason(&self) -> Option<String> {
        self.turn.ending.stop_reason.clone()
    }

    /// Why the turn ended as it did, in words.
    #[getter]
    fn detail(&self) -> String {
        self.turn.ending.detail.clone()
    }

    /// The visible text of the turn.
    #[getter]
    fn text(&self) -> String {
        self.turn.text.clone()
    }

    /// The exception reading the body ended with (the turn was decoded as far as it came), or None.
    #[getter]
    fn read_error(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.read_error.as_ref().map(|error| error.clone_ref(py))
    }

    /// The whole decoded turn as the library describes it (assistant content, calls, ending).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let value = serde_json::to_value(&self.turn)
            .map_err(|e| UsageError::new_err(format!("turn not serializable: {e}")))?;
        to_python(py, &value)
    }

    fn __repr__(&self) -> String {
        format!(
            "Turn(provider={:?}, status={:?}, stop_reason={:?})",
            self.turn.provider.as_str(),
            self.turn.ending.status.as_str(),
            self.turn.ending.stop_reason
        )
    }
}
