//! The file system itself: mounting, the options, power loss and the crash matrix's cuts.

use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Once, OnceLock, PoisonError, TryLockError};

use fuser::{BackgroundSession, Config, MountOption, SessionACL};

use crate::fs::{Server, State, lock};

/// What the mounted file system does besides plain POSIX.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Options {
    /// Look names up case- and normalization-insensitively, keeping the spelling they were made with.
    pub folding: bool,
    /// Keep a durable state beside the live one, for [`TestFs::power_loss`] and [`TestFs::cut_at`].
    pub power_loss: bool,
    /// Answer EINVAL to `renameat2` with `RENAME_NOREPLACE` or `RENAME_EXCHANGE`, as file systems
    /// without them do (LazyFS, NFS, many FUSE file systems), so programs take their fallbacks.
    pub plain_renames: bool,
    /// Hold every plain rename that replaces a file for [`RENAME_LAG`] between its two halves: the
    /// replaced file loses its link at once, while lookups still find it at the name, which moves only
    /// when the rename answers. The kernel holds both directories locked until then, as Linux's own
    /// file systems do in a window too short for a test to hit at will: a process that reads the
    /// directory's entries waits for the rename; one that only looks the name up does not.
    pub lagging_renames: bool,
}

/// How long a lagging rename ([`Options::lagging_renames`]) holds between its two halves.
pub const RENAME_LAG: std::time::Duration = std::time::Duration::from_millis(30);

/// Which of the metadata operations still pending (journaled, not yet committed by an fsync) a power
/// loss keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Keep {
    /// None of them: only what an fsync committed survives.
    Committed,
    /// All of them (LazyFS's behaviour: metadata always survives, unsynced data does not).
    All,
    /// The first n of them, in the order they ran.
    Prefix(usize),
}

/// Whether a [`Cut`] strikes before or after the operation it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum When {
    /// The operation does not run: the file system freezes and answers it EIO.
    Before,
    /// The operation runs (an fsync commits), answers as it would, and then the file system freezes.
    After,
}

/// The operations the trace records and a [`Cut`] can strike at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// A new entry: create, mknod, mkdir, symlink or link.
    Create,
    /// unlink or rmdir.
    Unlink,
    /// rename, with any flags (`RENAME_NOREPLACE`, `RENAME_EXCHANGE`).
    Rename,
    /// A change of attributes: mode, owner, times or size (truncate).
    SetAttr,
    /// Data written to a file (a write, or fallocate).
    Write,
    /// fsync or fdatasync of a file.
    Fsync,
    /// fsync of a directory.
    FsyncDir,
}

/// One operation the file system received while tracing, in the order received.
///
/// The trace holds the operations a [`Cut`] can strike at (see [`OpKind`]): those that change the
/// file system or make it durable, not lookups, reads, opens or closes. Paths are relative to the mount root (`a/b.txt`; the root itself is `""`) and name entries as the
/// live tree did when the operation arrived: an existing entry by its stored spelling, a new one as the
/// request spelled it. A failed operation is recorded too: it arrived, so a cut can strike at it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceOp {
    /// What kind of operation it was.
    pub op: OpKind,
    /// The entry made or removed, the file written, synced or changed; a rename's source.
    pub path: String,
    /// A rename's target.
    pub to: Option<String>,
    /// What else the request said, for people reading the trace: flags, offsets, modes.
    pub detail: String,
}

impl TraceOp {
    /// Whether a [`Cut`] on `op` at `path` counts this operation: a rename by its source or its target.
    pub fn matches(&self, op: OpKind, path: &str) -> bool {
        self.op == op && (self.path == path || self.to.as_deref() == Some(path))
    }
}

/// Which operation a [`Cut`] strikes at.
///
/// Operations are counted from the moment the cut is armed, as they arrive (one that then fails counts
/// too). Paths are as in [`TraceOp`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum At {
    /// The `nth` operation (from 1; 0 never strikes) of kind `op` on `path`; a rename counts when
    /// either its source or its target is `path`.
    Nth {
        /// The kind of operation to strike at.
        op: OpKind,
        /// The path it must name, relative to the mount root.
        path: String,
        /// Which matching operation to strike at.
        nth: usize,
    },
    /// The `n`th traced operation of any kind on any path (from 1): the same point of a workload that
    /// does the same operations in the same order, whatever names it drew at random.
    Index(usize),
}

/// A power loss armed to strike at an operation ([`At`]), before or after it runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cut {
    /// The operation to strike at.
    pub at: At,
    /// Whether the operation runs before the power goes.
    pub when: When,
    /// What the power loss keeps of the operations still pending.
    pub keep: Keep,
}

