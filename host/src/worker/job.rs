//! The job message: which root, which provider, and the raw streamed turn, read strictly.
//!
//! A job is one JetStream message on the jobs subject. Its headers name it and its payload is the
//! provider's response body exactly as streamed (so its size is bounded by the server's
//! `max_payload`, 1 MiB by default):
//!
//! * `Nats-Msg-Id`: the job ID, 1 to 64 ASCII letters, digits, `-` or `_`, starting with a letter or
//!   digit. It is the turn ID in the root's journal and the token of the job's results subject, and
//!   it makes JetStream drop a re-submitted job within the de-duplication window;
//! * `Turngate-Provider`: `anthropic`, `openai-chat`, `openai-responses` or `gemini`;
//! * `Turngate-Root`: a plain directory name beneath the worker's `--roots` (no `/`, not `.` or `..`);
//! * `Turngate-Forced-Tool-Choice: true` (optional, OpenAI Chat): as `run --forced-tool-choice`;
//! * `Turngate-Max-Output-Tokens: N` (optional): the output limit the request asked for, as
//!   `run --max-output-tokens`.
//!
//! Anything else is a [`JobError`], which the worker answers instead of running the job.

use async_nats::HeaderMap;
use bytes::Bytes;

use crate::providers::{DecoderOptions, TurnDecoder};
use crate::root::is_plain_name;
use crate::turn::{Provider, Turn};

/// The header carrying the job ID (JetStream's de-duplication header).
pub const HEADER_ID: &str = "Nats-Msg-Id";
/// The header naming the provider.
pub const HEADER_PROVIDER: &str = "Turngate-Provider";
/// The header naming the root.
pub const HEADER_ROOT: &str = "Turngate-Root";
/// The header marking an OpenAI Chat request that forced a named tool.
pub const HEADER_FORCED_TOOL_CHOICE: &str = "Turngate-Forced-Tool-Choice";
/// The header carrying the output limit the turn's request asked for.
pub const HEADER_MAX_OUTPUT_TOKENS: &str = "Turngate-Max-Output-Tokens";
/// Longest job ID.
const MAX_JOB_ID: usize = 64;

/// One turn to gate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The job ID (and turn ID).
    pub id: String,
    /// The protocol of the stream.
    pub provider: Provider,
    /// The root's name beneath the worker's roots directory.
    pub root: String,
    /// OpenAI Chat: the request forced a named tool.
    pub forced_tool_choice: bool,
    /// The output limit the request asked for, when known (a turn whose usage reached it is truncated).
    pub max_output_tokens: Option<u64>,
    /// The raw response body.
    pub stream: Bytes,
}

/// Why a message is not a job.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JobError {
    /// A header is missing.
    #[error("the job has no `{0}` header")]
    Missing(&'static str),
    /// A header's value is not usable.
    #[error("the job's `{header}` header is not usable ({detail})")]
    Invalid {
        /// The header.
        header: &'static str,
        /// What is wrong.
        detail: String,
    },
}

