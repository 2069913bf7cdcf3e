//! The effect pipeline: what a call changed, checked again, reviewed, applied atomically, journaled and
//! undoable.
//!
//! When a call returns, its view's upper layer becomes a [`ChangeSet`] ([`ChangeSet::from_upper`]): every
//! file created, replaced or deleted and every directory made or removed, with the SHA-256 of the
//! content before and after. [`ChangeSet::check`] holds every changed path to the approval and the policy
//! again; anything outside them fails the whole call. [`diff`] renders the set as a unified diff for
//! review. [`journal::Journal::apply`] then applies it under the root's journal: each target must still
//! resolve beneath the root without a symlink and be unchanged since the view first saw it, the intent
//! and the pre-images are on disk before anything moves, and each file is replaced by a rename, so a
//! reader sees the old content or the new, never a mix. [`journal::Journal::undo`] puts the pre-images
//! back.

pub mod diff;
pub mod journal;
pub(crate) mod order;
pub(crate) mod turn_order;

use std::io::{self, Read};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::descriptor::Access;
use crate::gate::ApprovedPath;
use crate::lower::Lower;
use crate::names::NameMatch;
use crate::policy::Policy;
use crate::resolve::{Entry, EntryKind, RelPath};
use crate::scope::is_reserved;
use crate::view::staging::{Staged, Staging};
use crate::view::{Node, Upper};

/// What a change does to its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// A new file where there was nothing.
    Create,
    /// A file's content replaced.
    Replace,
    /// A file (or symlink) removed.
    Delete,
    /// A new directory.
    MakeDir,
    /// An empty directory removed.
    RemoveDir,
}

impl ChangeKind {
    /// `create`, `replace`, `delete`, `make_dir`, `remove_dir`.
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Create => "create",
            ChangeKind::Replace => "replace",
            ChangeKind::Delete => "delete",
            ChangeKind::MakeDir => "make_dir",
            ChangeKind::RemoveDir => "remove_dir",
        }
    }
}

/// The content of a file on one side of a change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Content {
    /// SHA-256, hex.
    pub sha256: String,
    /// Bytes.
    pub size: u64,
}

/// One change of a call.
#[derive(Debug, Clone)]
pub struct Change {
    /// Where, relative to the root.
    pub path: RelPath,
    /// What happens there.
    pub kind: ChangeKind,
    /// The file before (`None` for directories, for nothing, and for a deleted symlink).
    pub before: Option<Content>,
    /// The file after (`None` unless a file is created or replaced).
    pub after: Option<Content>,
    /// What the lower layer held there when the call's view first looked (the no-lost-update check).
    origin: Option<Entry>,
    /// How the directories on the path match names (the approval and the policy are held to it so).
    matching: NameMatch,
    /// The staged file that becomes the new content.
    staged: Option<Staged>,
}

/// Everything a call changed, with the staged files that carry the new content.
pub struct ChangeSet {
    changes: Vec<Change>,
    staging: Option<Staging>,
    /// The view's lower layer, to read the old content for a diff.
    lower: Lower,
}

impl std::fmt::Debug for ChangeSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(&self.changes).finish()
    }
}

/// Why a call's changes were not applied. Nothing of the call was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EffectError {
    /// The call changed a path its approval or the policy does not cover.
    #[error("the call changed `{path}`, which {why}: none of its changes was applied")]
    OutsideApproval {
        /// The path.
        path: String,
        /// Why it is outside.
        why: String,
    },
    /// A target changed between the call's view and the apply (another writer): no lost update.
    #[error("`{path}` changed since the call saw it ({detail}): none of its changes was applied")]
    Changed {
        /// The path.
        path: String,
        /// What differs.
        detail: String,
    },
    /// A target no longer resolves beneath the root the way it did (a symlink swapped in).
    #[error(
        "`{path}` no longer resolves beneath the root as it did ({detail}): none of the call's changes was applied"
    )]
    Moved {
        /// The path.
        path: String,
        /// What is in the way.
        detail: String,
    },
    /// The user (or the embedding program's approver) did not approve the changes.
    #[error("the changes were not approved: none was applied")]
    NotApproved,
    /// The filesystem failed while applying (everything done so far was rolled back).
    #[error("applying failed at `{path}`: {message}; none of the call's changes was applied")]
    Io {
        /// Where.
        path: String,
        /// What the operating system said.
        message: String,
    },
    /// The journal could not be used.
    #[error("the journal failed: {0}")]
    Journal(String),
    /// Something turngate did not make stands where its state directory expects its own file or
    /// directory (a link, a FIFO, a file with other hard links): it is neither followed nor used.
    #[error(
        "`{path}` is {found}, which turngate did not make; it was neither followed nor used: move it out of the way to go on"
    )]
    Foreign {
        /// The entry, relative to the root (`.turngate/...`).
        path: String,
        /// What it is.
        found: String,
    },
}

