//! Models named by a Hugging Face hub reference, as llama.cpp's `-hf` takes
//! them: `ORG/REPO[:QUANT]` or `ORG/REPO/FILE.gguf`, optionally `@REVISION`.
//!
//! A reference resolves to files in the standard hub cache (the layout
//! `huggingface-cli` writes: `models--ORG--REPO/{blobs,snapshots,refs}`,
//! under `HF_HUB_CACHE`, or `HF_HOME/hub`, or `~/.cache/huggingface/hub`).
//! A reference whose files are all in the cache is used with no network at
//! all; otherwise the repository's file list is read, the quant's file (every
//! part of a split model) chosen, downloaded resumably and checked by size
//! and by the checksum the hub lists (an LFS file's sha256, a small file's
//! git blob id). `HF_ENDPOINT` names another hub,
//! `HF_TOKEN` (or the token file `huggingface-cli login` writes) is sent and
//! never printed, `HF_HUB_OFFLINE` allows the cache only, and
//! `HF_HUB_DOWNLOAD_TIMEOUT` is how long a request may wait for the hub.
//!
//! The hub's protocol is spoken here, over ureq, rather than through the
//! `hf-hub` crate: that crate names the cache's files after the `ETag` and
//! `X-Repo-Commit` headers as sent (so a hostile hub or mirror could write
//! or delete any file), sets no timeout, follows redirects without bound (to any
//! scheme) and panics on some answers. Here every value that becomes a path is checked
//! first (see `cache.rs`), and no header becomes one.
//!
//! The pieces, by concern: `reference` (what a reference names),
//! `env` (the settings the environment gives), `error` (what goes wrong
//! and how a server's values are shown), `choose` (the quant's files among a
//! repository's), `cache` (the cache's layout and what may become a path in
//! it), `listing` (the hub's file list as sent), `resolve` (the cache
//! first, the hub for what it lacks), `client` (requests to the hub) and
//! `download` (resumable, bounded downloads, checked by size and checksum).

mod cache;
mod choose;
mod client;
mod download;
mod env;
mod error;
mod listing;
mod reference;
mod resolve;

pub use env::{DEFAULT_TIMEOUT_S, HubEnv};
pub use error::HubError;
pub use reference::{HubRef, Select, is_reference};
pub use resolve::resolve;

use crate::support::progress::Progress;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

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

/// A reference resolved to local files.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The model's file in the cache (a split model's first part).
    pub path: PathBuf,
    pub origin: Origin,
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