impl Cut {
    /// A cut at the `nth` operation of kind `op` on `path`.
    pub fn nth(op: OpKind, path: &str, nth: usize, when: When, keep: Keep) -> Cut {
        Cut {
            at: At::Nth {
                op,
                path: path.to_owned(),
                nth,
            },
            when,
            keep,
        }
    }

    /// Every cut point of a traced run: for each operation, a cut before it and a cut after it, both
    /// keeping `keep`, by kind and path. Run the same workload again with each one armed to cover
    /// every crash.
    pub fn every(trace: &[TraceOp], keep: Keep) -> Vec<Cut> {
        let mut cuts = Vec::with_capacity(trace.len() * 2);
        for (at, op) in trace.iter().enumerate() {
            let nth = trace[..=at]
                .iter()
                .filter(|seen| seen.matches(op.op, &op.path))
                .count();
            for when in [When::Before, When::After] {
                cuts.push(Cut::nth(op.op, &op.path, nth, when, keep));
            }
        }
        cuts
    }

    /// Every cut point of a traced run by position ([`At::Index`]): before and after each of its
    /// operations, keeping `keep`.
    pub fn every_index(trace: &[TraceOp], keep: Keep) -> Vec<Cut> {
        (1..=trace.len())
            .flat_map(|index| {
                [When::Before, When::After].map(|when| Cut {
                    at: At::Index(index),
                    when,
                    keep,
                })
            })
            .collect()
    }
}

/// A mounted test file system. Dropping it unmounts it and removes its mount point.
pub struct TestFs {
    path: PathBuf,
    options: Options,
    state: Arc<Mutex<State>>,
    /// The current mount's FUSE session; `None` only when a remount failed.
    session: Option<BackgroundSession>,
}

impl fmt::Debug for TestFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TestFs")
            .field("path", &self.path)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl TestFs {
    /// Mount a new, empty file system on a new directory under the temporary directory; answers once
    /// the mount answers requests. Its root is a directory with mode 0755 owned by this process.
    pub fn mount(options: Options) -> io::Result<TestFs> {
        sweep_stale_mounts();
        let path = make_mount_point()?;
        let metadata = std::fs::metadata(&path)?;
        let state = Arc::new(Mutex::new(State::new(
            options,
            metadata.uid(),
            metadata.gid(),
        )));
        // Registered before mounting, so that exiting at any point after the mount detaches it.
        register(&path);
        match start_session(&path, &state, 0) {
            Ok(session) => Ok(TestFs {
                path,
                options,
                state,
                session: Some(session),
            }),
            Err(error) => {
                detach(&path);
                unregister(&path);
                let _ = std::fs::remove_dir(&path);
                Err(error)
            }
        }
    }

    /// The mount point.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The options it was mounted with.
    pub fn options(&self) -> Options {
        self.options
    }

    /// Lose power now: every request answers EIO until [`TestFs::reboot`], which keeps what `keep`
    /// says of the pending metadata operations. A second power loss before the reboot changes nothing.
    pub fn power_loss(&self, keep: Keep) {
        lock(&self.state).power_loss(keep);
    }

    /// Whether the file system is frozen by a power loss (called, or struck by a cut).
    pub fn is_frozen(&self) -> bool {
        lock(&self.state).is_frozen()
    }

    /// Arm a power loss at `cut`, replacing any armed one; it strikes once, and a reboot disarms it.
    pub fn cut_at(&self, cut: Cut) {
        lock(&self.state).cut_at(cut);
    }

    /// Start or stop recording the operations the file system receives (see [`TraceOp`]).
    pub fn trace(&self, on: bool) {
        lock(&self.state).set_tracing(on);
    }

    /// The operations recorded since the last call, oldest first.
    pub fn take_trace(&self) -> Vec<TraceOp> {
        lock(&self.state).take_trace()
    }

    /// How many metadata operations are journaled and not yet committed: a power loss now can keep
    /// [`Keep::Prefix`] 0 to this many of them. Always 0 without power-loss simulation.
    pub fn pending_ops(&self) -> usize {
        lock(&self.state).pending_ops()
    }

    /// Make everything durable: commit every pending operation and every file's data (a test's
    /// baseline before the operations it means to crash).
    pub fn sync_all(&self) {
        lock(&self.state).sync_all();
    }

    /// Restart after a power loss: what survived becomes the live state, and the file system is
    /// unmounted and mounted again at the same path (dropping the kernel's caches: handles open before
    /// answer EIO for good). Inode numbers stay; `st_dev` changes. Without a power loss first this is
    /// a clean restart, which loses nothing.
    pub fn reboot(&mut self) -> io::Result<()> {
        // Holding the old mount's root keeps its superblock, and so its device number, allocated
        // until the new mount has one: otherwise the kernel could hand the new mount the same number.
        let old_root = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(&self.path)
            .ok();
        let generation = lock(&self.state).reboot();
        detach(&self.path);
        drop(self.session.take());
        self.session = Some(start_session(&self.path, &self.state, generation)?);
        drop(old_root);
        Ok(())
    }
}

