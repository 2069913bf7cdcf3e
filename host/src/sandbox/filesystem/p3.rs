//! `wasi:filesystem@0.3` over the view: the 0.3 bindings' types translated to and from the operations
//! in `mod.rs`. Reads, writes and listings are 0.3 streams: a read is a producer that `pread`s straight
//! into the guest's buffer, a write a consumer that `pwrite`s from it into the staged file (counted
//! against the staging limit as 0.2's writes are), and a listing the view's snapshot of the directory.
//! Every other method is an `async func` that does its view work at once (the view never blocks).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use bytes::BytesMut;
use tokio::sync::oneshot;
use wasmtime::StoreContextMut;
use wasmtime::component::{
    Access, Accessor, Destination, FutureReader, Resource, Source, StreamConsumer, StreamProducer,
    StreamReader, StreamResult,
};
use wasmtime_wasi::p3::bindings::clocks::system_clock::Instant;

use super::{
    Descriptor, Failure, NewTime, ViewCtx, ViewFilesystem, metadata_hash, read_at, write_staged,
};
use crate::resolve::EntryKind;
use crate::sandbox::bindings::view_0_3::wasi::filesystem::preopens;
use crate::sandbox::bindings::view_0_3::wasi::filesystem::types::{
    self, Advice, DescriptorFlags, DescriptorStat, DescriptorType, DirectoryEntry, ErrorCode,
    MetadataHashValue, NewTimestamp, OpenFlags, PathFlags,
};
use crate::view::staging::Staged;
use crate::view::{OpenRequest, Stat, ViewError};

/// The error type of the generated bindings: an `error-code` for the guest, or a trap.
pub(crate) type FsError = wasmtime_wasi::TrappableError<ErrorCode>;

/// Most bytes a read stream moves into the guest at once (the guest's own buffer may be smaller).
const READ_CHUNK: usize = 64 * 1024;

super::view_error_codes!(ErrorCode);

impl From<Failure> for FsError {
    fn from(failure: Failure) -> FsError {
        match failure {
            Failure::Trap(error) => FsError::trap(error),
            failure => code(failure).into(),
        }
    }
}

/// The `error-code` for a failure the guest is told of (a trap is `io`: it never reaches a guest).
fn code(failure: Failure) -> ErrorCode {
    match failure {
        Failure::View(error) => ErrorCode::from(error),
        Failure::BadDescriptor => ErrorCode::BadDescriptor,
        Failure::Overflow => ErrorCode::Overflow,
        Failure::Trap(_) => ErrorCode::Io,
    }
}

// 0.3 has no `unknown` type: its catch-all is `other`.
super::descriptor_types!(DescriptorType, DescriptorType::Other(None));
super::open_request_flags!(PathFlags, OpenFlags, DescriptorFlags);

fn instant(ns: Option<i128>) -> Option<Instant> {
    let ns = ns?;
    Some(Instant {
        seconds: i64::try_from(ns.div_euclid(1_000_000_000)).ok()?,
        nanoseconds: u32::try_from(ns.rem_euclid(1_000_000_000)).ok()?,
    })
}

fn descriptor_stat(stat: Stat) -> DescriptorStat {
    DescriptorStat {
        type_: descriptor_type(stat.kind),
        link_count: stat.nlink,
        size: stat.size,
        data_access_timestamp: instant(stat.atime_ns),
        data_modification_timestamp: instant(stat.mtime_ns),
        status_change_timestamp: instant(stat.ctime_ns),
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
        NewTimestamp::Timestamp(t) => {
            let nanos = Duration::from_nanos(u64::from(t.nanoseconds.min(999_999_999)));
            let at = match u64::try_from(t.seconds) {
                Ok(seconds) => SystemTime::UNIX_EPOCH
                    .checked_add(Duration::from_secs(seconds))
                    .and_then(|at| at.checked_add(nanos)),
                Err(_) => SystemTime::UNIX_EPOCH
                    .checked_sub(Duration::from_secs(t.seconds.unsigned_abs()))
                    .and_then(|at| at.checked_add(nanos)),
            };
            at.map(Some).ok_or(Failure::Overflow)
        }
    }
}

