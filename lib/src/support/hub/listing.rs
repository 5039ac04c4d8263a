//! The repository's file list as the hub sends it, and what each file needs
//! to be fetched and checked.

use serde::Deserialize;

/// The repository's listing as the hub gives it with `blobs=true`: the
/// commit, and each file's size and checksum.
#[derive(Deserialize)]
pub(super) struct Listing {
    pub(super) sha: String,
    pub(super) siblings: Vec<Sibling>,
}

#[derive(Deserialize)]
pub(super) struct Sibling {
    pub(super) rfilename: String,
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

/// How a file is fetched and checked: the blob it is stored as, named by
/// its checksum, and its size.
pub(super) struct Wanted {
    pub(super) blob: String,
    pub(super) size: u64,
}

impl Sibling {
    pub(super) fn wanted(&self) -> Option<Wanted> {
        let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
        match &self.lfs {
            Some(l) if hex(&l.sha256, 64) => Some(Wanted { blob: l.sha256.to_ascii_lowercase(), size: l.size.or(self.size)? }),
            Some(_) => None,
            None => {
                let id = self.blob_id.as_deref().filter(|id| hex(id, 40))?;
                Some(Wanted { blob: id.to_ascii_lowercase(), size: self.size? })
            }
        }
    }
}

/// What a blob's name is the checksum of: an LFS file's sha256 (64 hex
/// digits), or a file in git's object id (40), the sha1 of
/// `"blob <size>\0"` and the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Checksum {
    Sha256,
    GitBlob,
}

impl Checksum {
    /// The checksum a blob of this name is checked by; `None` for a name
    /// that is neither.
    pub(super) fn of_blob(name: &str) -> Option<Checksum> {
        if !name.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        match name.len() {
            64 => Some(Checksum::Sha256),
            40 => Some(Checksum::GitBlob),
            _ => None,
        }
    }

    /// What messages call it.
    pub(super) fn name(self) -> &'static str {
        match self {
            Checksum::Sha256 => "sha256",
            Checksum::GitBlob => "git blob id",
        }
    }

    /// The checksum of a cached blob, lower-case hex: a sha256 through
    /// posrecall's hash cache (the one run files record, and a model is
    /// large), a git blob id read afresh (such files are small).
    pub(super) fn of_cached(self, path: &std::path::Path) -> anyhow::Result<String> {
        match self {
            Checksum::Sha256 => crate::support::fsutil::cached_sha256(path),
            Checksum::GitBlob => git_blob_id(path),
        }
    }

    /// The checksum of a download, read afresh.
    pub(super) fn of_download(self, path: &std::path::Path) -> anyhow::Result<String> {
        match self {
            Checksum::Sha256 => crate::support::fsutil::file_sha256(path),
            Checksum::GitBlob => git_blob_id(path),
        }
    }
}

/// The git object id of the file at `path` as a blob.
fn git_blob_id(path: &std::path::Path) -> anyhow::Result<String> {
    use anyhow::Context;
    use sha1::{Digest, Sha1};
    use std::io::Read;
    let mut f = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let len = f.metadata()?.len();
    let mut hasher = Sha1::new();
    hasher.update(format!("blob {len}\0").as_bytes());
    let mut buf = vec![0u8; 1 << 16];
    let mut read = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        read += n as u64;
        hasher.update(&buf[..n]);
    }
    // A file that changed while it was read would hash to neither.
    anyhow::ensure!(read == len, "{} changed while it was read", path.display());
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ids `git hash-object` gives (git 2.x, by hand): the empty blob, and
    /// `hello\n`.
    #[test]
    fn a_git_blob_id_is_gits() {
        let dir = tempfile::tempdir().unwrap();
        let (empty, hello) = (dir.path().join("e"), dir.path().join("h"));
        std::fs::write(&empty, b"").unwrap();
        std::fs::write(&hello, b"hello\n").unwrap();
        assert_eq!(git_blob_id(&empty).unwrap(), "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391");
        assert_eq!(git_blob_id(&hello).unwrap(), "ce013625030ba8dba906f756967f9e9ca394464a");
        assert_eq!(Checksum::of_blob("ce013625030ba8dba906f756967f9e9ca394464a"), Some(Checksum::GitBlob));
        assert_eq!(Checksum::of_blob(&"a".repeat(64)), Some(Checksum::Sha256));
        assert_eq!(Checksum::of_blob("../x"), None);
    }
}
