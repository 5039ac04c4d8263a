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

/// How a file is fetched and checked: the blob it is stored as, its size,
/// and the sha256 to check (LFS files; a file in git has its object id only).
pub(super) struct Wanted {
    pub(super) blob: String,
    pub(super) size: u64,
    pub(super) sha256: Option<String>,
}

impl Sibling {
    pub(super) fn wanted(&self) -> Option<Wanted> {
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