/// Runs `op` on the call's view, between two awaits of the guest (no view borrow is held across one).
fn on_view<U, R>(
    store: &Accessor<U, ViewFilesystem>,
    op: impl FnOnce(&mut ViewCtx<'_>) -> Result<R, Failure>,
) -> Result<R, FsError> {
    store.with(|mut access| Ok(op(&mut access.get())?))
}

/// An already resolved `future<result<_, error-code>>`.
fn resolved<U>(
    store: &mut Access<'_, U, ViewFilesystem>,
    result: Result<(), ErrorCode>,
) -> wasmtime::Result<FutureReader<Result<(), ErrorCode>>> {
    FutureReader::new(store, async move { Ok::<_, wasmtime::Error>(result) })
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
}

impl types::HostDescriptor for ViewCtx<'_> {
    fn drop(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        self.drop_descriptor(fd)
    }
}

impl<U> types::HostDescriptorWithStore<U> for ViewFilesystem {
    fn read_via_stream(
        mut store: Access<'_, U, Self>,
        fd: Resource<Descriptor>,
        offset: u64,
    ) -> wasmtime::Result<(StreamReader<u8>, FutureReader<Result<(), ErrorCode>>)> {
        let file = match store.get().readable_file(&fd) {
            Ok(file) => file,
            Err(Failure::Trap(error)) => return Err(error),
            Err(failure) => {
                let stream = StreamReader::new(&mut store, std::iter::empty())?;
                return Ok((stream, resolved(&mut store, Err(code(failure)))?));
            }
        };
        let (result, done) = oneshot::channel();
        let producer = FileReader {
            file: file.file,
            offset,
            result: Some(result),
        };
        Ok((
            StreamReader::new(&mut store, producer)?,
            FutureReader::new(&mut store, done)?,
        ))
    }

    fn write_via_stream(
        store: Access<'_, U, Self>,
        fd: Resource<Descriptor>,
        data: StreamReader<u8>,
        offset: u64,
    ) -> wasmtime::Result<FutureReader<Result<(), ErrorCode>>> {
        write_into(store, &fd, data, Some(offset))
    }

    fn append_via_stream(
        store: Access<'_, U, Self>,
        fd: Resource<Descriptor>,
        data: StreamReader<u8>,
    ) -> wasmtime::Result<FutureReader<Result<(), ErrorCode>>> {
        write_into(store, &fd, data, None)
    }

    async fn advise(
        store: &Accessor<U, Self>,
        fd: Resource<Descriptor>,
        _offset: u64,
        _length: u64,
        _advice: Advice,
    ) -> Result<(), FsError> {
        on_view(store, |ctx| ctx.advise(&fd))
    }

    async fn sync_data(store: &Accessor<U, Self>, fd: Resource<Descriptor>) -> Result<(), FsError> {
        // As 0.2's `sync`: staged files reach the disk when the journal applies them.
        on_view(store, |ctx| ctx.descriptor(&fd))
    }

