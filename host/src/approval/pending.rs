//! Approvals recorded in the root (`.turngate/approvals/`), so a question and its answer outlive the
//! process that asked and the page that answered.
//!
//! Each question is named by its digest ([`ApprovalRequest::digest`]: SHA-256 of exactly what is shown:
//! the call, its input, its staged changes with their SHA-256s and diff, or the network request), and
//! lives in three files at most:
//!
//! * `<hex>.ask`: the question (when asked, until when it may be answered, the turn, the request as
//!   shown). Whoever answers reads it and is held to it: a record whose request does not hash to its
//!   name is refused ([`ApprovalError::Damaged`]), so an answer always applies to what was shown.
//! * `<hex>.answer`: the answer, written once (a rename that fails when the name exists: the first
//!   answer stands, a no is final). An answer after the deadline is refused and the question denied.
//! * `<hex>.used`: a yes once the call it answered has taken it (renamed from `.answer`: of several
//!   processes that met it, one rename finds it), so a yes lets one call through. The same request
//!   asked again afterwards (the file put back as it was, say) is a new question.
//!
//! Every file is written to a temporary name, flushed, and renamed into place, and the directory
//! flushed: what [`PendingApprovals::answer`] reports written is there after a power loss. Files are
//! opened without following links and held to what was opened (a regular file with one link), as the
//! journal's are.

use std::io::{self, Read, Write};
use std::time::Duration;

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use serde::{Deserialize, Serialize};

use crate::digest::Sha256Digest;
use crate::effects::journal::{durable, moves, state};
use crate::root::{Root, STATE_DIR};

/// The directory in `.turngate/` approvals are recorded in.
pub const APPROVALS_DIR: &str = "approvals";

/// Largest record read (a question holds the diff shown, at most
/// [`crate::effects::diff::MAX_PAGED_BYTES`], which JSON may escape to twice its size).
const MAX_RECORD_BYTES: u64 = 128 << 20;

/// Why an approval could not be recorded, answered or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ApprovalError {
    /// Reading or writing the approvals directory failed.
    #[error("`{path}`: {source}")]
    Io {
        /// The file, under the root.
        path: String,
        /// What the system said.
        #[source]
        source: io::Error,
    },
    /// Something turngate did not make stands where its files are (a link, a FIFO, a hard link).
    #[error(transparent)]
    Foreign(#[from] crate::effects::EffectError),
    /// A record does not parse, or its request does not hash to its name.
    #[error("`{path}` is damaged: {why}")]
    Damaged {
        /// The file, under the root.
        path: String,
        /// What is wrong with it.
        why: String,
    },
    /// No question has this digest (never asked, or taken back).
    #[error("no approval is waiting with digest {0}")]
    Unknown(Sha256Digest),
    /// The question was answered already; the first answer stands.
    #[error("approval {digest} was answered already ({})", if *.approved { "approved" } else { "denied" })]
    Answered {
        /// The question.
        digest: Sha256Digest,
        /// The answer that stands.
        approved: bool,
    },
    /// The question's deadline passed: it is denied.
    #[error("approval {0} was not answered in time and is denied")]
    Expired(Sha256Digest),
}

/// A question as recorded (`<hex>.ask`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PendingApproval {
    /// Its name: the digest of `request`.
    pub digest: Sha256Digest,
    /// When it was first asked, in milliseconds since the Unix epoch.
    pub asked_ms: u64,
    /// The last moment an answer is taken; after it, it is denied.
    pub deadline_ms: u64,
    /// The turn of the call that asks, when known (the page groups by it).
    pub turn: Option<String>,
    /// The call's place in its turn, when known (the page lists a turn's questions in this order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub position: Option<usize>,
    /// The request exactly as shown ([`ApprovalRequest::to_json`]).
    pub request: serde_json::Value,
}

/// The questions waiting for an answer, and those that could not be read as what they claim to be.
#[derive(Debug, Default)]
pub struct Waiting {
    /// Waiting, oldest first.
    pub questions: Vec<PendingApproval>,
    /// Records that do not parse or do not hash to their names: never answerable, listed so that
    /// one damaged file hides nothing else.
    pub damaged: Vec<ApprovalError>,
}

