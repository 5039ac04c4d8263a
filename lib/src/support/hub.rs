//! Models named by a Hugging Face hub reference, as llama.cpp's `-hf` takes
//! them: `ORG/REPO[:QUANT]` or `ORG/REPO/FILE.gguf`, optionally `@REVISION`.
//!
//! A reference resolves to files in the standard hub cache (the layout
//! `huggingface-cli` writes: `models--ORG--REPO/{blobs,snapshots,refs}`,
//! under `HF_HUB_CACHE`, or `HF_HOME/hub`, or `~/.cache/huggingface/hub`).
//! A reference whose files are all in the cache is used with no network at
//! all; otherwise the repository's file list is read, the quant's file (every
//! part of a split model) chosen, downloaded resumably and checked by size
//! and by the sha256 the hub lists. `HF_ENDPOINT` names another hub,
//! `HF_TOKEN` (or the token file `huggingface-cli login` writes) is sent and
//! never printed, `HF_HUB_OFFLINE` allows the cache only, and
//! `HF_HUB_DOWNLOAD_TIMEOUT` is how long a request may wait for the hub.
//!
//! The hub's protocol is spoken here, over ureq, rather than through the
//! `hf-hub` crate: that crate names the cache's files after the `ETag` and
//! `X-Repo-Commit` headers as sent (so a hostile hub or mirror could write
//! or delete any file), sets no timeout, follows redirects without bound and
//! panics on some answers. Here every value that becomes a path is checked
//! first (see "The cache"), and no header becomes one.

use crate::support::progress::{Progress, Unit};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A parsed reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubRef {
    /// `ORG/REPO`.
    pub repo: String,
    pub select: Select,
    /// `@REVISION` (a branch, tag or commit); `None`: `main`.
    pub revision: Option<String>,
    /// The reference as given.
    pub text: String,
}

/// Which file of the repository a reference names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Select {
    /// `:QUANT`, or nothing (llama.cpp's default: Q4_K_M, then Q8_0, then
    /// the only model file).
    Quant(Option<String>),
    /// `/FILE.gguf`: this file (its path in the repository).
    File(String),
}

/// Where a run's model came from, as the run file records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Origin {
    /// The reference as given.
    pub reference: String,
    pub repo: String,
    /// The commit the revision resolved to.
    pub revision: String,
    /// The model's file in the repository (a split model's first part).
    pub file: String,
    /// Every file of a split model, in order (absent for one file).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
}

/// What a reference needs from the hub that it could not have. The messages
/// name the reference and the environment variable that matters, never a
/// token.
/// Needs no hint: no flag fixes these; the messages say what does.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error("`{0}` is not a hub reference (ORG/REPO[:QUANT] or ORG/REPO/FILE.gguf, optionally @REVISION)")]
    Syntax(String),
    #[error("{reference}: {what}; the repository has {listing}")]
    NoMatch { reference: String, what: String, listing: String },
    #[error("{reference}: {what}: {listing}; name one, as ORG/REPO/FILE.gguf")]
    Ambiguous { reference: String, what: String, listing: String },
    #[error("{reference}: not in the hub cache {cache}, and HF_HUB_OFFLINE is set{listing}")]
    Offline { reference: String, cache: String, listing: String },
    #[error("{reference}: the hub at {endpoint} answered {status}: {why}")]
    Unauthorized { reference: String, endpoint: String, status: &'static str, why: &'static str },
    #[error("{reference}: the hub at {endpoint} has no {what} (404)")]
    NotFound { reference: String, endpoint: String, what: String },
    #[error("{reference}: {file}: {why}")]
    Download { reference: String, file: String, why: String },
    #[error(
        "{reference}: {file}: the downloaded file's sha256 is {got}…, the hub lists {want}… (removed; run again to download it afresh)"
    )]
    Corrupt { reference: String, file: String, got: String, want: String },
    #[error("{reference}: the hub at {endpoint} could not be asked for the file list: {why}")]
    Listing { reference: String, endpoint: String, why: String },
    #[error("{reference}: the hub cache {cache}: {why}")]
    Cache { reference: String, cache: String, why: String },
    #[error("{reference}: the hub at {endpoint} sent {what}; refused, as nothing it sends may name a path outside the cache")]
    Unsafe { reference: String, endpoint: String, what: String },
    #[error("{reference}: the hub at {endpoint} sent nothing for {seconds} s while {what} (HF_HUB_DOWNLOAD_TIMEOUT sets the wait)")]
    Stalled { reference: String, endpoint: String, what: String, seconds: f64 },
    #[error("HF_HUB_DOWNLOAD_TIMEOUT={0:?} is not a number of seconds above 0")]
    Timeout(String),
}

/// How long a hub request waits for the connection, the answer, or the
/// next bytes of a download, unless `HF_HUB_DOWNLOAD_TIMEOUT` says.
pub const DEFAULT_TIMEOUT_S: f64 = 30.0;

/// The hub settings the environment gives.
#[derive(Debug, Clone)]
pub struct HubEnv {
    pub endpoint: String,
    /// The hub cache folder (`…/hub`).
    pub cache: PathBuf,
    pub token: Option<String>,
    pub offline: bool,
    /// `HF_HUB_DOWNLOAD_TIMEOUT`: connecting, waiting for an answer, and the
    /// longest pause in a download.
    pub timeout: Duration,
}

