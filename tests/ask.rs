//! `posrecall ask` against a scripted OpenAI-compatible server on 127.0.0.1,
//! without a model: the requests it sends, the responses file it writes, its
//! retries, timeouts and failures, requests in flight at once, resuming, and
//! the API key kept secret.
//!
//! The server is a few lines of std: one thread accepting connections, each
//! request answered by a script and the connection closed.

use crate::common;

use common::{ok, posrecall_with, s};
use serde_json::{Value, json};
use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tempfile::TempDir;

// ---------------------------------------------------------------------------
// The scripted server
// ---------------------------------------------------------------------------

/// One request as the server read it.
#[derive(Debug, Clone)]
struct Req {
    path: String,
    /// Header names in lower case.
    headers: HashMap<String, String>,
    body: Value,
    at: Instant,
}

impl Req {
    /// The prompt: the chat message's content, or the completion prompt.
    fn prompt(&self) -> &str {
        self.body["messages"][0]["content"]
            .as_str()
            .or_else(|| self.body["prompt"].as_str())
            .expect("a chat message or a completion prompt")
    }

    /// The target the prompt asks about.
    fn target(&self) -> String {
        let p = self.prompt();
        for (open, close) in [("function named `", "`"), ("The function `", "` from above")] {
            if let Some(i) = p.rfind(open) {
                let rest = &p[i + open.len()..];
                return rest[..rest.find(close).expect("a closed name")].to_string();
            }
        }
        panic!("no target name in the prompt");
    }
}

enum Reply {
    /// Status, extra headers, body.
    Http(u16, Vec<(&'static str, String)>, String),
    /// A 200 whose body is these bytes (not necessarily UTF-8).
    Bytes(Vec<u8>),
    /// Read the request, then say nothing for this long.
    Stall(Duration),
    /// This reply, sent after this long; meanwhile the server reads other
    /// requests (so several can be in flight at once).
    Late(Duration, Box<Reply>),
}

type Script = dyn Fn(&Req, usize) -> Reply + Send + Sync;

struct Server {
    url: String,
    log: Arc<Mutex<Vec<Req>>>,
}

impl Server {
    fn requests(&self) -> Vec<Req> {
        self.log.lock().unwrap().clone()
    }

    fn asked(&self) -> Vec<String> {
        self.requests().iter().map(Req::target).collect()
    }
}

/// Starts a server on 127.0.0.1 (port 0). `script` gets each request and its
/// index. With `stop_after`, the server closes its port as it sends the
/// answer with that number (1-based), so later connections are refused.
fn serve(stop_after: Option<usize>, script: impl Fn(&Req, usize) -> Reply + Send + Sync + 'static) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let log = Arc::new(Mutex::new(Vec::new()));
    let script: Arc<Script> = Arc::new(script);
    let thread_log = log.clone();
    std::thread::spawn(move || {
        let mut listener = Some(listener);
        let mut n = 0;
        while let Some(l) = &listener {
            let Ok((stream, _)) = l.accept() else { return };
            let Some(req) = read_request(&stream) else { continue };
            thread_log.lock().unwrap().push(req.clone());
            let reply = script(&req, n);
            n += 1;
            if stop_after == Some(n) {
                listener = None;
            }
            send(stream, reply);
        }
    });
    Server { url, log }
}

fn send(stream: TcpStream, reply: Reply) {
    match reply {
        Reply::Http(status, headers, body) => write_response(stream, status, &headers, body.as_bytes()),
        Reply::Bytes(body) => write_response(stream, 200, &[], &body),
        Reply::Stall(d) => {
            std::thread::spawn(move || {
                std::thread::sleep(d);
                drop(stream);
            });
        }
        Reply::Late(d, reply) => {
            std::thread::spawn(move || {
                std::thread::sleep(d);
                send(stream, *reply);
            });
        }
    }
}

fn read_request(stream: &TcpStream) -> Option<Req> {
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let path = line.split_whitespace().nth(1)?.to_string();
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
    }
    let len: usize = headers.get("content-length")?.parse().ok()?;
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some(Req { path, headers, body: serde_json::from_slice(&body).expect("the request body is JSON"), at: Instant::now() })
}

fn write_response(mut stream: TcpStream, status: u16, headers: &[(&str, String)], body: &[u8]) {
    let mut head =
        format!("HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n", body.len());
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(body);
    let _ = stream.flush();
}

/// An OpenAI answer holding `text`, in the shape the request's endpoint uses.
fn answer(req: &Req, text: &str) -> Reply {
    let choice = if req.path.split('?').next().unwrap_or_default().ends_with("/chat/completions") {
        json!({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"})
    } else {
        json!({"index": 0, "text": text, "finish_reason": "stop"})
    };
    let body = json!({
        "id": "cmpl-1",
        "object": "chat.completion",
        "choices": [choice],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 50, "total_tokens": 1050}
    });
    Reply::Http(200, vec![], body.to_string())
}

/// A script that answers every target with its expected lines.
fn echo(targets: &Value) -> impl Fn(&Req, usize) -> Reply + Send + Sync + 'static {
    let expected: HashMap<String, String> = targets["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let lines: Vec<&str> = t["expected"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
            (t["name"].as_str().unwrap().to_string(), lines.join("\n") + "\n")
        })
        .collect();
    move |req, _| answer(req, &expected[&req.target()])
}

// ---------------------------------------------------------------------------
// The binary
// ---------------------------------------------------------------------------

const DENSE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/dense.js");

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("UTF-8 output")
}

