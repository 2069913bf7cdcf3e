//! `turngate tools add | update | remove | publish | sign`: tools from registries, for the people who
//! install them and the people who publish them. What each prints for people (the signer, the digest
//! and the requested grants, side by side) goes to stderr; stdout carries one JSON object.

use std::io::{BufRead as _, IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};
use clap::Args;
use serde_json::json;
use turngate::digest::Sha256Digest;
use turngate::lockfile::PinnedTool;
use turngate::registry::artifact::TagOrDigest;
use turngate::registry::distribution::RegistryOptions;
use turngate::registry::grants::Grants;
use turngate::registry::install::{self, FetchOptions, Fetched};
use turngate::registry::source::{Source, Store};
use turngate::registry::{artifact, cosign, policy_file};
use turngate::{Policy, ToolboxBuilder};

// How a registry is reached.
#[derive(Args, Clone)]
pub struct RegistryArgs {
    /// Speak plain http to the registry (only a loopback one: 127.0.0.0/8, ::1, localhost).
    #[arg(long)]
    plain_http: bool,
    /// Cut a request after the registry sent nothing for this many milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    stall_ms: u64,
}

impl RegistryArgs {
    fn options(&self) -> RegistryOptions {
        RegistryOptions {
            plain_http: self.plain_http,
            stall: Duration::from_millis(self.stall_ms),
        }
    }
}

// `tools add`'s and `tools update`'s flags.
#[derive(Args)]
pub struct InstallArgs {
    /// The tools directory it goes into (and whose turngate.lock pins it).
    #[arg(long)]
    pub tools: PathBuf,
    /// The policy file: its [trust] says whose signatures are accepted; accepted grants are written into it.
    #[arg(long)]
    pub policy: Option<PathBuf>,
    /// Write the grants the tool asks for into the policy without asking.
    #[arg(long, requires = "policy")]
    pub accept_grants: bool,
    /// Install it although no signature the policy accepts vouches for it (the lock records that).
    #[arg(long)]
    pub allow_unsigned: bool,
    #[command(flatten)]
    pub registry: RegistryArgs,
}

/// The policy file's text and parsed policy (empty and allow-all without one).
fn read_policy(path: Option<&Path>) -> Result<(String, Policy)> {
    let Some(path) = path else {
        return Ok((String::new(), Policy::allow_all()));
    };
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading policy {}", path.display()))?;
    let policy = Policy::from_toml(&text).with_context(|| format!("policy {}", path.display()))?;
    Ok((text, policy))
}

/// Asks a yes-or-no question on the terminal; no terminal is no.
fn ask(question: &str) -> bool {
    if !std::io::stdin().is_terminal() {
        return false;
    }
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).is_ok()
        && matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// Describes the component in a toolbox of its own (compiling it into the cache, so the first call
/// after the install costs what a warm one does); answers its tool name.
async fn describe(builder: ToolboxBuilder, component: &Path) -> Result<String> {
    let toolbox = builder
        .without_bundled()
        .component_file(component)?
        .build()
        .await
        .context("loading the component")?;
    // Loading a component not seen before compiles it into the cache.
    let tool = toolbox.tools().next().expect("one component loaded");
    Ok(tool.descriptor().name.clone())
}

/// Writes `text` as the policy file at `path`, atomically.
fn write_policy(path: &Path, text: &str) -> Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut temp = tempfile::NamedTempFile::new_in(dir)?;
    temp.write_all(text.as_bytes())?;
    temp.as_file().sync_all()?;
    temp.persist(path)?;
    Ok(())
}

/// Shows what was fetched: source, digest, signer, the grants it asks for.
fn show(fetched: &Fetched, name: &str) {
    eprintln!("turngate: {name} from {}", fetched.source);
    eprintln!("  manifest   {}", fetched.manifest_digest);
    eprintln!("  component  sha256:{}", fetched.sha256);
    eprintln!("  signed by  {}", fetched.signer());
    eprintln!("  it asks for:\n{}", fetched.grants().describe().trim_end());
}

/// Whether the user grants what `fetched` asks for: `--accept-grants`, or a yes on the terminal.
fn accepts(args: &InstallArgs, name: &str, grants: &Grants) -> bool {
    if grants.is_empty() || args.accept_grants {
        return args.policy.is_some();
    }
    args.policy.is_some() && ask(&format!("turngate: grant these to `{name}`?"))
}

