//! `posrecall ask`: put every target's question to an OpenAI-compatible server
//! (llama.cpp's `llama-server`, vLLM, Ollama, a hosted API) and write the
//! answers, as they arrive, to the responses file `posrecall score` reads.
//!
//! The prompt is exactly what `targets --emit-prompts` writes (`--api chat`),
//! or the completion probe's text that `bench --probe completion` evaluates
//! (`--api completion`). Each answer is appended as one whole line and
//! flushed, so an interrupted run keeps every answer it received, and a rerun
//! asks only the targets that have none yet.
//!
//! Failures come in three kinds: a retryable one (connection error, 408, 429,
//! 5xx) is retried with exponential backoff; a target's own failure (a
//! malformed body, another 4xx, retries spent on a 5xx/429) is reported and
//! the run goes on; a failure of the whole server (unreachable after the
//! retries, no answer within `--timeout`, 401/403/404) stops the run.
//! The API key is never printed: every message is scrubbed of it.

use crate::cli::{ApiKind, AskArgs};
use crate::corpus::{Corpus, language_for};
use crate::prompt::{self, Frame};
use crate::run::TargetsFile;
use anyhow::{Context, Result, anyhow, bail};
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::HashSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The first wait before a retry; each further one doubles it.
const BACKOFF_START: Duration = Duration::from_millis(500);
/// The longest wait between two tries (a larger Retry-After is capped to it).
const BACKOFF_CAP: Duration = Duration::from_secs(300);
/// The largest response body read (an answer is a few KB).
const BODY_LIMIT: u64 = 64 << 20;

