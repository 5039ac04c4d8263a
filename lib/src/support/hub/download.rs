//! A file brought into the cache: downloaded resumably into its blob, checked
//! by size and by the checksum its blob is named by, and linked into its snapshot.

use super::HubError;
use super::cache::RepoCache;
use super::client::{Client, Failure};
use super::listing::{Checksum, Wanted};
use crate::support::progress::{Progress, Unit};
use std::path::{Path, PathBuf};

impl Client<'_> {
    /// Downloads `file` into its blob (resuming a partial download), checks
    /// its size and checksum, and links it into the snapshot of `commit`. A
    /// download that stops early is kept as `BLOB.part` for the next run to
    /// resume; one that is not the listed file is removed.
    pub(super) fn fetch(
        &self,
        repo: &RepoCache,
        commit: &str,
        file: &str,
        wanted: &Wanted,
        progress: &dyn Progress,
    ) -> Result<(), HubError> {
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
            // The blob's name is its checksum: every file is checked, an LFS
            // one by its sha256 and one in git by its git blob id.
            let checksum = Checksum::of_blob(&wanted.blob).expect("a listed blob name is a checksum");
            let got = checksum.of_download(&part).map_err(|e| download_error(format!("cannot read the download: {e:#}")))?;
            if !got.eq_ignore_ascii_case(&wanted.blob) {
                let _ = std::fs::remove_file(&part);
                return Err(HubError::Corrupt {
                    reference: self.r.text.clone(),
                    file: file.to_string(),
                    checksum: checksum.name(),
                    got: got[..12].to_string(),
                    want: wanted.blob[..12].to_string(),
                });
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
            // Running again would meet the same redirect.
            Err(Failure::Redirect(why)) => return Err(download_error(format!("the download was refused: {why}"))),
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