/// The JSON printed for an installed tool.
fn installed_json(
    entry: &PinnedTool,
    requested: &Grants,
    policy: Option<&Path>,
) -> serde_json::Value {
    json!({
        "name": entry.name,
        "file": entry.file,
        "sha256": entry.sha256,
        "source": entry.source,
        "manifest": entry.manifest,
        "signer": entry.signer,
        "unsigned": entry.unsigned,
        "grants_requested": serde_json::from_str::<serde_json::Value>(&requested.to_json()).unwrap_or_default(),
        "grants_accepted": entry.grants.is_some(),
        "policy": policy.map(|p| p.display().to_string()),
    })
}

/// `turngate tools add REF`.
pub async fn add(reference: &str, args: &InstallArgs, builder: ToolboxBuilder) -> Result<()> {
    let source = Source::parse(reference)?;
    let (policy_text, policy) = read_policy(args.policy.as_deref())?;
    let options = FetchOptions {
        registry: args.registry.options(),
        allow_unsigned: args.allow_unsigned,
    };
    let fetched = install::fetch(&source, &args.tools, &policy.trust(), &options).await?;
    let name = describe(builder, fetched.component.path()).await?;
    show(&fetched, &name);
    let requested = fetched.grants().clone();
    let accepted = accepts(args, &name, &requested);
    let new_policy = match &args.policy {
        Some(_) if accepted => Some(policy_file::accept(&policy_text, &name, &requested)?),
        Some(_) => Some(policy_file::deny(&policy_text, &name, &requested)?),
        None => None,
    };
    let installed = install::install(fetched, &name, &args.tools, accepted.then_some(&requested))?;
    if let (Some(path), Some(text)) = (&args.policy, &new_policy) {
        write_policy(path, text)?;
    }
    eprintln!(
        "turngate: installed `{name}` as {}; {}",
        installed.path.display(),
        match (&args.policy, accepted) {
            (Some(path), true) => format!("its grants are written into {}", path.display()),
            (Some(path), false) => format!(
                "no grant was given: every call is denied until {} grants it",
                path.display()
            ),
            (None, _) => "no grant was given: it runs only under a policy that lists it".to_owned(),
        }
    );
    outln!(
        "{}",
        installed_json(&installed.entry, &requested, args.policy.as_deref())
    )?;
    Ok(())
}