impl EffectError {
    /// A short, stable name: `outside_approval`, `changed`, `moved`, `not_approved`, `io`, `journal`,
    /// `foreign`.
    pub fn kind(&self) -> &'static str {
        match self {
            EffectError::OutsideApproval { .. } => "outside_approval",
            EffectError::Changed { .. } => "changed",
            EffectError::Moved { .. } => "moved",
            EffectError::NotApproved => "not_approved",
            EffectError::Io { .. } => "io",
            EffectError::Journal(_) => "journal",
            EffectError::Foreign { .. } => "foreign",
        }
    }

    fn io(path: &RelPath, error: &io::Error) -> EffectError {
        EffectError::Io {
            path: path.to_string(),
            message: error.to_string(),
        }
    }
}

impl ChangeSet {
    /// The change set of a finished call's upper layer, reading the lower layer through `lower` for the
    /// content hashes. A file rewritten with the content it had is no change.
    pub(crate) fn from_upper(upper: Upper) -> Result<ChangeSet, EffectError> {
        let Upper {
            nodes,
            origins,
            staging,
            mut lower,
        } = upper;
        let mut changes = Vec::new();
        for (path, node) in nodes {
            let origin = origins.get(&path).copied().flatten();
            let was = origin.map(|e| e.kind);
            let matching = matching_of(&mut lower, &path);
            let change = |kind, before, after, staged| Change {
                path: path.clone(),
                kind,
                before,
                after,
                origin,
                matching,
                staged,
            };
            match (was, node) {
                (None, Node::Absent) | (Some(EntryKind::Dir), Node::Dir) => {}
                (None, Node::Dir) => changes.push(change(ChangeKind::MakeDir, None, None, None)),
                (None, Node::File(staged)) => {
                    let after = Some(hash_staged(&path, &staged)?);
                    changes.push(change(ChangeKind::Create, None, after, Some(staged)));
                }
                (Some(EntryKind::Dir), Node::Absent) => {
                    changes.push(change(ChangeKind::RemoveDir, None, None, None))
                }
                (Some(EntryKind::Dir), Node::File(staged)) => {
                    changes.push(change(ChangeKind::RemoveDir, None, None, None));
                    let after = Some(hash_staged(&path, &staged)?);
                    let mut create = change(ChangeKind::Create, None, after, Some(staged));
                    create.origin = None;
                    changes.push(create);
                }
                (Some(kind), node) => {
                    let before = match kind {
                        EntryKind::File => Some(hash_lower(&path, origin, &mut lower)?),
                        _ => None,
                    };
                    match node {
                        Node::Absent => {
                            changes.push(change(ChangeKind::Delete, before, None, None))
                        }
                        Node::Dir => {
                            changes.push(change(ChangeKind::Delete, before, None, None));
                            let mut make = change(ChangeKind::MakeDir, None, None, None);
                            make.origin = None;
                            changes.push(make);
                        }
                        Node::File(staged) => {
                            let after = hash_staged(&path, &staged)?;
                            if kind == EntryKind::File && before.as_ref() == Some(&after) {
                                continue;
                            }
                            let kind = if kind == EntryKind::File {
                                ChangeKind::Replace
                            } else {
                                ChangeKind::Delete
                            };
                            if kind == ChangeKind::Delete {
                                // A symlink (or special file) replaced by a file: remove, then create.
                                changes.push(change(ChangeKind::Delete, before, None, None));
                                let mut create =
                                    change(ChangeKind::Create, None, Some(after), Some(staged));
                                create.origin = None;
                                changes.push(create);
                            } else {
                                changes.push(change(kind, before, Some(after), Some(staged)));
                            }
                        }
                    }
                }
            }
        }
        order(&mut changes);
        Ok(ChangeSet {
            changes,
            staging,
            lower,
        })
    }

    /// The changes, in the order they are applied.
    pub fn changes(&self) -> &[Change] {
        &self.changes
    }

    /// Whether the call changed nothing.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// Holds every changed path to the approval and the policy: it must lie within a path approved for
    /// writing (a directory made on the way to one counts) and the policy must let `tool` write it.
    pub fn check(
        &self,
        tool: &str,
        approved: &[ApprovedPath],
        policy: &Policy,
    ) -> Result<(), EffectError> {
        for change in &self.changes {
            let path = &change.path;
            let outside = |why: String| EffectError::OutsideApproval {
                path: path.to_string(),
                why,
            };
            if is_reserved(path) {
                return Err(outside("is turngate's state directory".into()));
            }
            let matching = change.matching;
            let granted = approved.iter().any(|p| {
                p.access == Access::Write
                    && (path.is_within_as(&p.location, matching)
                        || (change.kind == ChangeKind::MakeDir
                            && p.location.is_within_as(path, matching)))
            });
            if !granted {
                return Err(outside("the call was not approved to write".into()));
            }
            if let crate::policy::Verdict::Deny(reason) =
                policy.check_in(tool, path.to_policy_path(), Access::Write, matching)
            {
                return Err(outside(format!("the policy denies ({reason})")));
            }
        }
        Ok(())
    }

