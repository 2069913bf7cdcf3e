//! The allowed root: the one directory a call may touch, held as a capability.
//!
//! A [`Root`] is opened once, at the edge, with the only ambient-authority call in the library. Everything
//! after that (the gate's path checks and the sandbox's preopen) goes through the open handle, so renaming
//! or replacing the directory's path afterwards does not redirect a call somewhere else.

use std::io;
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

/// A directory that tool calls are confined to.
#[derive(Debug)]
pub struct Root {
    dir: Dir,
    path: PathBuf,
}

impl Root {
    /// Opens `path` as the allowed root. The path is canonicalized for display and audit records; access
    /// goes through the opened handle.
    pub fn open(path: impl AsRef<Path>) -> io::Result<Root> {
        let path = std::fs::canonicalize(path.as_ref())?;
        let dir = Dir::open_ambient_dir(&path, ambient_authority())?;
        Ok(Root { dir, path })
    }

    /// The canonical path the root was opened at (for messages; not used for access).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The capability handle every host-side access beneath the root goes through.
    pub(crate) fn dir(&self) -> &Dir {
        &self.dir
    }

    /// A host path that names exactly the directory this handle holds, for `WasiCtxBuilder::preopened_dir`
    /// (which only takes paths). On Linux that is the handle's `/proc/self/fd` entry, so the sandbox gets the
    /// very directory the gate checked even if the original path has since been swapped.
    pub(crate) fn preopen_path(&self) -> PathBuf {
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let by_fd = PathBuf::from(format!("/proc/self/fd/{}", self.dir.as_raw_fd()));
            if by_fd.exists() {
                return by_fd;
            }
        }
        self.path.clone()
    }
}