/// `turngate tools update [NAME]`: for each tool installed from a registry by tag, the tag's manifest
/// now; a moved tag is shown (old and new digest, signer, what it asks for more or less) and followed
/// only on the user's yes (`--yes` or the terminal).
pub async fn update(
    name: Option<&str>,
    args: &InstallArgs,
    yes: bool,
    builder: ToolboxBuilder,
) -> Result<()> {
    let lock = install::read_lock(&args.tools)?;
    let (policy_text, policy) = read_policy(args.policy.as_deref())?;
    let mut policy_text = policy_text;
    let candidates: Vec<PinnedTool> = lock
        .tools()
        .filter(|t| t.from_registry() && name.is_none_or(|n| t.name == n))
        .cloned()
        .collect();
    if let Some(name) = name
        && candidates.is_empty()
    {
        bail!(
            "no tool `{name}` installed from a registry is pinned in {}",
            args.tools.display()
        );
    }
    let mut report = Vec::new();
    for entry in candidates {
        let source_text = entry.source.clone().unwrap_or_default();
        let source = Source::parse(&source_text)?;
        if source.tag_or_digest().is_some_and(|r| r.digest().is_some()) {
            report.push(json!({"name": entry.name, "status": "pinned by digest"}));
            continue;
        }
        let options = FetchOptions {
            registry: args.registry.options(),
            allow_unsigned: args.allow_unsigned || entry.unsigned,
        };
        let fetched = install::fetch(&source, &args.tools, &policy.trust(), &options).await?;
        if Some(&fetched.manifest_digest) == entry.manifest.as_ref() {
            report
                .push(json!({"name": entry.name, "status": "current", "manifest": entry.manifest}));
            continue;
        }
        let before = entry
            .grants
            .as_deref()
            .map(Grants::parse)
            .transpose()?
            .unwrap_or_default();
        eprintln!("turngate: `{}` ({source_text}) moved:", entry.name);
        eprintln!(
            "  manifest   {} -> {}",
            entry
                .manifest
                .map_or_else(|| "?".to_owned(), |d| d.to_string()),
            fetched.manifest_digest
        );
        eprintln!(
            "  signed by  {} -> {}",
            entry
                .signer
                .as_ref()
                .map_or_else(|| "nobody".to_owned(), |s| s.to_string()),
            fetched.signer()
        );
        eprintln!(
            "  grants asked, against those accepted:\n{}",
            fetched.grants().difference(&before).trim_end()
        );
        let follow = yes || ask(&format!("turngate: update `{}`?", entry.name));
        if !follow {
            report.push(json!({"name": entry.name, "status": "moved, not followed", "manifest": entry.manifest, "available": fetched.manifest_digest}));
            continue;
        }
        let described = describe(builder.clone(), fetched.component.path()).await?;
        if described != entry.name {
            bail!(
                "the new version describes itself as `{described}`, not `{}`: not updated",
                entry.name
            );
        }
        let requested = fetched.grants().clone();
        let accepted = if requested == before && entry.grants.is_some() {
            true
        } else {
            accepts(args, &entry.name, &requested)
        };
        if accepted && let Some(_) = &args.policy {
            policy_text = policy_file::accept(&policy_text, &entry.name, &requested)?;
        }
        let recorded = if accepted {
            Some(&requested)
        } else {
            entry.grants.as_deref().map(|_| &before)
        };
        let installed = install::install(fetched, &entry.name, &args.tools, recorded)?;
        report.push(json!({
            "name": entry.name,
            "status": "updated",
            "manifest": installed.entry.manifest,
            "previous": entry.manifest,
            "signer": installed.entry.signer,
            "grants_accepted": accepted,
        }));
    }
    if let Some(path) = &args.policy {
        write_policy(path, &policy_text)?;
    }
    outln!("{}", json!({"tools": report}))?;
    Ok(())
}

/// `turngate tools remove NAME`.
pub fn remove(name: &str, tools: &Path) -> Result<()> {
    let entry = install::remove(tools, name)?;
    eprintln!(
        "turngate: removed `{name}` ({}); a policy table it had stays until you remove it",
        entry.file
    );
    outln!(
        "{}",
        json!({"name": name, "file": entry.file, "removed": true})
    )?;
    Ok(())
}

/// Opens the store a publish or sign writes to: a registry, or a layout directory (made if missing).
fn writable(source: &Source, registry: &RegistryArgs) -> Result<Store> {
    Ok(match source {
        Source::Registry(_) => source.open(&registry.options())?,
        Source::Layout { dir, .. } => {
            Store::Layout(turngate::registry::layout::Layout::open(dir, true)?)
        }
    })
}

/// The tag a publish or sign names, and the repository (`REGISTRY/REPO`, or `oci:DIR`).
fn tag_of(source: &Source) -> Result<String> {
    source
        .tag_or_digest()
        .and_then(|name| name.tag().map(str::to_owned))
        .context("name the tag to publish under (oci://REGISTRY/REPO:TAG or oci:DIR:TAG)")
}