impl HubEnv {
    /// As `huggingface_hub` reads them: `HF_ENDPOINT`, `HF_HUB_CACHE` or
    /// `HF_HOME`, `HF_TOKEN` or the token file, `HF_HUB_OFFLINE`,
    /// `HF_HUB_DOWNLOAD_TIMEOUT`.
    pub fn from_env() -> Result<HubEnv, HubError> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let home = var("HF_HOME").map(PathBuf::from).unwrap_or_else(|| {
            let cache = var("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(".")).join(".cache"));
            cache.join("huggingface")
        });
        let token_file = var("HF_TOKEN_PATH").map(PathBuf::from).unwrap_or_else(|| home.join("token"));
        let token = var("HF_TOKEN")
            .or_else(|| crate::support::fsutil::read_text(&token_file).ok().map(|t| t.trim().to_string()).filter(|t| !t.is_empty()));
        let offline = var("HF_HUB_OFFLINE").is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"));
        let timeout = match var("HF_HUB_DOWNLOAD_TIMEOUT") {
            None => DEFAULT_TIMEOUT_S,
            Some(v) => v.trim().parse::<f64>().ok().filter(|s| s.is_finite() && *s > 0.0 && *s <= 1e9).ok_or(HubError::Timeout(v))?,
        };
        Ok(HubEnv {
            endpoint: var("HF_ENDPOINT").unwrap_or_else(|| "https://huggingface.co".into()).trim_end_matches('/').to_string(),
            cache: var("HF_HUB_CACHE").map(PathBuf::from).unwrap_or_else(|| home.join("hub")),
            token,
            offline,
            timeout: Duration::from_secs_f64(timeout),
        })
    }
}

/// Whether `s`, given where a model file is taken, names a hub reference: it
/// is no existing file, does not look like a path (`/`, `.`, `~` first), and
/// is `ORG/REPO` (with `:QUANT` or `@REV`) or `ORG/REPO/….gguf`.
pub fn is_reference(s: &str) -> bool {
    if Path::new(s).exists() || s.starts_with(['/', '.', '~']) || s.contains('\\') {
        return false;
    }
    HubRef::parse(s).is_ok()
}

fn valid_part(p: &str) -> bool {
    !p.is_empty() && p != "." && p != ".." && p.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

impl HubRef {
    pub fn parse(s: &str) -> Result<HubRef, HubError> {
        let bad = || HubError::Syntax(s.to_string());
        let (body, revision) = match s.split_once('@') {
            // A revision names a ref file in the cache: a relative path that
            // stays there (`@/etc/x` or `@../..` would not).
            Some((b, r)) if safe_path(r) && !r.contains(char::is_whitespace) => (b, Some(r.to_string())),
            Some(_) => return Err(bad()),
            None => (s, None),
        };
        let (body, quant) = match body.split_once(':') {
            Some((b, q)) if !q.is_empty() && q.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) => (b, Some(q.to_string())),
            Some(_) => return Err(bad()),
            None => (body, None),
        };
        let parts: Vec<&str> = body.split('/').collect();
        if parts.len() < 2 || !parts[..2].iter().all(|p| valid_part(p)) {
            return Err(bad());
        }
        let repo = format!("{}/{}", parts[0], parts[1]);
        let select = match (&parts[2..], quant) {
            ([], q) => {
                if parts[1].to_ascii_lowercase().ends_with(".gguf") {
                    return Err(bad());
                }
                Select::Quant(q)
            }
            (file, None)
                if file.iter().all(|p| valid_part(p)) && file.last().is_some_and(|f| f.to_ascii_lowercase().ends_with(".gguf")) =>
            {
                Select::File(file.join("/"))
            }
            _ => return Err(bad()),
        };
        Ok(HubRef { repo, select, revision, text: s.to_string() })
    }

    fn revision(&self) -> &str {
        self.revision.as_deref().unwrap_or("main")
    }
}

/// The model file a `MODEL` argument names: the path itself, or the file a
/// hub reference resolves to (downloaded if need be, with a progress bar on a
/// terminal), and where it came from.
pub fn locate(model: &Path, progress: &dyn Progress) -> Result<(PathBuf, Option<Origin>), HubError> {
    let text = model.to_string_lossy();
    if !is_reference(&text) {
        return Ok((model.to_path_buf(), None));
    }
    let r = HubRef::parse(&text)?;
    let done = resolve(&r, &HubEnv::from_env()?, progress)?;
    Ok((done.path, Some(done.origin)))
}

// ---------------------------------------------------------------------------
// Choosing the file.

/// A GGUF file name's split and quant: `…-Q4_K_M-00001-of-00003.gguf`.
#[derive(Debug, PartialEq)]
struct SplitName {
    /// The path without `.gguf` and the split suffix.
    prefix: String,
    /// 1-based.
    index: usize,
    count: usize,
}

fn split_name(path: &str) -> Option<SplitName> {
    let stem = path.strip_suffix(".gguf").or_else(|| path.strip_suffix(".GGUF"))?;
    let tail: Vec<&str> = stem.rsplitn(4, '-').collect();
    // [count, "of", index, prefix]
    if let [count, of, index, prefix] = tail[..]
        && of.eq_ignore_ascii_case("of")
        && count.len() == 5
        && index.len() == 5
        && let (Ok(c), Ok(i)) = (count.parse::<usize>(), index.parse::<usize>())
        && i >= 1
        && i <= c
    {
        return Some(SplitName { prefix: prefix.to_string(), index: i, count: c });
    }
    Some(SplitName { prefix: stem.to_string(), index: 1, count: 1 })
}

/// Model weights, not a projector or a draft head stored beside them.
fn is_model_file(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    lower.ends_with(".gguf") && !["mmproj", "mtp-", "eagle3-", "dflash-", "dspark-"].iter().any(|k| name.contains(k))
}

/// Whether `path`'s name has `quant` followed by `.` or `-` (any case), as
/// llama.cpp matches a tag.
fn has_quant(path: &str, quant: &str) -> bool {
    let (name, q) = (path.rsplit('/').next().unwrap_or(path).to_ascii_uppercase(), quant.to_ascii_uppercase());
    name.match_indices(&q).any(|(at, _)| matches!(name.as_bytes().get(at + q.len()), Some(b'.' | b'-')))
}

/// The quant tag of a model file's name (`Q4_K_M`), for listings.
fn quant_of(path: &str) -> String {
    let prefix = split_name(path).map(|s| s.prefix).unwrap_or_default();
    let name = prefix.rsplit('/').next().unwrap_or(&prefix).to_string();
    match name.rfind(['-', '.']) {
        Some(at) => name[at + 1..].to_ascii_uppercase(),
        None => name,
    }
}

