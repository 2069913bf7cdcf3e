//! Asking the user: the [`Approver`] an embedding program (or the CLI's terminal) provides.
//!
//! A call is put to the approver when its tool is marked `approval = "ask"` in the policy, or when every
//! change is to be reviewed (`--review`). A call that can change files is asked about after it ran in its
//! staged view, with the change set and its unified diff, and applies only on yes; a call that only reads
//! is asked about before it runs, since what it reads is what it reveals. A network request of a tool
//! whose network table says `approval = "ask"` (a method that changes things) is asked about while the
//! call waits, with its method, URL and body ([`ApprovalRequest::network`]). Without an approver such a
//! call or request is denied. A denial is the call's result (the model is told); the other calls of a turn go on.

use std::future::Future;
use std::pin::Pin;

use crate::descriptor::Access;
use crate::effects::ChangeSet;
use crate::network::NetworkRequest;
use crate::resolve::RelPath;

/// One call waiting for the user's answer.
#[derive(Debug)]
pub struct ApprovalRequest<'a> {
    /// The provider's call ID.
    pub id: Option<&'a str>,
    /// The tool.
    pub tool: &'a str,
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

/// The future an [`Approver`] returns: `true` lets the call run (or its changes apply).
pub type ApprovalFuture<'a> = Pin<Box<dyn Future<Output = bool> + Send + 'a>>;

/// Decides calls that need the user's approval.
pub trait Approver: Send + Sync {
    /// Decides one call.
    fn approve<'a>(&'a self, request: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a>;
}

/// Approves everything, for embedders whose users approved in advance (and for tests).
#[derive(Debug, Clone, Copy, Default)]
pub struct ApproveAll;

impl Approver for ApproveAll {
    fn approve<'a>(&'a self, _: &'a ApprovalRequest<'a>) -> ApprovalFuture<'a> {
        Box::pin(async { true })
    }
}