    /// The staging directory holding the new content.
    pub(crate) fn staging(&self) -> Option<&Staging> {
        self.staging.as_ref()
    }
}

impl Change {
    /// The staged file with the new content (for creates and replaces).
    pub(crate) fn staged(&self) -> Option<&Staged> {
        self.staged.as_ref()
    }

    /// What the lower layer held at the path when the call's view first looked.
    pub(crate) fn origin(&self) -> Option<&Entry> {
        self.origin.as_ref()
    }
}

/// Removals first (files, then directories deepest first), then directories made (shallowest first),
/// then files created or replaced: so every change finds its parent, and a path freed is free before it
/// is used again.
fn order(changes: &mut [Change]) {
    changes.sort_by_key(|c| {
        let depth = c.path.depth() as i64;
        match c.kind {
            ChangeKind::Delete => (0, 0),
            ChangeKind::RemoveDir => (1, -depth),
            ChangeKind::MakeDir => (2, depth),
            ChangeKind::Create | ChangeKind::Replace => (3, 0),
        }
    });
}

/// How the directories on `path` match names, as far as lookups showed: those of its nearest directory
/// the lower layer has.
fn matching_of(lower: &mut Lower, path: &RelPath) -> NameMatch {
    let mut dir = path.parent();
    while let Some(at) = dir {
        if let Ok(matching) = lower.known_matching(&at) {
            return matching;
        }
        dir = at.parent();
    }
    NameMatch::Exact
}

/// SHA-256 and size of everything `reader` yields. The buffer is left uninitialized, so a small file
/// touches one page of it: a zeroed one would be 16 fresh pages to fault in for every hash in a one-shot
/// process (`turngate call`), and a 64 KiB `memset` in every other.
pub(crate) fn hash_reader(reader: impl Read) -> io::Result<Content> {
    let mut hasher = Sha256::new();
    let size = io::copy(
        &mut io::BufReader::with_capacity(64 * 1024, reader),
        &mut hasher,
    )?;
    Ok(Content {
        sha256: hex::encode(hasher.finalize()),
        size,
    })
}

fn hash_staged(path: &RelPath, staged: &Staged) -> Result<Content, EffectError> {
    let mut file = &*staged.file;
    io::Seek::seek(&mut file, io::SeekFrom::Start(0)).map_err(|e| EffectError::io(path, &e))?;
    hash_reader(file).map_err(|e| EffectError::io(path, &e))
}

/// The hash of the old content at `path`: the file the view saw there (`origin`), or an error when
/// another file, or the same one changed, is there now.
fn hash_lower(
    path: &RelPath,
    origin: Option<Entry>,
    lower: &mut Lower,
) -> Result<Content, EffectError> {
    let (file, opened) = lower
        .open_file(path)
        .map_err(|e| EffectError::io(path, &e))?;
    if let Some(origin) = origin
        && opened.identity != origin.identity
    {
        return Err(EffectError::Changed {
            path: path.to_string(),
            detail: "it changed while the call ran".into(),
        });
    }
    hash_reader(file.into_std()).map_err(|e| EffectError::io(path, &e))
}

/// What the calls on one root share: the root's journal, which it opens on first use (a call that
/// changes nothing never creates one), and the order in which calls touching the same paths go
/// ([`order`]). Keep one per root for as long as calls go on; calls may share it from many tasks.
#[derive(Debug, Default)]
pub struct Effects {
    retention: journal::Retention,
    journal: std::sync::Mutex<Option<journal::Journal>>,
    pub(crate) order: order::PathOrder,
}

impl Effects {
    /// Effects kept with the journal's retention.
    pub fn new(retention: journal::Retention) -> Effects {
        Effects {
            retention,
            journal: std::sync::Mutex::new(None),
            order: order::PathOrder::default(),
        }
    }

    /// Applies `changes` to `root` (always the same root for one `Effects`), journaled with `meta`.
    pub fn apply(
        &self,
        root: &crate::root::Root,
        meta: &journal::CallMeta,
        changes: &ChangeSet,
    ) -> Result<Option<journal::JournalEntry>, EffectError> {
        if changes.is_empty() {
            return Ok(None);
        }
        let mut journal = self.journal.lock().unwrap_or_else(|e| e.into_inner());
        let journal = match &mut *journal {
            Some(journal) => journal,
            None => journal.insert(journal::Journal::open(root, self.retention)?),
        };
        journal.apply(root, meta, changes)
    }
}
