//! The on-disk cache of precompiled components and of what each one said about itself.
//!
//! Compiling a component with Cranelift costs tens to hundreds of milliseconds; deserializing its
//! precompiled form costs about one; asking it to describe itself means instantiating it. Entries are
//! keyed by the SHA-256 of the component's bytes and of the engine's compatibility hash (wasmtime version
//! and every codegen setting), so a different engine never reads another's code; descriptors are also
//! keyed by this crate's version, since what a load checks may change with it. With both cached, a
//! process describes its tools without touching their code, and deserializes only the one it calls.
//! Entries are written atomically (temporary file, then rename); an unreadable entry only costs time.
//!
//! Precompiled code is native code: whoever can write an entry can run anything in every process that
//! loads it, whatever the tool lock pins. So an entry is used only when it, and the directory it is
//! in, belong to this user and nobody else may write them; anything else is ignored and compiled
//! afresh. The check is held to what is loaded: the directory and then the entry in it are opened, each
//! checked by its descriptor's `fstat`, and the entry is read, or mapped, through that descriptor
//! ([`open_trusted`]), so nothing put at the name after the check is loaded.

use std::fs::File;
use std::hash::{Hash, Hasher};
use std::io::{self, Read as _, Write as _};
use std::os::fd::AsFd as _;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::RawDescriptor;

/// Where precompiled components live.
#[derive(Debug, Clone)]
pub(crate) struct PrecompiledCache {
    dir: PathBuf,
    engine_key: String,
}

impl PrecompiledCache {
    /// A cache in `dir` for components compiled by `engine`.
    pub(crate) fn new(dir: PathBuf, engine: &Engine) -> Self {
        let mut hasher = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        let engine_key = hex::encode(&hasher.0.finalize()[..8]);
        PrecompiledCache { dir, engine_key }
    }

    /// The default location: `$TURNGATE_CACHE_DIR`, else the user's cache directory plus `turngate`.
    pub(crate) fn default_dir() -> Option<PathBuf> {
        std::env::var_os("TURNGATE_CACHE_DIR")
            .map(PathBuf::from)
            .or_else(|| dirs::cache_dir().map(|d| d.join("turngate")))
    }

    fn entry(&self, sha256: &str) -> PathBuf {
        self.dir.join(format!("{sha256}-{}.cwasm", self.engine_key))
    }

    fn descriptor_entry(&self, sha256: &str) -> PathBuf {
        self.dir.join(format!(
            "{sha256}-{}-{}.describe.json",
            self.engine_key,
            env!("CARGO_PKG_VERSION")
        ))
    }

    /// What the component with this digest said about itself when it was last loaded, if cached.
    pub(crate) fn descriptor(&self, sha256: &str) -> Option<RawDescriptor> {
        let Found::Trusted(mut file) = open_trusted(&self.descriptor_entry(sha256)) else {
            return None;
        };
        let mut text = Vec::new();
        file.read_to_end(&mut text).ok()?;
        serde_json::from_slice(&text).ok()
    }

    /// Remembers what a component that passed every load check said about itself.
    pub(crate) fn store_descriptor(&self, sha256: &str, descriptor: &RawDescriptor) {
        let entry = self.descriptor_entry(sha256);
        let text = serde_json::to_vec(descriptor).expect("a descriptor serializes");
        if let Err(e) = store(&entry, &text) {
            tracing::warn!("could not write cache entry {}: {e}", entry.display());
        }
    }

    /// Whether a trusted entry for the component with this digest is there (it may still fail to
    /// load, as any entry may: then it is compiled again).
    pub(crate) fn holds(&self, sha256: &str) -> bool {
        matches!(open_trusted(&self.entry(sha256)), Found::Trusted(_))
    }