/// The model files (first parts) of a listing, for messages: each with its
/// quant, and how many parts.
fn listing(files: &[String]) -> String {
    let mut shown: Vec<String> = files
        .iter()
        .filter(|f| is_model_file(f))
        .filter_map(|f| split_name(f).filter(|s| s.index == 1).map(|s| (f, s)))
        .map(|(f, s)| match s.count {
            1 => format!("{f} ({})", quant_of(f)),
            n => format!("{f} ({}, {n} parts)", quant_of(f)),
        })
        .collect();
    if shown.is_empty() {
        return "no GGUF model file".into();
    }
    shown.sort();
    let n = shown.len();
    format!("{n} GGUF model file{}: {}", if n == 1 { "" } else { "s" }, capped(shown))
}

/// Names joined for a message, the first [`LISTED`] of them.
fn capped(mut names: Vec<String>) -> String {
    let more = names.len().saturating_sub(LISTED);
    names.truncate(LISTED);
    if more > 0 {
        names.push(format!("and {more} more"));
    }
    names.join(", ")
}

/// How many model files a message lists (a repository may hold thousands;
/// the message stays a line).
const LISTED: usize = 20;

/// The files (every part, in order) that `select` names among `files` (the
/// repository's paths).
fn choose(reference: &str, select: &Select, files: &[String]) -> Result<Vec<String>, HubError> {
    let models: Vec<&String> = files.iter().filter(|f| is_model_file(f) && split_name(f).is_some_and(|s| s.index == 1)).collect();
    let first = match select {
        Select::File(want) => match files.iter().find(|f| *f == want) {
            Some(f) if split_name(f).is_some_and(|s| s.index == 1) => f.clone(),
            Some(f) => {
                let s = split_name(f).expect("a .gguf name");
                return Err(HubError::NoMatch {
                    reference: reference.into(),
                    what: format!("{f} is part {} of {} of a split model; name its first part", s.index, s.count),
                    listing: listing(files),
                });
            }
            None => {
                return Err(HubError::NoMatch { reference: reference.into(), what: format!("no file {want}"), listing: listing(files) });
            }
        },
        Select::Quant(q) => {
            let tags: Vec<&str> = match q {
                Some(q) => vec![q.as_str()],
                None => vec!["Q4_K_M", "Q8_0"],
            };
            let mut found = None;
            for tag in &tags {
                let hits: Vec<&&String> = models.iter().filter(|f| has_quant(f, tag)).collect();
                match hits[..] {
                    [] => continue,
                    [one] => found = Some((*one).clone()),
                    _ => {
                        let names: Vec<String> = hits.iter().map(|f| f.to_string()).collect();
                        return Err(HubError::Ambiguous {
                            reference: reference.into(),
                            what: format!("{} model files match {tag}", hits.len()),
                            listing: capped(names),
                        });
                    }
                }
                break;
            }
            match (found, q, &models[..]) {
                (Some(f), _, _) => f,
                (None, None, [only]) => (*only).clone(),
                (None, None, many) if many.len() > 1 => {
                    return Err(HubError::Ambiguous {
                        reference: reference.into(),
                        what: "no quant given, none is Q4_K_M or Q8_0, and several model files are".into(),
                        listing: listing(files),
                    });
                }
                (None, q, _) => {
                    let what = match q {
                        Some(q) => format!("no model file matches {q}"),
                        None => "no model file".into(),
                    };
                    return Err(HubError::NoMatch { reference: reference.into(), what, listing: listing(files) });
                }
            }
        }
    };
    let split = split_name(&first).expect("a .gguf name");
    if split.count == 1 {
        return Ok(vec![first]);
    }
    let mut all = Vec::with_capacity(split.count);
    for i in 1..=split.count {
        let part = files.iter().find(|f| split_name(f).is_some_and(|s| s.prefix == split.prefix && s.count == split.count && s.index == i));
        match part {
            Some(p) => all.push(p.clone()),
            None => {
                return Err(HubError::NoMatch {
                    reference: reference.into(),
                    what: format!("part {i} of {} of {first} is not in the repository", split.count),
                    listing: listing(files),
                });
            }
        }
    }
    Ok(all)
}

// ---------------------------------------------------------------------------
// The cache.
//
// Every path below is made of the cache folder and parts that were checked
// first: the repository's two names (`valid_part`), a commit (40 hex
// digits), a blob name (a sha256 or a git object id, hex), a revision and the
// repository's file paths (`safe_path`). Nothing a server sends (a listing,
// a header) reaches the file system unchecked, and no header is used at all:
// the blob is named by the checksum the listing gives, the snapshot by the
// listing's commit.

fn is_commit(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `s` is a relative `/`-separated path that stays where it is
/// joined: no empty, `.` or `..` part, no root, no backslash, no control
/// character.
fn safe_path(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 1024
        && !s.chars().any(|c| c.is_control() || c == '\\')
        && s.split('/').all(|p| !p.is_empty() && p != "." && p != "..")
}

/// A name from a server, for a one-line message: quoted, with control
/// characters escaped and long ones cut.
fn shown_name(s: &str) -> String {
    let mut out: String = s.chars().take(120).flat_map(char::escape_debug).collect();
    if s.chars().count() > 120 {
        out.push('…');
    }
    format!("\"{out}\"")
}

/// The hub's address for messages: without a user name or password.
fn shown_endpoint(endpoint: &str) -> String {
    match url::Url::parse(endpoint) {
        Ok(mut u) if !u.username().is_empty() || u.password().is_some() => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.as_str().trim_end_matches('/').to_string()
        }
        _ => endpoint.to_string(),
    }
}

/// One repository's folder in the hub cache, in the layout `huggingface-cli`
/// writes: `models--ORG--REPO/{blobs,snapshots,refs}`.
struct RepoCache {
    dir: PathBuf,
}

impl RepoCache {
    fn new(cache: &Path, repo: &str) -> RepoCache {
        RepoCache { dir: cache.join(format!("models--{}", repo.replace('/', "--"))) }
    }

