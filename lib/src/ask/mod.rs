//! Asking an OpenAI-compatible server (llama.cpp's `llama-server`, vLLM,
//! Ollama, a hosted API) every target's question, and keeping the answers,
//! as they arrive, in the responses file `posrecall score` reads.
//!
//! The prompt is exactly what `targets --emit-prompts` writes (chat), or the
//! completion probe's text that `bench` evaluates for base models. Each
//! answer is appended as one whole line and flushed, so an interrupted run
//! keeps every answer it received, and a rerun asks only the targets that
//! have none yet.
//!
//! Failures come in three kinds: a retryable one (connection error, 408, 429,
//! 5xx) is retried with exponential backoff; a target's own failure (a
//! malformed body, another 4xx, retries spent on a 5xx/429) is reported and
//! the run goes on; a failure of the whole server ([`client::ServerError`]:
//! unreachable after the retries, no answer within the timeout, 401/403/404)
//! stops the run. The API key is never printed: every message is scrubbed of it.
//!
//! [`responses`] is the file's format, for `ask` and `score` alike; [`score`]
//! scores a responses file against its targets file into a run file.

pub mod client;
pub mod grade;
pub mod rescore;
pub mod responses;

use crate::corpus::Source;
use crate::prompt::template::Think;
use crate::prompt::{self, Frame};
use crate::record::run::TargetsFile;
use crate::support::progress::{Bar, Notes};
use anyhow::{Context, Result, bail};
use client::{Asker, Outcome, ServerError};
use responses::Response;
use serde_json::Value;
use std::collections::HashSet;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

/// The most requests in flight at once.
pub const MAX_CONCURRENCY: usize = 256;
/// Requests in flight at once when nothing is said: one, as a user's
/// single server handles best.
pub const DEFAULT_CONCURRENCY: usize = 1;
/// Retries of a failed request when nothing is said.
pub const DEFAULT_RETRIES: u32 = 4;
/// Seconds one request may take when nothing is said: a long answer from a
/// slow server included.
pub const DEFAULT_TIMEOUT_S: f64 = 600.0;
/// Where the answers go when nothing is said.
pub const DEFAULT_RESPONSES: &str = "responses.jsonl";
/// The most retries of one request.
pub const MAX_RETRIES: u32 = 20;
/// The longest one request may take, in seconds (a day); a retry's wait is
/// capped at the request timeout too.
pub const MAX_TIMEOUT_S: f64 = 86_400.0;

crate::settings::named_choice! {
    /// Which OpenAI-compatible endpoint is asked.
    #[derive(Default)]
    pub enum ApiKind {
        /// `URL/v1/chat/completions`: the prompt (file, then question) as one user message.
        #[default]
        Chat,
        /// `URL/v1/completions`, for base models: the completion probe's text (file, comment, header).
        Completion,
    }
}

/// The generation cap sent with each request: the one given, else the
/// budget `bench` gives a question of `lines` lines.
pub fn answer_budget(given: Option<usize>, lines: usize) -> usize {
    given.unwrap_or(crate::bench::plan::default_answer_budget(lines)).max(1)
}

/// A setting of [`AskOptions`] out of its range; the message names no flag.
/// Needs no hint: the face refuses each on the command line first, naming
/// the flag; this keeps a library caller to the same ranges.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("the {what} {value} is out of range ({range})")]
pub struct OutOfRange {
    pub what: &'static str,
    pub value: String,
    pub range: String,
}

/// Everything a run of questions reads.
#[derive(Debug, Clone)]
pub struct AskOptions {
    /// The full endpoint URL ([`endpoint`]).
    pub endpoint: String,
    pub model: Option<String>,
    pub api: ApiKind,
    /// The generation cap sent with each request.
    pub max_tokens: usize,
    /// Fields merged into every request body; they win over posrecall's.
    pub extra: serde_json::Map<String, Value>,
    /// Sent as `chat_template_kwargs` with every chat request ([`chat_template_kwargs`]).
    pub template_kwargs: serde_json::Map<String, Value>,
    /// Sent as `Authorization: Bearer`; never printed.
    pub key: Option<String>,
    pub retries: u32,
    /// Seconds one request may take, answer included.
    pub timeout: f64,
    /// Requests in flight at once.
    pub concurrency: usize,
}

