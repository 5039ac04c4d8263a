//! Requests to the hub: the agent's bounds (timeouts, redirects), the file
//! list, and what a failed request means.

use super::cache::{is_commit, safe_path};
use super::error::{shown_endpoint, shown_name};
use super::listing::Listing;
use super::{HubEnv, HubError, HubRef};

/// The most a file listing may be (the hub's largest repositories list tens
/// of thousands of files in a few MB).
const LISTING_LIMIT: u64 = 64 << 20;

/// Requests to one hub for one reference.
pub(super) struct Client<'a> {
    pub(super) r: &'a HubRef,
    env: &'a HubEnv,
    agent: ureq::Agent,
    /// The hub's address as messages show it.
    shown: String,
}

/// What a failed request means.
pub(super) enum Failure {
    Status(u16),
    Stalled,
    /// The request's whole-answer bound passed.
    TooLong,
    /// A redirect that cannot be followed: without a Location, to a URL
    /// that is not one, to another scheme than HTTP(S), or one too many.
    Redirect(String),
    Other(String),
}

impl<'a> Client<'a> {
    pub(super) fn new(r: &'a HubRef, env: &'a HubEnv) -> Client<'a> {
        let wait = Some(env.timeout);
        let config = ureq::Agent::config_builder()
            .timeout_connect(wait)
            .timeout_resolve(wait)
            .timeout_send_request(wait)
            .timeout_recv_response(wait)
            // No progress for this long ends a download; a slow one goes on.
            .timeout_per_read(wait)
            // Redirects are followed by `get`, which sees each Location
            // before it is asked (a hub may send one to any scheme).
            .max_redirects(0)
            .http_status_as_error(false)
            .user_agent(concat!("posrecall/", env!("CARGO_PKG_VERSION")))
            .build();
        Client { r, env, agent: config.new_agent(), shown: shown_endpoint(&env.endpoint) }
    }

    /// `ENDPOINT/SEGMENTS…`, each segment percent-encoded as one.
    pub(super) fn url<'s>(&self, segments: impl IntoIterator<Item = &'s str>) -> Result<url::Url, HubError> {
        let mut u = url::Url::parse(&self.env.endpoint).map_err(|e| self.listing_error(format!("HF_ENDPOINT is not a URL ({e})")))?;
        u.path_segments_mut()
            .map_err(|()| self.listing_error("HF_ENDPOINT is not a URL with a path".into()))?
            .pop_if_empty()
            .extend(segments);
        Ok(u)
    }

    /// `url` from `range_from` on; `whole`: the most the request may take
    /// altogether, answer included (a file list, which a server sending it a
    /// byte at a time would otherwise stretch without end; a download has no
    /// such bound, only one on each read).
    pub(super) fn get(
        &self,
        url: &url::Url,
        range_from: u64,
        whole: Option<std::time::Duration>,
    ) -> Result<ureq::http::Response<ureq::Body>, Failure> {
        let mut url = url.clone();
        for redirects in 0..=MAX_REDIRECTS {
            let mut request = self.agent.get(url.as_str());
            // The token goes to the hub only, never to where it redirects
            // (its file store needs none: the redirect carries a signed URL).
            if let Some(t) = self.env.token.as_ref().filter(|_| redirects == 0) {
                request = request.header("Authorization", format!("Bearer {t}"));
            }
            if range_from > 0 {
                request = request.header("Range", format!("bytes={range_from}-"));
            }
            if whole.is_some() {
                request = request.config().timeout_global(whole).build();
            }
            let response = match request.call() {
                Ok(response) => response,
                Err(e) => return Err(failure(e)),
            };
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            if !status.is_redirection() || status.as_u16() == 304 {
                return Err(Failure::Status(status.as_u16()));
            }
            url = redirect_target(&url, status.as_u16(), response.headers())?;
        }
        Err(Failure::Redirect(format!("it redirected more than {MAX_REDIRECTS} times")))
    }

    fn listing_error(&self, why: String) -> HubError {
        // The transport's own words may quote the URL asked, query and all.
        let why = crate::support::shown::redact(&why, &self.env.endpoint);
        HubError::Listing { reference: self.r.text.clone(), endpoint: self.shown.clone(), why }
    }

    pub(super) fn unsafe_value(&self, what: String) -> HubError {
        HubError::Unsafe { reference: self.r.text.clone(), endpoint: self.shown.clone(), what }
    }

    pub(super) fn stalled(&self, what: String) -> HubError {
        HubError::Stalled { reference: self.r.text.clone(), endpoint: self.shown.clone(), what, seconds: self.env.timeout.as_secs_f64() }
    }

    pub(super) fn refused(&self, code: u16, what: String) -> HubError {
        match code {
            401 | 403 => unauthorized(self.r, self.env, code),
            404 => HubError::NotFound { reference: self.r.text.clone(), endpoint: self.shown.clone(), what },
            n => self.listing_error(format!("it answered {n} for the {what}")),
        }
    }

    /// The file list at the revision, every value that becomes a path
    /// checked.
    pub(super) fn list(&self) -> Result<Listing, HubError> {
        let (org, name) = self.r.repo.split_once('/').expect("ORG/REPO");
        let mut url = self.url(["api", "models", org, name, "revision", self.r.revision()])?;
        url.query_pairs_mut().append_pair("blobs", "true");
        let what = || format!("repository {} at revision {}", self.r.repo, self.r.revision());
        // A file list sent a byte at a time never stalls a read: the whole
        // answer gets twice the timeout.
        let whole = self.env.timeout * 2;
        let too_long =
            || self.listing_error(format!("the file list took longer than {} s to arrive (twice the timeout)", whole.as_secs_f64()));
        let mut response = match self.get(&url, 0, Some(whole)) {
            Ok(r) => r,
            Err(Failure::Status(code)) => return Err(self.refused(code, what())),
            Err(Failure::Stalled) => return Err(self.stalled("the file list".into())),
            Err(Failure::TooLong) => return Err(too_long()),
            Err(Failure::Redirect(why) | Failure::Other(why)) => return Err(self.listing_error(why)),
        };
        let listing: Listing = match response.body_mut().with_config().limit(LISTING_LIMIT).read_json() {
            Ok(l) => l,
            Err(ureq::Error::Timeout(ureq::Timeout::Global)) => return Err(too_long()),
            Err(ureq::Error::Timeout(_)) => return Err(self.stalled("the file list".into())),
            Err(e) => return Err(self.listing_error(format!("an unreadable answer ({e})"))),
        };
        if !is_commit(&listing.sha) {
            return Err(self.unsafe_value(format!("the commit {} (not 40 hex digits)", shown_name(&listing.sha))));
        }
        if let Some(bad) = listing.siblings.iter().find(|s| !safe_path(&s.rfilename)) {
            return Err(
                self.unsafe_value(format!("the file name {} (not a relative path inside the repository)", shown_name(&bad.rfilename)))
            );
        }
        Ok(listing)
    }
}

