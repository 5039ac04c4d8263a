//! A hub reference as llama.cpp's `-hf` writes it, parsed and checked: the
//! revision becomes a path in the cache, so it is held to the cache's rules.

use super::HubError;
use super::cache::safe_path;
use std::path::Path;

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

    pub(super) fn revision(&self) -> &str {
        self.revision.as_deref().unwrap_or("main")
    }
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
}
