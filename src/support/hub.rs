//! Models named by a Hugging Face hub reference, as llama.cpp's `-hf` takes
//! them: `ORG/REPO[:QUANT]` or `ORG/REPO/FILE.gguf`, optionally `@REVISION`.
//!
//! A reference resolves to files in the standard hub cache (the layout
//! `huggingface-cli` writes: `models--ORG--REPO/{blobs,snapshots,refs}`,
//! under `HF_HUB_CACHE`, or `HF_HOME/hub`, or `~/.cache/huggingface/hub`).
//! A reference whose files are all in the cache is used with no network at
//! all; otherwise the repository's file list is read, the quant's file (every
//! part of a split model) chosen and downloaded, resumably, by the `hf-hub`
//! crate (which speaks the hub's protocol), and each file's sha256 checked
//! against the one the hub lists. `HF_ENDPOINT` names another hub,
//! `HF_TOKEN` (or the token file `huggingface-cli login` writes) is sent and
//! never printed, and `HF_HUB_OFFLINE` allows the cache only.
//!
//! The cache's folders are named by `hf-hub`'s `Cache`, `Repo` and
//! `CacheRepo`, the ones its downloads write. Three things are still done
//! here because `hf-hub` 0.5 does them otherwise: where the cache and the
//! token are (its `Cache::from_env` reads `HF_HOME` only, not `HF_HUB_CACHE`,
//! `XDG_CACHE_HOME` or `HF_TOKEN_PATH`, and its default panics with no home
//! folder); the offline lookup (its `CacheRepo::get` answers for one named
//! file at a branch's ref, but choosing a quant needs the snapshot's file list,
//! and a commit given as the revision has no ref; the ref's path it keeps
//! private); and the file list with each file's sha256 (its `RepoInfo` has no
//! `lfs` field).

use hf_hub::api::sync::{Api, ApiBuilder, ApiError};
use hf_hub::{Cache, Repo, RepoType};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

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
    #[error("{reference}: the hub at {endpoint} answered 401 (unauthorized): {why}")]
    Unauthorized { reference: String, endpoint: String, why: &'static str },
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
}

/// The hub settings the environment gives.
#[derive(Debug, Clone)]
pub struct HubEnv {
    pub endpoint: String,
    /// The hub cache folder (`…/hub`).
    pub cache: PathBuf,
    pub token: Option<String>,
    pub offline: bool,
}

