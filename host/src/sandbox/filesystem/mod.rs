//! `wasi:filesystem` for tools, implemented over the call's [`CallView`] instead of a host directory, for
//! both WASI generations.
//!
//! This is the one place where a tool's filesystem requests cross into the host: each `descriptor`
//! resource is a location of the view (a directory) or a file the view opened, and every path-taking
//! function goes through the view, which resolves, authorizes and stages it. A tool with no path
//! parameters gets no preopened directory at all. File reads and writes are positioned `pread`/`pwrite`
//! calls on regular files (the view never opens anything else), so no host call here can block.
//!
//! The operations live here, once, on [`ViewCtx`], in the view's own terms ([`Failure`], [`Stat`],
//! [`EntryKind`]); `p2.rs` (`wasi:filesystem@0.2`) and `p3.rs` (`@0.3`, streams and async functions)
//! only translate their bindings' types to and from them. Both use the same [`Descriptor`] in the
//! store's table. The bindings are generated in `bindings.rs` from `host/wit/`.

pub(crate) mod p2;
pub(crate) mod p3;

use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::SystemTime;

use wasmtime::component::{HasData, Resource, ResourceTable};

use crate::resolve::{EntryKind, RelPath};
use crate::view::staging::Staged;
use crate::view::{CallView, OpenRequest, Opened, Stat, ViewError, ViewFile};

/// A `descriptor` resource, of either generation.
pub enum Descriptor {
    /// A directory of the view, and whether it was opened with `mutate-directory` (the preopen is, when
    /// the view is writable). As WASI's descriptors are capabilities, only such a directory's entries
    /// can be created, removed, renamed or opened for writing through it; the view still decides, by
    /// the grants, what may change at all.
    Dir { location: RelPath, mutate: bool },
    /// An open file.
    File(ViewFile),
}

/// What the filesystem host functions reach: the resource table and the call's view (`None` when the
/// tool has no filesystem).
pub(crate) struct ViewCtx<'a> {
    pub(crate) table: &'a mut ResourceTable,
    pub(crate) view: Option<&'a mut CallView>,
}

/// Marker for `add_to_linker`, of either generation.
pub(crate) struct ViewFilesystem;

impl HasData for ViewFilesystem {
    type Data<'a> = ViewCtx<'a>;
}

/// Why a filesystem operation failed, before a generation translates it: an error for the guest, or a
/// trap.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The view refused the operation, or the file system failed it.
    View(ViewError),
    /// The descriptor does not allow the operation (a write through a file opened to read), or there is
    /// no view at all.
    BadDescriptor,
    /// A timestamp out of range.
    Overflow,
    /// Not the guest's error (a handle that is not in the table): ends the call.
    Trap(wasmtime::Error),
}

impl From<ViewError> for Failure {
    fn from(error: ViewError) -> Failure {
        Failure::View(error)
    }
}

impl From<io::Error> for Failure {
    fn from(error: io::Error) -> Failure {
        Failure::View(ViewError::from(error))
    }
}

impl From<wasmtime::component::ResourceTableError> for Failure {
    fn from(error: wasmtime::component::ResourceTableError) -> Failure {
        Failure::Trap(error.into())
    }
}

/// What a descriptor may do, as `get-flags` reports it.
pub(crate) struct Flags {
    pub(crate) read: bool,
    pub(crate) write: bool,
    pub(crate) mutate_directory: bool,
}

/// A new timestamp, as `set-times` asks for it: unchanged, now, or this time.
pub(crate) type NewTime = Option<SystemTime>;