    async fn get_flags(
        store: &Accessor<U, Self>,
        fd: Resource<Descriptor>,
    ) -> Result<DescriptorFlags, FsError> {
        let flags = on_view(store, |ctx| ctx.flags(&fd))?;
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

    async fn get_type(
        store: &Accessor<U, Self>,
        fd: Resource<Descriptor>,
    ) -> Result<DescriptorType, FsError> {
        Ok(descriptor_type(on_view(store, |ctx| ctx.kind(&fd))?))
    }

    async fn set_size(
        store: &Accessor<U, Self>,
        fd: Resource<Descriptor>,
        size: u64,
    ) -> Result<(), FsError> {
        on_view(store, |ctx| ctx.set_size(&fd, size))
    }

    async fn set_times(
        store: &Accessor<U, Self>,
        fd: Resource<Descriptor>,
        atime: NewTimestamp,
        mtime: NewTimestamp,
    ) -> Result<(), FsError> {
        let (atime, mtime) = (new_time(atime)?, new_time(mtime)?);
        on_view(store, |ctx| ctx.set_times(&fd, atime, mtime))
    }

    fn read_directory(
        mut store: Access<'_, U, Self>,
        fd: Resource<Descriptor>,
    ) -> wasmtime::Result<(
        StreamReader<DirectoryEntry>,
        FutureReader<Result<(), ErrorCode>>,
    )> {
        let (entries, result) = match store.get().read_directory(&fd) {
            Ok(entries) => (entries, Ok(())),
            Err(Failure::Trap(error)) => return Err(error),
            Err(failure) => (Vec::new(), Err(code(failure))),
        };
        let entries: Vec<DirectoryEntry> = entries
            .into_iter()
            .map(|(name, kind)| DirectoryEntry {
                type_: descriptor_type(kind),
                name,
            })
            .collect();
        Ok((
            StreamReader::new(&mut store, entries)?,
            resolved(&mut store, result)?,
        ))
    }

    async fn sync(store: &Accessor<U, Self>, fd: Resource<Descriptor>) -> Result<(), FsError> {
        on_view(store, |ctx| ctx.descriptor(&fd))
    }

    async fn create_directory_at(
        store: &Accessor<U, Self>,
        fd: Resource<Descriptor>,
        path: String,
    ) -> Result<(), FsError> {
        on_view(store, |ctx| ctx.create_directory_at(&fd, &path))
    }

    async fn stat(
        store: &Accessor<U, Self>,
        fd: Resource<Descriptor>,
    ) -> Result<DescriptorStat, FsError> {
        Ok(descriptor_stat(on_view(store, |ctx| ctx.stat(&fd))?))
    }

    async fn stat_at(
        store: &Accessor<U, Self>,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
    ) -> Result<DescriptorStat, FsError> {
        let stat = on_view(store, |ctx| ctx.stat_at(&fd, follows(path_flags), &path))?;
        Ok(descriptor_stat(stat))
    }

    async fn set_times_at(
        store: &Accessor<U, Self>,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
        atime: NewTimestamp,
        mtime: NewTimestamp,
    ) -> Result<(), FsError> {
        let times = (new_time(atime)?, new_time(mtime)?);
        on_view(store, |ctx| {
            ctx.set_times_at(&fd, follows(path_flags), &path, times)
        })
    }

    async fn link_at(
        store: &Accessor<U, Self>,
        fd: Resource<Descriptor>,
        _old_path_flags: PathFlags,
        _old_path: String,
        _new_descriptor: Resource<Descriptor>,
        _new_path: String,
    ) -> Result<(), FsError> {
        on_view(store, |ctx| ctx.link_at(&fd))
    }

    async fn open_at(
        store: &Accessor<U, Self>,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
        open_flags: OpenFlags,
        flags: DescriptorFlags,
    ) -> Result<Resource<Descriptor>, FsError> {
        let request = OpenRequest::from(path_flags) | open_flags.into() | flags.into();
        let mutate = flags.contains(DescriptorFlags::MUTATE_DIRECTORY);
        on_view(store, |ctx| ctx.open_at(&fd, &path, request, mutate))
    }

    async fn readlink_at(
        store: &Accessor<U, Self>,
        fd: Resource<Descriptor>,
        path: String,
    ) -> Result<String, FsError> {
        on_view(store, |ctx| ctx.readlink_at(&fd, &path))
    }

    async fn remove_directory_at(
        store: &Accessor<U, Self>,
        fd: Resource<Descriptor>,
        path: String,
    ) -> Result<(), FsError> {
        on_view(store, |ctx| ctx.remove_directory_at(&fd, &path))
    }

    async fn rename_at(
        store: &Accessor<U, Self>,
        fd: Resource<Descriptor>,
        old_path: String,
        new_descriptor: Resource<Descriptor>,
        new_path: String,
    ) -> Result<(), FsError> {
        on_view(store, |ctx| {
            ctx.rename_at(&fd, &old_path, &new_descriptor, &new_path)
        })
    }

    async fn symlink_at(
        store: &Accessor<U, Self>,
        fd: Resource<Descriptor>,
        _old_path: String,
        _new_path: String,
    ) -> Result<(), FsError> {
        on_view(store, |ctx| ctx.symlink_at(&fd))
    }

    async fn unlink_file_at(
        store: &Accessor<U, Self>,
        fd: Resource<Descriptor>,
        path: String,
    ) -> Result<(), FsError> {
        on_view(store, |ctx| ctx.unlink_file_at(&fd, &path))
    }

    async fn is_same_object(
        store: &Accessor<U, Self>,
        fd: Resource<Descriptor>,
        other: Resource<Descriptor>,
    ) -> wasmtime::Result<bool> {
        store.with(|mut access| access.get().is_same_object(&fd, &other))
    }

    async fn metadata_hash(
        store: &Accessor<U, Self>,
        fd: Resource<Descriptor>,
    ) -> Result<MetadataHashValue, FsError> {
        Ok(hash_value(&on_view(store, |ctx| ctx.stat(&fd))?))
    }

    async fn metadata_hash_at(
        store: &Accessor<U, Self>,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
    ) -> Result<MetadataHashValue, FsError> {
        let stat = on_view(store, |ctx| ctx.stat_at(&fd, follows(path_flags), &path))?;
        Ok(hash_value(&stat))
    }
}

/// `write-via-stream` (`at` an offset) and `append-via-stream` (`None`): the guest's stream piped into
/// the staged file, or closed at once with the error when the descriptor may not be written.
fn write_into<U>(
    mut store: Access<'_, U, ViewFilesystem>,
    fd: &Resource<Descriptor>,
    mut data: StreamReader<u8>,
    at: Option<u64>,
) -> wasmtime::Result<FutureReader<Result<(), ErrorCode>>> {
    match store.get().writable_file(fd) {
        Ok((file, staged)) => {
            let (result, done) = oneshot::channel();
            let consumer = FileWriter {
                file: file.file,
                staged,
                at,
                result: Some(result),
            };
            data.pipe(&mut store, consumer)?;
            FutureReader::new(&mut store, done)
        }
        Err(Failure::Trap(error)) => Err(error),
        Err(failure) => {
            data.close(&mut store)?;
            resolved(&mut store, Err(code(failure)))
        }
    }
}

/// A `stream<u8>` of a view file from an offset: each read `pread`s into the guest's buffer.
struct FileReader {
    file: Arc<std::fs::File>,
    offset: u64,
    /// Resolves the read's future: `Ok` at the end of the file (or when the guest drops the stream).
    result: Option<oneshot::Sender<Result<(), ErrorCode>>>,
}

impl FileReader {
    fn close(&mut self, result: Result<(), ErrorCode>) -> StreamResult {
        if let Some(sender) = self.result.take() {
            let _ = sender.send(result);
        }
        StreamResult::Dropped
    }
}

impl Drop for FileReader {
    fn drop(&mut self) {
        self.close(Ok(()));
    }
}

impl<D> StreamProducer<D> for FileReader {
    type Item = u8;
    type Buffer = BytesMut;

