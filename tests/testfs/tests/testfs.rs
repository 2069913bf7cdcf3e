//! The test file system, mounted and used through system calls as the project's tests use it.
//!
//! These tests need root and `/dev/fuse`.
// The file system mounts only on Linux (`/dev/fuse`).
#![cfg(target_os = "linux")]
// The file system under test is a temporary mount outside any root the workspace's disallowed-methods
// lint guards: its tests open, rename and remove files there with std::fs.
#![allow(clippy::disallowed_methods)]

use std::ffi::{CStr, CString};
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, SystemTime};

use turngate_testfs::{At, Cut, Keep, OpKind, Options, TestFs, TraceOp, When, shared};

const FOLDING: Options = Options {
    folding: true,
    power_loss: false,
    plain_renames: false,
    lagging_renames: false,
};
const PLAIN: Options = Options {
    folding: false,
    power_loss: false,
    plain_renames: false,
    lagging_renames: false,
};
const CRASHABLE: Options = Options {
    folding: false,
    power_loss: true,
    plain_renames: false,
    lagging_renames: false,
};

fn mount(options: Options) -> TestFs {
    TestFs::mount(options).expect("mounting the test file system (needs root and /dev/fuse)")
}

fn errno<T: std::fmt::Debug>(result: io::Result<T>) -> i32 {
    result
        .expect_err("the call should fail")
        .raw_os_error()
        .unwrap_or(0)
}

fn cstring(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).expect("a path without NUL")
}

fn check(rc: libc::c_int) -> io::Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn renameat2(from: &Path, to: &Path, flags: libc::c_uint) -> io::Result<()> {
    let (from, to) = (cstring(from), cstring(to));
    // SAFETY: both paths are NUL-terminated strings that outlive the call.
    check(unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            flags,
        )
    })
}

fn mknod(path: &Path, mode: libc::mode_t, dev: libc::dev_t) -> io::Result<()> {
    let path = cstring(path);
    // SAFETY: the path is a NUL-terminated string that outlives the call.
    check(unsafe { libc::mknod(path.as_ptr(), mode, dev) })
}

/// A directory's entries as readdir returns them, `.` and `..` included: (name, d_ino).
fn readdir(dir: &Path) -> Vec<(String, u64)> {
    let path = cstring(dir);
    let mut entries = Vec::new();
    // SAFETY: the stream is used only between a successful opendir and its closedir, and each entry
    // only before the next readdir.
    unsafe {
        let stream = libc::opendir(path.as_ptr());
        assert!(
            !stream.is_null(),
            "opendir {}: {}",
            dir.display(),
            io::Error::last_os_error()
        );
        loop {
            let entry = libc::readdir(stream);
            if entry.is_null() {
                break;
            }
            let name = CStr::from_ptr((*entry).d_name.as_ptr())
                .to_string_lossy()
                .into_owned();
            entries.push((name, (*entry).d_ino));
        }
        libc::closedir(stream);
    }
    entries
}

fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("read_dir")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

/// Write a file and fsync it.
fn write_synced(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = File::create(path)?;
    file.write_all(bytes)?;
    file.sync_all()
}

fn fsync_dir(path: &Path) -> io::Result<()> {
    File::open(path)?.sync_all()
}

fn mtime_ns(path: &Path) -> i128 {
    let metadata = fs::metadata(path).unwrap();
    i128::from(metadata.mtime()) * 1_000_000_000 + i128::from(metadata.mtime_nsec())
}

#[test]
fn folding_matches_any_case_and_normalization_and_keeps_the_spelling() {
    let fs = mount(FOLDING);
    let root = fs.path();
    fs::write(root.join(".env"), "KEY=1").unwrap();
    assert_eq!(fs::read_to_string(root.join(".ENV")).unwrap(), "KEY=1");
    assert_eq!(
        fs::metadata(root.join(".Env")).unwrap().ino(),
        fs::metadata(root.join(".env")).unwrap().ino()
    );

    let nfc = "caf\u{e9}.txt";
    let nfd = "cafe\u{301}.txt";
    fs::write(root.join(nfc), "cr\u{e8}me").unwrap();
    assert_eq!(fs::read_to_string(root.join(nfd)).unwrap(), "cr\u{e8}me");
    assert_eq!(
        fs::read_to_string(root.join("CAF\u{c9}.TXT")).unwrap(),
        "cr\u{e8}me"
    );
    fs::write(root.join(nfd), "lait").unwrap();
    assert_eq!(fs::read_to_string(root.join(nfc)).unwrap(), "lait");

    fs::create_dir(root.join("MixedCase")).unwrap();
    fs::write(root.join("mixedcase/ReadMe.MD"), "doc").unwrap();
    assert_eq!(names(root), [".env", "MixedCase", nfc]);
    assert_eq!(names(&root.join("MIXEDCASE")), ["ReadMe.MD"]);
    assert_eq!(
        fs::read_to_string(root.join("MIXEDCASE/readme.md")).unwrap(),
        "doc"
    );
}

