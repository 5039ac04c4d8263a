//! One repository's folder in the hub cache, and the checks every value
//! passes before it becomes a path there.
//!
//! Every path in the cache is made of the cache folder and parts that were checked
//! first: the repository's two names (`valid_part`), a commit (40 hex
//! digits), a blob name (a sha256 or a git object id, hex), a revision and the
//! repository's file paths (`safe_path`). Nothing a server sends (a listing,
//! a header) reaches the file system unchecked, and no header is used at all:
//! the blob is named by the checksum the listing gives, the snapshot by the
//! listing's commit.

use super::error::shown_name;
use std::path::{Path, PathBuf};

pub(super) fn is_commit(s: &str) -> bool {
    s.len() == 40 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Whether `s` is a relative `/`-separated path that stays where it is
/// joined: no empty, `.` or `..` part, no root, no backslash, no control
/// character.
pub(super) fn safe_path(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 1024
        && !s.chars().any(|c| c.is_control() || c == '\\')
        && s.split('/').all(|p| !p.is_empty() && p != "." && p != "..")
}

/// One repository's folder in the hub cache, in the layout `huggingface-cli`
/// writes: `models--ORG--REPO/{blobs,snapshots,refs}`.
pub(super) struct RepoCache {
    dir: PathBuf,
}

impl RepoCache {
    pub(super) fn new(cache: &Path, repo: &str) -> RepoCache {
        RepoCache { dir: cache.join(format!("models--{}", repo.replace('/', "--"))) }
    }

    pub(super) fn snapshot(&self, commit: &str) -> PathBuf {
        debug_assert!(is_commit(commit));
        self.dir.join("snapshots").join(commit)
    }

    pub(super) fn blob(&self, name: &str) -> PathBuf {
        debug_assert!(name.bytes().all(|b| b.is_ascii_hexdigit()));
        self.dir.join("blobs").join(name)
    }

    pub(super) fn reference(&self, revision: &str) -> PathBuf {
        debug_assert!(safe_path(revision));
        self.dir.join("refs").join(revision)
    }
}

/// The commit `revision` points to in the cache, if known there: the
/// revision itself when it is a commit with a snapshot, else what its ref
/// (`refs/REVISION`, written after a download) names. A ref that holds no
/// commit is an error, not a path.
pub(super) fn cached_commit(repo: &RepoCache, revision: &str) -> Result<Option<String>, String> {
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
pub(super) fn snapshot_files(snapshot: &Path) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::hub::HubRef;
    use crate::support::hub::error::shown_endpoint;

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
