//! Outgoing HTTP for tools, under the same gate as their files.
//!
//! A tool reaches the network only through `wasi:http/outgoing-handler` (or 0.3's `wasi:http/client`;
//! never `wasi:sockets`, which refuses a component at load), and only where its grant in the policy allows: `rules.rs` (a rule:
//! methods, origin, path glob), `grant.rs` (a tool's rules from the policy, and the decision on one
//! request), `addresses.rs` (the host's own name resolution and the addresses it refuses),
//! `approval.rs` (requests held for the approver), `transport.rs` (TCP to the checked address, TLS, hyper's HTTP/1.1 client, metered bodies),
//! `secrets.rs` (secrets bound to origins, added by the host, never seen by the tool), `mask.rs` (a
//! secret a server echoes back, masked in the response before the tool reads it),
//! `call.rs` (one call's requests: checked, sent, limited, recorded), `hooks.rs` (the
//! `WasiHttpHooks` that hand every request to the call), `limits.rs` and `record.rs`.

mod addresses;
mod approval;
mod call;
mod grant;
mod hooks;
mod limits;
mod mask;
mod record;
mod rules;
mod secrets;
mod transport;

pub use addresses::{ResolveFuture, Resolver, StaticResolver, SystemResolver};
pub(crate) use approval::channel;
pub use approval::{Asks, NetworkRequest};
pub(crate) use call::{CallNetwork, NetworkSetup};
pub(crate) use grant::NetworkFile;
pub use grant::{GrantError, NetworkGrant};
pub(crate) use hooks::NetworkHooks;
pub use limits::{NetworkLimitError, NetworkLimits};
pub use record::{RequestRecord, mask_urls};
pub use rules::RuleError;
pub(crate) use secrets::SecretFile;
pub use secrets::{Secret, SecretBinding, SecretError};
