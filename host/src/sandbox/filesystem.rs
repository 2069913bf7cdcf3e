//! `wasi:filesystem` for tools, implemented over the call's [`CallView`] instead of a host directory.
//!
//! This is the one place where a tool's filesystem requests cross into the host: each `descriptor`
//! resource is a location of the view (a directory) or a file the view opened, and every path-taking
//! function goes through the view, which resolves, authorizes and stages it. A tool with no path
//! parameters gets no preopened directory at all. File reads and writes are positioned `pread`/`pwrite`
//! calls on regular files (the view never opens anything else), so no host call here can block. The
//! bindings are generated in `bindings.rs` from `host/wit/`.

use std::io;
use std::os::unix::fs::FileExt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use wasmtime::component::{HasData, Resource, ResourceTable};
use wasmtime_wasi_io::streams::{
    DynInputStream, DynOutputStream, InputStream, OutputStream, StreamError, StreamResult,
};

use super::bindings::view::wasi::clocks::wall_clock::Datetime;
use super::bindings::view::wasi::filesystem::types::{
    DescriptorFlags, DescriptorStat, DescriptorType, DirectoryEntry, ErrorCode, MetadataHashValue,
    NewTimestamp, OpenFlags, PathFlags,
};
use super::bindings::view::wasi::filesystem::{preopens, types};
use crate::resolve::{EntryKind, RelPath};
use crate::view::staging::Staged;
use crate::view::{CallView, OpenRequest, Opened, Stat, ViewError, ViewFile};

/// The error type of the generated bindings: an `error-code` for the guest, or a trap.
pub(crate) type FsError = wasmtime_wasi::TrappableError<ErrorCode>;

/// Largest read served at once, and the write permit given (the same bound as wasmtime-wasi's).
const MAX_CHUNK: usize = 64 * 1024;

/// Least a stream reads from a file at once (see `FileInput`).
const READ_AHEAD: usize = 16 * 1024;

/// A `descriptor` resource.
pub enum Descriptor {
    /// A directory of the view.
    Dir(RelPath),
    /// An open file.
    File(ViewFile),
}

/// A `directory-entry-stream` resource: the entries the view showed when the directory was read.
pub struct DirectoryEntries(std::vec::IntoIter<(String, EntryKind)>);

/// What the filesystem host functions reach: the resource table and the call's view (`None` when the
/// tool has no filesystem).
pub(crate) struct ViewCtx<'a> {
    pub(crate) table: &'a mut ResourceTable,
    pub(crate) view: Option<&'a mut CallView>,
}

/// Marker for `add_to_linker`.
pub(crate) struct ViewFilesystem;

impl HasData for ViewFilesystem {
    type Data<'a> = ViewCtx<'a>;
}

impl From<ViewError> for ErrorCode {
    fn from(error: ViewError) -> ErrorCode {
        match error {
            ViewError::NoEntry => ErrorCode::NoEntry,
            ViewError::Access => ErrorCode::Access,
            ViewError::NotPermitted => ErrorCode::NotPermitted,
            ViewError::ReadOnly => ErrorCode::ReadOnly,
            ViewError::Exist => ErrorCode::Exist,
            ViewError::IsDirectory => ErrorCode::IsDirectory,
            ViewError::NotDirectory => ErrorCode::NotDirectory,
            ViewError::NotEmpty => ErrorCode::NotEmpty,
            ViewError::Loop => ErrorCode::Loop,
            ViewError::Invalid => ErrorCode::Invalid,
            ViewError::CrossDevice => ErrorCode::CrossDevice,
            ViewError::InsufficientSpace => ErrorCode::InsufficientSpace,
            ViewError::Busy => ErrorCode::Busy,
            ViewError::NameTooLong => ErrorCode::NameTooLong,
            ViewError::Io => ErrorCode::Io,
        }
    }
}

impl From<ViewError> for FsError {
    fn from(error: ViewError) -> FsError {
        ErrorCode::from(error).into()
    }
}

fn io_error(error: io::Error) -> FsError {
    ErrorCode::from(ViewError::from(error)).into()
}