#[test]
fn folding_refuses_a_second_spelling_of_a_name() {
    let fs = mount(FOLDING);
    let root = fs.path();
    fs::write(root.join("a.txt"), "a").unwrap();
    let exclusive = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(root.join("A.txt"));
    assert_eq!(errno(exclusive), libc::EEXIST);
    assert_eq!(errno(fs::create_dir(root.join("A.TXT"))), libc::EEXIST);
    assert_eq!(
        errno(std::os::unix::fs::symlink("x", root.join("A.Txt"))),
        libc::EEXIST
    );
    assert_eq!(
        errno(fs::hard_link(root.join("a.txt"), root.join("A.tXt"))),
        libc::EEXIST
    );
    // Without O_EXCL, creating opens the file that has the name.
    OpenOptions::new()
        .append(true)
        .create(true)
        .open(root.join("A.TXT"))
        .unwrap()
        .write_all(b"b")
        .unwrap();
    assert_eq!(names(root), ["a.txt"]);
    assert_eq!(fs::read_to_string(root.join("a.txt")).unwrap(), "ab");

    fs::create_dir(root.join("dir")).unwrap();
    assert_eq!(errno(fs::create_dir(root.join("DIR"))), libc::EEXIST);
}

#[test]
fn folding_rename_over_a_case_variant_replaces_it_and_takes_the_new_spelling() {
    let fs = mount(FOLDING);
    let root = fs.path();
    fs::write(root.join("readme.md"), "old").unwrap();
    fs::write(root.join("draft"), "new").unwrap();
    assert_eq!(
        errno(renameat2(
            &root.join("draft"),
            &root.join("ReadMe.md"),
            libc::RENAME_NOREPLACE
        )),
        libc::EEXIST
    );
    fs::rename(root.join("draft"), root.join("README.MD")).unwrap();
    assert_eq!(names(root), ["README.MD"]);
    assert_eq!(fs::read_to_string(root.join("readme.md")).unwrap(), "new");
    // A rename between two spellings of the same file succeeds (the kernel makes it a no-op).
    fs::rename(root.join("README.MD"), root.join("Readme.md")).unwrap();
    assert_eq!(fs::read_to_string(root.join("README.md")).unwrap(), "new");
}

#[test]
fn folding_reaches_one_directory_through_every_spelling() {
    let fs = mount(FOLDING);
    let root = fs.path();
    fs::create_dir(root.join("Dir")).unwrap();
    fs::create_dir(root.join("DIR/Sub")).unwrap();
    // A directory held open while other spellings walk through it.
    let held = File::open(root.join("dir")).unwrap();
    for spelling in ["Dir", "dir", "DIR", "dIR"] {
        fs::write(root.join(spelling).join("sub/f"), spelling).unwrap();
        assert_eq!(
            fs::read_to_string(root.join("DIR/SUB/F")).unwrap(),
            spelling
        );
        assert_eq!(
            fs::read_to_string(root.join("dir/sub/f")).unwrap(),
            spelling
        );
    }
    held.sync_all().unwrap();
    assert_eq!(names(root), ["Dir"]);
    assert_eq!(names(&root.join("dir")), ["Sub"]);
    assert_eq!(names(&root.join("dir/sub")), ["f"]);
    fs::rename(root.join("DIR/sub/F"), root.join("dir/G")).unwrap();
    assert_eq!(names(&root.join("Dir")), ["G", "Sub"]);
    fs::remove_dir(root.join("dir/SUB")).unwrap();
    fs::remove_file(root.join("DIR/g")).unwrap();
    fs::remove_dir(root.join("dIr")).unwrap();
    assert!(names(root).is_empty());
}

#[test]
fn without_folding_names_are_exact() {
    let fs = mount(PLAIN);
    let root = fs.path();
    fs::write(root.join(".env"), "KEY=1").unwrap();
    assert_eq!(errno(fs::metadata(root.join(".ENV"))), libc::ENOENT);
    fs::write(root.join(".ENV"), "other").unwrap();
    assert_eq!(names(root), [".ENV", ".env"]);
    assert_eq!(errno(fs::metadata(root.join("cafe\u{301}"))), libc::ENOENT);
}