impl AskOptions {
    /// Every number in its range: 1 to [`MAX_CONCURRENCY`] requests at once,
    /// 0 to [`MAX_RETRIES`] retries, a timeout above 0 and at most
    /// [`MAX_TIMEOUT_S`] seconds, 1 to [`crate::bench::MAX_NEW_TOKENS`] answer
    /// tokens.
    pub fn validate(&self) -> Result<(), OutOfRange> {
        let out = |what, value: String, range: String| Err(OutOfRange { what, value, range });
        if !(1..=MAX_CONCURRENCY).contains(&self.concurrency) {
            return out("concurrency", self.concurrency.to_string(), format!("1 to {MAX_CONCURRENCY}"));
        }
        if self.retries > MAX_RETRIES {
            return out("retry count", self.retries.to_string(), format!("0 to {MAX_RETRIES}"));
        }
        if !(self.timeout > 0.0 && self.timeout <= MAX_TIMEOUT_S) {
            return out("timeout", format!("{} s", self.timeout), format!("above 0 and at most {MAX_TIMEOUT_S} s"));
        }
        if !(1..=crate::bench::MAX_NEW_TOKENS).contains(&self.max_tokens) {
            return out("answer budget", self.max_tokens.to_string(), format!("1 to {}", crate::bench::MAX_NEW_TOKENS));
        }
        Ok(())
    }
}

/// A URL that is not a server's base URL.
#[derive(Debug, thiserror::Error)]
#[error("`{0}`: expected http://HOST:PORT or https://HOST")]
pub struct BadUrl(pub String);

/// The endpoint for `url` (a server's base URL; a trailing `/v1` is
/// accepted). The API path goes after the base URL's own path and before
/// its query (a proxy's `?token=`), which is kept; a fragment is dropped.
pub fn endpoint(url: &str, api: ApiKind) -> Result<String, BadUrl> {
    let bad = || BadUrl(crate::support::shown::shown_url(url));
    let mut u = url::Url::parse(url.trim()).map_err(|_| bad())?;
    if !matches!(u.scheme(), "http" | "https") || u.host_str().is_none_or(str::is_empty) || u.port() == Some(0) {
        return Err(bad());
    }
    let base = u.path().trim_end_matches('/');
    let base = base.strip_suffix("/v1").unwrap_or(base).to_string();
    let path = match api {
        ApiKind::Chat => "chat/completions",
        ApiKind::Completion => "completions",
    };
    u.set_path(&format!("{base}/v1/{path}"));
    u.set_fragment(None);
    let endpoint = u.to_string();
    // What the HTTP client would refuse only at the first request is
    // refused here, before any work.
    match endpoint.parse::<ureq::http::Uri>() {
        Ok(uri) if uri.host().is_some_and(|h| !h.is_empty()) && port_ok(uri.authority()) => Ok(endpoint),
        _ => Err(bad()),
    }
}

/// Whether the authority's port, if it has one, is a port (1 to 65535).
fn port_ok(authority: Option<&ureq::http::uri::Authority>) -> bool {
    let Some(a) = authority else { return false };
    match a.as_str().rsplit_once(':') {
        // An IPv6 literal's colons are inside its brackets.
        Some((_, port)) if !port.contains(']') => port.parse::<u16>().is_ok_and(|n| n > 0),
        _ => true,
    }
}

/// The prompt for each target, in target order: `(name, prompt)`.
///
/// Reads the corpus the targets file names (or `corpus`), checks its sha256
/// against the targets file, and cuts the kept lines out of it.
pub fn prompts(file: &TargetsFile, corpus: Option<&Path>, api: ApiKind) -> Result<Vec<(String, String)>> {
    let recorded = PathBuf::from(&file.corpus.path);
    let path = corpus.map(Path::to_path_buf).unwrap_or_else(|| recorded.clone());
    let source = Source::open_spec(&file.corpus.spec(&path), None).with_context(|| match corpus {
        Some(_) => "the corpus given".to_string(),
        None => "the corpus the targets file names (it may have moved)".to_string(),
    })?;
    let text = &source.corpus;
    if text.sha256 != file.corpus.sha256 {
        bail!(
            "corpus {} is not the file the targets were made from (sha256 {}, the targets file says {})",
            path.display(),
            text.sha256,
            file.corpus.sha256
        );
    }
    let crop = &file.corpus.crop;
    if crop.first_line == 0 || crop.first_line > crop.last_line || crop.last_line > text.line_count() {
        bail!(
            "the targets file keeps lines {}..{}, but {} has {} lines",
            crop.first_line,
            crop.last_line,
            path.display(),
            text.line_count()
        );
    }
    let kept = text.slice_lines(crop.first_line - 1, crop.last_line - 1);
    let (lines, skip_blank, anchor) = (file.params.lines, file.params.skip_blank, file.params.anchor);
    let prompts = match api {
        ApiKind::Chat => file
            .targets
            .iter()
            .map(|t| (t.name.clone(), prompt::instruction_prompt(kept, &prompt::question(t, lines, skip_blank, anchor))))
            .collect(),
        ApiKind::Completion => {
            let frame = Frame { anchor, ..Frame::completion(source.language.line_comment()) };
            let prefix = frame.prefix(kept);
            file.targets.iter().map(|t| (t.name.clone(), format!("{prefix}{}", frame.suffix(t, lines, skip_blank)))).collect()
        }
    };
    Ok(prompts)
}