impl ViewCtx<'_> {
    fn view(&mut self) -> Result<&mut CallView, FsError> {
        // Without a view there are no descriptors, so a guest cannot get here; answer as POSIX would.
        self.view
            .as_deref_mut()
            .ok_or_else(|| ErrorCode::BadDescriptor.into())
    }

    fn dir(&self, fd: &Resource<Descriptor>) -> Result<RelPath, FsError> {
        match self.table.get(fd).map_err(FsError::trap)? {
            Descriptor::Dir(location) => Ok(location.clone()),
            Descriptor::File(_) => Err(ErrorCode::NotDirectory.into()),
        }
    }

    fn file(&self, fd: &Resource<Descriptor>) -> Result<ViewFile, FsError> {
        match self.table.get(fd).map_err(FsError::trap)? {
            Descriptor::File(file) => Ok(file.clone()),
            Descriptor::Dir(_) => Err(ErrorCode::IsDirectory.into()),
        }
    }

    fn writable_file(&self, fd: &Resource<Descriptor>) -> Result<(ViewFile, Staged), FsError> {
        let file = self.file(fd)?;
        match (&file.staged, file.write) {
            (Some(staged), true) => {
                let staged = staged.clone();
                Ok((file, staged))
            }
            _ => Err(ErrorCode::BadDescriptor.into()),
        }
    }

    fn stat(&mut self, fd: &Resource<Descriptor>) -> Result<Stat, FsError> {
        let location = match self.table.get(fd).map_err(FsError::trap)? {
            Descriptor::Dir(location) => location.clone(),
            Descriptor::File(file) => {
                let metadata = cap_std::fs::Metadata::from_file(&file.file).map_err(io_error)?;
                let entry = crate::resolve::Entry::from_metadata(&metadata);
                return Ok(Stat::of(&entry));
            }
        };
        Ok(self.view()?.stat_location(&location)?)
    }
}

fn descriptor_type(kind: EntryKind) -> DescriptorType {
    match kind {
        EntryKind::File => DescriptorType::RegularFile,
        EntryKind::Dir => DescriptorType::Directory,
        EntryKind::Symlink => DescriptorType::SymbolicLink,
        EntryKind::Fifo => DescriptorType::Fifo,
        EntryKind::Socket => DescriptorType::Socket,
        EntryKind::CharDevice => DescriptorType::CharacterDevice,
        EntryKind::BlockDevice => DescriptorType::BlockDevice,
        EntryKind::Unknown => DescriptorType::Unknown,
    }
}

fn datetime(ns: Option<i128>) -> Option<Datetime> {
    let ns = ns?;
    if ns < 0 {
        return None;
    }
    Some(Datetime {
        seconds: u64::try_from(ns / 1_000_000_000).ok()?,
        nanoseconds: u32::try_from(ns % 1_000_000_000).ok()?,
    })
}

fn descriptor_stat(stat: Stat) -> DescriptorStat {
    DescriptorStat {
        type_: descriptor_type(stat.kind),
        link_count: stat.nlink,
        size: stat.size,
        data_access_timestamp: datetime(stat.atime_ns),
        data_modification_timestamp: datetime(stat.mtime_ns),
        status_change_timestamp: datetime(stat.ctime_ns),
    }
}

fn metadata_hash(stat: &Stat) -> MetadataHashValue {
    let (dev, ino) = stat.object;
    MetadataHashValue {
        lower: ino ^ dev.rotate_left(32),
        upper: dev ^ ino.rotate_left(17),
    }
}

fn file_times(atime: NewTimestamp, mtime: NewTimestamp) -> Result<std::fs::FileTimes, FsError> {
    fn when(stamp: NewTimestamp) -> Result<Option<SystemTime>, FsError> {
        match stamp {
            NewTimestamp::NoChange => Ok(None),
            NewTimestamp::Now => Ok(Some(SystemTime::now())),
            NewTimestamp::Timestamp(t) => SystemTime::UNIX_EPOCH
                .checked_add(Duration::new(t.seconds, t.nanoseconds.min(999_999_999)))
                .map(Some)
                .ok_or_else(|| ErrorCode::Overflow.into()),
        }
    }
    let mut times = std::fs::FileTimes::new();
    if let Some(at) = when(atime)? {
        times = times.set_accessed(at);
    }
    if let Some(at) = when(mtime)? {
        times = times.set_modified(at);
    }
    Ok(times)
}

fn follows(flags: PathFlags) -> bool {
    flags.contains(PathFlags::SYMLINK_FOLLOW)
}

impl preopens::Host for ViewCtx<'_> {
    fn get_directories(&mut self) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>> {
        if self.view.is_none() {
            return Ok(Vec::new());
        }
        let root = self.table.push(Descriptor::Dir(RelPath::root()))?;
        Ok(vec![(root, "/".to_owned())])
    }
}

