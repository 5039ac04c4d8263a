//! The hub settings read from the environment, as `huggingface_hub` reads
//! them.

use super::HubError;
use std::path::PathBuf;
use std::time::Duration;

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
    pub(crate) fn from_env() -> Result<HubEnv, HubError> {
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