/// Why an answer was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnsweredBy {
    /// Someone answered (the console, a script with its token).
    User,
    /// Nobody answered before the deadline: denied.
    Deadline,
}

/// An answer as recorded (`<hex>.answer`, then `<hex>.used` once a yes is taken).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Answer {
    /// The question it answers.
    pub digest: Sha256Digest,
    /// Yes or no.
    pub approved: bool,
    /// Who answered.
    pub by: AnsweredBy,
    /// When, in milliseconds since the Unix epoch.
    pub answered_ms: u64,
}

/// The kinds of file a question has.
#[derive(Debug, Clone, Copy)]
enum Part {
    Ask,
    Answer,
    Used,
}

impl Part {
    fn name(self, digest: &Sha256Digest) -> String {
        let suffix = match self {
            Part::Ask => "ask",
            Part::Answer => "answer",
            Part::Used => "used",
        };
        format!("{}.{suffix}", digest.hex())
    }
}

/// The root's recorded approvals.
#[derive(Debug)]
pub struct PendingApprovals {
    dir: Dir,
}

impl PendingApprovals {
    /// Opens `.turngate/approvals/` in `root`, made when missing.
    pub fn open(root: &Root) -> Result<PendingApprovals, ApprovalError> {
        let dir = root
            .state_subdir(APPROVALS_DIR)
            .map_err(|source| ApprovalError::Io {
                path: format!("{STATE_DIR}/{APPROVALS_DIR}"),
                source,
            })?;
        Ok(PendingApprovals { dir })
    }

    /// Opens it when it exists (a reader, such as the console, makes nothing).
    pub fn open_existing(root: &Root) -> Result<Option<PendingApprovals>, ApprovalError> {
        let shown = format!("{STATE_DIR}/{APPROVALS_DIR}");
        let io_error = |source| ApprovalError::Io {
            path: shown.clone(),
            source,
        };
        let Some(state) = root.existing_state_dir().map_err(io_error)? else {
            return Ok(None);
        };
        match cap_fs_ext::DirExt::open_dir_nofollow(&state, APPROVALS_DIR) {
            Ok(dir) => Ok(Some(PendingApprovals { dir })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(state::refusal(&state, APPROVALS_DIR, &shown, e).into()),
        }
    }

    /// The questions waiting in `root` (none when it never recorded one; nothing is made).
    pub fn waiting_in(root: &Root) -> Result<Waiting, ApprovalError> {
        match PendingApprovals::open_existing(root)? {
            Some(approvals) => approvals.waiting(),
            None => Ok(Waiting::default()),
        }
    }

    /// Answers the question `digest` in `root` (as [`PendingApprovals::answer`]).
    pub fn answer_in(
        root: &Root,
        digest: &Sha256Digest,
        approved: bool,
    ) -> Result<Answer, ApprovalError> {
        PendingApprovals::open_existing(root)?
            .ok_or(ApprovalError::Unknown(*digest))?
            .answer(digest, approved)
    }

    /// Whether the question `digest` is recorded (its record is not read).
    pub fn is_asked(&self, digest: &Sha256Digest) -> Result<bool, ApprovalError> {
        let name = Part::Ask.name(digest);
        match self.dir.symlink_metadata(&name) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(source) => Err(self.io_error(&name, source)),
        }
    }

    /// Records `question`, unless one with its digest is recorded already (a process that asked
    /// before and died): answers the one that stands, whose deadline counts from the first ask.
    pub fn ask(&self, question: &PendingApproval) -> Result<PendingApproval, ApprovalError> {
        let name = Part::Ask.name(&question.digest);
        if let Some(recorded) = self.read::<PendingApproval>(&name)? {
            return Ok(recorded);
        }
        match self.write_new(&name, question) {
            Ok(()) => Ok(question.clone()),
            // Another process asked the same at the same moment: its record stands.
            Err(ApprovalError::Io { source, .. })
                if source.kind() == io::ErrorKind::AlreadyExists =>
            {
                self.read::<PendingApproval>(&name)?
                    .ok_or(ApprovalError::Unknown(question.digest))
            }
            Err(e) => Err(e),
        }
    }