    fn snapshot(&self, commit: &str) -> PathBuf {
        debug_assert!(is_commit(commit));
        self.dir.join("snapshots").join(commit)
    }

    fn blob(&self, name: &str) -> PathBuf {
        debug_assert!(name.bytes().all(|b| b.is_ascii_hexdigit()));
        self.dir.join("blobs").join(name)
    }

    fn reference(&self, revision: &str) -> PathBuf {
        debug_assert!(safe_path(revision));
        self.dir.join("refs").join(revision)
    }
}

/// The commit `revision` points to in the cache, if known there: the
/// revision itself when it is a commit with a snapshot, else what its ref
/// (`refs/REVISION`, written after a download) names. A ref that holds no
/// commit is an error, not a path.
fn cached_commit(repo: &RepoCache, revision: &str) -> Result<Option<String>, String> {
    if is_commit(revision) && repo.snapshot(revision).is_dir() {
        return Ok(Some(revision.to_string()));
    }
    let path = repo.reference(revision);
    let Ok(text) = crate::support::fsutil::read_text(&path) else { return Ok(None) };
    let commit = text.trim();
    if !is_commit(commit) {
        return Err(format!("{} holds {}, not a commit; remove it", path.display(), shown_name(commit)));
    }
    Ok(repo.snapshot(commit).is_dir().then(|| commit.to_string()))
}

/// The files of a snapshot, as repository paths, sorted. Its entries are
/// links into `blobs/`, followed: a link whose blob is gone is no file.
/// The walk goes no deeper than a repository's paths do, so that links that
/// point back up end it rather than multiply it.
fn snapshot_files(snapshot: &Path) -> Vec<String> {
    let mut out: Vec<String> = walkdir::WalkDir::new(snapshot)
        .follow_links(true)
        .max_depth(SNAPSHOT_DEPTH)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| e.path().strip_prefix(snapshot).ok().map(|rel| rel.to_string_lossy().replace('\\', "/")))
        .collect();
    out.sort();
    out
}

/// How deep a snapshot's files are looked for (GGUF repositories keep
/// their quants one or two folders down).
const SNAPSHOT_DEPTH: usize = 8;

// ---------------------------------------------------------------------------
// Resolving.

/// A reference resolved to local files.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The model's file in the cache (a split model's first part).
    pub path: PathBuf,
    pub origin: Origin,
}

/// The repository's listing as the hub gives it with `blobs=true`: the
/// commit, and each file's size and checksum.
#[derive(Deserialize)]
struct Listing {
    sha: String,
    siblings: Vec<Sibling>,
}

#[derive(Deserialize)]
struct Sibling {
    rfilename: String,
    #[serde(default)]
    size: Option<u64>,
    /// The git object id (what the hub names a file that is not in LFS by).
    #[serde(default, rename = "blobId")]
    blob_id: Option<String>,
    #[serde(default)]
    lfs: Option<Lfs>,
}

#[derive(Deserialize)]
struct Lfs {
    sha256: String,
    #[serde(default)]
    size: Option<u64>,
}

/// How a file is fetched and checked: the blob it is stored as, its size,
/// and the sha256 to check (LFS files; a file in git has its object id only).
struct Wanted {
    blob: String,
    size: u64,
    sha256: Option<String>,
}

impl Sibling {
    fn wanted(&self) -> Option<Wanted> {
        let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
        match &self.lfs {
            Some(l) if hex(&l.sha256, 64) => {
                let sha = l.sha256.to_ascii_lowercase();
                Some(Wanted { blob: sha.clone(), size: l.size.or(self.size)?, sha256: Some(sha) })
            }
            Some(_) => None,
            None => {
                let id = self.blob_id.as_deref().filter(|id| hex(id, 40))?;
                Some(Wanted { blob: id.to_ascii_lowercase(), size: self.size?, sha256: None })
            }
        }
    }
}

/// Resolves `r`: from the cache alone when every file is there, else (unless
/// offline) from the hub, downloading what the cache lacks with a progress
/// bar in `progress`.
pub fn resolve(r: &HubRef, env: &HubEnv, progress: &dyn Progress) -> Result<Resolved, HubError> {
    let repo = RepoCache::new(&env.cache, &r.repo);
    let cache_error = |why: String| HubError::Cache { reference: r.text.clone(), cache: env.cache.display().to_string(), why };
    // Components, not the path as given: `file/` would read as absent.
    let cache: PathBuf = env.cache.components().collect();
    if let Some(file) = cache.ancestors().find(|p| p.exists()).filter(|p| !p.is_dir()) {
        return Err(cache_error(format!(
            "{} is a file, not a folder (HF_HUB_CACHE or HF_HOME names where the cache goes)",
            file.display()
        )));
    }
    let mut cached_listing = None;
    if let Some(commit) = cached_commit(&repo, r.revision()).map_err(cache_error)? {
        let snapshot = repo.snapshot(&commit);
        let files = snapshot_files(&snapshot);
        if let Ok(chosen) = choose(&r.text, &r.select, &files) {
            // A cached file is the listed one only while its bytes still hash
            // to the name its blob was given: one changed or cut short after
            // the download is fetched again (or, offline, refused).
            match chosen.iter().find_map(|f| changed_since_download(&snapshot, f)) {
                None => return Ok(resolved(r, &snapshot, commit, chosen)),
                Some(changed) if env.offline => return Err(cache_error(changed.offline_message())),
                Some(changed) => changed.forget(),
            }
        }
        cached_listing = Some(files);
    }
    if env.offline {
        let listing = match cached_listing {
            Some(files) => format!("; its cached snapshot has {}", listing(&files)),
            None => String::new(),
        };
        return Err(HubError::Offline { reference: r.text.clone(), cache: env.cache.display().to_string(), listing });
    }
    let hub = Client::new(r, env);
    let listing = hub.list()?;
    let files: Vec<String> = listing.siblings.iter().map(|s| s.rfilename.clone()).collect();
    let chosen = choose(&r.text, &r.select, &files)?;
    let snapshot = repo.snapshot(&listing.sha);
    for file in &chosen {
        if snapshot.join(file).is_file() {
            match changed_since_download(&snapshot, file) {
                None => continue,
                Some(changed) => changed.forget(),
            }
        }
        let sibling = listing.siblings.iter().find(|s| &s.rfilename == file).expect("chosen from the listing");
        let wanted = sibling.wanted().ok_or_else(|| {
            hub.unsafe_value(format!("no usable size and checksum for {} (an LFS sha256 or a git object id)", shown_name(file)))
        })?;
        hub.fetch(&repo, &listing.sha, file, &wanted, progress)?;
    }
    // A branch or tag gets its ref, for the next run to find offline.
    if !is_commit(r.revision()) {
        let path = repo.reference(r.revision());
        std::fs::create_dir_all(path.parent().expect("under refs/"))
            .map_err(anyhow::Error::from)
            .and_then(|()| crate::support::fsutil::write_atomic(&path, listing.sha.as_bytes()))
            .map_err(|e| cache_error(format!("cannot write {}: {e:#}", path.display())))?;
    }
    Ok(resolved(r, &snapshot, listing.sha, chosen))
}