#[test]
fn files_read_and_write_at_offsets_with_holes_and_truncate() {
    let fs = mount(PLAIN);
    let path = fs.path().join("f");
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&path)
        .unwrap();
    file.write_all_at(b"abc", 0).unwrap();
    file.write_all_at(b"xyz", 10).unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"abc\0\0\0\0\0\0\0xyz");
    let metadata = fs::metadata(&path).unwrap();
    assert_eq!(
        (metadata.len(), metadata.blocks(), metadata.blksize()),
        (13, 8, 4096)
    );
    let mut middle = [0xff; 4];
    file.read_exact_at(&mut middle, 2).unwrap();
    assert_eq!(middle, *b"c\0\0\0");
    file.set_len(2).unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"ab");
    file.set_len(5).unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"ab\0\0\0");
    let mut appending = OpenOptions::new().append(true).open(&path).unwrap();
    appending.write_all(b"!").unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"ab\0\0\0!");
    // Truncating on open.
    fs::write(&path, "short").unwrap();
    assert_eq!(fs::read_to_string(&path).unwrap(), "short");
    // A file removed while open lives until it is closed.
    let mut open = File::open(&path).unwrap();
    fs::remove_file(&path).unwrap();
    assert_eq!(open.metadata().unwrap().nlink(), 0);
    let mut text = String::new();
    open.read_to_string(&mut text).unwrap();
    assert_eq!(text, "short");
    assert_eq!(errno(fs::metadata(&path)), libc::ENOENT);
}

