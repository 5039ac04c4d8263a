//! The evaluated prefix, kept on disk between runs (`--prefix-cache DIR`).
//!
//! Prefilling a long file is the expensive part of a run; a later run with the
//! same model, corpus range, prompt and context parameters can load the saved
//! sequence state instead. llama.cpp's state loader checks only a header, so
//! every state file has a sidecar holding its sha256: both are written under
//! temporary names and renamed, and the file is verified before it is loaded.
//! A corrupt or truncated file is reported, ignored and rebuilt; a different
//! key never loads, because the key (a digest of everything that decides
//! the state, made by the caller) is the file name.

use super::session::Session;
use anyhow::{Context, Result};
use llama_cpp_2::token::LlamaToken;
use std::path::{Path, PathBuf};

/// A folder of saved prefix states.
pub struct PrefixCache {
    dir: PathBuf,
}

/// What [`PrefixCache::load`] found.
pub enum Lookup {
    /// The state was verified and loaded into the session.
    Loaded,
    /// No file for this key.
    Missing,
    /// A file was there but failed verification; it was removed. The reason.
    Corrupt(String),
}

impl PrefixCache {
    pub fn new(dir: &Path) -> Result<PrefixCache> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create prefix cache folder {}", dir.display()))?;
        Ok(PrefixCache { dir: dir.to_path_buf() })
    }

    fn paths(&self, key: &str) -> (PathBuf, PathBuf) {
        (self.dir.join(format!("{key}.state")), self.dir.join(format!("{key}.state.sha256")))
    }

    /// Whether a state (verified or not) is saved under `key`.
    pub fn contains(&self, key: &str) -> bool {
        let (state, sidecar) = self.paths(key);
        state.exists() && sidecar.exists()
    }

    /// Loads the state saved under `key` into `session` after verifying its
    /// sha256 and that it holds exactly `tokens`.
    pub fn load(&self, session: &mut Session, key: &str, tokens: &[LlamaToken]) -> Result<Lookup> {
        let (state, sidecar) = self.paths(key);
        if !state.exists() {
            return Ok(Lookup::Missing);
        }
        let problem = match (std::fs::read_to_string(&sidecar), crate::support::fsutil::file_sha256(&state)) {
            (Err(_), _) => Some("its checksum file is missing".to_string()),
            (_, Err(e)) => Some(format!("it cannot be read ({e})")),
            (Ok(want), Ok(got)) if want.trim() != got => Some("its sha256 does not match (corrupt or truncated)".to_string()),
            _ => match session.load_prefix_file(&state, tokens) {
                Ok(()) => None,
                Err(e) => Some(format!("llama.cpp could not load it ({e:#})")),
            },
        };
        match problem {
            None => Ok(Lookup::Loaded),
            Some(why) => {
                let _ = std::fs::remove_file(&state);
                let _ = std::fs::remove_file(&sidecar);
                Ok(Lookup::Corrupt(format!("prefix cache file {} ignored: {why}; it will be rebuilt", state.display())))
            }
        }
    }

    /// Saves the session's evaluated prefix under `key`: temporary names,
    /// checksum, then renames (state first, so a crash never leaves a
    /// sidecar that vouches for a missing or partial state).
    pub fn save(&self, session: &Session, key: &str, tokens: &[LlamaToken]) -> Result<()> {
        let (state, sidecar) = self.paths(key);
        // Names no other process can hold, on this machine or another that
        // shares the folder (every pod of a job may run as PID 1).
        let unique = |suffix: &str| -> Result<std::path::PathBuf> {
            let (_, path) = tempfile::Builder::new()
                .prefix(&format!(".{key}.{suffix}.tmp-{}-", std::process::id()))
                .permissions(crate::support::fsutil::new_file_permissions())
                .tempfile_in(&self.dir)?
                .keep()?;
            Ok(path)
        };
        let tmp_state = unique("state")?;
        let tmp_sidecar = unique("state.sha256").inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp_state);
        })?;
        let result = (|| -> Result<()> {
            session.save_prefix_file(&tmp_state, tokens)?;
            let sha = crate::support::fsutil::file_sha256(&tmp_state)?;
            std::fs::write(&tmp_sidecar, format!("{sha}\n"))?;
            std::fs::rename(&tmp_state, &state)?;
            std::fs::rename(&tmp_sidecar, &sidecar)?;
            Ok(())
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp_state);
            let _ = std::fs::remove_file(&tmp_sidecar);
        }
        result.with_context(|| format!("cannot save the prefix cache in {}", self.dir.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::PrefixCache;

    /// A state counts as saved only with its sha256 sidecar beside it (the
    /// ladder asks before it saves each window).
    #[test]
    fn contains_needs_the_state_and_its_sidecar() {
        let dir = tempfile::tempdir().unwrap();
        let cache = PrefixCache::new(dir.path()).unwrap();
        assert!(!cache.contains("k"));
        std::fs::write(dir.path().join("k.state"), b"state").unwrap();
        assert!(!cache.contains("k"), "a state without its sidecar");
        std::fs::remove_file(dir.path().join("k.state")).unwrap();
        std::fs::write(dir.path().join("k.state.sha256"), b"sum").unwrap();
        assert!(!cache.contains("k"), "a sidecar without its state");
        std::fs::write(dir.path().join("k.state"), b"state").unwrap();
        assert!(cache.contains("k"));
        assert!(!cache.contains("other"));
    }
}
