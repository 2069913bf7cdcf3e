//! Asking the user: the [`Approver`] an embedding program (or the CLI's terminal) provides.
//!
//! A call is put to the approver when its tool is marked `approval = "ask"` in the policy, or when every
//! change is to be reviewed (`--review`). A call that can change files is asked about after it ran in its
//! staged view, with the change set and its unified diff, and applies only on yes; a call that only reads
//! is asked about before it runs, since what it reads is what it reveals. A network request of a tool
//! whose network table says `approval = "ask"` (a method that changes things) is asked about while the
//! call waits, with its method, URL and body ([`ApprovalRequest::network`]). Without an approver such a
//! call or request is denied. A denial is the call's result (the model is told); the other calls of a turn go on.
//!
//! The modules: [`pending`] records questions and answers in the root (`.turngate/approvals/`), each
//! named by the digest of exactly what is shown ([`ApprovalRequest::digest`]); [`durable`] is the
//! [`Approver`] that asks through them, so a question outlives the process that asked.

pub mod durable;
pub mod pending;

use std::future::Future;
use std::pin::Pin;

use crate::descriptor::Access;
use crate::digest::Sha256Digest;
use crate::effects::ChangeSet;
use crate::effects::diff::DiffSize;
use crate::network::NetworkRequest;
use crate::resolve::RelPath;

/// Where the tool that asks came from, as its question shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ToolProvenance {
    /// `bundled`, the component's file, or an embedding program's label.
    pub origin: String,
    /// SHA-256 of the component's bytes, hex.
    pub sha256: String,
    /// Where a tool installed from a registry came from (`oci://...` or a layout directory), as the
    /// tools directory's lock records it; `None` for one not installed from a registry.
    pub source: Option<String>,
    /// Who signed it, as its install verified; `None` for a tool installed unsigned by the user's
    /// choice, or not from a registry.
    pub signer: Option<String>,
}

/// Which rule of the policy asks the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AskedBecause {
    /// The tool is marked `approval = "ask"` (`[tools.NAME]`).
    ToolAsks,
    /// Every change set is reviewed (`--review`, `review=True`).
    Review,
    /// The tool's network table holds requests of this method for approval (`approval = "ask"`).
    NetworkAsks,
}

/// One call waiting for the user's answer.
#[derive(Debug)]
pub struct ApprovalRequest<'a> {
    /// The provider's call ID.
    pub id: Option<&'a str>,
    /// The turn the call belongs to, when known (shown to group a turn's questions; not part of what
    /// an answer is bound to, since a turn run again may be given a new ID).
    pub turn: Option<&'a str>,
    /// The call's place in its turn (0 for the first), when known: a turn's questions are listed in
    /// this order, whatever order they were asked in; not part of what an answer is bound to.
    pub position: Option<usize>,
    /// The tool.
    pub tool: &'a str,
    /// Where the tool came from (`None` where the caller does not know it).
    pub provenance: Option<&'a ToolProvenance>,
    /// Which rule asks.
    pub asked_because: AskedBecause,
    /// The input exactly as the model sent it (already parsed strictly and schema-checked).
    pub input: &'a str,
    /// The paths the call was approved for (where they lead) and with what access.
    pub paths: Vec<(RelPath, Access)>,
    /// What the call would change (`None`: asked before a call that only reads).
    pub changes: Option<&'a ChangeSet>,
    /// The changes as a unified diff (empty when there are none).
    pub diff: &'a str,
    /// A request the running call wants to make over the network (`approval = "ask"` in its network
    /// table): asked while the call waits, before anything is sent.
    pub network: Option<&'a NetworkRequest>,
}