/// `From<ViewError>` for a generation's `error-code`, whose cases bear the same names in 0.2 and 0.3.
macro_rules! view_error_codes {
    ($code:ident) => {
        impl From<ViewError> for $code {
            fn from(error: ViewError) -> $code {
                match error {
                    ViewError::NoEntry => $code::NoEntry,
                    ViewError::Access => $code::Access,
                    ViewError::NotPermitted => $code::NotPermitted,
                    ViewError::ReadOnly => $code::ReadOnly,
                    ViewError::Exist => $code::Exist,
                    ViewError::IsDirectory => $code::IsDirectory,
                    ViewError::NotDirectory => $code::NotDirectory,
                    ViewError::NotEmpty => $code::NotEmpty,
                    ViewError::Loop => $code::Loop,
                    ViewError::Invalid => $code::Invalid,
                    ViewError::CrossDevice => $code::CrossDevice,
                    ViewError::InsufficientSpace => $code::InsufficientSpace,
                    ViewError::Busy => $code::Busy,
                    ViewError::NameTooLong => $code::NameTooLong,
                    ViewError::Io => $code::Io,
                }
            }
        }
    };
}
pub(crate) use view_error_codes;

/// `descriptor_type`: a generation's `descriptor-type` of an entry kind (the same names in 0.2 and 0.3
/// but for what an unknown kind is).
/// The `open-at` flags of a generation (its `path-flags`, `open-flags` and `descriptor-flags`, each a
/// type of its own bindings) as the view's [`OpenRequest`], and `follows`, whether path flags follow a
/// last symlink: `open_request_flags!(PathFlags, OpenFlags, DescriptorFlags)` in each generation's
/// module.
macro_rules! open_request_flags {
    ($path:ident, $open:ident, $descriptor:ident) => {
        fn follows(flags: $path) -> bool {
            flags.contains($path::SYMLINK_FOLLOW)
        }

        impl From<$path> for OpenRequest {
            fn from(flags: $path) -> OpenRequest {
                let mut request = OpenRequest::empty();
                request.set(OpenRequest::FOLLOW, follows(flags));
                request
            }
        }

        impl From<$open> for OpenRequest {
            fn from(flags: $open) -> OpenRequest {
                let mut request = OpenRequest::empty();
                request.set(OpenRequest::CREATE, flags.contains($open::CREATE));
                request.set(OpenRequest::DIRECTORY, flags.contains($open::DIRECTORY));
                request.set(OpenRequest::EXCLUSIVE, flags.contains($open::EXCLUSIVE));
                request.set(OpenRequest::TRUNCATE, flags.contains($open::TRUNCATE));
                request
            }
        }

        impl From<$descriptor> for OpenRequest {
            fn from(flags: $descriptor) -> OpenRequest {
                let mut request = OpenRequest::empty();
                request.set(OpenRequest::READ, flags.contains($descriptor::READ));
                request.set(OpenRequest::WRITE, flags.contains($descriptor::WRITE));
                request
            }
        }
    };
}
pub(crate) use open_request_flags;

macro_rules! descriptor_types {
    ($type:ident, $unknown:expr) => {
        fn descriptor_type(kind: EntryKind) -> $type {
            match kind {
                EntryKind::File => $type::RegularFile,
                EntryKind::Dir => $type::Directory,
                EntryKind::Symlink => $type::SymbolicLink,
                EntryKind::Fifo => $type::Fifo,
                EntryKind::Socket => $type::Socket,
                EntryKind::CharDevice => $type::CharacterDevice,
                EntryKind::BlockDevice => $type::BlockDevice,
                EntryKind::Unknown => $unknown,
            }
        }
    };
}
pub(crate) use descriptor_types;

/// A `metadata-hash` of a stat: its object's identity, mixed.
pub(crate) fn metadata_hash(stat: &Stat) -> (u64, u64) {
    let (dev, ino) = stat.object;
    (ino ^ dev.rotate_left(32), dev ^ ino.rotate_left(17))
}

/// Access and modification times for `set_times`.
fn file_times(atime: NewTime, mtime: NewTime) -> std::fs::FileTimes {
    let mut times = std::fs::FileTimes::new();
    if let Some(at) = atime {
        times = times.set_accessed(at);
    }
    if let Some(at) = mtime {
        times = times.set_modified(at);
    }
    times
}

