//! What a reference can fail on, and how values a server sent are shown in
//! those messages (escaped, cut, without credentials).

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
    #[error("{reference}: the hub at {endpoint} answered {status}: {why}")]
    Unauthorized { reference: String, endpoint: String, status: &'static str, why: &'static str },
    #[error("{reference}: the hub at {endpoint} has no {what} (404)")]
    NotFound { reference: String, endpoint: String, what: String },
    #[error("{reference}: {file}: {why}")]
    Download { reference: String, file: String, why: String },
    #[error(
        "{reference}: {file}: the downloaded file's {checksum} is {got}…, the hub lists {want}… (removed; run again to download it afresh)"
    )]
    Corrupt { reference: String, file: String, checksum: &'static str, got: String, want: String },
    #[error("{reference}: the hub at {endpoint} could not be asked for the file list: {why}")]
    Listing { reference: String, endpoint: String, why: String },
    #[error("{reference}: the hub cache {cache}: {why}")]
    Cache { reference: String, cache: String, why: String },
    #[error("{reference}: the hub at {endpoint} sent {what}; refused, as nothing it sends may name a path outside the cache")]
    Unsafe { reference: String, endpoint: String, what: String },
    #[error("{reference}: the hub at {endpoint} sent nothing for {seconds} s while {what} (HF_HUB_DOWNLOAD_TIMEOUT sets the wait)")]
    Stalled { reference: String, endpoint: String, what: String, seconds: f64 },
    #[error("HF_HUB_DOWNLOAD_TIMEOUT={0:?} is not a number of seconds above 0")]
    Timeout(String),
}

/// A name from a server, for a one-line message: quoted, with control
/// characters escaped and long ones cut.
pub(super) fn shown_name(s: &str) -> String {
    let mut out: String = s.chars().take(120).flat_map(char::escape_debug).collect();
    if s.chars().count() > 120 {
        out.push('…');
    }
    format!("\"{out}\"")
}

/// The hub's address for messages: without a user name, password or
/// query ([`crate::support::shown::shown_url`]).
pub(super) fn shown_endpoint(endpoint: &str) -> String {
    crate::support::shown::shown_url(endpoint).trim_end_matches('/').to_string()
}