impl Drop for TestFs {
    fn drop(&mut self) {
        detach(&self.path);
        drop(self.session.take());
        unregister(&self.path);
        let _ = std::fs::remove_dir(&self.path);
    }
}

/// One file system per [`Options`] for the whole test process, mounted on first use and unmounted at
/// exit: for tests that can share a mount (each in its own directory).
///
/// # Panics
///
/// If the file system cannot be mounted (the process is not root, or `/dev/fuse` is missing).
pub fn shared(options: Options) -> &'static TestFs {
    static SHARED: [OnceLock<TestFs>; 16] = [const { OnceLock::new() }; 16];
    let slot = &SHARED[usize::from(options.lagging_renames) * 8
        + usize::from(options.folding) * 4
        + usize::from(options.power_loss) * 2
        + usize::from(options.plain_renames)];
    slot.get_or_init(|| {
        TestFs::mount(options)
            .unwrap_or_else(|error| panic!("mounting the test file system ({options:?}): {error}"))
    })
}

/// The prefix of every mount point's name, followed by the process ID and a counter.
const MOUNT_PREFIX: &str = "turngate-testfs-";

fn make_mount_point() -> io::Result<PathBuf> {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir();
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("{MOUNT_PREFIX}{}-{n}", std::process::id()));
        match std::fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(error),
        }
    }
}

/// Mount the state's current generation at `path`.
fn start_session(
    path: &Path,
    state: &Arc<Mutex<State>>,
    generation: u64,
) -> io::Result<BackgroundSession> {
    let server = Server {
        state: Arc::clone(state),
        generation,
    };
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName("turngate-testfs".to_owned()),
        MountOption::DefaultPermissions,
    ];
    // allow_other: a test may run a child process as another user against the mount.
    config.acl = SessionACL::All;
    // Mounting completes FUSE's INIT handshake before it returns; one stat makes sure requests are
    // being answered.
    let session = fuser::spawn_mount(server, path, &config)?;
    std::fs::symlink_metadata(path)?;
    Ok(session)
}

/// Lazily unmount whatever is mounted at `path` (`umount2(MNT_DETACH)`): it goes from the namespace at
/// once, and the kernel ends it when the last file open on it closes.
fn detach(path: &Path) {
    if let Ok(path) = CString::new(path.as_os_str().as_bytes()) {
        // SAFETY: `path` is a NUL-terminated string that outlives the call.
        unsafe {
            libc::umount2(path.as_ptr(), libc::MNT_DETACH);
        }
    }
}

/// The mount points mounted and not yet unmounted, for the exit handler.
static LIVE_MOUNTS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

fn register(path: &Path) {
    static AT_EXIT: Once = Once::new();
    AT_EXIT.call_once(|| {
        // SAFETY: registers a function that takes no arguments and never unwinds.
        unsafe {
            libc::atexit(detach_all_at_exit);
        }
    });
    LIVE_MOUNTS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(path.to_owned());
}

fn unregister(path: &Path) {
    LIVE_MOUNTS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .retain(|live| live != path);
}

/// At exit, detach every mount still live: tests keep some in statics, which are never dropped.
extern "C" fn detach_all_at_exit() {
    let mounts = match LIVE_MOUNTS.try_lock() {
        Ok(mounts) => mounts,
        Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
        // Another thread is mounting right now: waiting could hang the exit.
        Err(TryLockError::WouldBlock) => return,
    };
    for path in mounts.iter() {
        detach(path);
        let _ = std::fs::remove_dir(path);
    }
}

/// Detach the mounts that earlier test processes left behind when they died without running their exit
/// handlers (killed, or aborted): their server is gone, and anything touching them fails ENOTCONN.
fn sweep_stale_mounts() {
    static SWEPT: Once = Once::new();
    SWEPT.call_once(|| {
        let Ok(mountinfo) = std::fs::read_to_string("/proc/self/mountinfo") else {
            return;
        };
        for line in mountinfo.lines() {
            // The fifth field is the mount point.
            let Some(mount_point) = line.split(' ').nth(4) else {
                continue;
            };
            let path = Path::new(mount_point);
            let Some(pid) = path
                .file_name()
                .and_then(|name| name.to_str())
                .and_then(|name| name.strip_prefix(MOUNT_PREFIX))
                .and_then(|rest| rest.split('-').next())
            else {
                continue;
            };
            if path.parent() == Some(std::env::temp_dir().as_path())
                && !Path::new("/proc").join(pid).exists()
            {
                detach(path);
                let _ = std::fs::remove_dir(path);
            }
        }
    });
}