/// `pread`, retried when interrupted.
pub(crate) fn read_at(file: &std::fs::File, buffer: &mut [u8], offset: u64) -> io::Result<usize> {
    loop {
        match file.read_at(buffer, offset) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// Writes `bytes` into a staged file at `at` (`None`: at its end), counted against the call's staging
/// limit (past it: `StorageFull`, nothing written); the offset just past what was written.
pub(crate) fn write_staged(
    file: &std::fs::File,
    staged: &Staged,
    bytes: &[u8],
    at: Option<u64>,
) -> io::Result<u64> {
    let at = match at {
        Some(at) => at,
        None => file.metadata()?.len(),
    };
    let end = at.saturating_add(bytes.len() as u64);
    if !staged.reserve(end) {
        return Err(io::Error::from(io::ErrorKind::StorageFull));
    }
    file.write_all_at(bytes, at)?;
    Ok(end)
}

impl ViewCtx<'_> {
    fn view(&mut self) -> Result<&mut CallView, Failure> {
        // Without a view there are no descriptors, so a guest cannot get here; answer as POSIX would.
        self.view.as_deref_mut().ok_or(Failure::BadDescriptor)
    }

    /// The directory a descriptor is (`not-directory` for a file).
    pub(crate) fn dir(&self, fd: &Resource<Descriptor>) -> Result<RelPath, Failure> {
        match self.table.get(fd)? {
            Descriptor::Dir { location, .. } => Ok(location.clone()),
            Descriptor::File(_) => Err(ViewError::NotDirectory.into()),
        }
    }

    /// The directory a descriptor is, when it was opened to change its entries (`read-only` if not).
    fn mutable_dir(&self, fd: &Resource<Descriptor>) -> Result<RelPath, Failure> {
        match self.table.get(fd)? {
            Descriptor::Dir {
                location,
                mutate: true,
            } => Ok(location.clone()),
            Descriptor::Dir { .. } => Err(ViewError::ReadOnly.into()),
            Descriptor::File(_) => Err(ViewError::NotDirectory.into()),
        }
    }

    /// The file a descriptor is (`is-directory` for a directory).
    pub(crate) fn file(&self, fd: &Resource<Descriptor>) -> Result<ViewFile, Failure> {
        match self.table.get(fd)? {
            Descriptor::File(file) => Ok(file.clone()),
            Descriptor::Dir { .. } => Err(ViewError::IsDirectory.into()),
        }
    }

    /// The file a descriptor is, when it was opened to read.
    pub(crate) fn readable_file(&self, fd: &Resource<Descriptor>) -> Result<ViewFile, Failure> {
        let file = self.file(fd)?;
        if file.read {
            Ok(file)
        } else {
            Err(Failure::BadDescriptor)
        }
    }

    /// The file a descriptor is and its staging, when it was opened to write (only a staged file is).
    pub(crate) fn writable_file(
        &self,
        fd: &Resource<Descriptor>,
    ) -> Result<(ViewFile, Staged), Failure> {
        let file = self.file(fd)?;
        match (&file.staged, file.write) {
            (Some(staged), true) => {
                let staged = staged.clone();
                Ok((file, staged))
            }
            _ => Err(Failure::BadDescriptor),
        }
    }

    /// The root, the only preopened directory (none without a view).
    pub(crate) fn preopens(&mut self) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>> {
        if self.view.is_none() {
            return Ok(Vec::new());
        }
        let mutate = self.view.as_deref().is_some_and(CallView::is_writable);
        let root = self.table.push(Descriptor::Dir {
            location: RelPath::root(),
            mutate,
        })?;
        Ok(vec![(root, "/".to_owned())])
    }

    pub(crate) fn stat(&mut self, fd: &Resource<Descriptor>) -> Result<Stat, Failure> {
        let location = match self.table.get(fd)? {
            Descriptor::Dir { location, .. } => location.clone(),
            Descriptor::File(file) => {
                let metadata = cap_std::fs::Metadata::from_file(&file.file)?;
                let entry = crate::resolve::Entry::from_metadata(&metadata);
                return Ok(Stat::of(&entry));
            }
        };
        Ok(self.view()?.stat_location(&location)?)
    }

    pub(crate) fn flags(&self, fd: &Resource<Descriptor>) -> Result<Flags, Failure> {
        Ok(match self.table.get(fd)? {
            Descriptor::Dir { mutate, .. } => Flags {
                read: true,
                write: false,
                mutate_directory: *mutate,
            },
            Descriptor::File(file) => Flags {
                read: file.read,
                write: file.write,
                mutate_directory: false,
            },
        })
    }

    /// What a descriptor is: a directory or a regular file (the view opens nothing else).
    pub(crate) fn kind(&self, fd: &Resource<Descriptor>) -> Result<EntryKind, Failure> {
        Ok(match self.table.get(fd)? {
            Descriptor::Dir { .. } => EntryKind::Dir,
            Descriptor::File(_) => EntryKind::File,
        })
    }

    /// `advise`: a hint the view has no use for, taken only for a file (as wasmtime-wasi's).
    pub(crate) fn advise(&self, fd: &Resource<Descriptor>) -> Result<(), Failure> {
        match self.table.get(fd)? {
            Descriptor::File(_) => Ok(()),
            Descriptor::Dir { .. } => Err(Failure::BadDescriptor),
        }
    }

    /// Any descriptor: checks that the handle is one.
    pub(crate) fn descriptor(&self, fd: &Resource<Descriptor>) -> Result<(), Failure> {
        self.table.get(fd)?;
        Ok(())
    }

    pub(crate) fn set_size(&self, fd: &Resource<Descriptor>, size: u64) -> Result<(), Failure> {
        let (file, staged) = self.writable_file(fd)?;
        // A size no file offset can hold, as `ftruncate(2)` says.
        if i64::try_from(size).is_err() {
            return Err(ViewError::Invalid.into());
        }
        if !staged.reserve(size) {
            return Err(ViewError::InsufficientSpace.into());
        }
        Ok(file.file.set_len(size)?)
    }

    pub(crate) fn set_times(
        &self,
        fd: &Resource<Descriptor>,
        atime: NewTime,
        mtime: NewTime,
    ) -> Result<(), Failure> {
        match self.table.get(fd)? {
            Descriptor::File(file) if file.staged.is_some() && file.write => {
                Ok(file.file.set_times(file_times(atime, mtime))?)
            }
            Descriptor::File(_) => Err(Failure::BadDescriptor),
            Descriptor::Dir { .. } => Err(ViewError::NotPermitted.into()),
        }
    }

    /// A directory's entries, as the view shows them when it is read.
    pub(crate) fn read_directory(
        &mut self,
        fd: &Resource<Descriptor>,
    ) -> Result<Vec<(String, EntryKind)>, Failure> {
        let location = self.dir(fd)?;
        Ok(self.view()?.read_dir(&location)?)
    }

    pub(crate) fn create_directory_at(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
    ) -> Result<(), Failure> {
        let base = self.mutable_dir(fd)?;
        Ok(self.view()?.create_dir(&base, path)?)
    }

    pub(crate) fn stat_at(
        &mut self,
        fd: &Resource<Descriptor>,
        follow: bool,
        path: &str,
    ) -> Result<Stat, Failure> {
        let base = self.dir(fd)?;
        Ok(self.view()?.stat_at(&base, path, follow)?)
    }

    pub(crate) fn set_times_at(
        &mut self,
        fd: &Resource<Descriptor>,
        follow: bool,
        path: &str,
        (atime, mtime): (NewTime, NewTime),
    ) -> Result<(), Failure> {
        let base = self.mutable_dir(fd)?;
        Ok(self
            .view()?
            .set_times_at(&base, path, follow, file_times(atime, mtime))?)
    }

    /// Refused: a hard link would let an effect reach a file the approval never named.
    pub(crate) fn link_at(&self, fd: &Resource<Descriptor>) -> Result<(), Failure> {
        self.dir(fd)?;
        Err(ViewError::NotPermitted.into())
    }

    /// Refused: a symlink made by a tool could point anywhere once applied; the view makes none.
    pub(crate) fn symlink_at(&self, fd: &Resource<Descriptor>) -> Result<(), Failure> {
        self.dir(fd)?;
        Err(ViewError::NotPermitted.into())
    }

    /// Opens `path` from a directory; `mutate_directory` asks for a directory that may change (which
    /// only a directory that may itself change can give, as a write, a create or a truncate needs).
    pub(crate) fn open_at(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
        request: OpenRequest,
        mutate_directory: bool,
    ) -> Result<Resource<Descriptor>, Failure> {
        let mut request = request;
        // As WASI says: no access asked for is read; creating or truncating a file is writing it.
        if !request.intersects(OpenRequest::READ | OpenRequest::WRITE) {
            request |= OpenRequest::READ;
        }
        if request.intersects(OpenRequest::CREATE | OpenRequest::TRUNCATE) {
            request |= OpenRequest::WRITE;
        }
        let changes = mutate_directory || request.contains(OpenRequest::WRITE);
        let base = if changes {
            self.mutable_dir(fd)?
        } else {
            self.dir(fd)?
        };
        let descriptor = match self.view()?.open(&base, path, request)? {
            Opened::Dir(location) => Descriptor::Dir {
                location,
                mutate: mutate_directory,
            },
            Opened::File(file) => Descriptor::File(file),
        };
        Ok(self.table.push(descriptor)?)
    }

    pub(crate) fn readlink_at(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
    ) -> Result<String, Failure> {
        let base = self.dir(fd)?;
        Ok(self.view()?.read_link(&base, path)?)
    }

    pub(crate) fn remove_directory_at(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
    ) -> Result<(), Failure> {
        let base = self.mutable_dir(fd)?;
        Ok(self.view()?.remove_dir(&base, path)?)
    }

    pub(crate) fn rename_at(
        &mut self,
        fd: &Resource<Descriptor>,
        old_path: &str,
        new_descriptor: &Resource<Descriptor>,
        new_path: &str,
    ) -> Result<(), Failure> {
        let old_base = self.mutable_dir(fd)?;
        let new_base = self.mutable_dir(new_descriptor)?;
        Ok(self
            .view()?
            .rename(&old_base, old_path, &new_base, new_path)?)
    }

    pub(crate) fn unlink_file_at(
        &mut self,
        fd: &Resource<Descriptor>,
        path: &str,
    ) -> Result<(), Failure> {
        let base = self.mutable_dir(fd)?;
        Ok(self.view()?.unlink(&base, path)?)
    }

    pub(crate) fn is_same_object(
        &self,
        a: &Resource<Descriptor>,
        b: &Resource<Descriptor>,
    ) -> wasmtime::Result<bool> {
        Ok(match (self.table.get(a)?, self.table.get(b)?) {
            (Descriptor::Dir { location: x, .. }, Descriptor::Dir { location: y, .. }) => x == y,
            (Descriptor::File(x), Descriptor::File(y)) => {
                Arc::ptr_eq(&x.file, &y.file) || {
                    let (x, y) = (
                        cap_std::fs::Metadata::from_file(&x.file),
                        cap_std::fs::Metadata::from_file(&y.file),
                    );
                    match (x, y) {
                        (Ok(x), Ok(y)) => {
                            use cap_std::fs::MetadataExt;
                            x.dev() == y.dev() && x.ino() == y.ino()
                        }
                        _ => false,
                    }
                }
            }
            _ => false,
        })
    }

    pub(crate) fn drop_descriptor(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        self.table.delete(fd)?;
        Ok(())
    }
}