impl types::Host for ViewCtx<'_> {
    fn convert_error_code(&mut self, error: FsError) -> wasmtime::Result<ErrorCode> {
        error.downcast()
    }

    fn filesystem_error_code(
        &mut self,
        error: Resource<wasmtime::Error>,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        let error = self.table.get(&error)?;
        Ok(error
            .downcast_ref::<io::Error>()
            .map(|e| ErrorCode::from(ViewError::from(io::Error::from(e.kind())))))
    }
}

impl types::HostDescriptor for ViewCtx<'_> {
    fn read_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: u64,
    ) -> Result<Resource<DynInputStream>, FsError> {
        let file = self.file(&fd)?;
        if !file.read {
            return Err(ErrorCode::BadDescriptor.into());
        }
        let stream: DynInputStream = Box::new(FileInput::new(file.file, offset));
        self.table.push(stream).map_err(FsError::trap)
    }

    fn write_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: u64,
    ) -> Result<Resource<DynOutputStream>, FsError> {
        let (file, staged) = self.writable_file(&fd)?;
        let stream: DynOutputStream = Box::new(FileOutput {
            file: file.file,
            staged,
            position: Some(offset),
        });
        self.table.push(stream).map_err(FsError::trap)
    }

    fn append_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> Result<Resource<DynOutputStream>, FsError> {
        let (file, staged) = self.writable_file(&fd)?;
        let stream: DynOutputStream = Box::new(FileOutput {
            file: file.file,
            staged,
            position: None,
        });
        self.table.push(stream).map_err(FsError::trap)
    }

    fn advise(
        &mut self,
        fd: Resource<Descriptor>,
        _offset: u64,
        _length: u64,
        _advice: types::Advice,
    ) -> Result<(), FsError> {
        self.file(&fd).map(|_| ())
    }

    fn sync_data(&mut self, fd: Resource<Descriptor>) -> Result<(), FsError> {
        self.sync(fd)
    }

    fn get_flags(&mut self, fd: Resource<Descriptor>) -> Result<DescriptorFlags, FsError> {
        match self.table.get(&fd).map_err(FsError::trap)? {
            Descriptor::Dir(_) => {
                let writable = self.view.as_deref().is_some_and(CallView::is_writable);
                Ok(if writable {
                    DescriptorFlags::READ | DescriptorFlags::MUTATE_DIRECTORY
                } else {
                    DescriptorFlags::READ
                })
            }
            Descriptor::File(file) => {
                let mut flags = DescriptorFlags::empty();
                if file.read {
                    flags |= DescriptorFlags::READ;
                }
                if file.write {
                    flags |= DescriptorFlags::WRITE;
                }
                Ok(flags)
            }
        }
    }

    fn get_type(&mut self, fd: Resource<Descriptor>) -> Result<DescriptorType, FsError> {
        Ok(match self.table.get(&fd).map_err(FsError::trap)? {
            Descriptor::Dir(_) => DescriptorType::Directory,
            Descriptor::File(_) => DescriptorType::RegularFile,
        })
    }

    fn set_size(&mut self, fd: Resource<Descriptor>, size: u64) -> Result<(), FsError> {
        let (file, staged) = self.writable_file(&fd)?;
        if !staged.reserve(size) {
            return Err(ErrorCode::InsufficientSpace.into());
        }
        file.file.set_len(size).map_err(io_error)
    }

    fn set_times(
        &mut self,
        fd: Resource<Descriptor>,
        atime: NewTimestamp,
        mtime: NewTimestamp,
    ) -> Result<(), FsError> {
        let times = file_times(atime, mtime)?;
        match self.table.get(&fd).map_err(FsError::trap)? {
            Descriptor::File(file) if file.staged.is_some() && file.write => {
                file.file.set_times(times).map_err(io_error)
            }
            Descriptor::File(_) => Err(ErrorCode::BadDescriptor.into()),
            Descriptor::Dir(_) => Err(ErrorCode::NotPermitted.into()),
        }
    }

    fn read(
        &mut self,
        fd: Resource<Descriptor>,
        length: u64,
        offset: u64,
    ) -> Result<(Vec<u8>, bool), FsError> {
        let file = self.file(&fd)?;
        if !file.read {
            return Err(ErrorCode::BadDescriptor.into());
        }
        let mut buffer = vec![0; usize::try_from(length).unwrap_or(MAX_CHUNK).min(MAX_CHUNK)];
        let n = read_at(&file.file, &mut buffer, offset).map_err(io_error)?;
        buffer.truncate(n);
        Ok((buffer, n == 0 && length > 0))
    }

    fn write(
        &mut self,
        fd: Resource<Descriptor>,
        buffer: Vec<u8>,
        offset: u64,
    ) -> Result<u64, FsError> {
        let (file, staged) = self.writable_file(&fd)?;
        let end = offset.saturating_add(buffer.len() as u64);
        if !staged.reserve(end) {
            return Err(ErrorCode::InsufficientSpace.into());
        }
        file.file.write_all_at(&buffer, offset).map_err(io_error)?;
        Ok(buffer.len() as u64)
    }

    fn read_directory(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> Result<Resource<DirectoryEntries>, FsError> {
        let location = self.dir(&fd)?;
        let entries = self.view()?.read_dir(&location)?;
        self.table
            .push(DirectoryEntries(entries.into_iter()))
            .map_err(FsError::trap)
    }

    fn sync(&mut self, fd: Resource<Descriptor>) -> Result<(), FsError> {
        // The lower layer is never written; a staged file (or a directory that exists only in the view)
        // reaches the disk when the journal applies it, which makes it durable before anyone can see it.
        self.table.get(&fd).map_err(FsError::trap)?;
        Ok(())
    }

    fn create_directory_at(
        &mut self,
        fd: Resource<Descriptor>,
        path: String,
    ) -> Result<(), FsError> {
        let base = self.dir(&fd)?;
        Ok(self.view()?.create_dir(&base, &path)?)
    }

    fn stat(&mut self, fd: Resource<Descriptor>) -> Result<DescriptorStat, FsError> {
        Ok(descriptor_stat(ViewCtx::stat(self, &fd)?))
    }

    fn stat_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
    ) -> Result<DescriptorStat, FsError> {
        let base = self.dir(&fd)?;
        let stat = self.view()?.stat_at(&base, &path, follows(path_flags))?;
        Ok(descriptor_stat(stat))
    }

    fn set_times_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
        atime: NewTimestamp,
        mtime: NewTimestamp,
    ) -> Result<(), FsError> {
        let base = self.dir(&fd)?;
        let times = file_times(atime, mtime)?;
        Ok(self
            .view()?
            .set_times_at(&base, &path, follows(path_flags), times)?)
    }

    fn link_at(
        &mut self,
        fd: Resource<Descriptor>,
        _old_path_flags: PathFlags,
        _old_path: String,
        _new_descriptor: Resource<Descriptor>,
        _new_path: String,
    ) -> Result<(), FsError> {
        // A hard link would let an effect reach a file the approval never named.
        self.dir(&fd)?;
        Err(ErrorCode::NotPermitted.into())
    }

    fn open_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
        open_flags: OpenFlags,
        flags: DescriptorFlags,
    ) -> Result<Resource<Descriptor>, FsError> {
        let base = self.dir(&fd)?;
        let request = OpenRequest {
            follow: follows(path_flags),
            create: open_flags.contains(OpenFlags::CREATE),
            directory: open_flags.contains(OpenFlags::DIRECTORY),
            exclusive: open_flags.contains(OpenFlags::EXCLUSIVE),
            truncate: open_flags.contains(OpenFlags::TRUNCATE),
            read: flags.contains(DescriptorFlags::READ),
            write: flags.contains(DescriptorFlags::WRITE),
        };
        let descriptor = match self.view()?.open(&base, &path, request)? {
            Opened::Dir(location) => Descriptor::Dir(location),
            Opened::File(file) => Descriptor::File(file),
        };
        self.table.push(descriptor).map_err(FsError::trap)
    }

    fn readlink_at(&mut self, fd: Resource<Descriptor>, path: String) -> Result<String, FsError> {
        let base = self.dir(&fd)?;
        Ok(self.view()?.read_link(&base, &path)?)
    }

    fn remove_directory_at(
        &mut self,
        fd: Resource<Descriptor>,
        path: String,
    ) -> Result<(), FsError> {
        let base = self.dir(&fd)?;
        Ok(self.view()?.remove_dir(&base, &path)?)
    }

    fn rename_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path: String,
        new_descriptor: Resource<Descriptor>,
        new_path: String,
    ) -> Result<(), FsError> {
        let old_base = self.dir(&fd)?;
        let new_base = self.dir(&new_descriptor)?;
        Ok(self
            .view()?
            .rename(&old_base, &old_path, &new_base, &new_path)?)
    }

    fn symlink_at(
        &mut self,
        fd: Resource<Descriptor>,
        _old_path: String,
        _new_path: String,
    ) -> Result<(), FsError> {
        // A symlink made by a tool could point anywhere once applied; the view makes none.
        self.dir(&fd)?;
        Err(ErrorCode::NotPermitted.into())
    }

    fn unlink_file_at(&mut self, fd: Resource<Descriptor>, path: String) -> Result<(), FsError> {
        let base = self.dir(&fd)?;
        Ok(self.view()?.unlink(&base, &path)?)
    }

    fn is_same_object(
        &mut self,
        a: Resource<Descriptor>,
        b: Resource<Descriptor>,
    ) -> wasmtime::Result<bool> {
        let same = match (self.table.get(&a)?, self.table.get(&b)?) {
            (Descriptor::Dir(x), Descriptor::Dir(y)) => x == y,
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
        };
        Ok(same)
    }

    fn metadata_hash(&mut self, fd: Resource<Descriptor>) -> Result<MetadataHashValue, FsError> {
        Ok(metadata_hash(&ViewCtx::stat(self, &fd)?))
    }

    fn metadata_hash_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
    ) -> Result<MetadataHashValue, FsError> {
        let base = self.dir(&fd)?;
        let stat = self.view()?.stat_at(&base, &path, follows(path_flags))?;
        Ok(metadata_hash(&stat))
    }

    fn drop(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        self.table.delete(fd)?;
        Ok(())
    }
}

