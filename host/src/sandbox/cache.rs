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
//! in, belong to this user and nobody else may write them ([`trusted`]); anything else is ignored and
//! compiled afresh.

use std::hash::{Hash, Hasher};
use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

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
        let entry = self.descriptor_entry(sha256);
        if !trusted(&entry) {
            return None;
        }
        let text = std::fs::read(entry).ok()?;
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

    /// Loads `bytes` (whose SHA-256 is `sha256`) as a component: from the cache when an entry exists,
    /// otherwise compiled and stored. A cache that cannot be read or written only costs time; it never
    /// fails the load.
    pub(crate) fn load(
        &self,
        engine: &Engine,
        sha256: &str,
        bytes: &[u8],
    ) -> wasmtime::Result<Component> {
        let entry = self.entry(sha256);
        if trusted(&entry) {
            // SAFETY: the entry was written by `Component::serialize` of an engine with the same
            // compatibility hash, into a directory only this user can write (`trusted`); wasmtime
            // checks the header again.
            match unsafe { Component::deserialize_file(engine, &entry) } {
                Ok(component) => return Ok(component),
                Err(e) => {
                    tracing::warn!("ignoring unusable cache entry {}: {e}", entry.display())
                }
            }
        } else if entry.symlink_metadata().is_ok() {
            tracing::warn!(
                "ignoring cache entry {}: it, or its directory, is not this user's alone",
                entry.display()
            );
        }
        let component = Component::new(engine, bytes)?;
        match component.serialize() {
            Ok(code) => {
                if let Err(e) = store(&entry, &code) {
                    tracing::warn!("could not write cache entry {}: {e}", entry.display());
                }
            }
            Err(e) => tracing::warn!("could not serialize {}: {e}", entry.display()),
        }
        Ok(component)
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

/// Whether the entry at `path` may be trusted as the cache's own: a regular file (a link is not
/// followed) owned by this user and writable by nobody else, in a directory of the same kind.
fn trusted(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let user = rustix::process::geteuid().as_raw();
    let private = |m: &std::fs::Metadata| m.uid() == user && m.mode() & 0o022 == 0;
    let Some(dir) = path.parent() else {
        return false;
    };
    match (std::fs::metadata(dir), std::fs::symlink_metadata(path)) {
        (Ok(dir), Ok(entry)) => dir.is_dir() && private(&dir) && entry.is_file() && private(&entry),
        _ => false,
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
