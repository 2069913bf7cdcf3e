//! Filesystem helpers: error mapping and atomic replacement of a file.

use std::fs::{self, File, OpenOptions};
use std::hash::{BuildHasher, RandomState};
use std::io::{self, ErrorKind, Write};
use std::path::{Path, PathBuf};

use crate::ToolError;

/// How many temporary names [`atomic_write`] tries before giving up.
const TEMP_ATTEMPTS: u32 = 8;

/// The longest prefix of the target's name (in characters) kept in a temporary file's name, so that
/// a long target name does not push the temporary over the 255-byte name limit.
const TEMP_NAME_CHARS: usize = 64;

/// Maps an I/O error on `path` to a [`ToolError`] whose message names the path.
///
/// `NotFound` is `not-found`; `PermissionDenied` and `ReadOnlyFilesystem` are `denied`; every other
/// error is `failed`.
pub fn io_error(path: &Path, err: io::Error) -> ToolError {
    let message = format!("{}: {err}", path.display());
    match err.kind() {
        ErrorKind::NotFound => ToolError::NotFound(message),
        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => ToolError::Denied(message),
        _ => ToolError::Failed(message),
    }
}

/// Replaces the file at `path` with `bytes`, atomically.
///
/// The bytes go to a new temporary file in the same directory (`.<name>.turngate-<hex>.tmp`),
/// which is synced and then renamed over `path`: a reader sees the old content or the new, never a
/// mix, and an error leaves the old file untouched (the temporary is removed). Because the directory
/// entry is replaced, a hard link to the old file elsewhere keeps the old content, and a symlink at
/// `path` is replaced by the file rather than written through.
///
/// The parent directory must exist (`not-found` naming it otherwise); `path` must not be a
/// directory.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> Result<(), ToolError> {
    let Some(file_name) = path.file_name() else {
        return Err(ToolError::Failed(format!(
            "{} does not name a file",
            path.display()
        )));
    };
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    match fs::metadata(parent) {
        Ok(meta) if meta.is_dir() => {}
        Ok(_) => {
            return Err(ToolError::Failed(format!(
                "cannot write {}: {} is not a directory",
                path.display(),
                parent.display()
            )));
        }
        Err(err) if err.kind() == ErrorKind::NotFound => {
            return Err(ToolError::NotFound(format!(
                "cannot write {}: parent directory {} does not exist (create it with make_dir)",
                path.display(),
                parent.display()
            )));
        }
        Err(err) => return Err(io_error(parent, err)),
    }
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => {
            return Err(ToolError::Failed(format!(
                "{} is a directory",
                path.display()
            )));
        }
        Ok(_) => {}
        Err(err) if err.kind() == ErrorKind::NotFound => {}
        Err(err) => return Err(io_error(path, err)),
    }

    let stem: String = file_name
        .to_string_lossy()
        .chars()
        .take(TEMP_NAME_CHARS)
        .collect();
    let (temp, file) = create_temp(parent, &stem).map_err(|err| io_error(path, err))?;
    let written = write_synced(file, bytes).and_then(|()| fs::rename(&temp, path));
    if let Err(err) = written {
        // Best effort: the error that matters is the one that made the write fail.
        let _ = fs::remove_file(&temp);
        return Err(io_error(path, err));
    }
    Ok(())
}

/// Creates a new, empty temporary file next to the target; never opens an existing file.
fn create_temp(dir: &Path, stem: &str) -> io::Result<(PathBuf, File)> {
    let mut last = io::Error::new(ErrorKind::AlreadyExists, "no free temporary name");
    for attempt in 0..TEMP_ATTEMPTS {
        // std has no RNG, but each `RandomState` is seeded from the system's random source.
        let token = RandomState::new().hash_one(attempt);
        let temp = dir.join(format!(".{stem}.turngate-{token:016x}.tmp"));
        match OpenOptions::new().write(true).create_new(true).open(&temp) {
            Ok(file) => return Ok((temp, file)),
            Err(err) if err.kind() == ErrorKind::AlreadyExists => last = err,
            Err(err) => return Err(err),
        }
    }
    Err(last)
}

fn write_synced(mut file: File, bytes: &[u8]) -> io::Result<()> {
    file.write_all(bytes)?;
    file.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch directory under the system temp dir, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(name: &str) -> Self {
            let token = RandomState::new().hash_one(name);
            let dir = std::env::temp_dir().join(format!("turngate-guest-{name}-{token:x}"));
            fs::create_dir_all(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn io_error_kinds() {
        let p = Path::new("a/b.txt");
        let e = |k: ErrorKind| io_error(p, io::Error::from(k));
        assert!(
            matches!(e(ErrorKind::NotFound), ToolError::NotFound(m) if m.starts_with("a/b.txt: "))
        );
        assert!(matches!(
            e(ErrorKind::PermissionDenied),
            ToolError::Denied(_)
        ));
        assert!(matches!(
            e(ErrorKind::ReadOnlyFilesystem),
            ToolError::Denied(_)
        ));
        assert!(matches!(e(ErrorKind::IsADirectory), ToolError::Failed(_)));
    }

    #[test]
    fn creates_and_replaces_without_leftovers() {
        let s = Scratch::new("replace");
        let target = s.0.join("notes.txt");
        atomic_write(&target, b"one").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"one");
        atomic_write(&target, b"two, longer").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"two, longer");
        atomic_write(&target, b"").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"");
        assert_eq!(names(&s.0), ["notes.txt"]);
    }

    #[test]
    fn hard_link_keeps_old_content() {
        let s = Scratch::new("hardlink");
        let target = s.0.join("a.txt");
        let link = s.0.join("b.txt");
        fs::write(&target, "old").unwrap();
        fs::hard_link(&target, &link).unwrap();
        atomic_write(&target, b"new").unwrap();
        assert_eq!(fs::read_to_string(&target).unwrap(), "new");
        assert_eq!(fs::read_to_string(&link).unwrap(), "old");
    }

    #[test]
    fn missing_parent_is_not_found() {
        let s = Scratch::new("parent");
        let target = s.0.join("missing/a.txt");
        match atomic_write(&target, b"x") {
            Err(ToolError::NotFound(m)) => assert!(m.contains("parent directory"), "{m}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn directory_target_fails() {
        let s = Scratch::new("dir");
        fs::create_dir(s.0.join("d")).unwrap();
        match atomic_write(&s.0.join("d"), b"x") {
            Err(ToolError::Failed(m)) => assert!(m.ends_with("is a directory"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(names(&s.0), ["d"]);
    }

    #[test]
    fn long_name_fits() {
        let s = Scratch::new("long");
        let target = s.0.join("x".repeat(250));
        atomic_write(&target, b"x").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"x");
    }
}