/// A cached file whose blob no longer hashes to its name.
struct Changed {
    link: PathBuf,
    blob: PathBuf,
    got: String,
}

impl Changed {
    fn offline_message(&self) -> String {
        let want = self.blob.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        format!(
            "{} is not the file the hub listed (its sha256 is {}…, its name says {}…): it changed after the download; run online \
             to fetch it again, or delete it",
            self.link.display(),
            &self.got[..self.got.len().min(12)],
            &want[..want.len().min(12)]
        )
    }

    /// Drops the blob and the snapshot's link to it, so that it is fetched
    /// again.
    fn forget(self) {
        let _ = std::fs::remove_file(&self.blob);
        let _ = std::fs::remove_file(&self.link);
    }
}

/// Whether `file` of `snapshot` changed since it was downloaded: its blob is
/// named by the listed sha256, so its bytes must hash to that name (an LFS
/// file; a file in git is named by its git id, which is not checked). The
/// hash is posrecall's cached one (by path, size and modification time), the
/// one the run file records.
fn changed_since_download(snapshot: &Path, file: &str) -> Option<Changed> {
    let link = snapshot.join(file);
    let blob = std::fs::canonicalize(&link).ok()?;
    let name = blob.file_name()?.to_string_lossy().into_owned();
    if name.len() != 64 || !name.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let got = crate::support::fsutil::cached_sha256(&blob).ok()?;
    (!got.eq_ignore_ascii_case(&name)).then_some(Changed { link, blob, got })
}

fn resolved(r: &HubRef, snapshot: &Path, commit: String, chosen: Vec<String>) -> Resolved {
    Resolved {
        path: snapshot.join(&chosen[0]),
        origin: Origin {
            reference: r.text.clone(),
            repo: r.repo.clone(),
            revision: commit,
            file: chosen[0].clone(),
            files: if chosen.len() > 1 { chosen } else { Vec::new() },
        },
    }
}

// ---------------------------------------------------------------------------
// Talking to the hub.

/// The most a file listing may be (the hub's largest repositories list tens
/// of thousands of files in a few MB).
const LISTING_LIMIT: u64 = 64 << 20;

/// Requests to one hub for one reference.
struct Client<'a> {
    r: &'a HubRef,
    env: &'a HubEnv,
    agent: ureq::Agent,
    /// The hub's address as messages show it.
    shown: String,
}

/// What a failed request means.
enum Failure {
    Status(u16),
    Stalled,
    /// The request's whole-answer bound passed.
    TooLong,
    Other(String),
}

