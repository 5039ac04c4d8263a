//! One HTTP client for an OpenAI-compatible server: the request body, the
//! retries with exponential backoff, and what each answer means.

use super::ApiKind;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The first wait before a retry; each further one doubles it.
pub(crate) const BACKOFF_START: Duration = Duration::from_millis(500);
/// The longest wait between two tries (a larger Retry-After is capped to it).
pub(crate) const BACKOFF_CAP: Duration = Duration::from_secs(300);
/// The largest response body read (an answer is a few KB).
const BODY_LIMIT: u64 = 64 << 20;

/// Why the server as a whole failed: the run stops. The messages name no
/// flag; the command adds which one to check.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ServerError {
    #[error("{endpoint} refused the request: HTTP {status}{detail}")]
    Refused { endpoint: String, status: u16, detail: String },
    #[error("{endpoint} answered HTTP 404{detail}")]
    NotFound { endpoint: String, detail: String },
    #[error("{endpoint} gave no answer within {seconds} s")]
    Timeout { endpoint: String, seconds: f64 },
    /// A redirect is not followed: it would carry the prompt and the API key
    /// to another address, and a 301/302/303 turns the POST into a GET.
    #[error("{endpoint} answered HTTP {status}, a redirect to {location}, which posrecall does not follow")]
    Redirected { endpoint: String, status: u16, location: String },
    #[error("{0}")]
    Unreachable(String),
    #[error("request to {endpoint} failed: {why}")]
    Other { endpoint: String, why: String },
}

/// An answer as the server gave it.
#[derive(Debug)]
pub struct Answered {
    pub response: String,
    /// The server's reasoning, apart from the answer (`message.reasoning_content`
    /// from llama-server and DeepSeek, `message.reasoning` from vLLM).
    pub reasoning: Option<String>,
    pub usage: Value,
    /// llama-server's own `timings` object (prompt and generation times,
    /// and `draft_n`/`draft_n_accepted` with speculative decoding), or null
    /// from a server that sends none.
    pub timings: Value,
    pub finish_reason: Option<String>,
    pub wall_ms: u64,
    /// The body was not valid UTF-8: the answer holds U+FFFD where it was not.
    pub invalid_utf8: bool,
}

/// How asking one target ended.
pub(crate) enum Outcome {
    Answered(Answered),
    /// This target failed; the others are still asked.
    Failed(String),
    /// The server failed; the run stops.
    Fatal(ServerError),
    /// Not asked to the end because the run is stopping.
    Stopped,
}

/// How one request ended.
enum Try {
    Done(Answered),
    Failed(String),
    Fatal(ServerError),
    /// Worth another try: why, the server's Retry-After, and whether running
    /// out of tries means the server is gone (a connection error).
    Again {
        why: String,
        retry_after: Option<Duration>,
        unreachable: bool,
    },
}

/// Sends the requests: one shared agent (connection pool) for all workers.
pub(crate) struct Asker {
    agent: ureq::Agent,
    endpoint: String,
    /// The endpoint as messages show it: without credentials.
    shown: String,
    model: Option<String>,
    api: ApiKind,
    max_tokens: usize,
    /// Fields added to every request body; they win over posrecall's.
    extra: serde_json::Map<String, Value>,
    template_kwargs: serde_json::Map<String, Value>,
    key: Option<String>,
    retries: u32,
    timeout: f64,
}