/// The `chat_template_kwargs` a chat request carries for `think`: the
/// switches of the common template families (each template reads only its
/// own), then the user's kwargs over them.
pub fn chat_template_kwargs(think: Think, user: &serde_json::Map<String, Value>) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    let on = think == Think::On;
    m.insert("enable_thinking".into(), Value::Bool(on));
    m.insert("thinking".into(), Value::Bool(on));
    if !on {
        m.insert("reasoning_effort".into(), Value::from("low"));
    }
    for (k, v) in user {
        m.insert(k.clone(), v.clone());
    }
    m
}

/// The targets already answered in `path`. A last line without its newline
/// (a run stopped while writing it) is cut off, so its target is asked again;
/// returns whether the file needs a newline before the next line (a last line
/// that is whole but lacks one).
pub fn read_answered(path: &Path, file: &TargetsFile, notes: &dyn Notes) -> Result<(HashSet<String>, bool)> {
    let bytes = match crate::support::fsutil::read_input(path, crate::support::fsutil::MAX_TEXT_BYTES) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((HashSet::new(), false)),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let mut answered = HashSet::new();
    let mut check = |line: &[u8], n: usize| -> Result<bool> {
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(true);
        }
        let Some(a) = Response::parse(line) else {
            return Ok(false);
        };
        if !file.targets.iter().any(|t| t.name == a.name) {
            bail!(
                "{} line {n} answers `{}`, which is not a target in this targets file; write the answers to another file",
                path.display(),
                a.name
            );
        }
        if !answered.insert(a.name.clone()) {
            bail!("{} line {n}: a second answer for `{}`", path.display(), a.name);
        }
        Ok(true)
    };
    let mut n = 0;
    // Every line up to the last newline (that newline ends the last of them).
    let whole = if complete == 0 { &[][..] } else { &bytes[..complete - 1] };
    for line in whole.split(|&b| b == b'\n').filter(|_| complete > 0) {
        n += 1;
        if !check(line, n)? {
            bail!("{} line {n} is not an answer ({{\"name\": ..., \"response\": ...}}); write the answers to another file", path.display());
        }
    }
    let tail = &bytes[complete..];
    if tail.is_empty() {
        return Ok((answered, false));
    }
    if check(tail, n + 1)? {
        return Ok((answered, !tail.iter().all(u8::is_ascii_whitespace)));
    }
    // A line cut short by an interrupted run: drop it, its target is asked again.
    let f = OpenOptions::new().write(true).open(path).with_context(|| format!("cannot open {}", path.display()))?;
    f.set_len(complete as u64).with_context(|| format!("cannot cut the incomplete last line of {}", path.display()))?;
    notes.note(&format!("note: dropped an incomplete last line of {} (an interrupted run); its target is asked again", path.display()));
    Ok((answered, false))
}

/// Another run holds the responses file.
#[derive(Debug, thiserror::Error)]
#[error("another posrecall ask is writing {0} (it holds the file's lock); wait for it to end")]
pub struct Busy(pub String);

/// Opens the responses file for appending (creating it) and takes its lock,
/// so that two runs never interleave their lines; the lock lasts as long as
/// the file stays open.
pub fn open_responses(path: &Path) -> Result<File> {
    let f = OpenOptions::new().create(true).append(true).open(path).with_context(|| format!("cannot open {}", path.display()))?;
    // On Linux (and macOS, the BSDs) std's try_lock is flock(2) with
    // LOCK_EX|LOCK_NB, the lock earlier builds took by hand, so runs of old and
    // new builds still exclude each other. It is not an fcntl (POSIX record)
    // lock: the two kinds do not see each other on Linux. A flock belongs to
    // the open file, not the process, so a second open in this same process is
    // refused too.
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(TryLockError::WouldBlock) => Err(Busy(path.display().to_string()).into()),
        Err(TryLockError::Error(e)) => Err(e).with_context(|| format!("cannot lock {}", path.display())),
    }
}

/// Appends one whole line and flushes it.
fn append(out: &mut File, path: &Path, line: &str) -> Result<()> {
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    out.write_all(&bytes).and_then(|()| out.flush()).with_context(|| format!("cannot write {}", path.display()))
}