impl<'a> Client<'a> {
    fn new(r: &'a HubRef, env: &'a HubEnv) -> Client<'a> {
        let wait = Some(env.timeout);
        let config = ureq::Agent::config_builder()
            .timeout_connect(wait)
            .timeout_resolve(wait)
            .timeout_send_request(wait)
            .timeout_recv_response(wait)
            // No progress for this long ends a download; a slow one goes on.
            .timeout_per_read(wait)
            .max_redirects(MAX_REDIRECTS)
            .http_status_as_error(false)
            .user_agent(concat!("posrecall/", env!("CARGO_PKG_VERSION")))
            .build();
        Client { r, env, agent: config.new_agent(), shown: shown_endpoint(&env.endpoint) }
    }

    /// `ENDPOINT/SEGMENTS…`, each segment percent-encoded as one.
    fn url<'s>(&self, segments: impl IntoIterator<Item = &'s str>) -> Result<url::Url, HubError> {
        let mut u = url::Url::parse(&self.env.endpoint).map_err(|e| self.listing_error(format!("HF_ENDPOINT is not a URL ({e})")))?;
        u.path_segments_mut()
            .map_err(|()| self.listing_error("HF_ENDPOINT is not a URL with a path".into()))?
            .pop_if_empty()
            .extend(segments);
        Ok(u)
    }

    /// `url` from `range_from` on; `whole`: the most the request may take
    /// altogether, answer included (a file list, which a server sending it a
    /// byte at a time would otherwise stretch without end; a download has no
    /// such bound, only one on each read).
    fn get(
        &self,
        url: &url::Url,
        range_from: u64,
        whole: Option<std::time::Duration>,
    ) -> Result<ureq::http::Response<ureq::Body>, Failure> {
        let mut request = self.agent.get(url.as_str());
        if let Some(t) = &self.env.token {
            request = request.header("Authorization", format!("Bearer {t}"));
        }
        if range_from > 0 {
            request = request.header("Range", format!("bytes={range_from}-"));
        }
        if whole.is_some() {
            request = request.config().timeout_global(whole).build();
        }
        match request.call() {
            Ok(response) if response.status().is_success() => Ok(response),
            Ok(response) => Err(Failure::Status(response.status().as_u16())),
            Err(e) => Err(failure(e)),
        }
    }

    fn listing_error(&self, why: String) -> HubError {
        HubError::Listing { reference: self.r.text.clone(), endpoint: self.shown.clone(), why }
    }

    fn unsafe_value(&self, what: String) -> HubError {
        HubError::Unsafe { reference: self.r.text.clone(), endpoint: self.shown.clone(), what }
    }

    fn stalled(&self, what: String) -> HubError {
        HubError::Stalled { reference: self.r.text.clone(), endpoint: self.shown.clone(), what, seconds: self.env.timeout.as_secs_f64() }
    }

    fn refused(&self, code: u16, what: String) -> HubError {
        match code {
            401 | 403 => unauthorized(self.r, self.env, code),
            404 => HubError::NotFound { reference: self.r.text.clone(), endpoint: self.shown.clone(), what },
            n => self.listing_error(format!("it answered {n} for the {what}")),
        }
    }

    /// The file list at the revision, every value that becomes a path
    /// checked.
    fn list(&self) -> Result<Listing, HubError> {
        let (org, name) = self.r.repo.split_once('/').expect("ORG/REPO");
        let mut url = self.url(["api", "models", org, name, "revision", self.r.revision()])?;
        url.query_pairs_mut().append_pair("blobs", "true");
        let what = || format!("repository {} at revision {}", self.r.repo, self.r.revision());
        // A file list sent a byte at a time never stalls a read: the whole
        // answer gets twice the timeout.
        let whole = self.env.timeout * 2;
        let too_long =
            || self.listing_error(format!("the file list took longer than {} s to arrive (twice the timeout)", whole.as_secs_f64()));
        let mut response = match self.get(&url, 0, Some(whole)) {
            Ok(r) => r,
            Err(Failure::Status(code)) => return Err(self.refused(code, what())),
            Err(Failure::Stalled) => return Err(self.stalled("the file list".into())),
            Err(Failure::TooLong) => return Err(too_long()),
            Err(Failure::Other(why)) => return Err(self.listing_error(why)),
        };
        let listing: Listing = match response.body_mut().with_config().limit(LISTING_LIMIT).read_json() {
            Ok(l) => l,
            Err(ureq::Error::Timeout(ureq::Timeout::Global)) => return Err(too_long()),
            Err(ureq::Error::Timeout(_)) => return Err(self.stalled("the file list".into())),
            Err(e) => return Err(self.listing_error(format!("an unreadable answer ({e})"))),
        };
        if !is_commit(&listing.sha) {
            return Err(self.unsafe_value(format!("the commit {} (not 40 hex digits)", shown_name(&listing.sha))));
        }
        if let Some(bad) = listing.siblings.iter().find(|s| !safe_path(&s.rfilename)) {
            return Err(
                self.unsafe_value(format!("the file name {} (not a relative path inside the repository)", shown_name(&bad.rfilename)))
            );
        }
        Ok(listing)
    }

    /// Downloads `file` into its blob (resuming a partial download), checks
    /// its size and sha256, and links it into the snapshot of `commit`. A
    /// download that stops early is kept as `BLOB.part` for the next run to
    /// resume; one that is not the listed file is removed.
    fn fetch(&self, repo: &RepoCache, commit: &str, file: &str, wanted: &Wanted, progress: &dyn Progress) -> Result<(), HubError> {
        let download_error = |why: String| HubError::Download { reference: self.r.text.clone(), file: file.to_string(), why };
        let io = |what: &str, path: &Path, e: std::io::Error| download_error(format!("cannot {what} {}: {e}", path.display()));
        let blob = repo.blob(&wanted.blob);
        let blobs = blob.parent().expect("blobs/");
        std::fs::create_dir_all(blobs).map_err(|e| io("create", blobs, e))?;
        if !blob.is_file() || std::fs::metadata(&blob).map(|m| m.len()).ok() != Some(wanted.size) {
            let mut part = blob.clone().into_os_string();
            part.push(".part");
            let part = PathBuf::from(part);
            self.download(commit, file, wanted, &part, progress)?;
            if let Some(want) = &wanted.sha256 {
                let got =
                    crate::support::fsutil::file_sha256(&part).map_err(|e| download_error(format!("cannot read the download: {e:#}")))?;
                if !got.eq_ignore_ascii_case(want) {
                    let _ = std::fs::remove_file(&part);
                    return Err(HubError::Corrupt {
                        reference: self.r.text.clone(),
                        file: file.to_string(),
                        got: got[..12].to_string(),
                        want: want[..12].to_string(),
                    });
                }
            }
            std::fs::rename(&part, &blob).map_err(|e| io("move the download to", &blob, e))?;
        }
        // The snapshot's link, relative as huggingface-cli writes it.
        let link = repo.snapshot(commit).join(file);
        let parent = link.parent().expect("inside the snapshot");
        std::fs::create_dir_all(parent).map_err(|e| io("create", parent, e))?;
        let up = "../".repeat(file.split('/').count() + 1);
        if std::fs::symlink_metadata(&link).is_ok() {
            std::fs::remove_file(&link).map_err(|e| io("replace", &link, e))?;
        }
        let target = format!("{up}blobs/{}", wanted.blob);
        symlink(Path::new(&target), &link).map_err(|e| io("link", &link, e))
    }

    /// Brings `part` to the file's full size: resumes from what it holds,
    /// reads no more than the file's size, and stops at a stall.
    fn download(&self, commit: &str, file: &str, wanted: &Wanted, part: &Path, progress: &dyn Progress) -> Result<(), HubError> {
        use std::io::{Read, Write};
        let download_error = |why: String| HubError::Download { reference: self.r.text.clone(), file: file.to_string(), why };
        let (org, name) = self.r.repo.split_once('/').expect("ORG/REPO");
        let url = self.url([org, name, "resolve", commit].into_iter().chain(file.split('/')))?;
        let mut have = std::fs::metadata(part).map(|m| m.len()).unwrap_or(0);
        if have > wanted.size {
            let _ = std::fs::remove_file(part);
            have = 0;
        }
        // A listed size the disk cannot hold is refused before a byte comes.
        if let Some(free) = free_space(part.parent().unwrap_or(Path::new(".")))
            && wanted.size - have > free
        {
            return Err(download_error(format!(
                "it is {} bytes and the cache's file system has {free} bytes free; free some space, or set HF_HOME to a larger disk",
                wanted.size - have
            )));
        }
        let mut response = match self.get(&url, have, None) {
            Ok(r) => r,
            // The part is whole already (a run stopped before the check).
            Err(Failure::Status(416)) if have == wanted.size => return Ok(()),
            Err(Failure::Status(code)) => return Err(self.refused(code, format!("file {file}"))),
            Err(Failure::Stalled | Failure::TooLong) => return Err(self.stalled(format!("starting the download of {file}"))),
            Err(Failure::Other(why)) => {
                return Err(download_error(format!("the download failed ({why}); run again to resume it from where it stopped")));
            }
        };
        // A server that ignores the range sends the whole file again.
        if response.status().as_u16() != 206 {
            have = 0;
        }
        let mut out = std::fs::OpenOptions::new()
            .create(true)
            .append(have > 0)
            .write(true)
            .truncate(have == 0)
            .open(part)
            .map_err(|e| download_error(format!("cannot write {}: {e}", part.display())))?;
        let bar = progress.bar(wanted.size, file.rsplit('/').next().unwrap_or(file), Unit::Bytes);
        bar.set_position(have);
        // One byte more than the file can hold tells a server that sends too much.
        let mut body = response.body_mut().with_config().limit(u64::MAX).reader().take((wanted.size - have).saturating_add(1));
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = match body.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut || is_timeout(&e) => {
                    let _ = out.flush();
                    return Err(self.stalled(format!("downloading {file} (kept {} of {} bytes to resume)", have, wanted.size)));
                }
                Err(e) => {
                    let _ = out.flush();
                    return Err(download_error(format!(
                        "the download failed after {have} of {} bytes ({e}); run again to resume it from where it stopped",
                        wanted.size
                    )));
                }
            };
            out.write_all(&buf[..n]).map_err(|e| download_error(format!("cannot write {}: {e}", part.display())))?;
            have += n as u64;
            bar.inc(n as u64);
        }
        drop(bar);
        out.sync_all().map_err(|e| download_error(format!("cannot write {}: {e}", part.display())))?;
        if have > wanted.size {
            let _ = std::fs::remove_file(part);
            return Err(download_error(format!(
                "the hub sent more than the {} bytes it lists (removed; run again to download it afresh)",
                wanted.size
            )));
        }
        if have < wanted.size {
            return Err(download_error(format!(
                "the hub sent {have} of the {} bytes it lists; run again to resume it from where it stopped",
                wanted.size
            )));
        }
        Ok(())
    }
}