impl Asker {
    pub fn new(o: &super::AskOptions) -> Asker {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs_f64(o.timeout)))
            // A 3xx comes back as an answer, for `try_once` to refuse by name.
            .max_redirects(0)
            .http_status_as_error(false)
            .user_agent(concat!("posrecall/", env!("CARGO_PKG_VERSION")))
            .build();
        Asker {
            agent: config.into(),
            endpoint: o.endpoint.clone(),
            shown: crate::support::shown::shown_url(&o.endpoint),
            model: o.model.clone(),
            api: o.api,
            max_tokens: o.max_tokens,
            extra: o.extra.clone(),
            template_kwargs: o.template_kwargs.clone(),
            key: o.key.clone(),
            retries: o.retries,
            timeout: o.timeout,
        }
    }

    /// Replaces every occurrence of the API key, and of the URL's
    /// credentials and query values, in a message.
    fn redact(&self, msg: String) -> String {
        let msg = crate::support::shown::redact(&msg, &self.endpoint);
        match &self.key {
            Some(k) if !k.is_empty() => msg.replace(k.as_str(), "[API key]"),
            _ => msg,
        }
    }

    fn redact_error(&self, e: ServerError) -> ServerError {
        match e {
            ServerError::Refused { endpoint, status, detail } => ServerError::Refused { endpoint, status, detail: self.redact(detail) },
            ServerError::NotFound { endpoint, detail } => ServerError::NotFound { endpoint, detail: self.redact(detail) },
            ServerError::Unreachable(m) => ServerError::Unreachable(self.redact(m)),
            ServerError::Other { endpoint, why } => ServerError::Other { endpoint, why: self.redact(why) },
            ServerError::Redirected { endpoint, status, location } => {
                ServerError::Redirected { endpoint, status, location: self.redact(location) }
            }
            t @ ServerError::Timeout { .. } => t,
        }
    }

    /// The request body: temperature 0, one user message (chat) or the prompt (completion).
    fn body(&self, prompt: &str) -> Vec<u8> {
        let mut b = serde_json::Map::new();
        if let Some(m) = &self.model {
            b.insert("model".into(), Value::from(m.as_str()));
        }
        match self.api {
            ApiKind::Chat => {
                b.insert("messages".into(), serde_json::json!([{"role": "user", "content": prompt}]));
            }
            ApiKind::Completion => {
                b.insert("prompt".into(), Value::from(prompt));
            }
        }
        b.insert("temperature".into(), Value::from(0));
        b.insert("max_tokens".into(), Value::from(self.max_tokens));
        b.insert("stream".into(), Value::from(false));
        if self.api == ApiKind::Chat && !self.template_kwargs.is_empty() {
            b.insert("chat_template_kwargs".into(), Value::Object(self.template_kwargs.clone()));
        }
        for (k, v) in &self.extra {
            b.insert(k.clone(), v.clone());
        }
        serde_json::to_vec(&Value::Object(b)).expect("a JSON map serializes")
    }

    /// Asks one prompt, with retries; `note` reports each retry.
    pub fn ask(&self, prompt: &str, stop: &AtomicBool, note: &dyn Fn(String)) -> Outcome {
        let body = self.body(prompt);
        let mut retried = 0;
        loop {
            let started = Instant::now();
            let (why, retry_after, unreachable) = match self.try_once(&body) {
                Try::Done(mut a) => {
                    a.wall_ms = started.elapsed().as_millis() as u64;
                    return Outcome::Answered(a);
                }
                Try::Failed(m) => return Outcome::Failed(self.redact(m)),
                Try::Fatal(e) => return Outcome::Fatal(self.redact_error(e)),
                Try::Again { why, retry_after, unreachable } => (self.redact(why), retry_after, unreachable),
            };
            if retried >= self.retries {
                let msg = match self.retries {
                    0 => why,
                    n => format!("{why} (after {n} {})", if n == 1 { "retry" } else { "retries" }),
                };
                return if unreachable { Outcome::Fatal(ServerError::Unreachable(msg)) } else { Outcome::Failed(msg) };
            }
            if stop.load(Ordering::SeqCst) {
                return Outcome::Stopped;
            }
            let backoff = BACKOFF_START.saturating_mul(1 << retried.min(20));
            // A server's Retry-After is honoured up to the backoff cap and
            // never longer than one request may take.
            let wait = retry_after.unwrap_or(backoff).min(BACKOFF_CAP).min(Duration::from_secs_f64(self.timeout));
            retried += 1;
            note(format!("{why}; retry {retried}/{} in {:.1} s", self.retries, wait.as_secs_f64()));
            std::thread::sleep(wait);
        }
    }

    fn try_once(&self, body: &[u8]) -> Try {
        let mut req = self.agent.post(&self.endpoint).header("content-type", "application/json");
        if let Some(k) = &self.key {
            req = req.header("authorization", format!("Bearer {k}"));
        }
        let mut resp = match req.send(body) {
            Ok(r) => r,
            Err(e) => return self.transport_error(e),
        };
        let status = resp.status().as_u16();
        // Where a redirect leads, as messages show a URL: without its query
        // or credentials, and escaped for a terminal.
        let location = resp.headers().get("location").map(|l| {
            let l = crate::support::shown::shown_url(&String::from_utf8_lossy(l.as_bytes()));
            format!("`{}`", crate::support::shown::for_terminal(&l))
        });
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        // A body too large or not decodable is this answer's failure, not
        // the server's: the other targets are still asked.
        let bytes = match resp.body_mut().with_config().limit(BODY_LIMIT).read_to_vec() {
            Ok(b) => b,
            Err(ureq::Error::BodyExceedsLimit(_)) => {
                return Try::Failed(format!("the server's answer is larger than {} MiB; it was not read", BODY_LIMIT >> 20));
            }
            Err(ureq::Error::Decompress(what, e)) => {
                return Try::Failed(self.redact(format!("the server's answer could not be decompressed ({what}: {e})")));
            }
            Err(e) => return self.transport_error(e),
        };
        // Redacted before anything cuts it short: a key that crossed the cut
        // would no longer be whole, and its start would be printed.
        let text = self.redact(String::from_utf8_lossy(&bytes).into_owned());
        let endpoint = self.shown.clone();
        match status {
            200..=299 => match parse_answer(&text, self.api) {
                Ok(mut a) => {
                    a.invalid_utf8 = std::str::from_utf8(&bytes).is_err();
                    Try::Done(a)
                }
                Err(m) => Try::Failed(m),
            },
            408 | 429 | 500..=599 => Try::Again {
                why: format!("HTTP {status}{}", detail(&text)),
                retry_after: if matches!(status, 429 | 503) { retry_after } else { None },
                unreachable: false,
            },
            300..=399 => Try::Fatal(ServerError::Redirected {
                endpoint,
                status,
                location: location.unwrap_or_else(|| "nowhere (no Location header)".into()),
            }),
            401 | 403 => Try::Fatal(ServerError::Refused { endpoint, status, detail: detail(&text) }),
            404 => Try::Fatal(ServerError::NotFound { endpoint, detail: detail(&text) }),
            _ => Try::Failed(format!("HTTP {status}{}", detail(&text))),
        }
    }

    fn transport_error(&self, e: ureq::Error) -> Try {
        let endpoint = self.shown.clone();
        match e {
            ureq::Error::Timeout(_) => Try::Fatal(ServerError::Timeout { endpoint, seconds: self.timeout }),
            ureq::Error::Io(_) | ureq::Error::ConnectionFailed | ureq::Error::HostNotFound | ureq::Error::Protocol(_) => {
                Try::Again { why: self.redact(format!("cannot reach {endpoint}: {e}")), retry_after: None, unreachable: true }
            }
            other => Try::Fatal(ServerError::Other { endpoint, why: self.redact(other.to_string()) }),
        }
    }
}