#[test]
fn copy_fallocate_and_concurrent_use_of_a_shared_mount() {
    let fs = shared(PLAIN);
    let dir = fs.path().join("concurrent");
    fs::create_dir_all(&dir).unwrap();
    let workers: Vec<_> = (0..4)
        .map(|worker| {
            let dir = dir.join(format!("w{worker}"));
            std::thread::spawn(move || {
                fs::create_dir(&dir).unwrap();
                for n in 0..50 {
                    let path = dir.join(format!("{n}"));
                    fs::write(&path, format!("{worker}:{n}")).unwrap();
                    fs::copy(&path, dir.join(format!("{n}.copy"))).unwrap();
                    fs::rename(
                        dir.join(format!("{n}.copy")),
                        dir.join(format!("{n}.moved")),
                    )
                    .unwrap();
                    assert_eq!(
                        fs::read_to_string(dir.join(format!("{n}.moved"))).unwrap(),
                        format!("{worker}:{n}")
                    );
                }
                assert_eq!(fs::read_dir(&dir).unwrap().count(), 100);
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }

    let file = File::create(dir.join("allocated")).unwrap();
    // SAFETY: plain system calls on a descriptor that outlives them.
    check(unsafe { libc::fallocate(std::os::fd::AsRawFd::as_raw_fd(&file), 0, 0, 10_000) })
        .unwrap();
    assert_eq!(file.metadata().unwrap().len(), 10_000);
    assert_eq!(fs::read(dir.join("allocated")).unwrap(), vec![0; 10_000]);
}

#[test]
fn links_directories_and_their_counts() {
    let fs = mount(PLAIN);
    let root = fs.path();
    fs::write(root.join("f"), "data").unwrap();
    fs::hard_link(root.join("f"), root.join("g")).unwrap();
    let (f, g) = (
        fs::metadata(root.join("f")).unwrap(),
        fs::metadata(root.join("g")).unwrap(),
    );
    assert_eq!((f.ino(), f.nlink(), g.nlink()), (g.ino(), 2, 2));
    fs::remove_file(root.join("f")).unwrap();
    assert_eq!(fs::metadata(root.join("g")).unwrap().nlink(), 1);
    assert_eq!(
        errno(fs::hard_link(root.join("g"), root.join("g"))),
        libc::EEXIST
    );

    assert_eq!(fs::metadata(root).unwrap().nlink(), 2);
    fs::create_dir(root.join("d")).unwrap();
    fs::create_dir(root.join("d/s1")).unwrap();
    fs::create_dir(root.join("d/s2")).unwrap();
    fs::write(root.join("d/file"), "").unwrap();
    assert_eq!(fs::metadata(root.join("d")).unwrap().nlink(), 4);
    assert_eq!(fs::metadata(root).unwrap().nlink(), 3);
    fs::remove_dir(root.join("d/s1")).unwrap();
    assert_eq!(fs::metadata(root.join("d")).unwrap().nlink(), 3);
    assert_eq!(errno(fs::remove_dir(root.join("d"))), libc::ENOTEMPTY);
    assert_eq!(errno(fs::remove_file(root.join("d"))), libc::EISDIR);
    assert_eq!(errno(fs::remove_dir(root.join("g"))), libc::ENOTDIR);
    // Moving a directory moves its `..`.
    fs::rename(root.join("d/s2"), root.join("s2")).unwrap();
    assert_eq!(fs::metadata(root.join("d")).unwrap().nlink(), 2);
    assert_eq!(fs::metadata(root).unwrap().nlink(), 4);

    std::os::unix::fs::symlink("d/file", root.join("link")).unwrap();
    assert_eq!(
        fs::read_link(root.join("link")).unwrap(),
        Path::new("d/file")
    );
    assert!(
        fs::symlink_metadata(root.join("link"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(fs::symlink_metadata(root.join("link")).unwrap().len(), 6);
    assert_eq!(fs::read_to_string(root.join("link")).unwrap(), "");
}

#[test]
fn rename_replaces_refuses_and_exchanges() {
    let fs = mount(PLAIN);
    let root = fs.path();
    let at = |name: &str| root.join(name);
    fs::write(at("file"), "file").unwrap();
    fs::write(at("other"), "other").unwrap();
    fs::create_dir(at("empty")).unwrap();
    fs::create_dir(at("full")).unwrap();
    fs::write(at("full/x"), "x").unwrap();

    assert_eq!(errno(fs::rename(at("file"), at("empty"))), libc::EISDIR);
    assert_eq!(errno(fs::rename(at("empty"), at("file"))), libc::ENOTDIR);
    assert_eq!(errno(fs::rename(at("empty"), at("full"))), libc::ENOTEMPTY);
    assert_eq!(errno(fs::rename(at("full"), at("full/sub"))), libc::EINVAL);
    assert_eq!(errno(fs::rename(at("missing"), at("x"))), libc::ENOENT);
    assert_eq!(
        errno(renameat2(&at("file"), &at("other"), libc::RENAME_NOREPLACE)),
        libc::EEXIST
    );
    assert_eq!(
        errno(renameat2(
            &at("file"),
            &at("missing"),
            libc::RENAME_EXCHANGE
        )),
        libc::ENOENT
    );

    let other_ino = fs::metadata(at("other")).unwrap().ino();
    renameat2(&at("file"), &at("other"), libc::RENAME_EXCHANGE).unwrap();
    assert_eq!(fs::read_to_string(at("file")).unwrap(), "other");
    assert_eq!(fs::read_to_string(at("other")).unwrap(), "file");
    assert_eq!(fs::metadata(at("file")).unwrap().ino(), other_ino);
    renameat2(&at("full"), &at("file"), libc::RENAME_EXCHANGE).unwrap();
    assert_eq!(fs::read_to_string(at("file/x")).unwrap(), "x");

    renameat2(&at("other"), &at("new"), libc::RENAME_NOREPLACE).unwrap();
    fs::rename(at("new"), at("full")).unwrap();
    assert_eq!(fs::read_to_string(at("full")).unwrap(), "file");
    fs::rename(at("file"), at("empty")).unwrap();
    assert_eq!(names(root), ["empty", "full"]);
    assert_eq!(names(&at("empty")), ["x"]);
    assert_eq!(fs::metadata(root).unwrap().nlink(), 3);
}

#[test]
fn special_files_attributes_and_times() {
    let fs = mount(PLAIN);
    let root = fs.path();
    mknod(&root.join("fifo"), libc::S_IFIFO | 0o600, 0).unwrap();
    mknod(&root.join("socket"), libc::S_IFSOCK | 0o600, 0).unwrap();
    let null = libc::makedev(1, 3);
    mknod(&root.join("null"), libc::S_IFCHR | 0o666, null).unwrap();
    mknod(
        &root.join("block"),
        libc::S_IFBLK | 0o600,
        libc::makedev(7, 0),
    )
    .unwrap();
    assert!(
        fs::metadata(root.join("fifo"))
            .unwrap()
            .file_type()
            .is_fifo()
    );
    assert!(
        fs::metadata(root.join("socket"))
            .unwrap()
            .file_type()
            .is_socket()
    );
    assert!(
        fs::metadata(root.join("block"))
            .unwrap()
            .file_type()
            .is_block_device()
    );
    let device = fs::metadata(root.join("null")).unwrap();
    assert!(device.file_type().is_char_device());
    assert_eq!(device.rdev(), null);

    let path = root.join("f");
    fs::write(&path, "x").unwrap();
    let metadata = fs::metadata(&path).unwrap();
    // SAFETY: geteuid and getegid cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    assert_eq!((metadata.uid(), metadata.gid()), (uid, gid));
    assert_eq!(metadata.mode() & libc::S_IFMT, libc::S_IFREG);

    fs::set_permissions(&path, fs::Permissions::from_mode(0o4751)).unwrap();
    assert_eq!(fs::metadata(&path).unwrap().mode() & 0o7777, 0o4751);
    std::os::unix::fs::chown(&path, Some(1000), Some(1001)).unwrap();
    let metadata = fs::metadata(&path).unwrap();
    assert_eq!((metadata.uid(), metadata.gid()), (1000, 1001));

    let times = [
        libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        libc::timespec {
            tv_sec: 1_000_000_000,
            tv_nsec: 123_456_789,
        },
    ];
    let c_path = cstring(&path);
    // SAFETY: the path and the two timespecs outlive the call.
    check(unsafe { libc::utimensat(libc::AT_FDCWD, c_path.as_ptr(), times.as_ptr(), 0) }).unwrap();
    let metadata = fs::metadata(&path).unwrap();
    assert_eq!(
        (metadata.mtime(), metadata.mtime_nsec()),
        (1_000_000_000, 123_456_789)
    );
    let accessed = metadata.accessed().unwrap();
    assert!(
        SystemTime::now()
            .duration_since(accessed)
            .unwrap_or_default()
            < Duration::from_secs(60)
    );

    // Writing moves mtime and ctime on; so does an entry change for its directory.
    let before = mtime_ns(root);
    std::thread::sleep(Duration::from_millis(5));
    fs::write(&path, "y").unwrap();
    assert!(fs::metadata(&path).unwrap().mtime() > 1_000_000_000);
    fs::write(root.join("g"), "").unwrap();
    assert!(mtime_ns(root) > before);

    // ioctl reaches the file system, which knows none.
    let file = File::open(&path).unwrap();
    let mut flags: libc::c_long = 0;
    // SAFETY: FS_IOC_GETFLAGS writes one long to the pointer, which outlives the call.
    let rc = unsafe {
        libc::ioctl(
            std::os::fd::AsRawFd::as_raw_fd(&file),
            libc::FS_IOC_GETFLAGS,
            &mut flags,
        )
    };
    assert_eq!(rc, -1);
    assert_eq!(
        io::Error::last_os_error().raw_os_error(),
        Some(libc::ENOTTY)
    );

    let c_root = cstring(root);
    // SAFETY: statvfs fills the struct, which outlives the call.
    let statvfs = unsafe {
        let mut statvfs = std::mem::zeroed::<libc::statvfs>();
        check(libc::statvfs(c_root.as_ptr(), &mut statvfs)).unwrap();
        statvfs
    };
    assert_eq!((statvfs.f_bsize, statvfs.f_namemax), (4096, 255));
    assert!(statvfs.f_bfree > 0 && statvfs.f_bfree < statvfs.f_blocks);
}

#[test]
fn readdir_resumes_across_calls_and_reports_inode_numbers() {
    let fs = mount(PLAIN);
    let root = fs.path();
    fs::create_dir(root.join("d")).unwrap();
    // Long names, so the listing takes several readdir requests.
    let mut made: Vec<String> = (0..400)
        .map(|n| format!("{n:04}-{}", "x".repeat(120)))
        .collect();
    for name in &made {
        fs::write(root.join("d").join(name), "").unwrap();
    }
    fs::create_dir(root.join("d/sub")).unwrap();
    made.push("sub".to_owned());
    made.sort();

    let entries = readdir(&root.join("d"));
    let mut listed: Vec<String> = entries
        .iter()
        .map(|(name, _)| name.clone())
        .filter(|name| !name.starts_with('.'))
        .collect();
    listed.sort();
    assert_eq!(listed, made);
    for (name, ino) in &entries {
        assert_eq!(
            *ino,
            fs::symlink_metadata(root.join("d").join(name))
                .unwrap()
                .ino(),
            "{name}"
        );
    }
    assert!(entries.iter().any(|(name, _)| name == "."));
    assert!(entries.iter().any(|(name, _)| name == ".."));
}

#[test]
fn unsynced_data_comes_back_empty() {
    let mut fs = mount(CRASHABLE);
    let path = fs.path().join("f");
    fs::write(&path, "never synced").unwrap();
    fs.power_loss(Keep::All);
    fs.reboot().unwrap();
    assert_eq!(fs::read(&path).unwrap(), b"");

    // Nothing committed its creation: with only what is committed, it is gone.
    fs::write(fs.path().join("g"), "never synced").unwrap();
    fs.power_loss(Keep::Committed);
    fs.reboot().unwrap();
    assert_eq!(errno(fs::metadata(fs.path().join("g"))), libc::ENOENT);
    assert_eq!(names(fs.path()), ["f"]);
}

#[test]
fn fsynced_data_survives_and_later_writes_do_not() {
    let mut fs = mount(CRASHABLE);
    let root = fs.path().to_owned();
    write_synced(&root.join("f"), b"v1").unwrap();
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(root.join("g"))
        .unwrap();
    file.write_all(b"data").unwrap();
    file.sync_data().unwrap();
    OpenOptions::new()
        .append(true)
        .open(root.join("f"))
        .unwrap()
        .write_all(b" v2")
        .unwrap();
    // A truncate is data too: volatile until an fsync.
    OpenOptions::new()
        .write(true)
        .open(root.join("g"))
        .unwrap()
        .set_len(0)
        .unwrap();
    fs.power_loss(Keep::Committed);
    fs.reboot().unwrap();
    assert_eq!(fs::read(root.join("f")).unwrap(), b"v1");
    assert_eq!(fs::read(root.join("g")).unwrap(), b"data");
}

#[test]
fn a_rename_after_fsync_survives_with_keep_all_or_a_directory_fsync() {
    let mut fs = mount(CRASHABLE);
    let root = fs.path().to_owned();
    let publish = |name: &str, sync_dir: bool| {
        let tmp = root.join(format!("{name}.tmp"));
        write_synced(&tmp, name.as_bytes()).unwrap();
        fs::rename(&tmp, root.join(name)).unwrap();
        if sync_dir {
            fsync_dir(&root).unwrap();
        }
    };

    publish("a", false);
    fs.power_loss(Keep::Committed);
    fs.reboot().unwrap();
    assert_eq!(names(&root), ["a.tmp"]);
    assert_eq!(fs::read(root.join("a.tmp")).unwrap(), b"a");

    publish("b", false);
    fs.power_loss(Keep::All);
    fs.reboot().unwrap();
    assert_eq!(names(&root), ["a.tmp", "b"]);
    assert_eq!(fs::read(root.join("b")).unwrap(), b"b");

    publish("c", true);
    fs.power_loss(Keep::Committed);
    fs.reboot().unwrap();
    assert_eq!(names(&root), ["a.tmp", "b", "c"]);
    assert_eq!(fs::read(root.join("c")).unwrap(), b"c");
}

#[test]
fn rename_exchange_is_journaled_like_any_rename() {
    let mut fs = mount(CRASHABLE);
    let root = fs.path().to_owned();
    fs::write(root.join("a"), "A").unwrap();
    fs::write(root.join("b"), "B").unwrap();
    fs.sync_all();
    let read = |name: &str| fs::read_to_string(root.join(name)).unwrap();
    let exchange = || renameat2(&root.join("a"), &root.join("b"), libc::RENAME_EXCHANGE).unwrap();

    exchange();
    fs.power_loss(Keep::Committed);
    fs.reboot().unwrap();
    assert_eq!((read("a"), read("b")), ("A".to_owned(), "B".to_owned()));

    exchange();
    fs.power_loss(Keep::All);
    fs.reboot().unwrap();
    assert_eq!((read("a"), read("b")), ("B".to_owned(), "A".to_owned()));

    exchange();
    fsync_dir(&root).unwrap();
    fs.power_loss(Keep::Committed);
    fs.reboot().unwrap();
    assert_eq!((read("a"), read("b")), ("A".to_owned(), "B".to_owned()));
}

#[test]
fn metadata_is_journaled_in_order() {
    let mut fs = mount(CRASHABLE);
    let root = fs.path().to_owned();
    write_synced(&root.join("f"), b"kept").unwrap();
    let mode = fs::metadata(root.join("f")).unwrap().mode() & 0o777;
    fs::create_dir(root.join("a")).unwrap();
    fs::create_dir(root.join("b")).unwrap();
    fs::set_permissions(root.join("f"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::remove_file(root.join("f")).unwrap();
    assert_eq!(fs.pending_ops(), 4);
    fs.power_loss(Keep::Prefix(2));
    fs.reboot().unwrap();
    assert_eq!(names(&root), ["a", "b", "f"]);
    assert_eq!(fs::metadata(root.join("f")).unwrap().mode() & 0o777, mode);
    assert_eq!(fs::read(root.join("f")).unwrap(), b"kept");

    fs::set_permissions(root.join("f"), fs::Permissions::from_mode(0o600)).unwrap();
    fs::remove_file(root.join("f")).unwrap();
    fs.power_loss(Keep::Prefix(1));
    fs.reboot().unwrap();
    assert_eq!(fs::metadata(root.join("f")).unwrap().mode() & 0o777, 0o600);
}

/// Write `f` three times, fsyncing each version; stops at the first error (a cut).
fn three_versions(root: &Path) -> io::Result<()> {
    for version in ["v1", "v2", "v3"] {
        write_synced(&root.join("f"), version.as_bytes())?;
    }
    Ok(())
}

#[test]
fn a_cut_strikes_before_or_after_the_nth_fsync_of_a_path() {
    let mut fs = mount(CRASHABLE);
    let root = fs.path().to_owned();
    fs.cut_at(Cut::nth(
        OpKind::Fsync,
        "f",
        2,
        When::Before,
        Keep::Committed,
    ));
    assert_eq!(
        three_versions(&root).unwrap_err().raw_os_error(),
        Some(libc::EIO)
    );
    assert!(fs.is_frozen());
    fs.reboot().unwrap();
    assert!(!fs.is_frozen());
    assert_eq!(fs::read(root.join("f")).unwrap(), b"v1");

    fs::remove_file(root.join("f")).unwrap();
    fs.cut_at(Cut::nth(
        OpKind::Fsync,
        "f",
        2,
        When::After,
        Keep::Committed,
    ));
    // The second fsync answers; the write after it finds the machine dead.
    assert_eq!(
        three_versions(&root).unwrap_err().raw_os_error(),
        Some(libc::EIO)
    );
    assert!(fs.is_frozen());
    fs.reboot().unwrap();
    assert_eq!(fs::read(root.join("f")).unwrap(), b"v2");
}

/// Write `final` atomically: a temporary file, fsynced, renamed over it, the directory fsynced.
fn atomic_write(root: &Path) -> io::Result<()> {
    write_synced(&root.join("tmp"), b"content")?;
    fs::rename(root.join("tmp"), root.join("final"))?;
    fsync_dir(root)
}

#[test]
fn the_trace_lists_operations_in_order_and_drives_a_crash_matrix() {
    let fs = mount(CRASHABLE);
    fs.trace(true);
    atomic_write(fs.path()).unwrap();
    let trace = fs.take_trace();
    let summary: Vec<(OpKind, &str, Option<&str>)> = trace
        .iter()
        .map(|op| (op.op, op.path.as_str(), op.to.as_deref()))
        .collect();
    assert_eq!(
        summary,
        [
            (OpKind::Create, "tmp", None),
            (OpKind::Write, "tmp", None),
            (OpKind::Fsync, "tmp", None),
            (OpKind::Rename, "tmp", Some("final")),
            (OpKind::FsyncDir, "", None),
        ]
    );
    assert_eq!(trace[1].detail, "offset=0 len=7");
    assert!(fs.take_trace().is_empty());
    drop(fs);

    // The same points by kind and path, and by position.
    let cuts = Cut::every(&trace, Keep::Committed);
    assert_eq!(cuts.len(), 10);
    let by_index = Cut::every_index(&trace, Keep::Committed);
    assert_eq!(by_index.len(), 10);
    let mut survived = Vec::new();
    let mut survived_by_index = Vec::new();
    for cut in by_index {
        let mut fs = mount(CRASHABLE);
        fs.cut_at(cut.clone());
        let _ = atomic_write(fs.path());
        assert!(fs.is_frozen(), "{cut:?} never struck");
        fs.reboot().unwrap();
        survived_by_index.push(names(fs.path()));
    }
    for cut in cuts {
        let mut fs = mount(CRASHABLE);
        fs.cut_at(cut.clone());
        let _ = atomic_write(fs.path());
        assert!(fs.is_frozen(), "{cut:?} never struck");
        fs.reboot().unwrap();
        // Whatever the crash, `final` is absent or whole.
        match fs::read(fs.path().join("final")) {
            Ok(bytes) => assert_eq!(bytes, b"content", "{cut:?}"),
            Err(error) => assert_eq!(error.kind(), io::ErrorKind::NotFound, "{cut:?}"),
        }
        survived.push(names(fs.path()));
    }
    let expected: [&[&str]; 10] = [
        &[],
        &[],
        &[],
        &[],
        &[],
        &["tmp"],
        &["tmp"],
        &["tmp"],
        &["tmp"],
        &["final"],
    ];
    assert_eq!(survived, expected);
    assert_eq!(survived_by_index, expected);
}

#[test]
fn a_rename_cut_matches_its_source_or_its_target() {
    let trace = [
        TraceOp {
            op: OpKind::Rename,
            path: "a".to_owned(),
            to: Some("b".to_owned()),
            detail: String::new(),
        },
        TraceOp {
            op: OpKind::Rename,
            path: "b".to_owned(),
            to: Some("c".to_owned()),
            detail: String::new(),
        },
    ];
    let nths: Vec<usize> = Cut::every(&trace, Keep::All)
        .iter()
        .map(|cut| match cut.at {
            At::Nth { nth, .. } => nth,
            At::Index(_) => unreachable!("`every` cuts by kind and path"),
        })
        .collect();
    assert_eq!(nths, [1, 1, 2, 2]);

    let mut fs = mount(CRASHABLE);
    let root = fs.path().to_owned();
    write_synced(&root.join("a"), b"x").unwrap();
    fs.cut_at(Cut::nth(OpKind::Rename, "b", 2, When::Before, Keep::All));
    fs::rename(root.join("a"), root.join("b")).unwrap();
    assert_eq!(errno(fs::rename(root.join("b"), root.join("c"))), libc::EIO);
    fs.reboot().unwrap();
    assert_eq!(names(&root), ["b"]);
}

#[test]
fn a_reboot_keeps_inode_numbers_and_changes_the_device() {
    let mut fs = mount(CRASHABLE);
    let path = fs.path().join("f");
    write_synced(&path, b"data").unwrap();
    let before = fs::metadata(&path).unwrap();
    fs.power_loss(Keep::Committed);
    fs.reboot().unwrap();
    let after = fs::metadata(&path).unwrap();
    assert_eq!(after.ino(), before.ino());
    assert_ne!(after.dev(), before.dev());
    assert_eq!(fs::read(&path).unwrap(), b"data");

    // A clean restart loses nothing.
    fs::write(fs.path().join("g"), "unsynced").unwrap();
    fs.reboot().unwrap();
    assert_eq!(fs::read_to_string(fs.path().join("g")).unwrap(), "unsynced");
    assert_ne!(fs::metadata(&path).unwrap().dev(), after.dev());
}

#[test]
fn a_frozen_file_system_answers_eio_until_the_reboot() {
    let mut fs = mount(CRASHABLE);
    let root = fs.path().to_owned();
    write_synced(&root.join("f"), b"data").unwrap();
    let mut open = File::open(root.join("f")).unwrap();
    fs.power_loss(Keep::All);
    assert!(fs.is_frozen());
    assert_eq!(errno(fs::metadata(root.join("f"))), libc::EIO);
    assert_eq!(errno(fs::write(root.join("g"), "")), libc::EIO);
    assert_eq!(errno(fs::read_dir(&root)), libc::EIO);
    fs.reboot().unwrap();
    assert_eq!(fs::read(root.join("f")).unwrap(), b"data");
    // A file opened before the power loss stays dead.
    let mut buffer = Vec::new();
    assert_eq!(errno(open.read_to_end(&mut buffer)), libc::EIO);
}

#[test]
fn without_power_loss_simulation_nothing_is_lost() {
    let mut fs = mount(PLAIN);
    fs::write(fs.path().join("f"), "unsynced").unwrap();
    fs.power_loss(Keep::Committed);
    assert_eq!(errno(fs::metadata(fs.path().join("f"))), libc::EIO);
    fs.reboot().unwrap();
    assert_eq!(fs::read_to_string(fs.path().join("f")).unwrap(), "unsynced");
}

#[test]
fn shared_mounts_are_one_per_options() {
    let first = shared(FOLDING);
    assert!(std::ptr::eq(first, shared(FOLDING)));
    assert!(!std::ptr::eq(first, shared(CRASHABLE)));
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mount_point = first.path().to_str().unwrap();
    assert!(
        mountinfo
            .lines()
            .any(|line| line.contains(&format!(" {mount_point} "))
                && line.contains(" - fuse turngate-testfs ")),
        "{mountinfo}"
    );
    let dir = first.path().join("shared-test");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("X"), "x").unwrap();
    assert_eq!(fs::read_to_string(dir.join("x")).unwrap(), "x");
}

#[test]
fn a_directory_removed_while_held_open_answers_fstat_with_no_links() {
    let fs = mount(Options::default());
    let dir = fs.path().join("gone");
    fs::create_dir(&dir).unwrap();
    let held = fs::File::open(&dir).unwrap();
    fs::remove_dir(&dir).unwrap();
    let metadata = held.metadata().expect("the kernel still holds the inode");
    assert!(metadata.is_dir());
    assert_eq!(metadata.nlink(), 0);
}
