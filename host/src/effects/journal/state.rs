//! The state directory's own files, opened so that nothing planted in it is followed or trusted.
//!
//! Whatever stands in `.turngate/` could have been put there by someone else: a symlink where the log
//! should be, a FIFO, a hard link to a file elsewhere, a link named like a temporary file. So turngate's
//! files are opened without following links and without blocking, and then held to what was opened
//! (its `fstat`: a regular file with no other hard link); anything else is refused with
//! [`EffectError::Foreign`], naming it. Temporary files get random names and are created exclusively,
//! so a name planted in advance is never written through.

use std::fs::File;
use std::io;

use cap_fs_ext::{FollowSymlinks, OpenOptionsFollowExt};
use cap_std::fs::{Dir, MetadataExt, OpenOptions, OpenOptionsExt};

use crate::effects::EffectError;
use crate::resolve::EntryKind;

/// Opens turngate's own file `name` in `dir` (`where_` names `dir` in messages, e.g. `.turngate`) for
/// reading and writing, creating it when missing. Refuses a link, a special file, or a file with other
/// hard links.
pub(super) fn open_own_file(dir: &Dir, where_: &str, name: &str) -> Result<File, EffectError> {
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true);
    options
        .follow(FollowSymlinks::No)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32);
    let path = format!("{where_}/{name}");
    let file = match dir.open_with(name, &options) {
        Ok(file) => file.into_std(),
        Err(error) => return Err(refusal(dir, name, &path, error)),
    };
    let metadata = cap_std::fs::Metadata::from_file(&file)
        .map_err(|e| EffectError::Journal(format!("cannot stat `{path}`: {e}")))?;
    check_own_file(&path, &metadata)?;
    Ok(file)
}

/// Holds an opened file of the state directory to what turngate makes: a regular file with one link.
pub(crate) fn check_own_file(
    path: &str,
    metadata: &cap_std::fs::Metadata,
) -> Result<(), EffectError> {
    let found = if !metadata.is_file() {
        Some(
            EntryKind::from_file_type(metadata.file_type())
                .describe()
                .to_owned(),
        )
    } else if metadata.nlink() > 1 {
        Some(format!(
            "a file with {} hard links (one may be a file elsewhere)",
            metadata.nlink()
        ))
    } else {
        None
    };
    match found {
        Some(found) => Err(EffectError::Foreign {
            path: path.to_owned(),
            found,
        }),
        None => Ok(()),
    }
}

/// The error for an entry of the state directory that could not be opened as turngate's own: what it
/// is when `lstat` can tell (a link, a FIFO, a directory), else what the system said.
pub(crate) fn refusal(dir: &Dir, name: &str, path: &str, error: io::Error) -> EffectError {
    match dir.symlink_metadata(name) {
        Ok(metadata) => {
            let kind = EntryKind::from_file_type(metadata.file_type());
            if kind == EntryKind::File && metadata.nlink() <= 1 {
                EffectError::Journal(format!("cannot open `{path}`: {error}"))
            } else {
                EffectError::Foreign {
                    path: path.to_owned(),
                    found: kind.describe().to_owned(),
                }
            }
        }
        Err(_) => EffectError::Journal(format!("cannot open `{path}`: {error}")),
    }
}

/// Opens the directory `name` in `dir` without following a link, creating it when missing; refuses
/// anything else standing there.
pub(crate) fn open_own_dir(dir: &Dir, where_: &str, name: &str) -> Result<Dir, EffectError> {
    match dir.create_dir(name) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(EffectError::Journal(format!(
                "cannot make `{where_}/{name}`: {e}"
            )));
        }
    }
    cap_fs_ext::DirExt::open_dir_nofollow(dir, name)
        .map_err(|e| refusal(dir, name, &format!("{where_}/{name}"), e))
}

/// Creates a new file named `<prefix>.<random><suffix>` in `dir`, exclusively (`O_EXCL`: a name that
/// exists, a planted link included, is never opened). Answers the file and its name.
pub(super) fn create_exclusive(
    dir: &Dir,
    prefix: &str,
    suffix: &str,
) -> io::Result<(File, String)> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    loop {
        let name = format!("{prefix}.{:016x}{suffix}", fastrand::u64(..));
        match dir.open_with(&name, &options) {
            Ok(file) => return Ok((file.into_std(), name)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
}

/// A temporary file to write and rename over `prefix` (see [`create_exclusive`]).
pub(crate) fn create_temporary(dir: &Dir, prefix: &str) -> io::Result<(File, String)> {
    create_exclusive(dir, prefix, TEMPORARY)
}

/// What the names of temporary files end in.
const TEMPORARY: &str = ".tmp";

/// Whether `name` is a temporary file a process left (`<prefix>.<anything>.tmp`), to be removed.
pub(crate) fn is_temporary(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('.'))
        .is_some_and(|rest| rest.ends_with(TEMPORARY))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A link planted at the very name a temporary file is about to get is never opened: the name is
    /// taken as in use and the next one drawn.
    #[test]
    fn a_link_planted_at_the_next_temporary_name_is_passed_over_never_opened() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let target = outside.path().join("secret.txt");
        std::fs::write(&target, "outside secret\n").unwrap();
        let state = Dir::open_ambient_dir(dir.path(), cap_std::ambient_authority()).unwrap();
        let mut predicted = fastrand::Rng::with_seed(7);
        let first = format!("journal.jsonl.{:016x}.tmp", predicted.u64(..));
        let second = format!("journal.jsonl.{:016x}.tmp", predicted.u64(..));
        std::os::unix::fs::symlink(&target, dir.path().join(&first)).unwrap();
        fastrand::seed(7);
        let (mut file, name) = create_temporary(&state, "journal.jsonl").unwrap();
        std::io::Write::write_all(&mut file, b"written").unwrap();
        assert_eq!(name, second, "the planted name was not passed over");
        assert_eq!(
            std::fs::read_to_string(&target).unwrap(),
            "outside secret\n"
        );
        assert!(
            dir.path()
                .join(&first)
                .symlink_metadata()
                .unwrap()
                .is_symlink()
        );
    }
}
