//! Live providers: stream a turn from a provider's API, gate it, answer its calls, and go on.
//!
//! * [`request`]: endpoints, headers and request bodies per provider (tools from the toolbox's schemas).
//! * [`conversation`]: the message list in the provider's shape, extended with each turn's history.
//! * [`errors`]: [`ApiError`], one class per kind of failure, each with a stable `kind()` and exit code.
//! * [`retry`]: `retry-after` / `retryDelay` parsing, backoff with jitter, [`RetryPolicy`].
//! * [`client`]: one streaming request into a [`Turn`](crate::Turn) through the same decoder as
//!   `turngate run`; HTTP status, headers and transport failures become an [`ApiError`].
//! * [`agent`]: the loop ([`Agent`]): bounded regeneration of bad turns, bounded API retries, the turn
//!   gate with an approval hook, cancellation between calls.
//!
//! Nothing about a call is acted on while its turn streams: the client returns only a whole, decoded
//! turn, and the agent hands it to [`process_turn_with`](crate::process_turn_with), which runs calls only
//! for a completed turn.

pub mod agent;
pub mod client;
pub mod conversation;
pub mod errors;
pub mod request;
pub mod retry;

pub use agent::{Agent, AgentConfig, AgentEnd, AgentObserver, AgentOutcome, RegenerationPolicy};
pub use client::LiveClient;
pub use conversation::Conversation;
pub use errors::ApiError;
pub use request::{ApiKey, Endpoint};
pub use retry::RetryPolicy;