/// What a run of questions did.
#[derive(Debug, Default)]
pub struct Tally {
    /// Answers written.
    pub written: usize,
    /// Targets that failed on their own.
    pub failed: usize,
    /// Why the server failed, when it did (the run stopped).
    pub fatal: Option<ServerError>,
}

/// Asks every `(name, prompt)` of `todo` with `o.concurrency` requests in
/// flight and appends each answer to `out` (the file at `path`) as it
/// arrives. A target's own failure is printed and counted; a server failure
/// stops the run; a failed write ends it with that error.
pub fn ask_all(o: &AskOptions, todo: &[&(String, String)], out: &mut File, path: &Path, bar: &dyn Bar, notes: &dyn Notes) -> Result<Tally> {
    o.validate()?;
    let asker = Asker::new(o);
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let mut tally = Tally::default();
    let mut write_error: Option<anyhow::Error> = None;
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel::<(usize, Outcome)>();
        for _ in 0..o.concurrency.min(todo.len()) {
            let tx = tx.clone();
            let (next, stop, asker) = (&next, &stop, &asker);
            s.spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some((name, prompt)) = todo.get(i) else { break };
                    let note = |m: String| notes.note(&format!("note: {name}: {m}"));
                    let outcome = asker.ask(prompt, stop, &note);
                    if matches!(outcome, Outcome::Fatal(_)) {
                        // Before this worker takes another target.
                        stop.store(true, Ordering::SeqCst);
                    }
                    if tx.send((i, outcome)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        for (i, outcome) in rx {
            if let Err(e) = record(&todo[i].0, outcome, out, path, bar, &mut tally, notes) {
                stop.store(true, Ordering::SeqCst);
                write_error = Some(e);
                break;
            }
            if tally.fatal.is_some() {
                stop.store(true, Ordering::SeqCst);
            }
        }
    });
    match write_error {
        Some(e) => Err(e),
        None => Ok(tally),
    }
}

/// Writes or reports one target's outcome.
fn record(name: &str, outcome: Outcome, out: &mut File, path: &Path, bar: &dyn Bar, tally: &mut Tally, notes: &dyn Notes) -> Result<()> {
    match outcome {
        Outcome::Answered(a) => {
            let reasoning_tokens = a
                .usage
                .pointer("/completion_tokens_details/reasoning_tokens")
                .and_then(Value::as_u64)
                .and_then(|n| usize::try_from(n).ok());
            let line = Response {
                name: name.to_string(),
                response: a.response,
                wall_ms: a.wall_ms,
                usage: a.usage,
                timings: a.timings,
                finish_reason: a.finish_reason,
                invalid_utf8: a.invalid_utf8,
                reasoning: a.reasoning,
                reasoning_tokens,
            };
            append(out, path, &line.to_line()?)?;
            tally.written += 1;
            bar.inc(1);
        }
        Outcome::Failed(m) => {
            tally.failed += 1;
            notes.note(&format!("posrecall: {name}: {m}"));
            bar.inc(1);
        }
        Outcome::Fatal(e) => {
            tally.fatal.get_or_insert(e);
        }
        Outcome::Stopped => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints() {
        assert_eq!(endpoint("http://h:1", ApiKind::Chat).unwrap(), "http://h:1/v1/chat/completions");
        assert_eq!(endpoint("http://h:1/v1/", ApiKind::Completion).unwrap(), "http://h:1/v1/completions");
        assert!(endpoint("h:1", ApiKind::Chat).is_err());
        assert!(endpoint("http://", ApiKind::Chat).is_err());
        assert!(endpoint("http://exa mple:1", ApiKind::Chat).is_err());
        assert!(endpoint("http://h:99999", ApiKind::Chat).is_err());
        assert!(endpoint("http://h:0", ApiKind::Chat).is_err());
        assert!(endpoint("ftp://h:1", ApiKind::Chat).is_err());
        // The path goes before a proxy's query, after the base URL's own path.
        assert_eq!(endpoint("http://h:1/proxy/?token=a&b=c", ApiKind::Chat).unwrap(), "http://h:1/proxy/v1/chat/completions?token=a&b=c");
        assert_eq!(endpoint("https://h/v1?k=1#frag", ApiKind::Completion).unwrap(), "https://h/v1/completions?k=1");
        // Credentials stay in the request's URL and leave every shown one.
        assert_eq!(endpoint("http://u:p@h:1", ApiKind::Chat).unwrap(), "http://u:p@h:1/v1/chat/completions");
        assert_eq!(
            endpoint("http://u:secret@exa mple:1", ApiKind::Chat).unwrap_err().to_string(),
            "`http://exa mple:1`: expected http://HOST:PORT or https://HOST"
        );
    }
}
