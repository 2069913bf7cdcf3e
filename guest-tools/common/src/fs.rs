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

/// Maps an I/O error on `path` to a [`ToolError`] whose message names the path and the error in words.
///
/// `NotFound` is `not-found`; `PermissionDenied` and `ReadOnlyFilesystem` are `denied`; every other
/// error is `failed`. The words come from [`describe`], never from the error's `Display`, which would print
/// the host's reading of a WASI errno number (`os error 54`).
pub fn io_error(path: &Path, err: io::Error) -> ToolError {
    let message = format!("{}: {}", path.display(), describe(&err));
    match err.kind() {
        ErrorKind::NotFound => ToolError::NotFound(message),
        ErrorKind::PermissionDenied | ErrorKind::ReadOnlyFilesystem => ToolError::Denied(message),
        _ => ToolError::Failed(message),
    }
}

/// Names an I/O error: by its kind when std decoded a specific one, else, for a raw OS error, by its WASI
/// errno name (the guest runs on WASI, whose numbers are not the host's), else by the error's own message
/// (an error made with a message, not from an errno).
fn describe(err: &io::Error) -> String {
    let Some(code) = err.raw_os_error() else {
        return err.to_string();
    };
    if let Some(name) = kind_name(err.kind()) {
        return name.to_owned();
    }
    let name = if cfg!(target_os = "wasi") {
        wasi_errno_name(code)
    } else {
        None
    };
    match name {
        Some(name) => name.to_owned(),
        None => format!("{} (error code {code})", err.kind()),
    }
}

/// The usual words for the error kinds a file tool meets.
fn kind_name(kind: ErrorKind) -> Option<&'static str> {
    Some(match kind {
        ErrorKind::NotFound => "no such file or directory",
        ErrorKind::PermissionDenied => "permission denied",
        ErrorKind::AlreadyExists => "file exists",
        ErrorKind::NotADirectory => "not a directory",
        ErrorKind::IsADirectory => "is a directory",
        ErrorKind::DirectoryNotEmpty => "directory not empty",
        ErrorKind::ReadOnlyFilesystem => "read-only file system",
        ErrorKind::InvalidInput => "invalid argument",
        ErrorKind::InvalidFilename => "invalid file name",
        ErrorKind::StorageFull => "no space left on device",
        ErrorKind::FileTooLarge => "file too large",
        ErrorKind::CrossesDevices => "cross-device link",
        ErrorKind::TooManyLinks => "too many links",
        ErrorKind::ResourceBusy => "resource busy",
        ErrorKind::Unsupported => "operation not supported",
        ErrorKind::Interrupted => "interrupted",
        _ => return None,
    })
}

/// WASI preview 1 errno names (`wasi-libc`'s `errno.h`, the numbers std reports on `wasm32-wasip2`), for the
/// errors std does not decode to a specific kind.
fn wasi_errno_name(code: i32) -> Option<&'static str> {
    Some(match code {
        1 => "argument list too long",
        2 => "permission denied",
        8 => "bad file descriptor",
        10 => "device or resource busy",
        20 => "file exists",
        22 => "file too large",
        25 => "illegal byte sequence",
        27 => "interrupted system call",
        28 => "invalid argument",
        29 => "I/O error",
        31 => "is a directory",
        32 => "too many levels of symbolic links",
        33 => "too many open files",
        34 => "too many links",
        37 => "file name too long",
        44 => "no such file or directory",
        48 => "out of memory",
        51 => "no space left on device",
        52 => "function not implemented",
        54 => "not a directory",
        55 => "directory not empty",
        58 => "operation not supported",
        61 => "value too large for data type",
        63 => "operation not permitted",
        69 => "read-only file system",
        70 => "invalid seek",
        73 => "timed out",
        74 => "text file busy",
        75 => "cross-device link",
        76 => "capabilities insufficient",
        _ => return None,
    })
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
    fn io_errors_are_named_never_numbered() {
        let p = Path::new("notes.txt/");
        let message = |err: io::Error| match io_error(p, err) {
            ToolError::NotFound(m) | ToolError::Denied(m) | ToolError::Failed(m) => m,
            other => panic!("{other:?}"),
        };
        // A real error of this platform: its kind names it.
        let missing = fs::metadata("/nonexistent/turngate").unwrap_err();
        assert_eq!(message(missing), "notes.txt/: no such file or directory");
        // An errno std leaves uncategorized is named by the WASI table on WASI, never printed as `os error`.
        let odd = message(io::Error::from_raw_os_error(25));
        assert!(!odd.contains("os error"), "{odd}");
        // An error made with a message keeps it.
        assert_eq!(
            message(io::Error::other("disk on fire")),
            "notes.txt/: disk on fire"
        );
    }

    #[test]
    fn wasi_errno_table_names_what_std_reports() {
        assert_eq!(wasi_errno_name(54), Some("not a directory"));
        assert_eq!(wasi_errno_name(44), Some("no such file or directory"));
        assert_eq!(wasi_errno_name(2), Some("permission denied"));
        assert_eq!(wasi_errno_name(9999), None);
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