/// How many redirects a request follows (the hub sends one, to its file
/// store).
const MAX_REDIRECTS: u32 = 5;

fn failure(e: ureq::Error) -> Failure {
    match e {
        ureq::Error::StatusCode(n) => Failure::Status(n),
        ureq::Error::Timeout(ureq::Timeout::Global) => Failure::TooLong,
        ureq::Error::Timeout(_) => Failure::Stalled,
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => Failure::Stalled,
        ureq::Error::TooManyRedirects => Failure::Other(format!("more than {MAX_REDIRECTS} redirects")),
        e => Failure::Other(e.to_string()),
    }
}

/// Whether a read error is ureq's timeout, passed through `io::Error`.
fn is_timeout(e: &std::io::Error) -> bool {
    e.get_ref().and_then(|inner| inner.downcast_ref::<ureq::Error>()).is_some_and(|u| matches!(u, ureq::Error::Timeout(_)))
}

/// Bytes free to this user on the file system holding `dir`; `None` where
/// that cannot be read.
fn free_space(dir: &Path) -> Option<u64> {
    let s = rustix::fs::statvfs(dir).ok()?;
    Some(s.f_bavail.saturating_mul(s.f_frsize))
}

#[cfg(unix)]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    std::os::unix::fs::symlink(target, link)
}

#[cfg(not(unix))]
fn symlink(target: &Path, link: &Path) -> std::io::Result<()> {
    // Without symbolic links the blob is copied (huggingface-cli does the same).
    let blob = link.parent().expect("inside the snapshot").join(target);
    std::fs::copy(blob, link).map(|_| ())
}