    fn poll_produce<'a>(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        store: StoreContextMut<'a, D>,
        dst: Destination<'a, u8, BytesMut>,
        _finish: bool,
    ) -> Poll<wasmtime::Result<StreamResult>> {
        let mut dst = dst.as_direct(store, READ_CHUNK);
        let buffer = dst.remaining();
        if buffer.is_empty() {
            return Poll::Ready(Ok(StreamResult::Completed));
        }
        let result = match read_at(&self.file, buffer, self.offset) {
            Ok(0) => self.close(Ok(())),
            Ok(n) => match self.offset.checked_add(n as u64) {
                Some(next) => {
                    dst.mark_written(n);
                    self.offset = next;
                    StreamResult::Completed
                }
                None => self.close(Err(ErrorCode::Overflow)),
            },
            Err(e) => self.close(Err(ErrorCode::from(ViewError::from(e)))),
        };
        Poll::Ready(Ok(result))
    }
}

/// A guest's `stream<u8>` into a staged file, at an offset or appended: each write `pwrite`s from the
/// guest's buffer, counted against the staging limit.
struct FileWriter {
    file: Arc<std::fs::File>,
    staged: Staged,
    /// `None`: append.
    at: Option<u64>,
    /// Resolves the write's future: `Ok` when the guest ends its stream, else the error that ended it.
    result: Option<oneshot::Sender<Result<(), ErrorCode>>>,
}

impl Drop for FileWriter {
    fn drop(&mut self) {
        if let Some(sender) = self.result.take() {
            let _ = sender.send(Ok(()));
        }
    }
}

impl<D> StreamConsumer<D> for FileWriter {
    type Item = u8;

    fn poll_consume(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        store: StoreContextMut<D>,
        src: Source<u8>,
        _finish: bool,
    ) -> Poll<wasmtime::Result<StreamResult>> {
        let mut src = src.as_direct(store);
        let bytes = src.remaining();
        let written = bytes.len();
        let result = match write_staged(&self.file, &self.staged, bytes, self.at) {
            Ok(end) => {
                src.mark_read(written);
                if let Some(at) = &mut self.at {
                    *at = end;
                }
                StreamResult::Completed
            }
            Err(e) => {
                let code = if e.kind() == io::ErrorKind::StorageFull {
                    ErrorCode::InsufficientSpace
                } else {
                    ErrorCode::from(ViewError::from(e))
                };
                if let Some(sender) = self.result.take() {
                    let _ = sender.send(Err(code));
                }
                StreamResult::Dropped
            }
        };
        Poll::Ready(Ok(result))
    }
}