/// The prompt for each target, in target order: `(name, prompt)`.
///
/// Reads the corpus the targets file names (or `corpus`), checks its sha256
/// against the targets file, and cuts the kept lines out of it.
pub fn prompts(file: &TargetsFile, corpus: Option<&Path>, api: ApiKind) -> Result<Vec<(String, String)>> {
    let recorded = PathBuf::from(&file.corpus.path);
    let path = corpus.map(Path::to_path_buf).unwrap_or_else(|| recorded.clone());
    let text = Corpus::load(&path).with_context(|| {
        if corpus.is_some() {
            "--corpus".to_string()
        } else {
            "the corpus the targets file names (pass --corpus FILE if it moved)".to_string()
        }
    })?;
    if text.sha256 != file.corpus.sha256 {
        bail!(
            "corpus {} is not the file the targets were made from (sha256 {}, the targets file says {}); pass --corpus with that file",
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
    let (lines, skip_blank) = (file.params.lines, file.params.skip_blank);
    let prompts = match api {
        ApiKind::Chat => file
            .targets
            .iter()
            .map(|t| (t.name.clone(), prompt::instruction_prompt(kept, &prompt::query(&t.name, lines, skip_blank))))
            .collect(),
        ApiKind::Completion => {
            let language = language_for(&recorded).or_else(|_| language_for(&path))?;
            let frame = Frame::completion(language.line_comment());
            let prefix = frame.prefix(kept);
            file.targets
                .iter()
                .map(|t| (t.name.clone(), format!("{prefix}{}", frame.suffix(t, lines, skip_blank))))
                .collect()
        }
    };
    Ok(prompts)
}

/// The endpoint for `url` (a server's base URL; a trailing `/v1` is accepted).
pub fn endpoint(url: &str, api: ApiKind) -> Result<String> {
    let base = url.trim().trim_end_matches('/');
    let base = base.strip_suffix("/v1").unwrap_or(base);
    let host = base
        .strip_prefix("http://")
        .or_else(|| base.strip_prefix("https://"))
        .filter(|h| !h.is_empty())
        .ok_or_else(|| anyhow!("--url `{url}`: expected http://HOST:PORT or https://HOST"))?;
    if host.starts_with('/') {
        bail!("--url `{url}`: expected http://HOST:PORT or https://HOST");
    }
    let path = match api {
        ApiKind::Chat => "chat/completions",
        ApiKind::Completion => "completions",
    };
    Ok(format!("{base}/v1/{path}"))
}

/// One line of the responses file.
#[derive(Serialize)]
struct Line<'a> {
    name: &'a str,
    response: &'a str,
    /// The answering request's wall time.
    wall_ms: u64,
    /// The server's `usage` object (token counts), or null.
    usage: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    finish_reason: Option<&'a str>,
}

/// What `read_answers` needs of a line already in the output file.
#[derive(Deserialize)]
struct Existing {
    name: String,
    #[allow(dead_code)]
    response: String,
}

/// The targets already answered in `path`. A last line without its newline
/// (a run stopped while writing it) is cut off, so its target is asked again;
/// returns whether the file needs a newline before the next line (a last line
/// that is whole but lacks one).
fn read_answered(path: &Path, file: &TargetsFile) -> Result<(HashSet<String>, bool)> {
    let bytes = match std::fs::read(path) {
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
        let Ok(a) = serde_json::from_slice::<Existing>(line) else {
            return Ok(false);
        };
        if !file.targets.iter().any(|t| t.name == a.name) {
            bail!(
                "{} line {n} answers `{}`, which is not a target in this targets file; give another --out",
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
            bail!(
                "{} line {n} is not an answer ({{\"name\": ..., \"response\": ...}}); give another --out",
                path.display()
            );
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
    let f = OpenOptions::new()
        .write(true)
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    f.set_len(complete as u64)
        .with_context(|| format!("cannot cut the incomplete last line of {}", path.display()))?;
    eprintln!(
        "note: dropped an incomplete last line of {} (an interrupted run); its target is asked again",
        path.display()
    );
    Ok((answered, false))
}

/// An answer as the server gave it.
#[derive(Debug)]
struct Answered {
    response: String,
    usage: Value,
    finish_reason: Option<String>,
    wall_ms: u64,
}

/// How asking one target ended.
enum Outcome {
    Answered(Answered),
    /// This target failed; the others are still asked.
    Failed(String),
    /// The server failed; the run stops.
    Fatal(String),
    /// Not asked to the end because the run is stopping.
    Stopped,
}

/// How one request ended.
enum Try {
    Done(Answered),
    Failed(String),
    Fatal(String),
    /// Worth another try: why, the server's Retry-After, and whether running
    /// out of tries means the server is gone (a connection error).
    Again {
        why: String,
        retry_after: Option<Duration>,
        unreachable: bool,
    },
}

/// Sends the requests: one shared agent (connection pool) for all workers.
struct Asker {
    agent: ureq::Agent,
    endpoint: String,
    model: Option<String>,
    api: ApiKind,
    max_tokens: usize,
    /// Fields added to every request body (`--extra`); they win over ours.
    extra: serde_json::Map<String, Value>,
    key: Option<String>,
    retries: u32,
    timeout: f64,
}

impl Asker {
    /// Replaces every occurrence of the API key in a message.
    fn redact(&self, msg: String) -> String {
        match &self.key {
            Some(k) if !k.is_empty() => msg.replace(k.as_str(), "[API key]"),
            _ => msg,
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
        for (k, v) in &self.extra {
            b.insert(k.clone(), v.clone());
        }
        serde_json::to_vec(&Value::Object(b)).expect("a JSON map serializes")
    }

    /// Asks one prompt, with retries; `note` reports each retry.
    fn ask(&self, prompt: &str, stop: &AtomicBool, note: &dyn Fn(String)) -> Outcome {
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
                Try::Fatal(m) => return Outcome::Fatal(self.redact(m)),
                Try::Again { why, retry_after, unreachable } => (self.redact(why), retry_after, unreachable),
            };
            if retried >= self.retries {
                let msg = match self.retries {
                    0 => why,
                    n => format!("{why} (after {n} {})", if n == 1 { "retry" } else { "retries" }),
                };
                return if unreachable { Outcome::Fatal(msg) } else { Outcome::Failed(msg) };
            }
            if stop.load(Ordering::SeqCst) {
                return Outcome::Stopped;
            }
            let backoff = BACKOFF_START.saturating_mul(1 << retried.min(20));
            let wait = retry_after.unwrap_or(backoff).min(BACKOFF_CAP);
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
        let retry_after = resp
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        let bytes = match resp.body_mut().with_config().limit(BODY_LIMIT).read_to_vec() {
            Ok(b) => b,
            Err(e) => return self.transport_error(e),
        };
        let text = String::from_utf8_lossy(&bytes);
        match status {
            200..=299 => match parse_answer(&text, self.api) {
                Ok(a) => Try::Done(a),
                Err(m) => Try::Failed(m),
            },
            408 | 429 | 500..=599 => Try::Again {
                why: format!("HTTP {status}{}", detail(&text)),
                retry_after: if matches!(status, 429 | 503) { retry_after } else { None },
                unreachable: false,
            },
            401 | 403 => Try::Fatal(format!(
                "{} refused the request: HTTP {status}{} (an API key goes in an environment variable named by --api-key-env)",
                self.endpoint,
                detail(&text)
            )),
            404 => Try::Fatal(format!(
                "{} answered HTTP 404{}: is --url the server's base URL, and does it serve --api {}?",
                self.endpoint,
                detail(&text),
                match self.api {
                    ApiKind::Chat => "chat",
                    ApiKind::Completion => "completion",
                }
            )),
            _ => Try::Failed(format!("HTTP {status}{}", detail(&text))),
        }
    }

    fn transport_error(&self, e: ureq::Error) -> Try {
        match e {
            ureq::Error::Timeout(_) => Try::Fatal(format!(
                "{} gave no answer within {} s (--timeout): is the server stuck, or does it need a longer --timeout?",
                self.endpoint, self.timeout
            )),
            ureq::Error::Io(_) | ureq::Error::ConnectionFailed | ureq::Error::HostNotFound | ureq::Error::Protocol(_) => {
                Try::Again {
                    why: format!("cannot reach {}: {e}", self.endpoint),
                    retry_after: None,
                    unreachable: true,
                }
            }
            other => Try::Fatal(format!("request to {} failed: {other}", self.endpoint)),
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
fn parse_answer(body: &str, api: ApiKind) -> std::result::Result<Answered, String> {
    let kind = match api {
        ApiKind::Chat => "chat completion",
        ApiKind::Completion => "completion",
    };
    let v: Value = serde_json::from_str(body)
        .map_err(|e| format!("the server's answer is not JSON ({e}){}", detail(body)))?;
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
    Ok(Answered {
        response,
        usage: v.get("usage").cloned().unwrap_or(Value::Null),
        finish_reason: choice.get("finish_reason").and_then(Value::as_str).map(String::from),
        wall_ms: 0,
    })
}

/// Appends one whole line and flushes it.
fn append(out: &mut File, path: &Path, line: &str) -> Result<()> {
    let mut bytes = Vec::with_capacity(line.len() + 1);
    bytes.extend_from_slice(line.as_bytes());
    bytes.push(b'\n');
    out.write_all(&bytes)
        .and_then(|()| out.flush())
        .with_context(|| format!("cannot write {}", path.display()))
}

fn progress_bar(len: u64) -> ProgressBar {
    let bar = ProgressBar::new(len);
    let style = ProgressStyle::with_template("     ask [{bar:30}] {pos}/{len} answers  {elapsed}  ETA {eta}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    bar.set_style(style);
    bar
}

pub fn run(args: &AskArgs) -> Result<()> {
    if args.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        bail!("--timeout must be a positive number of seconds");
    }
    let extra = match args.extra.as_deref() {
        None => serde_json::Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => m,
            Ok(_) => bail!("--extra must be a JSON object, e.g. '{{\"cache_prompt\": false}}'"),
            Err(e) => bail!("--extra is not JSON: {e}"),
        },
    };
    let endpoint = endpoint(&args.url, args.api)?;
    let key = match &args.api_key_env {
        Some(name) => {
            let k = std::env::var(name)
                .ok()
                .filter(|k| !k.trim().is_empty())
                .ok_or_else(|| anyhow!("--api-key-env {name}: the environment variable {name} is not set"))?;
            if ureq::http::HeaderValue::from_str(&format!("Bearer {k}")).is_err() {
                bail!("--api-key-env {name}: the key holds characters an HTTP header cannot carry");
            }
            Some(k)
        }
        None => None,
    };
    let file = TargetsFile::load(&args.targets)?;
    let prompts = prompts(&file, args.corpus.as_deref(), args.api)?;
    let (answered, needs_newline) = read_answered(&args.out, &file)?;
    let todo: Vec<&(String, String)> = prompts.iter().filter(|(name, _)| !answered.contains(name)).collect();
    if todo.is_empty() {
        eprintln!("all {} targets are answered in {}", prompts.len(), args.out.display());
        return Ok(());
    }
    if !answered.is_empty() {
        eprintln!(
            "{} of {} targets are answered in {}; asking the other {}",
            answered.len(),
            prompts.len(),
            args.out.display(),
            todo.len()
        );
    }
    let mut out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.out)
        .with_context(|| format!("cannot open {}", args.out.display()))?;
    if needs_newline {
        out.write_all(b"\n").with_context(|| format!("cannot write {}", args.out.display()))?;
    }

    let timeout = Duration::from_secs_f64(args.timeout);
    let config = ureq::Agent::config_builder()
        .timeout_global(Some(timeout))
        .http_status_as_error(false)
        .user_agent(concat!("posrecall/", env!("CARGO_PKG_VERSION")))
        .build();
    let asker = Asker {
        agent: config.into(),
        endpoint,
        model: args.model.clone(),
        api: args.api,
        max_tokens: args.max_tokens.unwrap_or(40 * file.params.lines).max(1),
        extra,
        key,
        retries: args.retries,
        timeout: args.timeout,
    };

    let bar = progress_bar(todo.len() as u64);
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (mut written, mut failed) = (0usize, 0usize);
    let mut fatal: Option<String> = None;
    let mut write_error: Option<anyhow::Error> = None;
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::channel::<(usize, Outcome)>();
        for _ in 0..args.concurrency.min(todo.len()) {
            let tx = tx.clone();
            let (next, stop, asker, todo, bar) = (&next, &stop, &asker, &todo, &bar);
            s.spawn(move || {
                loop {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some((name, prompt)) = todo.get(i) else { break };
                    let note = |m: String| bar.suspend(|| eprintln!("note: {name}: {m}"));
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
            let name = todo[i].0.as_str();
            match outcome {
                Outcome::Answered(a) => {
                    let line = Line {
                        name,
                        response: &a.response,
                        wall_ms: a.wall_ms,
                        usage: &a.usage,
                        finish_reason: a.finish_reason.as_deref(),
                    };
                    let json = serde_json::to_string(&line).expect("a line serializes");
                    if let Err(e) = append(&mut out, &args.out, &json) {
                        stop.store(true, Ordering::SeqCst);
                        write_error = Some(e);
                        break;
                    }
                    written += 1;
                    bar.inc(1);
                }
                Outcome::Failed(m) => {
                    failed += 1;
                    bar.suspend(|| eprintln!("posrecall: {name}: {m}"));
                    bar.inc(1);
                }
                Outcome::Fatal(m) => {
                    stop.store(true, Ordering::SeqCst);
                    if fatal.is_none() {
                        fatal = Some(m);
                    }
                }
                Outcome::Stopped => {}
            }
        }
    });
    bar.finish_and_clear();
    if let Some(e) = write_error {
        return Err(e);
    }
    let have = answered.len() + written;
    eprintln!(
        "{written} new answer(s) written to {} ({have} of {} targets answered there)",
        args.out.display(),
        prompts.len()
    );
    let failures = match failed {
        0 => String::new(),
        n => format!("; {n} target(s) failed (see above)"),
    };
    if let Some(m) = fatal {
        bail!("{m}{failures}; stopped with {have} of {} targets answered: rerun the same command to ask the rest", prompts.len());
    }
    if failed > 0 {
        bail!(
            "{failed} of {} target(s) asked failed (see above); rerun the same command to ask them again",
            todo.len()
        );
    }
    eprintln!(
        "score them: posrecall score {} {} --url {}{}",
        args.targets.display(),
        args.out.display(),
        args.url,
        args.model.as_deref().map(|m| format!(" --model {m}")).unwrap_or_default()
    );
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
    }

    #[test]
    fn parses_chat_and_completion_answers() {
        let a = parse_answer(r#"{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}],"usage":{"a":1}}"#, ApiKind::Chat)
            .unwrap();
        assert_eq!((a.response.as_str(), a.finish_reason.as_deref()), ("x", Some("stop")));
        assert_eq!(a.usage["a"], 1);
        let a = parse_answer(r#"{"choices":[{"text":"y"}]}"#, ApiKind::Completion).unwrap();
        assert_eq!(a.response, "y");
        assert!(a.usage.is_null());
        assert!(parse_answer("{\"choices\":[]}", ApiKind::Chat).unwrap_err().contains("choices[0]"));
        assert!(parse_answer("<html>", ApiKind::Chat).unwrap_err().contains("not JSON"));
        assert!(parse_answer(r#"{"choices":[{"text":"y"}]}"#, ApiKind::Chat).unwrap_err().contains("message.content"));
        assert!(parse_answer(r#"{"error":{"message":"boom"}}"#, ApiKind::Chat).unwrap_err().contains("boom"));
    }
}