    /// The answer standing for the question `digest`, if any (a yes already taken is not).
    pub fn answer_of(&self, digest: &Sha256Digest) -> Result<Option<Answer>, ApprovalError> {
        self.read::<Answer>(&Part::Answer.name(digest))
    }

    /// Answers the question `digest` (the page's approve or deny). Refused when no such question is
    /// recorded, when its record does not hash to its name, when it was answered already (the first
    /// answer stands) or when its deadline passed (it is then denied, and that is recorded).
    pub fn answer(&self, digest: &Sha256Digest, approved: bool) -> Result<Answer, ApprovalError> {
        let question = self.question(digest)?;
        if let Some(answer) = self.answer_of(digest)? {
            return Err(ApprovalError::Answered {
                digest: *digest,
                approved: answer.approved,
            });
        }
        if now_ms() > question.deadline_ms {
            self.expire(digest)?;
            return Err(ApprovalError::Expired(*digest));
        }
        self.record_answer(digest, approved, AnsweredBy::User)
    }

    /// Denies `digest` for want of an answer, unless an answer came first: answers the one that
    /// stands.
    pub fn expire(&self, digest: &Sha256Digest) -> Result<Answer, ApprovalError> {
        match self.record_answer(digest, false, AnsweredBy::Deadline) {
            Err(ApprovalError::Answered { .. }) => self
                .answer_of(digest)?
                .ok_or(ApprovalError::Unknown(*digest)),
            other => other,
        }
    }