/// `turngate tools publish FILE.wasm REF`: the component as a Wasm OCI artifact, with its descriptor
/// and the grants in `grants` (a JSON file) as annotations.
pub async fn publish(
    file: &Path,
    reference: &str,
    grants: Option<&Path>,
    registry: &RegistryArgs,
    builder: ToolboxBuilder,
) -> Result<()> {
    let source = Source::parse(reference)?;
    let tag = tag_of(&source)?;
    let component = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let toolbox = builder
        .without_bundled()
        .component_file(file)?
        .build()
        .await?;
    let tool = toolbox.tools().next().expect("one component loaded");
    let descriptor = serde_json::to_string(&json!({
        "name": tool.descriptor().name,
        "description": tool.descriptor().description,
        "input_schema": tool.descriptor().input_schema,
    }))?;
    let grants = match grants {
        Some(path) => Grants::parse(
            &std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?,
        )?,
        None => Grants::default(),
    };
    let created = jiff::Timestamp::now().to_string();
    let (config, manifest) = artifact::build(&component, &descriptor, &grants, &created);
    let blobs = [
        (config.as_slice(), Sha256Digest::of(&config)),
        (component.as_slice(), Sha256Digest::of(&component)),
    ];
    let digest = match writable(&source, registry)? {
        Store::Registry(registry) => {
            registry
                .push(&blobs, &manifest, &TagOrDigest::Tag(tag.clone()))
                .await?
        }
        Store::Layout(layout) => layout.push(&blobs, &manifest, &tag, artifact::OCI_MANIFEST)?,
    };
    eprintln!(
        "turngate: published `{}` as {reference} ({digest})",
        tool.descriptor().name
    );
    outln!(
        "{}",
        json!({"name": tool.descriptor().name, "reference": reference, "manifest": digest})
    )?;
    Ok(())
}

/// `turngate tools sign --key KEY REF@sha256:...`: a cosign key signature of that manifest, stored as
/// cosign stores it (appended to the `sha256-<hex>.sig` manifest's signatures).
pub async fn sign(reference: &str, key: &Path, registry: &RegistryArgs) -> Result<()> {
    let source = Source::parse(reference)?;
    let digest = source
        .tag_or_digest()
        .and_then(|name| name.digest())
        .context("sign a manifest by its digest: REF@sha256:...")?;
    let pem =
        std::fs::read_to_string(key).with_context(|| format!("reading key {}", key.display()))?;
    let key = cosign::private_key(&pem).map_err(anyhow::Error::msg)?;
    let store = writable(&source, registry)?;
    if store
        .manifest(
            Some(&TagOrDigest::Digest(digest)),
            artifact::MAX_MANIFEST_BYTES,
        )
        .await?
        .is_none()
    {
        bail!("{reference}: no such manifest to sign");
    }
    let repository = match &source {
        Source::Registry(r) => format!("{}/{}", r.registry(), r.repository()),
        Source::Layout { .. } => source.trust_name(),
    };
    let payload = cosign::payload(&repository, &digest);
    let signature = cosign::sign(&payload, &key).map_err(anyhow::Error::msg)?;
    let tag = TagOrDigest::Tag(cosign::signature_tag(&digest));
    let mut signatures = match store
        .manifest(Some(&tag), artifact::MAX_MANIFEST_BYTES)
        .await?
    {
        Some((bytes, _)) => serde_json::from_slice::<artifact::Manifest>(&bytes)?,
        None => {
            let config = b"{}".to_vec();
            artifact::Manifest {
                schema_version: 2,
                media_type: Some(artifact::OCI_MANIFEST.to_owned()),
                artifact_type: None,
                config: artifact::Descriptor {
                    media_type: "application/vnd.oci.image.config.v1+json".into(),
                    digest: Sha256Digest::of(&config).to_string(),
                    size: config.len() as u64,
                    artifact_type: None,
                    annotations: Default::default(),
                },
                layers: Vec::new(),
                subject: None,
                annotations: Default::default(),
            }
        }
    };
    signatures.layers.push(artifact::Descriptor {
        media_type: cosign::SIGNATURE_LAYER.into(),
        digest: Sha256Digest::of(&payload).to_string(),
        size: payload.len() as u64,
        artifact_type: None,
        annotations: [(cosign::SIGNATURE_ANNOTATION.to_owned(), signature)].into(),
    });
    let manifest = serde_json::to_vec(&signatures)?;
    let config = b"{}".to_vec();
    let blobs = [
        (config.as_slice(), signatures.config.sha256()?),
        (payload.as_slice(), Sha256Digest::of(&payload)),
    ];
    let written = match store {
        Store::Registry(registry) => registry.push(&blobs, &manifest, &tag).await?,
        Store::Layout(layout) => {
            layout.push(&blobs, &manifest, &tag.to_string(), artifact::OCI_MANIFEST)?
        }
    };
    eprintln!("turngate: signed {digest} ({tag}: {written})");
    outln!(
        "{}",
        json!({"signed": digest, "tag": tag.to_string(), "signatures": signatures.layers.len()})
    )?;
    Ok(())
}
