//! `wasi:filesystem@0.2` over the view: the 0.2 bindings' types translated to and from the operations
//! in `mod.rs`, plus 0.2's own `input-stream`, `output-stream` and `directory-entry-stream`.

use std::io;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use wasmtime::component::Resource;
use wasmtime_wasi_io::streams::{
    DynInputStream, DynOutputStream, InputStream, OutputStream, StreamError, StreamResult,
};

use super::{Descriptor, Failure, NewTime, ViewCtx, metadata_hash, read_at, write_staged};
use crate::resolve::EntryKind;
use crate::sandbox::bindings::view::wasi::clocks::wall_clock::Datetime;
use crate::sandbox::bindings::view::wasi::filesystem::types::{
    DescriptorFlags, DescriptorStat, DescriptorType, DirectoryEntry, ErrorCode, MetadataHashValue,
    NewTimestamp, OpenFlags, PathFlags,
};
use crate::sandbox::bindings::view::wasi::filesystem::{preopens, types};
use crate::view::staging::Staged;
use crate::view::{OpenRequest, Stat, ViewError};

/// The error type of the generated bindings: an `error-code` for the guest, or a trap.
pub(crate) type FsError = wasmtime_wasi::TrappableError<ErrorCode>;

/// Largest read served at once, and the write permit given (the same bound as wasmtime-wasi's).
const MAX_CHUNK: usize = 64 * 1024;

/// Least a stream reads from a file at once (see `FileInput`).
const READ_AHEAD: usize = 16 * 1024;

/// A `directory-entry-stream` resource: the entries the view showed when the directory was read.
pub struct DirectoryEntries(std::vec::IntoIter<(String, EntryKind)>);

super::view_error_codes!(ErrorCode);

impl From<Failure> for FsError {
    fn from(failure: Failure) -> FsError {
        match failure {
            Failure::View(error) => ErrorCode::from(error).into(),
            Failure::BadDescriptor => ErrorCode::BadDescriptor.into(),
            Failure::Overflow => ErrorCode::Overflow.into(),
            Failure::Trap(error) => FsError::trap(error),
        }
    }
}

super::descriptor_types!(DescriptorType, DescriptorType::Unknown);
super::open_request_flags!(PathFlags, OpenFlags, DescriptorFlags);

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

fn hash_value(stat: &Stat) -> MetadataHashValue {
    let (lower, upper) = metadata_hash(stat);
    MetadataHashValue { lower, upper }
}

fn new_time(stamp: NewTimestamp) -> Result<NewTime, Failure> {
    match stamp {
        NewTimestamp::NoChange => Ok(None),
        NewTimestamp::Now => Ok(Some(SystemTime::now())),
        NewTimestamp::Timestamp(t) => SystemTime::UNIX_EPOCH
            .checked_add(Duration::new(t.seconds, t.nanoseconds.min(999_999_999)))
            .map(Some)
            .ok_or(Failure::Overflow),
    }
}