fn unauthorized(r: &HubRef, env: &HubEnv, code: u16) -> HubError {
    let why = match env.token {
        Some(_) => {
            "it refused the token (HF_TOKEN or the saved token); the repository is gated or private and the token cannot read it, or it does not exist"
        }
        None => "the repository is gated or private, or does not exist; set HF_TOKEN to a token that can read it",
    };
    let status = if code == 403 { "403 (forbidden)" } else { "401 (unauthorized)" };
    HubError::Unauthorized { reference: r.text.clone(), endpoint: shown_endpoint(&env.endpoint), status, why }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_parse_as_llama_cpp_writes_them() {
        let r = HubRef::parse("unsloth/Qwen3-GGUF:Q4_K_XL").unwrap();
        assert_eq!(
            (r.repo.as_str(), &r.select, r.revision.as_deref()),
            ("unsloth/Qwen3-GGUF", &Select::Quant(Some("Q4_K_XL".into())), None)
        );
        let r = HubRef::parse("org/repo/sub/m-Q8_0.gguf@v1.0").unwrap();
        assert_eq!((&r.select, r.revision.as_deref()), (&Select::File("sub/m-Q8_0.gguf".into()), Some("v1.0")));
        assert_eq!(HubRef::parse("org/repo").unwrap().select, Select::Quant(None));
        for bad in ["org", "org/", "/repo", "org/repo:", "org/repo@", "org/repo/readme.md", "org/m.gguf", "org/repo/x.gguf:Q4", "o rg/repo"]
        {
            assert!(HubRef::parse(bad).is_err(), "{bad}");
        }
        assert!(!is_reference("./org/repo"));
        assert!(!is_reference("/abs/path.gguf"));
    }

    #[test]
    fn quants_are_chosen_as_llama_cpp_chooses_them_and_ambiguity_is_an_error() {
        let files: Vec<String> = [
            "README.md",
            "m-Q4_K_M.gguf",
            "m-Q8_0.gguf",
            "mmproj-m-F16.gguf",
            "UD-Q4_K_XL/m-UD-Q4_K_XL-00001-of-00002.gguf",
            "UD-Q4_K_XL/m-UD-Q4_K_XL-00002-of-00002.gguf",
            "m-Q4_K_XL.gguf",
        ]
        .map(String::from)
        .to_vec();
        let pick = |s: Select| choose("r", &s, &files);
        assert_eq!(pick(Select::Quant(Some("q8_0".into()))).unwrap(), ["m-Q8_0.gguf"]);
        assert_eq!(pick(Select::Quant(None)).unwrap(), ["m-Q4_K_M.gguf"]);
        let e = pick(Select::Quant(Some("Q4_K_XL".into()))).unwrap_err().to_string();
        assert!(e.contains("2 model files match Q4_K_XL") && e.contains("m-Q4_K_XL.gguf"), "{e}");
        assert_eq!(
            pick(Select::Quant(Some("UD-Q4_K_XL".into()))).unwrap(),
            ["UD-Q4_K_XL/m-UD-Q4_K_XL-00001-of-00002.gguf", "UD-Q4_K_XL/m-UD-Q4_K_XL-00002-of-00002.gguf"]
        );
        let many: Vec<String> = (0..5000).map(|i| format!("m-{i}-Q5_K.gguf")).collect();
        let e = choose("r", &Select::Quant(Some("Q2_K".into())), &many).unwrap_err().to_string();
        assert!(e.contains("5000 GGUF model files") && e.ends_with("and 4980 more") && e.len() < 1000, "{e}");
        let e = pick(Select::Quant(Some("Q2_K".into()))).unwrap_err().to_string();
        assert!(e.contains("no model file matches Q2_K") && e.contains("4 GGUF model files") && e.contains("2 parts"), "{e}");
        assert!(pick(Select::File("UD-Q4_K_XL/m-UD-Q4_K_XL-00002-of-00002.gguf".into())).unwrap_err().to_string().contains("part 2 of 2"));
        let missing: Vec<String> = files.iter().filter(|f| !f.ends_with("-00002-of-00002.gguf")).cloned().collect();
        let e = choose("r", &Select::Quant(Some("UD-Q4_K_XL".into())), &missing).unwrap_err().to_string();
        assert!(e.contains("part 2 of 2"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn the_cache_is_read_where_huggingface_cli_writes_it() {
        let dir = tempfile::tempdir().unwrap();
        let commit = "0123456789abcdef0123456789abcdef01234567";
        // huggingface-cli's layout: snapshots hold links into blobs/.
        let repo_dir = dir.path().join("models--org--repo");
        let snapshot = repo_dir.join("snapshots").join(commit);
        std::fs::create_dir_all(snapshot.join("sub")).unwrap();
        std::fs::create_dir_all(repo_dir.join("blobs")).unwrap();
        std::fs::create_dir_all(repo_dir.join("refs")).unwrap();
        std::fs::write(repo_dir.join("blobs/b1"), "x").unwrap();
        std::os::unix::fs::symlink("../../../blobs/b1", snapshot.join("sub/m-Q8_0.gguf")).unwrap();
        std::os::unix::fs::symlink("../../blobs/b1", snapshot.join("m-Q4_0.gguf")).unwrap();
        std::os::unix::fs::symlink("../../blobs/gone", snapshot.join("m-Q2_K.gguf")).unwrap();
        assert_eq!(snapshot_files(&snapshot), ["m-Q4_0.gguf", "sub/m-Q8_0.gguf"], "a link whose blob is gone is no file");

        let repo = RepoCache::new(dir.path(), "org/repo");
        assert_eq!(repo.snapshot(commit), snapshot);
        assert_eq!(cached_commit(&repo, commit).unwrap().as_deref(), Some(commit), "a commit needs no ref");
        assert_eq!(cached_commit(&repo, "main").unwrap(), None, "no ref yet");
        std::fs::write(repo_dir.join("refs/main"), commit).unwrap();
        assert_eq!(cached_commit(&repo, "main").unwrap().as_deref(), Some(commit));
        std::fs::write(repo_dir.join("refs/v1"), format!("{commit}\n")).unwrap();
        assert_eq!(cached_commit(&repo, "v1").unwrap().as_deref(), Some(commit), "a ref written with a newline");
        std::fs::write(repo_dir.join("refs/old"), "fedcba9876543210fedcba9876543210fedcba98").unwrap();
        assert_eq!(cached_commit(&repo, "old").unwrap(), None, "a ref to a snapshot not in the cache");
        // A ref that names a path, not a commit, is refused.
        std::fs::write(repo_dir.join("refs/bad"), "../..").unwrap();
        let e = cached_commit(&repo, "bad").unwrap_err();
        assert!(e.contains("not a commit"), "{e}");
    }

    #[test]
    fn what_a_server_sends_must_be_a_path_inside_the_cache() {
        for good in ["m.gguf", "sub/m-Q4_K_M.gguf", "refs/pr/1", "v1.0"] {
            assert!(safe_path(good), "{good}");
        }
        for bad in ["", "/etc/passwd", "../x", "a/../../x", "a//b", "./a", "a/.", "a\\b", "a\nb", "a\u{1b}[31m", "x/"] {
            assert!(!safe_path(bad), "{bad:?}");
        }
        for bad in ["org/repo@/tmp/x", "org/repo@../..", "org/repo:Q4@a/../../b"] {
            assert!(HubRef::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(HubRef::parse("org/repo@refs/pr/1").unwrap().revision.as_deref(), Some("refs/pr/1"));
        assert_eq!(shown_endpoint("http://user:secret@127.0.0.1:8080/"), "http://127.0.0.1:8080");
        assert_eq!(shown_name("a\nb\u{1b}"), "\"a\\nb\\u{1b}\"");
    }
}