/// `": <the body's first 200 characters>"` for an error message, or nothing.
fn detail(body: &str) -> String {
    let body = body.trim();
    if body.is_empty() {
        return String::new();
    }
    let mut s: String = body.chars().take(200).collect();
    if s.len() < body.len() {
        s.push('…');
    }
    format!(": {s:?}")
}

/// Reads the answer text out of an OpenAI chat or completion response.
pub fn parse_answer(body: &str, api: ApiKind) -> Result<Answered, String> {
    let kind = match api {
        ApiKind::Chat => "chat completion",
        ApiKind::Completion => "completion",
    };
    let v: Value = serde_json::from_str(body).map_err(|e| format!("the server's answer is not JSON ({e}){}", detail(body)))?;
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        let msg = err.get("message").and_then(Value::as_str).map(String::from).unwrap_or_else(|| err.to_string());
        return Err(format!("the server answered with an error: {}", detail(&msg).trim_start_matches(": ")));
    }
    let choice = v
        .get("choices")
        .and_then(|c| c.get(0))
        .ok_or_else(|| format!("the server's answer is not an OpenAI {kind}: no choices[0]{}", detail(body)))?;
    let (field, text) = match api {
        ApiKind::Chat => ("choices[0].message.content", choice.pointer("/message/content")),
        ApiKind::Completion => ("choices[0].text", choice.get("text")),
    };
    let response = match text {
        Some(Value::String(s)) => s.clone(),
        _ => return Err(format!("the server's answer is not an OpenAI {kind}: no string {field}{}", detail(body))),
    };
    let reasoning = ["/message/reasoning_content", "/message/reasoning"]
        .iter()
        .find_map(|p| choice.pointer(p).and_then(Value::as_str))
        .map(String::from);
    Ok(Answered {
        response,
        reasoning,
        usage: v.get("usage").cloned().unwrap_or(Value::Null),
        timings: v.get("timings").filter(|t| t.is_object()).cloned().unwrap_or(Value::Null),
        finish_reason: choice.get("finish_reason").and_then(Value::as_str).map(String::from),
        wall_ms: 0,
        invalid_utf8: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_chat_and_completion_answers() {
        let a = parse_answer(r#"{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}],"usage":{"a":1}}"#, ApiKind::Chat).unwrap();
        assert_eq!((a.response.as_str(), a.finish_reason.as_deref()), ("x", Some("stop")));
        assert_eq!(a.usage["a"], 1);
        assert!(a.timings.is_null());
        let a =
            parse_answer(r#"{"choices":[{"message":{"content":"x"}}],"timings":{"predicted_n":3,"draft_n":2}}"#, ApiKind::Chat).unwrap();
        assert_eq!((a.timings["predicted_n"].as_u64(), a.timings["draft_n"].as_u64()), (Some(3), Some(2)));
        let a = parse_answer(r#"{"choices":[{"text":"y"}]}"#, ApiKind::Completion).unwrap();
        assert_eq!(a.response, "y");
        assert!(a.usage.is_null());
        assert!(parse_answer("{\"choices\":[]}", ApiKind::Chat).unwrap_err().contains("choices[0]"));
        assert!(parse_answer("<html>", ApiKind::Chat).unwrap_err().contains("not JSON"));
        assert!(parse_answer(r#"{"choices":[{"text":"y"}]}"#, ApiKind::Chat).unwrap_err().contains("message.content"));
        assert!(parse_answer(r#"{"error":{"message":"boom"}}"#, ApiKind::Chat).unwrap_err().contains("boom"));
    }
}