/// Asserts failure with exit status 1 (a bad file or server answer, not a
/// malformed command line, a panic or a signal) and returns stderr.
fn fails(o: &Output) -> String {
    assert_eq!(o.status.code(), Some(1), "posrecall should have failed with status 1:\nstderr: {}", text(&o.stderr));
    text(&o.stderr)
}

/// A folder with `targets.json` for `corpus` (`--lines 8`, `--count COUNT`).
fn targets(corpus: &str, count: usize) -> (TempDir, PathBuf, Value) {
    let dir = TempDir::new().unwrap();
    let count = count.to_string();
    let printed = ok(&posrecall_with(&["targets", corpus, "--json", "--lines", "8", "--count", &count], &[]));
    let path = dir.path().join("targets.json");
    std::fs::write(&path, &printed).unwrap();
    (dir, path, serde_json::from_str(&printed).unwrap())
}

fn names(targets: &Value) -> Vec<String> {
    targets["targets"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect()
}

/// The responses file's lines, parsed (every line must be whole JSON).
fn responses(path: &Path) -> Vec<Value> {
    let t = std::fs::read_to_string(path).unwrap();
    assert!(t.is_empty() || t.ends_with('\n'), "the responses file ends with a whole line");
    t.lines().map(|l| serde_json::from_str(l).expect("every line is JSON")).collect()
}

fn answered(path: &Path) -> BTreeSet<String> {
    let r = responses(path);
    let set: BTreeSet<String> = r.iter().map(|l| l["name"].as_str().unwrap().to_string()).collect();
    assert_eq!(set.len(), r.len(), "no target is answered twice");
    set
}

fn ask(targets: &Path, out: &Path, url: &str, extra: &[&str]) -> Output {
    ask_env(targets, out, url, extra, &[])
}

fn ask_env(targets: &Path, out: &Path, url: &str, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut args = vec!["ask", s(targets), "--url", url, "--out", s(out)];
    args.extend_from_slice(extra);
    posrecall_with(&args, env)
}

/// Scores `out` and returns the run file.
fn score(dir: &Path, targets: &Path, out: &Path, extra: &[&str]) -> Value {
    let run = dir.join("run.json");
    let mut args = vec!["score", s(targets), s(out), "--out", s(&run), "--quiet"];
    args.extend_from_slice(extra);
    ok(&posrecall_with(&args, &[]));
    serde_json::from_str(&std::fs::read_to_string(&run).unwrap()).unwrap()
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[test]
fn asks_every_target_and_score_reads_the_answers() {
    let (dir, tpath, t) = targets(DENSE, 4);
    let server = serve(None, echo(&t));
    let out = dir.path().join("responses.jsonl");
    ok(&ask(&tpath, &out, &server.url, &["--model", "test-model", "--concurrency", "2"]));

    // The prompts are exactly what `targets --emit-prompts` writes.
    let emitted = dir.path().join("prompts.jsonl");
    ok(&posrecall_with(&["targets", DENSE, "--lines", "8", "--count", "4", "--emit-prompts", s(&emitted)], &[]));
    let prompts: HashMap<String, String> =
        responses(&emitted).iter().map(|l| (l["name"].as_str().unwrap().to_string(), l["prompt"].as_str().unwrap().to_string())).collect();
    let reqs = server.requests();
    assert_eq!(reqs.len(), 4);
    for r in &reqs {
        assert_eq!(r.path, "/v1/chat/completions");
        assert_eq!(r.body["temperature"], 0);
        assert_eq!(r.body["model"], "test-model");
        assert_eq!(r.body["max_tokens"], 320, "40 tokens per expected line");
        assert_eq!(r.body["messages"].as_array().unwrap().len(), 1);
        assert_eq!(r.body["messages"][0]["role"], "user");
        assert_eq!(r.prompt(), prompts[&r.target()], "the prompt of {}", r.target());
        assert!(!r.headers.contains_key("authorization"));
    }

    let lines = responses(&out);
    assert_eq!(answered(&out), names(&t).into_iter().collect());
    for l in &lines {
        assert!(l["response"].is_string() && l["wall_ms"].is_u64(), "{l}");
        assert_eq!(l["usage"]["total_tokens"], 1050, "{l}");
    }

    // score reads the extra keys without complaint; --url/--model label the run.
    let run = score(dir.path(), &tpath, &out, &["--url", &server.url, "--model", "test-model"]);
    assert_eq!(run["summary"]["passes"], 4, "{}", run["summary"]);
    assert_eq!(run["manifest"]["external"], json!({"url": server.url, "model": "test-model"}));
    let report = ok(&posrecall_with(&["report", s(&dir.path().join("run.json")), "--format", "json"], &[]));
    let report: Value = serde_json::from_str(&report).unwrap();
    assert_eq!(report["runs"][0]["model"], format!("test-model @ {}", server.url));

    // A rerun finds everything answered and asks nothing.
    let o = ask(&tpath, &out, &server.url, &[]);
    ok(&o);
    assert!(text(&o.stderr).contains("all 4 targets are answered"), "{}", text(&o.stderr));
    assert_eq!(server.requests().len(), 4);
    assert_eq!(responses(&out), lines);
}

#[test]
fn completion_api_sends_the_completion_probe_text() {
    let (dir, tpath, t) = targets(DENSE, 4);
    let server = serve(None, echo(&t));
    let out = dir.path().join("responses.jsonl");
    ok(&ask(&tpath, &out, &server.url, &["--api", "completion", "--max-new-tokens", "99"]));
    let corpus = std::fs::read_to_string(DENSE).unwrap();
    let headers: HashMap<String, String> = t["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap().to_string(), t["header"].as_str().unwrap().to_string()))
        .collect();
    let reqs = server.requests();
    assert_eq!(reqs.len(), 4);
    for r in &reqs {
        assert_eq!(r.path, "/v1/completions");
        assert!(r.body.get("model").is_none(), "no --model, no model field");
        assert_eq!(r.body["max_tokens"], 99);
        assert_eq!(r.body["temperature"], 0);
        let name = r.target();
        let mut expected = corpus.clone();
        if !expected.ends_with('\n') {
            expected.push('\n');
        }
        expected.push_str(&format!("\n// The function `{name}` from above, repeated verbatim:\n{}\n", headers[&name]));
        assert_eq!(r.prompt(), expected);
    }
    let run = score(dir.path(), &tpath, &out, &[]);
    assert_eq!(run["summary"]["passes"], 4, "{}", run["summary"]);
    assert!(run["manifest"].get("external").is_none());
}

/// `--think` sends the template kwargs that switch thinking, `--template-kwargs`
/// goes over them, and a server's `reasoning_content` is written apart from
/// the answer; `score` records it, with the server's reasoning token count,
/// and scores the answer alone (reasoning inside the answer text is split off
/// as well).
#[test]
fn thinking_kwargs_are_sent_and_reasoning_is_recorded_not_scored() {
    let (dir, tpath, t) = targets(DENSE, 2);
    let expected: HashMap<String, String> = t["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            let lines: Vec<&str> = x["expected"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
            (x["name"].as_str().unwrap().to_string(), lines.join("\n") + "\n")
        })
        .collect();
    let first = names(&t)[0].clone();
    let server = serve(None, move |req, _| {
        let name = req.target();
        // One server gives the reasoning apart (llama-server's reasoning_content);
        // for the other target it is left inside the answer, wrongly fenced.
        let (content, reasoning) = if name == first {
            (expected[&name].clone(), json!("The user wants:\n```js\nnot();\n```"))
        } else {
            (format!("<think>\n```js\nnot();\n```\n</think>\n\n```js\n{}```\n", expected[&name]), Value::Null)
        };
        let body = json!({
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content, "reasoning_content": reasoning}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 90, "completion_tokens_details": {"reasoning_tokens": 40}}
        });
        Reply::Http(200, vec![], body.to_string())
    });
    let out = dir.path().join("responses.jsonl");
    ok(&ask(&tpath, &out, &server.url, &[]));
    for r in server.requests() {
        assert_eq!(r.body["chat_template_kwargs"]["enable_thinking"], false, "--think off is the default");
        assert_eq!(r.body["chat_template_kwargs"]["reasoning_effort"], "low");
    }
    let lines = responses(&out);
    let with_reasoning: Vec<&Value> = lines.iter().filter(|l| l["reasoning"].is_string()).collect();
    assert_eq!(with_reasoning.len(), 1, "{lines:?}");
    assert!(lines.iter().all(|l| l["reasoning_tokens"] == 40));

    let run = score(dir.path(), &tpath, &out, &[]);
    for r in run["targets"].as_array().unwrap() {
        assert_eq!(r["matched"], 8, "the answer alone is scored: {r}");
        assert!(r["reasoning"].as_str().unwrap().contains("not();"), "{r}");
        assert!(!r["response"].as_str().unwrap().contains("not();"), "{r}");
        assert_eq!(r["reasoning_tokens"], 40);
    }
    assert_eq!(run["summary"]["reasoning_tokens"], 80);

    // --think on, with a kwarg over posrecall's.
    let out2 = dir.path().join("responses2.jsonl");
    ok(&ask(&tpath, &out2, &server.url, &["--think", "on", "--template-kwargs", r#"{"reasoning_effort": "high", "x": [1]}"#]));
    for r in server.requests().iter().skip(2) {
        let k = &r.body["chat_template_kwargs"];
        assert_eq!((&k["enable_thinking"], &k["reasoning_effort"], &k["x"]), (&json!(true), &json!("high"), &json!([1])));
    }
}

#[test]
fn extra_fields_are_merged_into_every_request() {
    let (dir, tpath, t) = targets(DENSE, 3);
    let server = serve(None, echo(&t));
    let out = dir.path().join("responses.jsonl");
    let extra = r#"{"cache_prompt": false, "ignore_eos": true, "max_tokens": 7}"#;
    ok(&ask(&tpath, &out, &server.url, &["--max-new-tokens", "99", "--extra", extra]));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    for r in &reqs {
        assert_eq!(r.body["cache_prompt"], false);
        assert_eq!(r.body["ignore_eos"], true);
        // --extra wins over posrecall's own fields.
        assert_eq!(r.body["max_tokens"], 7);
        assert_eq!(r.body["temperature"], 0);
    }
    assert_eq!(answered(&out).len(), 3);

    // Not an object, or not JSON: refused before anything is asked or written.
    let empty = tempfile::tempdir().unwrap();
    let none = empty.path().join("responses.jsonl");
    for bad in ["[1, 2]", "{cache_prompt: false}"] {
        let msg = fails(&ask(&tpath, &none, &server.url, &["--extra", bad]));
        assert!(msg.contains("--extra"), "{msg}");
        assert!(!none.exists(), "{bad}: the output file was created");
    }
    assert_eq!(server.requests().len(), 3);
}

#[test]
fn retries_after_a_500() {
    let (dir, tpath, t) = targets(DENSE, 1);
    let echo = echo(&t);
    let server =
        serve(None, move |req, n| if n == 0 { Reply::Http(500, vec![], "{\"error\":\"overloaded\"}".into()) } else { echo(req, n) });
    let out = dir.path().join("r.jsonl");
    let o = ask(&tpath, &out, &server.url, &[]);
    ok(&o);
    assert!(text(&o.stderr).contains("HTTP 500"), "{}", text(&o.stderr));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let gap = reqs[1].at - reqs[0].at;
    assert!(gap >= Duration::from_millis(450), "backoff of 0.5 s, waited {gap:?}");
    assert_eq!(responses(&out).len(), 1);
}

#[test]
fn honours_retry_after_on_a_429() {
    let (dir, tpath, t) = targets(DENSE, 1);
    let echo = echo(&t);
    let server = serve(None, move |req, n| {
        if n == 0 { Reply::Http(429, vec![("Retry-After", "1".into())], "{\"error\":\"slow down\"}".into()) } else { echo(req, n) }
    });
    let out = dir.path().join("r.jsonl");
    ok(&ask(&tpath, &out, &server.url, &[]));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    let gap = reqs[1].at - reqs[0].at;
    assert!(
        gap >= Duration::from_millis(980) && gap < Duration::from_secs(5),
        "Retry-After: 1 means a wait of 1 s (not the 0.5 s backoff), waited {gap:?}"
    );
    assert_eq!(responses(&out).len(), 1);
}

#[test]
fn a_malformed_answer_fails_that_target_only() {
    let (dir, tpath, t) = targets(DENSE, 4);
    let bad = names(&t)[1].clone();
    let echo_all = echo(&t);
    let bad_name = bad.clone();
    let server =
        serve(
            None,
            move |req, n| {
                if req.target() == bad_name { Reply::Http(200, vec![], "<html>oops</html>".into()) } else { echo_all(req, n) }
            },
        );
    let out = dir.path().join("r.jsonl");
    let err = fails(&ask(&tpath, &out, &server.url, &["--retries", "3"]));
    assert!(err.contains(&format!("{bad}: the server's answer is not JSON")), "{err}");
    assert!(err.contains("1 of 4 target(s) asked failed"), "{err}");
    assert_eq!(server.asked().iter().filter(|n| **n == bad).count(), 1, "a malformed body is not retried");
    let mut others: BTreeSet<String> = names(&t).into_iter().collect();
    others.remove(&bad);
    assert_eq!(answered(&out), others);

    // The rerun asks only the failed target.
    let fixed = serve(None, echo(&t));
    ok(&ask(&tpath, &out, &fixed.url, &[]));
    assert_eq!(fixed.asked(), vec![bad]);
    assert_eq!(answered(&out).len(), 4);
}

#[test]
fn a_stalled_server_is_a_clear_error_after_the_timeout() {
    let (dir, tpath, _) = targets(DENSE, 2);
    // The server stalls for 120 s: a run that ends well before it ended
    // at its own 1 s timeout, however loaded the machine (a tighter bound
    // would fail on a busy one without telling anything more).
    let server = serve(None, |_, _| Reply::Stall(Duration::from_secs(120)));
    let out = dir.path().join("r.jsonl");
    let started = Instant::now();
    let err = fails(&ask(&tpath, &out, &server.url, &["--timeout", "1"]));
    let took = started.elapsed();
    assert!(took < Duration::from_secs(60), "took {took:?}");
    assert!(err.contains("no answer within 1 s (--timeout)"), "{err}");
    assert_eq!(server.requests().len(), 1, "a timeout stops the run: not retried, nothing else asked");
    assert!(responses(&out).is_empty());
}

#[test]
fn a_rerun_resumes_without_losing_or_repeating_answers() {
    let (dir, tpath, t) = targets(DENSE, 4);
    let all = names(&t);
    // The first server goes away after two answers.
    let first = serve(Some(2), echo(&t));
    let out = dir.path().join("r.jsonl");
    let err = fails(&ask(&tpath, &out, &first.url, &["--retries", "1"]));
    assert!(err.contains("cannot reach"), "{err}");
    assert!(err.contains("rerun the same command"), "{err}");
    assert_eq!(answered(&out), all[..2].iter().cloned().collect());

    // A crash in the middle of writing a line leaves half a line behind.
    let mut f = std::fs::OpenOptions::new().append(true).open(&out).unwrap();
    f.write_all(format!("{{\"name\":\"{}\",\"respo", all[2]).as_bytes()).unwrap();
    drop(f);

    let second = serve(None, echo(&t));
    let o = ask(&tpath, &out, &second.url, &[]);
    ok(&o);
    assert!(text(&o.stderr).contains("incomplete last line"), "{}", text(&o.stderr));
    assert_eq!(second.asked().into_iter().collect::<BTreeSet<_>>(), all[2..].iter().cloned().collect());
    assert_eq!(answered(&out), all.iter().cloned().collect());
    let run = score(dir.path(), &tpath, &out, &[]);
    assert_eq!(run["summary"]["passes"], 4, "{}", run["summary"]);
}

#[test]
fn the_api_key_is_sent_and_never_shown() {
    const KEY: &str = "sk-posrecall-test-6f1c0d2e9a";
    let (dir, tpath, t) = targets(DENSE, 2);
    let echo_all = echo(&t);
    let refused = names(&t)[1].clone();
    let refused_name = refused.clone();
    // A server that quotes the key back in an error body.
    let server = serve(None, move |req, n| {
        if req.target() == refused_name {
            Reply::Http(400, vec![], json!({"error": {"message": format!("bad request for key {KEY}")}}).to_string())
        } else {
            echo_all(req, n)
        }
    });
    let out = dir.path().join("r.jsonl");
    let o = ask_env(&tpath, &out, &server.url, &["--api-key-env", "POSRECALL_TEST_KEY"], &[("POSRECALL_TEST_KEY", KEY)]);
    let err = fails(&o);
    for r in server.requests() {
        assert_eq!(r.headers.get("authorization").map(String::as_str), Some(format!("Bearer {KEY}").as_str()));
    }
    assert!(err.contains(&format!("{refused}: HTTP 400")), "{err}");
    assert!(err.contains("[API key]"), "{err}");
    assert!(!text(&o.stdout).contains(KEY) && !err.contains(KEY), "the key leaked: {err}");
    assert!(!std::fs::read_to_string(&out).unwrap().contains(KEY));
    assert_eq!(answered(&out).len(), 1);

    // A key variable that is not set is an error that names the variable.
    let err = fails(&ask_env(&tpath, &out, &server.url, &["--api-key-env", "POSRECALL_NO_SUCH_KEY_VAR"], &[]));
    assert!(err.contains("POSRECALL_NO_SUCH_KEY_VAR is not set"), "{err}");
}

#[test]
fn a_changed_corpus_is_refused_before_asking() {
    let tmp = TempDir::new().unwrap();
    let corpus = tmp.path().join("dense.js");
    std::fs::copy(DENSE, &corpus).unwrap();
    let (dir, tpath, _) = targets(s(&corpus), 2);
    let mut text_now = std::fs::read_to_string(&corpus).unwrap();
    text_now.push_str("// edited\n");
    std::fs::write(&corpus, text_now).unwrap();
    let server = serve(None, |req, _| answer(req, ""));
    let out = dir.path().join("r.jsonl");
    let err = fails(&ask(&tpath, &out, &server.url, &[]));
    assert!(err.contains("is not the file the targets were made from"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(server.requests().is_empty());

    // --corpus points at the right file.
    let good = tmp.path().join("good.js");
    std::fs::copy(DENSE, &good).unwrap();
    ok(&ask(&tpath, &out, &server.url, &["--corpus", s(&good)]));
    assert_eq!(responses(&out).len(), 2);
}

#[test]
fn an_unreachable_server_stops_the_run() {
    let (dir, tpath, _) = targets(DENSE, 2);
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let out = dir.path().join("r.jsonl");
    let started = Instant::now();
    let err = fails(&ask(&tpath, &out, &format!("http://127.0.0.1:{port}"), &["--retries", "1"]));
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(err.contains("cannot reach") && err.contains("(after 1 retry)"), "{err}");
    assert!(responses(&out).is_empty());
}

// ---------------------------------------------------------------------------
// Hardening
// ---------------------------------------------------------------------------

#[test]
fn a_long_retry_after_is_capped_at_the_request_timeout() {
    // Retry-After: 999999 used to put a 300 s sleep between two tries,
    // whatever --timeout said.
    let (dir, tpath, t) = targets(DENSE, 1);
    let echo_all = echo(&t);
    let server = serve(
        None,
        move |req, n| {
            if n == 0 { Reply::Http(429, vec![("Retry-After", "999999".into())], "{}".into()) } else { echo_all(req, n) }
        },
    );
    let out = dir.path().join("r.jsonl");
    let started = Instant::now();
    ok(&ask(&tpath, &out, &server.url, &["--retries", "1", "--timeout", "2"]));
    let reqs = server.requests();
    assert_eq!(reqs.len(), 2);
    // Never shorter than the 2 s cap (the backoff alone would be 0.5 s), and
    // far short of the next bound a broken cap would meet (the 300 s
    // backoff cap): the upper bound leaves a loaded machine a minute.
    let gap = reqs[1].at - reqs[0].at;
    assert!(gap >= Duration::from_millis(1900) && gap < Duration::from_secs(60), "waited {gap:?} for a 2 s timeout");
    assert!(started.elapsed() < Duration::from_secs(120));
}

#[test]
fn an_answer_that_is_not_utf8_is_recorded_as_such() {
    let (dir, tpath, t) = targets(DENSE, 2);
    let odd = names(&t)[0].clone();
    let echo_all = echo(&t);
    let server = serve(None, move |req, n| {
        if req.target() == odd {
            // A chat completion whose content holds the bytes 0xFF 0xFE.
            let mut body = br#"{"choices":[{"message":{"content":"  var x = 1;"#.to_vec();
            body.extend([0xff, 0xfe]);
            body.extend(br#""},"finish_reason":"stop"}]}"#);
            Reply::Bytes(body)
        } else {
            echo_all(req, n)
        }
    });
    let out = dir.path().join("r.jsonl");
    ok(&ask(&tpath, &out, &server.url, &[]));
    let lines = responses(&out);
    let flagged: Vec<&Value> = lines.iter().filter(|l| l["invalid_utf8"] == true).collect();
    assert_eq!(flagged.len(), 1, "{lines:?}");
    assert_eq!(flagged[0]["name"], names(&t)[0].as_str());
    assert!(flagged[0]["response"].as_str().unwrap().contains('\u{fffd}'));
    // score carries the flag into the run file.
    let run = score(dir.path(), &tpath, &out, &[]);
    let marked: Vec<&str> =
        run["targets"].as_array().unwrap().iter().filter(|r| r["invalid_utf8"] == true).map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(marked, [names(&t)[0].as_str()]);
}

#[test]
fn a_second_run_on_the_same_responses_file_is_refused() {
    let (dir, tpath, t) = targets(DENSE, 2);
    let server = serve(None, echo(&t));
    let out = dir.path().join("r.jsonl");
    // Another run holds the file's lock.
    let held = std::fs::OpenOptions::new().create(true).append(true).open(&out).unwrap();
    held.try_lock().unwrap();
    let err = fails(&ask(&tpath, &out, &server.url, &[]));
    assert!(err.contains("another posrecall ask is writing") && err.contains("--out"), "{err}");
    assert!(server.requests().is_empty(), "nothing is asked");
    assert_eq!(std::fs::read(&out).unwrap(), b"");
    drop(held);
    ok(&ask(&tpath, &out, &server.url, &[]));
    assert_eq!(responses(&out).len(), 2);
}

#[test]
fn bad_urls_and_timeouts_are_refused_before_anything_is_asked() {
    let (dir, tpath, _t) = targets(DENSE, 1);
    let out = dir.path().join("r.jsonl");
    for url in ["http://exa mple:8080", "http://127.0.0.1:99999", "ftp://h", "127.0.0.1:8080"] {
        let err = fails(&ask(&tpath, &out, url, &[]));
        assert!(err.contains("--url"), "{url}: {err}");
    }
    for t in ["1e20", "0", "-1", "nan", "86401"] {
        let flag = format!("--timeout={t}");
        let o = ask(&tpath, &out, "http://127.0.0.1:9", &[&flag]);
        assert_eq!(o.status.code(), Some(2), "--timeout {t}");
        assert!(text(&o.stderr).contains("--timeout"), "{}", text(&o.stderr));
        assert!(!text(&o.stderr).contains("panicked"));
    }
    assert!(!out.exists(), "no responses file for a refused run");
}

// ---------------------------------------------------------------------------
// docs/GUIDE.md's promises on failures, retries, the key and concurrency
// ("Models behind an HTTP server")
// ---------------------------------------------------------------------------

/// The gaps between consecutive requests.
fn gaps(server: &Server) -> Vec<Duration> {
    server.requests().windows(2).map(|w| w[1].at - w[0].at).collect()
}

#[test]
fn a_401_403_or_404_stops_the_run_at_once() {
    let (dir, tpath, t) = targets(DENSE, 4);
    let key_hint = "(an API key goes in an environment variable named by --api-key-env)";
    let url_hint = "is --url the server's base URL, and does it serve --api chat?";
    for (status, hint) in [(401, key_hint), (403, key_hint), (404, url_hint)] {
        // The first request is answered, every later one refused.
        let echo_all = echo(&t);
        let server =
            serve(None, move |req, n| if n == 0 { echo_all(req, n) } else { Reply::Http(status, vec![], "{\"error\":\"no\"}".into()) });
        let out = dir.path().join(format!("r{status}.jsonl"));
        // Retries would be allowed: a refusal is not worth one.
        let err = fails(&ask(&tpath, &out, &server.url, &["--retries", "4"]));
        assert!(err.contains(&format!("HTTP {status}: ")), "{status}: {err}");
        assert!(err.contains(hint), "{status}: {err}");
        assert!(err.contains("stopped with 1 of 4 targets answered"), "{status}: {err}");
        assert!(!err.contains("note:"), "{status}: no retry: {err}");
        assert_eq!(server.requests().len(), 2, "{status}: the refused target was not retried, nothing else was asked");
        assert_eq!(answered(&out), BTreeSet::from([server.asked()[0].clone()]), "{status}: the first answer is kept");
    }
}

/// A redirect is not followed, whatever its status: a 307 or 308 would
/// carry the prompt and the API key to another address, a 301, 302 or 303
/// would turn the POST into a GET. The run stops at once with one line
/// naming the status and where it leads, shown without its query, and
/// nothing is retried.
#[test]
fn a_redirect_stops_the_run_and_says_where_it_leads() {
    let (dir, tpath, _) = targets(DENSE, 2);
    for status in [307, 308, 302] {
        let server = serve(None, move |_, _| {
            Reply::Http(status, vec![("Location", "https://elsewhere.example/v1?key=s3cr3tvalue".into())], String::new())
        });
        let out = dir.path().join(format!("r{status}.jsonl"));
        let err = fails(&ask(&tpath, &out, &server.url, &["--retries", "3"]));
        let want = format!(
            "answered HTTP {status}, a redirect to `https://elsewhere.example/v1?…`, which posrecall does not follow: if that is the \
             server, give its address to --url"
        );
        assert!(err.contains(&want), "{status}: {err}");
        assert!(!err.contains("s3cr3t") && !err.contains("note:"), "{status}: {err}");
        assert_eq!(server.requests().len(), 1, "{status}: one request, not retried, nothing else asked");
        assert!(responses(&out).is_empty(), "{status}");
    }
    // Without a Location: said so.
    let server = serve(None, |_, _| Reply::Http(307, vec![], String::new()));
    let err = fails(&ask(&tpath, &dir.path().join("none.jsonl"), &server.url, &[]));
    assert!(err.contains("answered HTTP 307, a redirect to nowhere (no Location header)"), "{err}");
}

/// Tight lower bounds (a wait is never shorter than the backoff) and
/// generous upper bounds (short of the next doubling, so that a longer
/// policy fails too): whatever the machine's load, only a doubling passes.
#[test]
fn a_408_and_a_503_are_retried_with_a_backoff_that_doubles() {
    let (dir, tpath, t) = targets(DENSE, 1);
    let echo_all = echo(&t);
    let server = serve(None, move |req, n| match n {
        0 => Reply::Http(408, vec![], String::new()),
        1 => Reply::Http(503, vec![], String::new()),
        2 => Reply::Http(502, vec![], String::new()),
        _ => echo_all(req, n),
    });
    let out = dir.path().join("r.jsonl");
    let o = ask(&tpath, &out, &server.url, &["--retries", "3"]);
    ok(&o);
    let err = text(&o.stderr);
    let name = &names(&t)[0];
    for note in ["HTTP 408; retry 1/3 in 0.5 s", "HTTP 503; retry 2/3 in 1.0 s", "HTTP 502; retry 3/3 in 2.0 s"] {
        assert!(err.contains(&format!("note: {name}: {note}")), "`{note}` not in: {err}");
    }
    let gaps = gaps(&server);
    assert_eq!(gaps.len(), 3, "three failures, one answer");
    for (gap, want_ms) in gaps.iter().zip([500u64, 1000, 2000]) {
        let want = Duration::from_millis(want_ms);
        // The client sleeps only after it has the answer, which the server
        // sent after it logged the request: the gap holds the whole wait.
        assert!(*gap >= want - Duration::from_millis(5), "waited {gap:?}, the backoff is {want:?}: {gaps:?}");
        assert!(*gap < want * 2, "waited {gap:?}, the backoff is {want:?}: {gaps:?}");
    }
    assert_eq!(answered(&out).len(), 1);
}

#[test]
fn a_503s_retry_after_is_honoured_and_a_408s_is_not() {
    let (dir, tpath, t) = targets(DENSE, 1);
    let echo_all = echo(&t);
    let server = serve(None, move |req, n| match n {
        0 => Reply::Http(408, vec![("Retry-After", "3".into())], String::new()),
        1 => Reply::Http(503, vec![("Retry-After", "2".into())], String::new()),
        _ => echo_all(req, n),
    });
    let out = dir.path().join("r.jsonl");
    let o = ask(&tpath, &out, &server.url, &["--retries", "2"]);
    ok(&o);
    let err = text(&o.stderr);
    assert!(err.contains("HTTP 408; retry 1/2 in 0.5 s"), "a 408's Retry-After is not a wait: {err}");
    assert!(err.contains("HTTP 503; retry 2/2 in 2.0 s"), "a 503's Retry-After is (not the 1 s backoff): {err}");
    let gaps = gaps(&server);
    assert_eq!(gaps.len(), 2);
    let ms = Duration::from_millis;
    assert!(gaps[0] >= ms(495) && gaps[0] < ms(2500), "408: {gaps:?}");
    assert!(gaps[1] >= ms(1995) && gaps[1] < ms(4000), "503 with Retry-After: 2: {gaps:?}");
}

#[test]
fn retries_spent_on_a_5xx_fail_that_target_and_the_run_goes_on() {
    let (dir, tpath, t) = targets(DENSE, 3);
    let all = names(&t);
    // The first target asked is the one that always fails.
    let bad = all[0].clone();
    let echo_all = echo(&t);
    let bad_name = bad.clone();
    let server =
        serve(None, move |req, n| if req.target() == bad_name { Reply::Http(500, vec![], "overloaded".into()) } else { echo_all(req, n) });
    let out = dir.path().join("r.jsonl");
    let err = fails(&ask(&tpath, &out, &server.url, &["--retries", "2"]));
    assert!(err.contains(&format!("posrecall: {bad}: HTTP 500: \"overloaded\" (after 2 retries)")), "{err}");
    assert!(err.contains("2 new answer(s) written"), "{err}");
    assert!(err.contains("1 of 3 target(s) asked failed"), "{err}");
    // One try and two retries, then the other targets, each once.
    let asked = server.asked();
    assert_eq!(asked[..3], [bad.clone(), bad.clone(), bad.clone()], "{asked:?}");
    assert_eq!(asked[3..].iter().cloned().collect::<BTreeSet<_>>(), all[1..].iter().cloned().collect(), "{asked:?}");
    assert_eq!(asked.len(), 5, "{asked:?}");
    assert_eq!(answered(&out), all[1..].iter().cloned().collect());
}

#[test]
fn the_api_key_is_redacted_in_fatal_errors_and_retry_notes() {
    const KEY: &str = "sk-posrecall-fatal-4b7e19c2d8";
    let (dir, tpath, _) = targets(DENSE, 2);
    for (status, what) in [(401, "refused the request: HTTP 401"), (404, "answered HTTP 404")] {
        // A 503, then the fatal status, both quoting the key back.
        let server = serve(None, move |_, n| {
            let body = json!({"error": {"message": format!("key {KEY} is not valid here")}}).to_string();
            Reply::Http(if n == 0 { 503 } else { status }, vec![], body)
        });
        let out = dir.path().join(format!("r{status}.jsonl"));
        let env = [("POSRECALL_TEST_KEY", KEY)];
        let o = ask_env(&tpath, &out, &server.url, &["--api-key-env", "POSRECALL_TEST_KEY"], &env);
        let err = fails(&o);
        assert_eq!(server.requests().len(), 2, "{status}");
        assert!(err.contains("HTTP 503") && err.contains("retry 1/4"), "the retry note: {err}");
        assert!(err.contains(what), "{err}");
        assert_eq!(err.matches("key [API key] is not valid here").count(), 2, "the note and the fatal error: {err}");
        assert!(!err.contains(KEY) && !text(&o.stdout).contains(KEY), "the key leaked: {err}");
        assert!(responses(&out).is_empty());
    }
}

#[test]
fn a_key_that_crosses_the_cut_of_a_long_error_body_is_still_redacted() {
    // The message quotes the body's first 200 characters; the key starts at
    // character 190, so a cut made before redacting would print its start.
    const KEY: &str = "sk-posrecall-partial-0123456789abcdef";
    let (dir, tpath, _) = targets(DENSE, 1);
    let server = serve(None, move |_, _| Reply::Http(401, vec![], format!("{} key {KEY}", "x".repeat(185))));
    let out = dir.path().join("r.jsonl");
    let env = [("POSRECALL_TEST_KEY", KEY)];
    let o = ask_env(&tpath, &out, &server.url, &["--api-key-env", "POSRECALL_TEST_KEY"], &env);
    let err = fails(&o);
    assert!(err.contains("refused the request: HTTP 401"), "{err}");
    assert!(!err.contains(&KEY[..5]), "the key's start leaked: {err}");
}

/// Two requests in flight, proven by arrival times alone: every answer
/// comes `STALL` after its request, so a request that arrives less than
/// `STALL` after another was sent before that one's answer existed.
#[test]
fn concurrency_2_keeps_two_requests_in_flight_and_no_more() {
    const STALL: Duration = Duration::from_secs(2);
    let (dir, tpath, t) = targets(DENSE, 4);
    let echo_all = echo(&t);
    let server = serve(None, move |req, n| Reply::Late(STALL, Box::new(echo_all(req, n))));
    let out = dir.path().join("r.jsonl");
    ok(&ask(&tpath, &out, &server.url, &["--concurrency", "2"]));
    let at: Vec<Instant> = server.requests().iter().map(|r| r.at).collect();
    assert_eq!(at.len(), 4);
    let since = |a: usize, b: usize| at[b] - at[a];
    // Two at once, in each wave.
    assert!(since(0, 1) < STALL, "the second request waited for the first answer: {:?}", since(0, 1));
    assert!(since(2, 3) < STALL, "the fourth request waited for the third answer: {:?}", since(2, 3));
    // Never three: the third came after an answer, the fourth after two.
    assert!(since(0, 2) >= STALL, "three requests in flight: {:?}", since(0, 2));
    assert!(since(1, 3) >= STALL, "three requests in flight: {:?}", since(1, 3));
    assert_eq!(answered(&out), names(&t).into_iter().collect());
}

/// A base URL with credentials and a proxy's query: the API path goes before
/// the query, and the credentials appear in no message, hint, run file or
/// report. An answer over 64 MiB, and one whose gzip encoding is broken, fail
/// their own targets only; the others are asked and answered.
#[test]
fn url_queries_and_credentials_and_bad_bodies() {
    let (dir, tpath, t) = targets(DENSE, 4);
    let all = names(&t);
    let (huge, broken) = (all[1].clone(), all[2].clone());
    let echo_all = echo(&t);
    let server = serve(None, move |req, n| {
        if req.target() == huge {
            Reply::Bytes(vec![b' '; (64 << 20) + 10])
        } else if req.target() == broken {
            Reply::Http(200, vec![("Content-Encoding", "gzip".into())], "this is not gzip".into())
        } else {
            echo_all(req, n)
        }
    });
    let url = server.url.replace("http://", "http://user:s3cr3t@") + "/proxy/?token=t0ps3cret";
    let out = dir.path().join("r.jsonl");
    let o = ask(&tpath, &out, &url, &["--retries", "0"]);
    let err = fails(&o);
    assert!(
        server.requests().iter().all(|r| r.path == "/proxy/v1/chat/completions?token=t0ps3cret"),
        "{:?}",
        server.requests().iter().map(|r| r.path.clone()).collect::<Vec<_>>()
    );
    assert!(err.contains(&format!("{}: the server's answer is larger than 64 MiB", all[1])), "{err}");
    assert!(err.contains(&format!("{}: the server's answer", all[2])), "{err}");
    assert!(err.contains("2 of 4 target(s) asked failed"), "{err}");
    assert_eq!(answered(&out).len(), 2);
    assert!(!err.contains("s3cr3t") && !text(&o.stdout).contains("s3cr3t"), "the password leaked: {err}");
    // A proxy's query-string token is as secret as the password.
    assert!(!err.contains("t0ps3cret") && !text(&o.stdout).contains("t0ps3cret"), "the query's token leaked: {err}");

    // Once all are answered, the hint to score them and the scored run file
    // name the server without its credentials or its query's values.
    let fixed = serve(None, echo(&t));
    let fixed_url = fixed.url.replace("http://", "http://user:s3cr3t@") + "/?key=t0ps3cret";
    let o = ask(&tpath, &out, &fixed_url, &[]);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let shown = format!("{}/?…", fixed.url);
    assert!(
        o.status.success() && err.contains(&format!("--url {shown}")) && !err.contains("s3cr3t") && !err.contains("t0ps3cret"),
        "{err}"
    );
    let run = score(dir.path(), &tpath, &out, &["--url", &fixed_url]);
    assert_eq!(run["manifest"]["external"]["url"], shown.as_str(), "{}", run["manifest"]);
}