    /// The component with this digest, mapped from its entry, if a trusted and usable one is there.
    /// A cache that cannot be read only costs a compile; it never fails the load.
    pub(crate) fn load(&self, engine: &Engine, sha256: &str) -> Option<Component> {
        let entry = self.entry(sha256);
        match open_trusted(&entry) {
            Found::Trusted(file) => {
                crate::test_hooks::cache_entry_checked();
                // The descriptor's own path: wasmtime maps the file it opens there, which is the one
                // checked, whatever stands at the entry's name by now (where that path cannot be
                // opened the load fails and the component is compiled: slower, never unchecked).
                let checked = crate::platform::descriptor_path(file.as_fd());
                // SAFETY: the entry was written by `Engine::precompile_component` of an engine with
                // the same compatibility hash, into a directory only this user can write (checked
                // through the descriptors); wasmtime checks the header again.
                match unsafe { Component::deserialize_file(engine, &checked) } {
                    Ok(component) => return Some(component),
                    Err(e) => {
                        tracing::warn!("ignoring unusable cache entry {}: {e}", entry.display())
                    }
                }
            }
            Found::Untrusted => tracing::warn!(
                "ignoring cache entry {}: it, or its directory, is not this user's alone",
                entry.display()
            ),
            Found::Absent => {}
        }
        None
    }

    /// Keeps `code` (the precompiled form of the component with this digest) as its entry. A cache
    /// that cannot be written only costs the next process a compile.
    pub(crate) fn store_code(&self, sha256: &str, code: &[u8]) {
        let entry = self.entry(sha256);
        if let Err(e) = store(&entry, code) {
            tracing::warn!("could not write cache entry {}: {e}", entry.display());
        }
    }
}

fn store(entry: &Path, code: &[u8]) -> io::Result<()> {
    let dir = entry.parent().expect("entries live in the cache directory");
    std::fs::create_dir_all(dir)?;
    let mut temp = tempfile::NamedTempFile::new_in(dir)?;
    temp.write_all(code)?;
    temp.persist(entry).map_err(|e| e.error)?;
    Ok(())
}

/// A cache entry as [`open_trusted`] found it.
enum Found {
    /// Opened; it and its directory are this user's alone (checked through their descriptors).
    Trusted(File),
    /// Not there, or not readable.
    Absent,
    /// There, but it or its directory is not this user's alone, or it is not a regular file.
    Untrusted,
}

/// Opens the entry at `path` if it may be trusted as the cache's own: a regular file (a link is not
/// followed) owned by this user and writable by nobody else, in a directory of the same kind. The
/// directory is opened and checked first, and the entry opened beneath that descriptor; each check is
/// of the opened object's `fstat`.
fn open_trusted(path: &Path) -> Found {
    let user = rustix::process::geteuid().as_raw();
    let private = |stat: &rustix::fs::Stat| stat.st_uid == user && stat.st_mode & 0o022 == 0;
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
        return Found::Absent;
    };
    let directory = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let Ok(dir) = rustix::fs::open(dir, directory, Mode::empty()) else {
        return Found::Absent;
    };
    // Non-blocking: a FIFO planted at the name must not hang the load.
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let entry = match rustix::fs::openat(&dir, name, flags, Mode::empty()) {
        Ok(entry) => entry,
        Err(rustix::io::Errno::NOENT) => return Found::Absent,
        // A symbolic link (`ELOOP`), or an entry this user may not read.
        Err(_) => return Found::Untrusted,
    };
    match (rustix::fs::fstat(&dir), rustix::fs::fstat(&entry)) {
        (Ok(dir), Ok(entry_stat))
            if private(&dir)
                && private(&entry_stat)
                && FileType::from_raw_mode(entry_stat.st_mode).is_file() =>
        {
            Found::Trusted(File::from(entry))
        }
        _ => Found::Untrusted,
    }
}

/// Feeds `Hash` input into SHA-256 so the key is stable across Rust releases (unlike `DefaultHasher`).
struct ShaHasher(Sha256);

impl Hasher for ShaHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    fn finish(&self) -> u64 {
        let digest = self.0.clone().finalize();
        u64::from_le_bytes(digest[..8].try_into().expect("SHA-256 has 32 bytes"))
    }
}