/// How many redirects a request follows (the hub sends one, to its file
/// store).
const MAX_REDIRECTS: u32 = 5;

fn failure(e: ureq::Error) -> Failure {
    match e {
        ureq::Error::StatusCode(n) => Failure::Status(n),
        ureq::Error::Timeout(ureq::Timeout::Global) => Failure::TooLong,
        ureq::Error::Timeout(_) => Failure::Stalled,
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => Failure::Stalled,
        e => Failure::Other(e.to_string()),
    }
}

/// Where a redirect from `from` leads: its Location, relative to `from`,
/// and HTTP or HTTPS (a `file://` or other scheme is refused, not read).
/// The target is shown without its query, which a file store signs with.
fn redirect_target(from: &url::Url, status: u16, headers: &ureq::http::HeaderMap) -> Result<url::Url, Failure> {
    let Some(location) = headers.get("location") else {
        return Err(Failure::Redirect(format!("it redirected ({status}) without a Location")));
    };
    let location = String::from_utf8_lossy(location.as_bytes());
    let shown = || shown_name(&crate::support::shown::shown_url(&location));
    let to = from
        .join(&location)
        .map_err(|e| Failure::Redirect(format!("it redirected ({status}) to {}, which is not a URL ({e})", shown())))?;
    match to.scheme() {
        "http" | "https" => Ok(to),
        _ => Err(Failure::Redirect(format!("it redirected ({status}) to a non-HTTP(S) URL, {} (not followed)", shown()))),
    }
}

fn unauthorized(r: &HubRef, env: &HubEnv, code: u16) -> HubError {
    let why = match env.token {
        Some(_) => {
            "it refused the token (HF_TOKEN or the saved token); the repository is gated or private and the token cannot read it, or it does not exist"
        }
        None => "the repository is gated or private, or does not exist; set HF_TOKEN to a token that can read it",
    };
    let status = if code == 403 { "403 (forbidden)" } else { "401 (unauthorized)" };
    HubError::Unauthorized { reference: r.text.clone(), endpoint: shown_endpoint(&env.endpoint), status, why }
}