impl ApprovalRequest<'_> {
    /// The request as JSON, for approvers outside Rust (the Python and Node packages): `{"id", "tool",
    /// "provenance": null | {"origin", "sha256", "source", "signer"}, "asked_because": "tool_asks" |
    /// "review" | "network_asks", "input", "paths": [{"path", "access"}], "changes": null | [{"path",
    /// "kind", "before", "after"}], "diff", "network": null | {"method", "url", "body_bytes",
    /// "body_sha256", "body_start"}}`.
    pub fn to_json(&self) -> serde_json::Value {
        let paths: Vec<serde_json::Value> = self
            .paths
            .iter()
            .map(|(path, access)| serde_json::json!({"path": path.as_str(), "access": access}))
            .collect();
        let changes = self.changes.map(|set| {
            set.changes()
                .iter()
                .map(|c| {
                    serde_json::json!({
                        "path": c.path.as_str(), "kind": c.kind, "before": c.before, "after": c.after
                    })
                })
                .collect::<Vec<_>>()
        });
        let network = self.network.map(|request| {
            serde_json::json!({
                "method": request.method,
                "url": request.url,
                "body_bytes": request.body_bytes,
                "body_sha256": request.body_sha256,
                "body_start": request.body_start,
            })
        });
        serde_json::json!({
            "id": self.id,
            "tool": self.tool,
            "provenance": self.provenance,
            "asked_because": self.asked_because,
            "input": self.input,
            "paths": paths,
            "changes": changes,
            "diff": self.diff,
            "network": network,
        })
    }
}

impl ApprovalRequest<'_> {
    /// What an answer to this request is bound to: SHA-256 of [`ApprovalRequest::to_json`] as bytes
    /// (the call ID, tool, where it came from, the rule that asks, input, paths, every change with the SHA-256 and size of both sides, the
    /// diff, the network request with its body's SHA-256). Two requests with the same digest show the
    /// same thing.
    pub fn digest(&self) -> Sha256Digest {
        digest_of(&self.to_json())
    }
}

/// The digest of a request as [`ApprovalRequest::to_json`] gave it (or as read back from a record).
pub(crate) fn digest_of(shown: &serde_json::Value) -> Sha256Digest {
    Sha256Digest::of(&serde_json::to_vec(shown).expect("a JSON value serializes"))
}

/// The future an [`Approver`] returns: `true` lets the call run (or its changes apply).
pub type ApprovalFuture<'a> = Pin<Box<dyn Future<Output = bool> + Send + 'a>>;

/// How an [`Approver`] takes the questions of one turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Asking {
    /// One question at a time, in the turn's order (a prompt on a terminal, a callback): each call is
    /// asked about once the calls before it applied or were refused.
    #[default]
    OneAtATime,
    /// Every question that can stand at once (a page where they wait to be answered, one by one or a
    /// turn at a time): the turn's calls on disjoint paths run and are asked about together, each
    /// later call on a path an earlier one touches only once that one is done, and they still apply
    /// in the turn's order. A call that may reach the network still runs alone.
    Together,
}

/// Decides calls that need the user's approval.
pub trait Approver: Send + Sync {
    /// Decides one call.
    fn approve<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a>;

    /// How it takes a turn's questions (one at a time unless it says otherwise).
    fn asking(&self) -> Asking {
        Asking::OneAtATime
    }

    /// How much of a change set the diffs it is shown hold (shown whole unless it says otherwise:
    /// one that shows them a page of hunks at a time is given larger files' diffs).
    fn diff_size(&self) -> DiffSize {
        DiffSize::Whole
    }
}

/// Approves everything, for embedders whose users approved in advance (and for tests).
#[derive(Debug, Clone, Copy, Default)]
pub struct ApproveAll;

impl Approver for ApproveAll {
    fn approve<'a>(&'a self, _: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a> {
        Box::pin(async { true })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_as_json_shows_the_network_request_it_asks_about() {
        let network = NetworkRequest {
            method: "POST".into(),
            url: "https://api.example.org/issues".into(),
            body_bytes: 2,
            body_sha256: "ab".repeat(32),
            body_start: Some("{}".into()),
        };
        let request = ApprovalRequest {
            id: Some("c1"),
            turn: None,
            position: None,
            tool: "github",
            provenance: None,
            asked_because: AskedBecause::NetworkAsks,
            input: "{}",
            paths: vec![(RelPath::parse("notes.txt").unwrap(), Access::Read)],
            changes: None,
            diff: "",
            network: Some(&network),
        };
        let json = request.to_json();
        assert_eq!(json["paths"][0]["path"], "notes.txt");
        assert_eq!(json["changes"], serde_json::Value::Null);
        assert_eq!(json["network"]["method"], "POST");
        assert_eq!(json["network"]["url"], "https://api.example.org/issues");
        assert_eq!(json["network"]["body_bytes"], 2);
        assert_eq!(json["network"]["body_start"], "{}");
    }
}