    /// Takes the yes given to `digest` for the call that asked: `true` once, for one taker; `false`
    /// when there is no yes to take (a no, none yet, or taken by another). The question is then
    /// removed.
    pub fn take_yes(&self, digest: &Sha256Digest) -> Result<bool, ApprovalError> {
        let answer = Part::Answer.name(digest);
        match self.read::<Answer>(&answer)? {
            Some(found) if found.approved => {}
            _ => return Ok(false),
        }
        // One rename of `.answer` succeeds; the others find it gone. An earlier `.used` of the same
        // request is replaced.
        let used = Part::Used.name(digest);
        match self.dir.rename(&answer, &self.dir, &used) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
            Err(source) => return Err(self.io_error(&used, source)),
        }
        self.sync()?;
        self.withdraw(digest)?;
        Ok(true)
    }

    /// Removes the question `digest` (nobody waits for it any more: answered and taken, or the call
    /// was cancelled). Its answer, if any, stays.
    pub fn withdraw(&self, digest: &Sha256Digest) -> Result<(), ApprovalError> {
        let name = Part::Ask.name(digest);
        match self.dir.remove_file(&name) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(source) => Err(self.io_error(&name, source)),
        }
    }

    /// The questions waiting for an answer, oldest first (those answered, or past their deadline, are
    /// not waiting), and the records that are damaged.
    pub fn waiting(&self) -> Result<Waiting, ApprovalError> {
        let now = now_ms();
        let entries = self
            .dir
            .entries()
            .map_err(|source| self.io_error(".", source))?;
        let mut waiting = Waiting::default();
        for entry in entries {
            let entry = entry.map_err(|source| self.io_error(".", source))?;
            let name = entry.file_name();
            let Some(hex) = name.to_str().and_then(|name| name.strip_suffix(".ask")) else {
                continue;
            };
            let Ok(digest) = Sha256Digest::from_hex(hex) else {
                continue;
            };
            let question = match self.question(&digest) {
                Ok(question) => question,
                // Taken back between the listing and the read.
                Err(ApprovalError::Unknown(_)) => continue,
                Err(damaged @ ApprovalError::Damaged { .. }) => {
                    waiting.damaged.push(damaged);
                    continue;
                }
                Err(e) => return Err(e),
            };
            if question.deadline_ms >= now && self.answer_of(&digest)?.is_none() {
                waiting.questions.push(question);
            }
        }
        waiting
            .questions
            .sort_by_key(|question| (question.asked_ms, question.digest));
        Ok(waiting)
    }

    /// The recorded question `digest`, held to its name (waiting, or answered and not yet taken).
    pub fn question(&self, digest: &Sha256Digest) -> Result<PendingApproval, ApprovalError> {
        let name = Part::Ask.name(digest);
        let question = self
            .read::<PendingApproval>(&name)?
            .ok_or(ApprovalError::Unknown(*digest))?;
        let hashed = super::digest_of(&question.request);
        if question.digest != *digest || hashed != *digest {
            return Err(ApprovalError::Damaged {
                path: self.shown(&name),
                why: format!("its request hashes to {hashed}, not to its name"),
            });
        }
        Ok(question)
    }

    fn record_answer(
        &self,
        digest: &Sha256Digest,
        approved: bool,
        by: AnsweredBy,
    ) -> Result<Answer, ApprovalError> {
        let answer = Answer {
            digest: *digest,
            approved,
            by,
            answered_ms: now_ms(),
        };
        match self.write_new(&Part::Answer.name(digest), &answer) {
            Ok(()) => Ok(answer),
            Err(ApprovalError::Io { source, .. })
                if source.kind() == io::ErrorKind::AlreadyExists =>
            {
                let standing = self.answer_of(digest)?;
                Err(ApprovalError::Answered {
                    digest: *digest,
                    approved: standing.is_some_and(|answer| answer.approved),
                })
            }
            Err(e) => Err(e),
        }
    }

    /// Writes `record` as `name`, which must not exist (a temporary file, flushed, renamed into place
    /// without replacing, the directory flushed). `AlreadyExists` when the name is taken.
    fn write_new(&self, name: &str, record: &impl Serialize) -> Result<(), ApprovalError> {
        let bytes = serde_json::to_vec(record).expect("a record serializes");
        let (mut file, temporary) =
            state::create_temporary(&self.dir, name).map_err(|e| self.io_error(name, e))?;
        let written = file
            .write_all(&bytes)
            .and_then(|()| durable::sync_file(&file))
            .and_then(|()| moves::rename_no_replace(&self.dir, &temporary, &self.dir, name));
        if let Err(source) = written {
            let _ = self.dir.remove_file(&temporary);
            return Err(self.io_error(name, source));
        }
        self.sync()
    }

    fn sync(&self) -> Result<(), ApprovalError> {
        durable::sync_dir(&self.dir).map_err(|source| self.io_error(".", source))
    }

    /// Reads and parses `name`, `None` when there is none; refuses anything but a regular file with
    /// one link.
    fn read<T: serde::de::DeserializeOwned>(&self, name: &str) -> Result<Option<T>, ApprovalError> {
        let mut options = OpenOptions::new();
        options.read(true);
        options
            .follow(FollowSymlinks::No)
            .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
        let path = self.shown(name);
        let file = match self.dir.open_with(name, &options) {
            Ok(file) => file.into_std(),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(state::refusal(&self.dir, name, &path, e).into()),
        };
        let metadata = cap_std::fs::Metadata::from_file(&file)
            .map_err(|source| self.io_error(name, source))?;
        state::check_own_file(&path, &metadata)?;
        let mut bytes = Vec::new();
        file.take(MAX_RECORD_BYTES)
            .read_to_end(&mut bytes)
            .map_err(|source| self.io_error(name, source))?;
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| ApprovalError::Damaged {
                path,
                why: e.to_string(),
            })
    }

    fn shown(&self, name: &str) -> String {
        format!("{STATE_DIR}/{APPROVALS_DIR}/{name}")
    }

    fn io_error(&self, name: &str, source: io::Error) -> ApprovalError {
        ApprovalError::Io {
            path: self.shown(name),
            source,
        }
    }
}

/// Milliseconds since the Unix epoch, now.
pub(crate) fn now_ms() -> u64 {
    u64::try_from(crate::audit::now_ms()).unwrap_or(u64::MAX)
}

/// `deadline` from now, in milliseconds since the Unix epoch.
pub(crate) fn deadline_ms(timeout: Duration) -> u64 {
    now_ms().saturating_add(u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX))
}
