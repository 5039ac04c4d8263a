//! A reference resolved to files in the cache: from the cache alone when it
//! holds them unchanged (the only way offline), else from the hub.

use super::cache::{RepoCache, cached_commit, is_commit, snapshot_files};
use super::choose::{choose, listing};
use super::client::Client;
use super::error::shown_name;
use super::listing::Checksum;
use super::{HubEnv, HubError, HubRef, Origin, Resolved};
use crate::support::progress::Progress;
use std::path::{Path, PathBuf};

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
    checksum: Checksum,
    got: String,
}

impl Changed {
    fn offline_message(&self) -> String {
        let want = self.blob.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        format!(
            "{} is not the file the hub listed (its {} is {}…, its name says {}…): it changed after the download; run online \
             to fetch it again, or delete it",
            self.link.display(),
            self.checksum.name(),
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
/// named by its checksum (an LFS file's sha256, a file in git's git blob
/// id), so its bytes must hash to that name.
fn changed_since_download(snapshot: &Path, file: &str) -> Option<Changed> {
    let link = snapshot.join(file);
    let blob = std::fs::canonicalize(&link).ok()?;
    let name = blob.file_name()?.to_string_lossy().into_owned();
    let checksum = Checksum::of_blob(&name)?;
    let got = checksum.of_cached(&blob).ok()?;
    (!got.eq_ignore_ascii_case(&name)).then_some(Changed { link, blob, checksum, got })
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