impl preopens::Host for ViewCtx<'_> {
    fn get_directories(&mut self) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>> {
        self.preopens()
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
        let file = self.readable_file(&fd)?;
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
        Ok(ViewCtx::advise(self, &fd)?)
    }

    fn sync_data(&mut self, fd: Resource<Descriptor>) -> Result<(), FsError> {
        self.sync(fd)
    }

    fn get_flags(&mut self, fd: Resource<Descriptor>) -> Result<DescriptorFlags, FsError> {
        let flags = self.flags(&fd)?;
        let mut bits = DescriptorFlags::empty();
        for (set, bit) in [
            (flags.read, DescriptorFlags::READ),
            (flags.write, DescriptorFlags::WRITE),
            (flags.mutate_directory, DescriptorFlags::MUTATE_DIRECTORY),
        ] {
            if set {
                bits |= bit;
            }
        }
        Ok(bits)
    }

    fn get_type(&mut self, fd: Resource<Descriptor>) -> Result<DescriptorType, FsError> {
        Ok(descriptor_type(self.kind(&fd)?))
    }

    fn set_size(&mut self, fd: Resource<Descriptor>, size: u64) -> Result<(), FsError> {
        Ok(ViewCtx::set_size(self, &fd, size)?)
    }

    fn set_times(
        &mut self,
        fd: Resource<Descriptor>,
        atime: NewTimestamp,
        mtime: NewTimestamp,
    ) -> Result<(), FsError> {
        let (atime, mtime) = (new_time(atime)?, new_time(mtime)?);
        Ok(ViewCtx::set_times(self, &fd, atime, mtime)?)
    }

    fn read(
        &mut self,
        fd: Resource<Descriptor>,
        length: u64,
        offset: u64,
    ) -> Result<(Vec<u8>, bool), FsError> {
        let file = self.readable_file(&fd)?;
        let mut buffer = vec![0; usize::try_from(length).unwrap_or(MAX_CHUNK).min(MAX_CHUNK)];
        let n = read_at(&file.file, &mut buffer, offset).map_err(Failure::from)?;
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
        write_staged(&file.file, &staged, &buffer, Some(offset)).map_err(Failure::from)?;
        Ok(buffer.len() as u64)
    }

    fn read_directory(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> Result<Resource<DirectoryEntries>, FsError> {
        let entries = ViewCtx::read_directory(self, &fd)?;
        self.table
            .push(DirectoryEntries(entries.into_iter()))
            .map_err(FsError::trap)
    }

    fn sync(&mut self, fd: Resource<Descriptor>) -> Result<(), FsError> {
        // The lower layer is never written; a staged file (or a directory that exists only in the view)
        // reaches the disk when the journal applies it, which makes it durable before anyone can see it.
        Ok(self.descriptor(&fd)?)
    }

    fn create_directory_at(
        &mut self,
        fd: Resource<Descriptor>,
        path: String,
    ) -> Result<(), FsError> {
        Ok(ViewCtx::create_directory_at(self, &fd, &path)?)
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
        let stat = ViewCtx::stat_at(self, &fd, follows(path_flags), &path)?;
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
        let times = (new_time(atime)?, new_time(mtime)?);
        Ok(ViewCtx::set_times_at(
            self,
            &fd,
            follows(path_flags),
            &path,
            times,
        )?)
    }

    fn link_at(
        &mut self,
        fd: Resource<Descriptor>,
        _old_path_flags: PathFlags,
        _old_path: String,
        _new_descriptor: Resource<Descriptor>,
        _new_path: String,
    ) -> Result<(), FsError> {
        Ok(ViewCtx::link_at(self, &fd)?)
    }

    fn open_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
        open_flags: OpenFlags,
        flags: DescriptorFlags,
    ) -> Result<Resource<Descriptor>, FsError> {
        let request = OpenRequest::from(path_flags) | open_flags.into() | flags.into();
        let mutate = flags.contains(DescriptorFlags::MUTATE_DIRECTORY);
        Ok(ViewCtx::open_at(self, &fd, &path, request, mutate)?)
    }

    fn readlink_at(&mut self, fd: Resource<Descriptor>, path: String) -> Result<String, FsError> {
        Ok(ViewCtx::readlink_at(self, &fd, &path)?)
    }

    fn remove_directory_at(
        &mut self,
        fd: Resource<Descriptor>,
        path: String,
    ) -> Result<(), FsError> {
        Ok(ViewCtx::remove_directory_at(self, &fd, &path)?)
    }

    fn rename_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path: String,
        new_descriptor: Resource<Descriptor>,
        new_path: String,
    ) -> Result<(), FsError> {
        Ok(ViewCtx::rename_at(
            self,
            &fd,
            &old_path,
            &new_descriptor,
            &new_path,
        )?)
    }

    fn symlink_at(
        &mut self,
        fd: Resource<Descriptor>,
        _old_path: String,
        _new_path: String,
    ) -> Result<(), FsError> {
        Ok(ViewCtx::symlink_at(self, &fd)?)
    }

    fn unlink_file_at(&mut self, fd: Resource<Descriptor>, path: String) -> Result<(), FsError> {
        Ok(ViewCtx::unlink_file_at(self, &fd, &path)?)
    }

    fn is_same_object(
        &mut self,
        a: Resource<Descriptor>,
        b: Resource<Descriptor>,
    ) -> wasmtime::Result<bool> {
        ViewCtx::is_same_object(self, &a, &b)
    }

    fn metadata_hash(&mut self, fd: Resource<Descriptor>) -> Result<MetadataHashValue, FsError> {
        Ok(hash_value(&ViewCtx::stat(self, &fd)?))
    }

    fn metadata_hash_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
    ) -> Result<MetadataHashValue, FsError> {
        let stat = ViewCtx::stat_at(self, &fd, follows(path_flags), &path)?;
        Ok(hash_value(&stat))
    }

    fn drop(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        self.drop_descriptor(fd)
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
        let end = write_staged(&self.file, &self.staged, &bytes, self.position)
            .map_err(|e| StreamError::LastOperationFailed(e.into()))?;
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