/// Whether `id` is usable as a job ID (see the module docs).
pub fn is_job_id(id: &str) -> bool {
    id.len() <= MAX_JOB_ID
        && id.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// A fresh job ID: the time and a random suffix.
pub fn new_job_id() -> String {
    format!("job-{}-{:016x}", crate::audit::now_ms(), fastrand::u64(..))
}

impl Job {
    /// The job's headers, as [`Job::from_parts`] reads them; refused when the ID or the root would
    /// be refused there.
    pub fn headers(&self) -> Result<HeaderMap, JobError> {
        if !is_job_id(&self.id) {
            return Err(JobError::Invalid {
                header: HEADER_ID,
                detail: format!("`{}` is not a job ID", self.id.escape_debug()),
            });
        }
        if !is_plain_name(&self.root) {
            return Err(JobError::Invalid {
                header: HEADER_ROOT,
                detail: format!(
                    "`{}` is not a plain directory name",
                    self.root.escape_debug()
                ),
            });
        }
        let mut headers = HeaderMap::new();
        headers.insert(HEADER_ID, self.id.as_str());
        headers.insert(HEADER_PROVIDER, self.provider.as_str());
        headers.insert(HEADER_ROOT, self.root.as_str());
        if self.forced_tool_choice {
            headers.insert(HEADER_FORCED_TOOL_CHOICE, "true");
        }
        if let Some(limit) = self.max_output_tokens {
            headers.insert(HEADER_MAX_OUTPUT_TOKENS, limit.to_string().as_str());
        }
        Ok(headers)
    }

    /// Reads a job from a message's headers and payload. On an error, also answers the job ID when
    /// the message has a usable one, so the answer can reach the submitter.
    pub fn from_parts(
        headers: Option<&HeaderMap>,
        payload: Bytes,
    ) -> Result<Job, (Option<String>, JobError)> {
        let get = |name: &'static str| {
            headers
                .and_then(|h| h.get(name))
                .map(|v| v.as_str().to_owned())
        };
        let id = get(HEADER_ID).ok_or((None, JobError::Missing(HEADER_ID)))?;
        if !is_job_id(&id) {
            return Err((
                None,
                JobError::Invalid {
                    header: HEADER_ID,
                    detail: format!(
                        "expected 1 to {MAX_JOB_ID} ASCII letters, digits, `-` or `_`, starting with a letter or digit"
                    ),
                },
            ));
        }
        let fail = |error| Err((Some(id.clone()), error));
        let Some(provider) = get(HEADER_PROVIDER) else {
            return fail(JobError::Missing(HEADER_PROVIDER));
        };
        let Ok(provider) = provider.parse::<Provider>() else {
            return fail(JobError::Invalid {
                header: HEADER_PROVIDER,
                detail: format!(
                    "`{provider}`: expected anthropic, openai-chat, openai-responses or gemini"
                ),
            });
        };
        let Some(root) = get(HEADER_ROOT) else {
            return fail(JobError::Missing(HEADER_ROOT));
        };
        if !is_plain_name(&root) {
            return fail(JobError::Invalid {
                header: HEADER_ROOT,
                detail: format!("`{root}` is not a plain directory name"),
            });
        }
        let forced_tool_choice = match get(HEADER_FORCED_TOOL_CHOICE).as_deref() {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return fail(JobError::Invalid {
                    header: HEADER_FORCED_TOOL_CHOICE,
                    detail: format!("`{other}`: expected true or false"),
                });
            }
        };
        let max_output_tokens = match get(HEADER_MAX_OUTPUT_TOKENS) {
            None => None,
            Some(text) => match text.parse::<u64>() {
                Ok(limit) if text.bytes().all(|b| b.is_ascii_digit()) => Some(limit),
                _ => {
                    return fail(JobError::Invalid {
                        header: HEADER_MAX_OUTPUT_TOKENS,
                        detail: format!("`{}`: expected a number of tokens", text.escape_debug()),
                    });
                }
            },
        };
        Ok(Job {
            id,
            provider,
            root,
            forced_tool_choice,
            max_output_tokens,
            stream: payload,
        })
    }

    /// Decodes the whole stream into a turn, as `turngate run` does.
    pub fn decode(&self) -> Turn {
        let options = DecoderOptions {
            forced_tool_choice: self.forced_tool_choice,
            max_output_tokens: self.max_output_tokens,
            ..DecoderOptions::default()
        };
        let mut decoder = TurnDecoder::with_options(self.provider, options);
        decoder.feed(&self.stream);
        decoder.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> Job {
        Job {
            id: "j-1".into(),
            provider: Provider::Anthropic,
            root: "tenant-a".into(),
            forced_tool_choice: false,
            max_output_tokens: Some(4096),
            stream: Bytes::from_static(b"data: {}\n\n"),
        }
    }

    #[test]
    fn a_job_reads_back_from_its_headers() {
        let job = job();
        let back = Job::from_parts(Some(&job.headers().unwrap()), job.stream.clone()).unwrap();
        assert_eq!(back, job);
    }

    #[test]
    fn the_output_limit_travels_in_the_job_and_its_decoding_honours_it() {
        let stream = include_bytes!(
            "../../../tests/fixtures/streams/constructed/openai_chat_vllm_tool_calls_at_limit.sse"
        );
        let mut job = Job {
            provider: Provider::OpenAiChat,
            stream: Bytes::from_static(stream),
            max_output_tokens: Some(64),
            ..job()
        };
        let back = Job::from_parts(Some(&job.headers().unwrap()), job.stream.clone()).unwrap();
        assert_eq!(back.max_output_tokens, Some(64));
        assert_eq!(back.decode().ending.status, crate::TurnStatus::Truncated);
        job.max_output_tokens = None;
        let back = Job::from_parts(Some(&job.headers().unwrap()), job.stream.clone()).unwrap();
        assert_eq!(back.max_output_tokens, None);
        assert_eq!(back.decode().ending.status, crate::TurnStatus::Completed);
        for bad in ["", "-1", "+5", "1e3", "ten", "99999999999999999999999"] {
            let mut headers = job.headers().unwrap();
            headers.insert(HEADER_MAX_OUTPUT_TOKENS, bad);
            let (id, error) = Job::from_parts(Some(&headers), Bytes::new()).unwrap_err();
            assert_eq!(id.as_deref(), Some("j-1"), "{bad:?}");
            assert!(
                error.to_string().contains(HEADER_MAX_OUTPUT_TOKENS),
                "{error}"
            );
        }
    }

    #[test]
    fn roots_that_are_not_plain_names_are_refused_with_the_job_id() {
        for root in ["..", ".", "a/b", "/etc", "", "a\0b", "a\tb"] {
            let mut headers = job().headers().unwrap();
            headers.insert(HEADER_ROOT, root);
            let (id, error) = Job::from_parts(Some(&headers), Bytes::new()).unwrap_err();
            assert_eq!(id.as_deref(), Some("j-1"), "{root:?}");
            assert!(error.to_string().contains("Turngate-Root"), "{error}");
        }
    }

    #[test]
    fn bad_ids_and_providers_are_refused() {
        assert!(Job::from_parts(None, Bytes::new()).is_err());
        for id in ["", "_x", "a.b", "a b", &"x".repeat(65)] {
            let mut headers = job().headers().unwrap();
            headers.insert(HEADER_ID, id);
            assert_eq!(
                Job::from_parts(Some(&headers), Bytes::new()).unwrap_err().0,
                None
            );
        }
        let mut headers = job().headers().unwrap();
        headers.insert(HEADER_PROVIDER, "cohere");
        let (id, _) = Job::from_parts(Some(&headers), Bytes::new()).unwrap_err();
        assert_eq!(id.as_deref(), Some("j-1"));
    }
}