impl types::HostDirectoryEntryStream for ViewCtx<'_> {
    fn read_directory_entry(
        &mut self,
        stream: Resource<DirectoryEntries>,
    ) -> Result<Option<DirectoryEntry>, FsError> {
        let entries = self.table.get_mut(&stream).map_err(FsError::trap)?;
        Ok(entries.0.next().map(|(name, kind)| DirectoryEntry {
            type_: descriptor_type(kind),
            name,
        }))
    }

    fn drop(&mut self, stream: Resource<DirectoryEntries>) -> wasmtime::Result<()> {
        self.table.delete(stream)?;
        Ok(())
    }
}

/// `pread`, retried when interrupted.
fn read_at(file: &std::fs::File, buffer: &mut [u8], offset: u64) -> io::Result<usize> {
    loop {
        match file.read_at(buffer, offset) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// An `input-stream` over a view file: positioned reads, always ready (regular files only). It reads
/// ahead at least [`READ_AHEAD`] bytes, so a guest reading in small pieces (as `read_to_end` does)
/// costs one `pread` per chunk rather than one per piece.
struct FileInput {
    file: Arc<std::fs::File>,
    position: u64,
    ahead: Bytes,
}

impl FileInput {
    fn new(file: Arc<std::fs::File>, position: u64) -> FileInput {
        FileInput {
            file,
            position,
            ahead: Bytes::new(),
        }
    }
}

#[wasmtime_wasi_io::async_trait]
impl wasmtime_wasi_io::poll::Pollable for FileInput {
    async fn ready(&mut self) {}
}

impl InputStream for FileInput {
    fn read(&mut self, size: usize) -> StreamResult<Bytes> {
        if size == 0 {
            return Ok(Bytes::new());
        }
        if self.ahead.is_empty() {
            let mut buffer = BytesMut::zeroed(size.clamp(READ_AHEAD, MAX_CHUNK));
            let n = read_at(&self.file, &mut buffer, self.position)
                .map_err(|e| StreamError::LastOperationFailed(e.into()))?;
            if n == 0 {
                return Err(StreamError::Closed);
            }
            buffer.truncate(n);
            self.position += n as u64;
            self.ahead = buffer.freeze();
        }
        Ok(self.ahead.split_to(size.min(self.ahead.len())))
    }
}

/// An `output-stream` into a staged file: positioned writes (or appends), counted against the call's
/// staging limit.
struct FileOutput {
    file: Arc<std::fs::File>,
    staged: Staged,
    /// `None`: append.
    position: Option<u64>,
}

#[wasmtime_wasi_io::async_trait]
impl wasmtime_wasi_io::poll::Pollable for FileOutput {
    async fn ready(&mut self) {}
}

impl OutputStream for FileOutput {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        let failed = |e: io::Error| StreamError::LastOperationFailed(e.into());
        let at = match self.position {
            Some(at) => at,
            None => self.file.metadata().map_err(failed)?.len(),
        };
        let end = at.saturating_add(bytes.len() as u64);
        if !self.staged.reserve(end) {
            return Err(failed(io::Error::from(io::ErrorKind::StorageFull)));
        }
        self.file.write_all_at(&bytes, at).map_err(failed)?;
        if let Some(position) = &mut self.position {
            *position = end;
        }
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(MAX_CHUNK)
    }
}