impl HubEnv {
    /// As `huggingface_hub` reads them: `HF_ENDPOINT`, `HF_HUB_CACHE` or
    /// `HF_HOME`, `HF_TOKEN` or the token file, `HF_HUB_OFFLINE`.
    pub fn from_env() -> HubEnv {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let home = var("HF_HOME").map(PathBuf::from).unwrap_or_else(|| {
            let cache = var("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .unwrap_or_else(|| std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(".")).join(".cache"));
            cache.join("huggingface")
        });
        let token_file = var("HF_TOKEN_PATH").map(PathBuf::from).unwrap_or_else(|| home.join("token"));
        let token =
            var("HF_TOKEN").or_else(|| std::fs::read_to_string(token_file).ok().map(|t| t.trim().to_string()).filter(|t| !t.is_empty()));
        let offline = var("HF_HUB_OFFLINE").is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"));
        HubEnv {
            endpoint: var("HF_ENDPOINT").unwrap_or_else(|| "https://huggingface.co".into()).trim_end_matches('/').to_string(),
            cache: var("HF_HUB_CACHE").map(PathBuf::from).unwrap_or_else(|| home.join("hub")),
            token,
            offline,
        }
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
            Some((b, r)) if !r.is_empty() && !r.contains(char::is_whitespace) => (b, Some(r.to_string())),
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
pub fn locate(model: &Path) -> Result<(PathBuf, Option<Origin>), HubError> {
    let text = model.to_string_lossy();
    if !is_reference(&text) {
        return Ok((model.to_path_buf(), None));
    }
    let r = HubRef::parse(&text)?;
    // A bar where indicatif would draw one: on a terminal.
    let show = !indicatif::ProgressDrawTarget::stderr().is_hidden();
    let done = resolve(&r, &HubEnv::from_env(), show)?;
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
    format!("{} GGUF model file{}: {}", shown.len(), if shown.len() == 1 { "" } else { "s" }, shown.join(", "))
}

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
                        let names: Vec<&str> = hits.iter().map(|f| f.as_str()).collect();
                        return Err(HubError::Ambiguous {
                            reference: reference.into(),
                            what: format!("{} model files match {tag}", hits.len()),
                            listing: names.join(", "),
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

fn is_commit(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The commit `repo`'s revision points to in `cache`, if known there: the
/// revision itself when it is a commit with a snapshot, else what its ref
/// (`refs/REVISION`, which `hf-hub` writes after a download) names.
fn cached_commit(cache: &Cache, repo: &Repo) -> Option<String> {
    let snapshot = |commit: &str| cache.repo(repo.clone()).pointer_path(commit);
    let revision = repo.revision();
    if is_commit(revision) && snapshot(revision).is_dir() {
        return Some(revision.to_string());
    }
    let commit = std::fs::read_to_string(cache.path().join(repo.folder_name()).join("refs").join(revision)).ok()?;
    let commit = commit.trim().to_string();
    snapshot(&commit).is_dir().then_some(commit)
}

/// The files of a snapshot, as repository paths, sorted. Its entries are
/// links into `blobs/`, followed: a link whose blob is gone is no file.
fn snapshot_files(snapshot: &Path) -> Vec<String> {
    let mut out: Vec<String> = walkdir::WalkDir::new(snapshot)
        .follow_links(true)
        .into_iter()
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| e.path().strip_prefix(snapshot).ok().map(|rel| rel.to_string_lossy().replace('\\', "/")))
        .collect();
    out.sort();
    out
}

// ---------------------------------------------------------------------------
// Resolving.

/// A reference resolved to local files.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The model's file in the cache (a split model's first part).
    pub path: PathBuf,
    pub origin: Origin,
}

/// The repository's listing as the hub gives it with `blobs=true` (with
/// each file's sha256, which `hf_hub::api::RepoInfo` drops).
#[derive(Deserialize)]
struct Listing {
    sha: String,
    siblings: Vec<Sibling>,
}

#[derive(Deserialize)]
struct Sibling {
    rfilename: String,
    #[serde(default)]
    lfs: Option<Lfs>,
}

#[derive(Deserialize)]
struct Lfs {
    sha256: String,
}

/// Resolves `r`: from the cache alone when every file is there, else (unless
/// offline) from the hub, downloading what the cache lacks with a progress
/// bar when `show_progress`.
pub fn resolve(r: &HubRef, env: &HubEnv, show_progress: bool) -> Result<Resolved, HubError> {
    let cache = Cache::new(env.cache.clone());
    let repo = Repo::with_revision(r.repo.clone(), RepoType::Model, r.revision().to_string());
    let cached = cache.repo(repo.clone());
    let mut cached_listing = None;
    if let Some(commit) = cached_commit(&cache, &repo) {
        let snapshot = cached.pointer_path(&commit);
        let files = snapshot_files(&snapshot);
        if let Ok(chosen) = choose(&r.text, &r.select, &files) {
            return Ok(resolved(r, &snapshot, commit, chosen));
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
    // From this cache, not ApiBuilder::new(), whose default cache panics with
    // no home folder; the token is the one HubEnv found.
    let api = ApiBuilder::from_cache(cache)
        .with_endpoint(env.endpoint.clone())
        .with_token(env.token.clone())
        .with_progress(false)
        .build()
        .map_err(|e| HubError::Listing { reference: r.text.clone(), endpoint: env.endpoint.clone(), why: e.to_string() })?;
    let listing = list(&api, &repo, r, env)?;
    let files: Vec<String> = listing.siblings.iter().map(|s| s.rfilename.clone()).collect();
    let chosen = choose(&r.text, &r.select, &files)?;
    let snapshot = cached.pointer_path(&listing.sha);
    for file in &chosen {
        if snapshot.join(file).is_file() {
            continue;
        }
        let want = listing.siblings.iter().find(|s| &s.rfilename == file).and_then(|s| s.lfs.as_ref()).map(|l| l.sha256.clone());
        download(&api, &repo, r, env, file, want, show_progress)?;
    }
    if !snapshot.is_dir() {
        return Err(HubError::Cache {
            reference: r.text.clone(),
            cache: env.cache.display().to_string(),
            why: format!("the downloads did not land in the snapshot of commit {} (the hub changed the revision meanwhile?)", listing.sha),
        });
    }
    Ok(resolved(r, &snapshot, listing.sha, chosen))
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

/// The status code a failed request got, if it got one.
fn status(e: &ApiError) -> Option<u16> {
    match e {
        ApiError::RequestError(b) => match **b {
            ureq::Error::StatusCode(n) => Some(n),
            _ => None,
        },
        ApiError::TooManyRetries(inner) => status(inner),
        _ => None,
    }
}

fn unauthorized(r: &HubRef, env: &HubEnv) -> HubError {
    let why = match env.token {
        Some(_) => {
            "it refused the token (HF_TOKEN or the saved token); the repository is gated or private and the token cannot read it, or it does not exist"
        }
        None => "the repository is gated or private, or does not exist; set HF_TOKEN to a token that can read it",
    };
    HubError::Unauthorized { reference: r.text.clone(), endpoint: env.endpoint.clone(), why }
}

fn list(api: &Api, repo: &Repo, r: &HubRef, env: &HubEnv) -> Result<Listing, HubError> {
    let request = api.repo(repo.clone()).info_request().query("blobs", "true");
    let failed = |why: String| HubError::Listing { reference: r.text.clone(), endpoint: env.endpoint.clone(), why };
    match request.call() {
        Ok(mut response) => response.body_mut().read_json::<Listing>().map_err(|e| failed(format!("an unreadable answer ({e})"))),
        Err(ureq::Error::StatusCode(401 | 403)) => Err(unauthorized(r, env)),
        Err(ureq::Error::StatusCode(404)) => Err(HubError::NotFound {
            reference: r.text.clone(),
            endpoint: env.endpoint.clone(),
            what: format!("repository {} at revision {}", r.repo, r.revision()),
        }),
        Err(e) => Err(failed(e.to_string())),
    }
}

/// A progress bar for one file (hidden unless shown).
struct Bar(indicatif::ProgressBar);

impl hf_hub::api::Progress for Bar {
    fn init(&mut self, size: usize, filename: &str) {
        self.0.set_length(size as u64);
        self.0.set_position(0);
        self.0.set_message(filename.to_string());
    }
    fn update(&mut self, size: usize) {
        self.0.inc(size as u64);
    }
    fn finish(&mut self) {
        self.0.finish_and_clear();
    }
}

fn download(api: &Api, repo: &Repo, r: &HubRef, env: &HubEnv, file: &str, want: Option<String>, show: bool) -> Result<(), HubError> {
    let bar = match show {
        true => {
            let b = indicatif::ProgressBar::new(0);
            b.set_style(crate::support::progress::style("{msg} [{bar:30}] {bytes}/{total_bytes}  {bytes_per_sec}  ETA {eta}"));
            b
        }
        false => indicatif::ProgressBar::hidden(),
    };
    let path = match api.repo(repo.clone()).download_with_progress(file, Bar(bar)) {
        Ok(p) => p,
        Err(e) => {
            return Err(match status(&e) {
                Some(401 | 403) => unauthorized(r, env),
                Some(404) => HubError::NotFound { reference: r.text.clone(), endpoint: env.endpoint.clone(), what: format!("file {file}") },
                _ => HubError::Download {
                    reference: r.text.clone(),
                    file: file.to_string(),
                    why: format!("the download failed ({e}); run again to resume it from where it stopped"),
                },
            });
        }
    };
    let Some(want) = want else { return Ok(()) };
    let got = crate::support::fsutil::cached_sha256(&path).map_err(|e| HubError::Download {
        reference: r.text.clone(),
        file: file.to_string(),
        why: format!("cannot read the download: {e:#}"),
    })?;
    if !got.eq_ignore_ascii_case(&want) {
        // The blob, its snapshot link and the download's lock file go, so
        // that the next run fetches it afresh and nothing of it stays.
        let blob = std::fs::canonicalize(&path).ok();
        let _ = std::fs::remove_file(&path);
        if let Some(b) = blob {
            let mut lock = b.clone().into_os_string();
            lock.push(".lock");
            let _ = std::fs::remove_file(lock);
            let _ = std::fs::remove_file(b);
        }
        return Err(HubError::Corrupt {
            reference: r.text.clone(),
            file: file.to_string(),
            got: got[..12].to_string(),
            want: want.chars().take(12).collect(),
        });
    }
    Ok(())
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
        let e = pick(Select::Quant(Some("Q2_K".into()))).unwrap_err().to_string();
        assert!(e.contains("no model file matches Q2_K") && e.contains("4 GGUF model files") && e.contains("2 parts"), "{e}");
        assert!(pick(Select::File("UD-Q4_K_XL/m-UD-Q4_K_XL-00002-of-00002.gguf".into())).unwrap_err().to_string().contains("part 2 of 2"));
        let missing: Vec<String> = files.iter().filter(|f| !f.ends_with("-00002-of-00002.gguf")).cloned().collect();
        let e = choose("r", &Select::Quant(Some("UD-Q4_K_XL".into())), &missing).unwrap_err().to_string();
        assert!(e.contains("part 2 of 2"), "{e}");
    }

    #[cfg(unix)]
    #[test]
    fn the_cache_is_read_where_huggingface_cli_and_hf_hub_write_it() {
        let dir = tempfile::tempdir().unwrap();
        let commit = "0123456789abcdef0123456789abcdef01234567";
        // huggingface-cli's layout: snapshots hold links into blobs/.
        let repo_dir = dir.path().join("models--org--repo");
        let snapshot = repo_dir.join("snapshots").join(commit);
        std::fs::create_dir_all(snapshot.join("sub")).unwrap();
        std::fs::create_dir_all(repo_dir.join("blobs")).unwrap();
        std::fs::write(repo_dir.join("blobs/b1"), "x").unwrap();
        std::os::unix::fs::symlink("../../../blobs/b1", snapshot.join("sub/m-Q8_0.gguf")).unwrap();
        std::os::unix::fs::symlink("../../blobs/b1", snapshot.join("m-Q4_0.gguf")).unwrap();
        std::os::unix::fs::symlink("../../blobs/gone", snapshot.join("m-Q2_K.gguf")).unwrap();
        assert_eq!(snapshot_files(&snapshot), ["m-Q4_0.gguf", "sub/m-Q8_0.gguf"], "a link whose blob is gone is no file");

        let cache = Cache::new(dir.path().to_path_buf());
        let at = |rev: &str| Repo::with_revision("org/repo".into(), RepoType::Model, rev.into());
        assert_eq!(cache.repo(at("main")).pointer_path(commit), snapshot);
        assert_eq!(cached_commit(&cache, &at(commit)).as_deref(), Some(commit), "a commit needs no ref");
        assert_eq!(cached_commit(&cache, &at("main")), None, "no ref yet");
        cache.repo(at("main")).create_ref(commit).unwrap();
        assert_eq!(std::fs::read_to_string(repo_dir.join("refs/main")).unwrap(), commit);
        assert_eq!(cached_commit(&cache, &at("main")).as_deref(), Some(commit));
        std::fs::write(repo_dir.join("refs/v1"), format!("{commit}\n")).unwrap();
        assert_eq!(cached_commit(&cache, &at("v1")).as_deref(), Some(commit), "a ref written with a newline");
        std::fs::write(repo_dir.join("refs/old"), "fedcba9876543210fedcba9876543210fedcba98").unwrap();
        assert_eq!(cached_commit(&cache, &at("old")), None, "a ref to a snapshot not in the cache");
    }
}
