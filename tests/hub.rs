//! Hugging Face hub references (`ORG/REPO[:QUANT]`, `ORG/REPO/FILE.gguf`,
//! `@REVISION`), against a hub served on 127.0.0.1: the hub cannot be reached
//! from the machines these tests run on, so a small HTTP server here answers
//! the two endpoints the hub protocol uses (the file list at a revision, and
//! a file's bytes by range, with the ETag and X-Repo-Commit headers) for a
//! repository holding the real SmolLM2, whole and split in three parts.
//! posrecall is pointed at it the supported way, `HF_ENDPOINT`, and keeps
//! its downloads in a hub cache of the test's own (`HF_HUB_CACHE`).

use crate::common;

use common::*;
use sha2::{Digest, Sha256};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

const REPO: &str = "posrecall-test/SmolLM2-135M-Instruct-GGUF";
const COMMIT: &str = "0123456789abcdef0123456789abcdef01234567";
const WHOLE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// One file of the served repository.
struct File {
    name: String,
    bytes: Vec<u8>,
    sha256: String,
    /// Its git object id, as `git hash-object` gives it (the oracle for the
    /// id the hub lists a file that is not in LFS by).
    git_id: String,
}

/// What the server saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    range: Option<String>,
    authorization: Option<String>,
}

#[derive(Default)]
struct Behaviour {
    /// Answer 401 unless this bearer token is sent.
    token: Option<String>,
    /// Serve only the first half of the next full download, then hang up.
    cut_next: bool,
    /// Serve the next full download wrong, as a whole response.
    corrupt_next: Option<Corruption>,
    /// Answer every request as a hostile hub or mirror would.
    hostile: Option<Hostile>,
    /// List the files as the hub lists a small file kept in git (a size
    /// and a git object id, no LFS sha256).
    in_git: bool,
}

/// What a hostile (or broken) hub or mirror sends.
#[derive(Debug, Clone)]
enum Hostile {
    /// The listing's commit is this, not a commit.
    Commit(&'static str),
    /// The listing has one more model file, named this.
    FileName(&'static str),
    /// Files come with this ETag and X-Repo-Commit, and the wrong bytes.
    Headers(String),
    /// The listing is never answered.
    StallListing,
    /// The listing comes a byte every half second: no read ever waits long.
    SlowListing,
    /// The model file is listed as this many bytes.
    Size(u64),
    /// A file stops after half its bytes, the connection left open.
    StallFile,
    /// Every request is redirected, to this Location (or with none).
    Redirect(Option<&'static str>),
    /// Every request gets this status.
    Status(&'static str),
}

/// Bytes a hub or mirror sends in place of the file it lists.
#[derive(Debug, Clone, Copy)]
enum Corruption {
    /// The right length, one byte changed.
    Flipped,
    /// The first half, announced as the whole answer.
    Truncated,
}

struct Hub {
    url: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    behaviour: Arc<Mutex<Behaviour>>,
    stop: Arc<AtomicBool>,
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees the stop.
        let _ = TcpStream::connect(self.url.trim_start_matches("http://"));
    }
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// The repository: the whole SmolLM2 and its three parts under `split/`.
fn files() -> Arc<Vec<File>> {
    let mut paths = vec![(WHOLE.to_string(), smollm2())];
    let first = split_first_part();
    for i in 1..=3 {
        let name = format!("SmolLM2-135M-Instruct.Q4_1-{i:05}-of-00003.gguf");
        paths.push((format!("split/{name}"), first.with_file_name(&name)));
    }
    Arc::new(
        paths
            .into_iter()
            .map(|(name, p)| {
                let bytes = std::fs::read(&p).unwrap();
                let git = std::process::Command::new("git").arg("hash-object").arg(&p).output().unwrap();
                assert!(git.status.success(), "git hash-object: {}", String::from_utf8_lossy(&git.stderr));
                let git_id = String::from_utf8(git.stdout).unwrap().trim().to_string();
                File { name, sha256: hex(&bytes), bytes, git_id }
            })
            .collect(),
    )
}

fn split_first_part() -> PathBuf {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/env/gguf-split");
    let target = Path::new(bin()).parent().and_then(Path::parent).unwrap();
    let o = std::process::Command::new(&script).arg("--test-model").env("CARGO_TARGET_DIR", target).output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    PathBuf::from(String::from_utf8_lossy(&o.stdout).trim())
}

fn serve(files: Arc<Vec<File>>) -> Hub {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (seen, behaviour, stop) =
        (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Behaviour::default())), Arc::new(AtomicBool::new(false)));
    let (s, b, st) = (seen.clone(), behaviour.clone(), stop.clone());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            if st.load(Ordering::SeqCst) {
                break;
            }
            let Ok(stream) = stream else { continue };
            let (files, s, b) = (files.clone(), s.clone(), b.clone());
            std::thread::spawn(move || answer(stream, &files, &s, &b));
        }
    });
    Hub { url, seen, behaviour, stop }
}

fn answer(mut stream: TcpStream, files: &[File], seen: &Mutex<Vec<Seen>>, behaviour: &Mutex<Behaviour>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() || line.is_empty() {
        return;
    }
    let target = line.split(' ').nth(1).unwrap_or("").to_string();
    let (mut range, mut authorization) = (None, None);
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
            break;
        }
        let (k, v) = h.split_once(':').unwrap_or((&h, ""));
        match k.trim().to_ascii_lowercase().as_str() {
            "range" => range = Some(v.trim().to_string()),
            "authorization" => authorization = Some(v.trim().to_string()),
            _ => {}
        }
    }
    let path = target.split('?').next().unwrap_or("").to_string();
    seen.lock().unwrap().push(Seen { path: path.clone(), range: range.clone(), authorization: authorization.clone() });
    let reply = |stream: &mut TcpStream, status: &str, headers: &[(String, String)], body: &[u8]| {
        let mut head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n", body.len());
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let _ = stream.write_all(head.as_bytes());
        let _ = stream.write_all(body);
    };
    let hostile = behaviour.lock().unwrap().hostile.clone();
    let stall = || std::thread::sleep(std::time::Duration::from_secs(30));
    match &hostile {
        Some(Hostile::StallListing) if path.starts_with("/api/") => return stall(),
        Some(Hostile::SlowListing) if path.starts_with("/api/") => {
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\nContent-Type: application/json\r\n\r\n{");
            for _ in 0..60 {
                std::thread::sleep(std::time::Duration::from_millis(500));
                if stream.write_all(b" ").and_then(|()| stream.flush()).is_err() {
                    return;
                }
            }
            return;
        }
        Some(Hostile::Redirect(to)) => {
            let headers: Vec<(String, String)> = to.iter().map(|l| ("Location".to_string(), l.to_string())).collect();
            return reply(&mut stream, "302 Found", &headers, b"");
        }
        Some(Hostile::Status(status)) => return reply(&mut stream, status, &[], b"{\"error\":\"no\"}"),
        _ => {}
    }
    let token = behaviour.lock().unwrap().token.clone();
    if let Some(t) = token
        && authorization.as_deref() != Some(&format!("Bearer {t}"))
    {
        return reply(&mut stream, "401 Unauthorized", &[], b"{\"error\":\"Invalid credentials\"}");
    }
    let listing = format!("/api/models/{REPO}/revision/");
    if let Some(rev) = path.strip_prefix(&listing) {
        if rev != "main" && rev != COMMIT {
            return reply(&mut stream, "404 Not Found", &[], b"{\"error\":\"Invalid rev id\"}");
        }
        let extra = match &hostile {
            Some(Hostile::FileName(name)) => {
                let name = serde_json::to_string(name).unwrap();
                vec![format!("{{\"rfilename\":{name},\"size\":5,\"lfs\":{{\"sha256\":\"{}\",\"size\":5}}}}", hex(b"x"))]
            }
            _ => vec![],
        };
        let in_git = behaviour.lock().unwrap().in_git;
        let commit = match &hostile {
            Some(Hostile::Commit(c)) => serde_json::to_string(c).unwrap(),
            _ => format!("\"{COMMIT}\""),
        };
        let siblings: Vec<String> = std::iter::once("{\"rfilename\":\"README.md\",\"size\":5}".to_string())
            .chain(extra)
            .chain(files.iter().map(|f| {
                if in_git {
                    return format!("{{\"rfilename\":\"{}\",\"size\":{},\"blobId\":\"{}\"}}", f.name, listed_size(&hostile, f), f.git_id);
                }
                format!(
                    "{{\"rfilename\":\"{}\",\"size\":{},\"lfs\":{{\"sha256\":\"{}\",\"size\":{}}}}}",
                    f.name,
                    listed_size(&hostile, f),
                    f.sha256,
                    listed_size(&hostile, f)
                )
            }))
            .collect();
        let body = format!("{{\"id\":\"{REPO}\",\"sha\":{commit},\"siblings\":[{}]}}", siblings.join(","));
        return reply(&mut stream, "200 OK", &[("Content-Type".into(), "application/json".into())], body.as_bytes());
    }
    let resolve = format!("/{REPO}/resolve/");
    let Some(rest) = path.strip_prefix(&resolve) else {
        return reply(&mut stream, "404 Not Found", &[], b"");
    };
    let (rev, name) = rest.split_once('/').unwrap_or((rest, ""));
    let Some(file) = files.iter().find(|f| f.name == name).filter(|_| rev == "main" || rev == COMMIT) else {
        return reply(&mut stream, "404 Not Found", &[], b"Entry not found");
    };
    let size = file.bytes.len();
    let (start, end) = match range.as_deref().and_then(|r| r.strip_prefix("bytes=")).and_then(|r| r.split_once('-')) {
        Some((a, b)) => (a.parse::<usize>().unwrap_or(0), b.parse::<usize>().map(|b| b + 1).unwrap_or(size).min(size)),
        None => (0, size),
    };
    let (etag, commit) = match &hostile {
        Some(Hostile::Headers(h)) => (h.clone(), h.clone()),
        _ => (format!("\"{}\"", file.sha256), COMMIT.to_string()),
    };
    if let Some(Hostile::Headers(_)) = hostile {
        behaviour.lock().unwrap().corrupt_next = Some(Corruption::Flipped);
    }
    if let Some(Hostile::StallFile) = hostile {
        let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {size}\r\nETag: {etag}\r\n\r\n");
        let _ = stream.write_all(head.as_bytes());
        let _ = stream.write_all(&file.bytes[..size / 2]);
        let _ = stream.flush();
        return stall();
    }
    let headers = vec![
        ("ETag".to_string(), etag),
        ("X-Repo-Commit".to_string(), commit),
        ("Content-Range".to_string(), format!("bytes {start}-{}/{size}", end.saturating_sub(1))),
    ];
    let cut = end - start > 1 && std::mem::take(&mut behaviour.lock().unwrap().cut_next);
    if cut {
        // A connection that breaks halfway: the full length announced, half sent.
        let mut head = format!("HTTP/1.1 206 Partial Content\r\nContent-Length: {}\r\nConnection: close\r\n", end - start);
        for (k, v) in &headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let _ = stream.write_all(head.as_bytes());
        let _ = stream.write_all(&file.bytes[start..start + (end - start) / 2]);
        let _ = stream.flush();
        let _ = stream.shutdown(std::net::Shutdown::Both);
        return;
    }
    let corrupt = if end - start > 1 { behaviour.lock().unwrap().corrupt_next.take() } else { None };
    match corrupt {
        Some(Corruption::Flipped) => {
            let mut bytes = file.bytes[start..end].to_vec();
            let middle = bytes.len() / 2;
            bytes[middle] ^= 0xff;
            reply(&mut stream, "206 Partial Content", &headers, &bytes);
        }
        Some(Corruption::Truncated) => {
            let half = (end - start) / 2;
            let mut headers = headers;
            headers[2].1 = format!("bytes {start}-{}/{}", start + half - 1, start + half);
            reply(&mut stream, "206 Partial Content", &headers, &file.bytes[start..start + half]);
        }
        None => reply(&mut stream, "206 Partial Content", &headers, &file.bytes[start..end]),
    }
    // Drain anything the client still sends before the close.
    let _ = reader.read(&mut [0u8; 16]);
}

/// The size the listing gives `f`.
fn listed_size(hostile: &Option<Hostile>, f: &File) -> u64 {
    match hostile {
        Some(Hostile::Size(n)) => *n,
        _ => f.bytes.len() as u64,
    }
}

/// Runs posrecall against `hub` with `cache` as the hub cache, no token
/// unless given, and nothing else from the user's hub settings.
fn with_hub(args: &[&str], hub_url: &str, cache: &Path, extra: &[(&str, &str)]) -> std::process::Output {
    let mut env = vec![("HF_ENDPOINT", hub_url), ("HF_HUB_CACHE", s(cache)), ("HF_HOME", s(cache)), ("HF_TOKEN", "")];
    env.extend_from_slice(extra);
    posrecall_with(args, &env)
}

fn prompt_args(model: &str) -> Vec<&str> {
    vec!["prompt", model, "--target", "no-such-function", "--count", "1", "--crop", "densest", "--max-prefix-tokens", "1500"]
}

/// `prompt` with a target no run has: it loads the model's vocabulary and
/// plans, then refuses the name, listing the run's targets. A refusal of
/// that kind means the model was found and read.
fn assert_model_read(o: &std::process::Output) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("`no-such-function` is not one of this run's"), "the model was not read: {err}");
}

fn snapshot(cache: &Path) -> PathBuf {
    cache.join(format!("models--{}", REPO.replace('/', "--"))).join("snapshots").join(COMMIT)
}

#[test]
fn a_reference_downloads_into_the_hub_cache_and_is_recorded() {
    let _g = serial();
    let files = files();
    let hub = serve(files.clone());
    let cache = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let run = out.path().join("run.json");
    let reference = format!("{REPO}/{WHOLE}");
    // A small forced-only run: what is checked is where the model came from.
    let dense = fixture("dense.js");
    let args = [
        "bench",
        &reference,
        "--corpus",
        s(&dense),
        "--crop-lines",
        "1:100",
        "--forced-only",
        "--count",
        "2",
        "--lines",
        "6",
        "--kv",
        "f16",
        "-q",
        "-o",
        s(&run),
    ];
    ok(&with_hub(&args, &hub.url, cache.path(), &[]));
    // It asked for the file list at the revision, then the file.
    let paths: Vec<String> = hub.seen.lock().unwrap().iter().map(|r| r.path.clone()).collect();
    assert_eq!(paths[0], format!("/api/models/{REPO}/revision/main"));
    assert_eq!(paths[1..], [format!("/{REPO}/resolve/{COMMIT}/{WHOLE}")], "the file at the listing's commit, in one request");

    // The layout huggingface-cli writes: the blob named by its ETag, the
    // snapshot's link to it, the branch's ref.
    let repo_dir = cache.path().join(format!("models--{}", REPO.replace('/', "--")));
    let link = snapshot(cache.path()).join(WHOLE);
    assert_eq!(std::fs::read_link(&link).unwrap(), PathBuf::from(format!("../../blobs/{}", files[0].sha256)));
    assert_eq!(std::fs::read_to_string(repo_dir.join("refs/main")).unwrap().trim(), COMMIT);
    assert_eq!(hex(&std::fs::read(&link).unwrap()), files[0].sha256);

    let m = read(&run)["manifest"]["model"].clone();
    assert_eq!(m["hub"]["reference"], reference);
    assert_eq!(m["hub"]["repo"], REPO);
    assert_eq!(m["hub"]["revision"], COMMIT);
    assert_eq!(m["hub"]["file"], WHOLE);
    assert_eq!(m["sha256"], files[0].sha256.as_str());
    assert_eq!(m["path"], link.display().to_string());

    // Again: the cache answers, and the hub is not asked anything.
    let before = hub.seen.lock().unwrap().len();
    assert_model_read(&with_hub(&prompt_args(&reference), &hub.url, cache.path(), &[]));
    assert_eq!(hub.seen.lock().unwrap().len(), before, "a cached reference asked the hub");
    // Offline, with no hub at all: the cache still answers, by quant too.
    drop(hub);
    let offline = [("HF_HUB_OFFLINE", "1")];
    assert_model_read(&with_hub(&prompt_args(&format!("{REPO}:Q4_1")), "http://127.0.0.1:9", cache.path(), &offline));
    // What the cache lacks is a one-line error offline, naming what it has.
    let o = with_hub(&prompt_args(&format!("{REPO}:Q8_0")), "http://127.0.0.1:9", cache.path(), &offline);
    let empty = tempfile::tempdir().unwrap();
    assert_clean_failure(&o, empty.path(), "not in the hub cache");
    assert!(String::from_utf8_lossy(&o.stderr).contains(WHOLE), "{}", String::from_utf8_lossy(&o.stderr));
    // `@REVISION` names the cached commit.
    assert_model_read(&with_hub(&prompt_args(&format!("{reference}@{COMMIT}")), "http://127.0.0.1:9", cache.path(), &offline));
    // A sweep's model `path` may be a reference too, served by the cache offline.
    let sweep = out.path().join("models.toml");
    let toml = format!(
        "[corpus]\npath = {:?}\ncrop_lines = \"1:100\"\n[params]\ncount = 1\nlines = 4\n[[model]]\nname = \"smol\"\npath = \"{REPO}:Q4_1\"\nkv = [\"f16\"]\n",
        s(&dense)
    );
    std::fs::write(&sweep, toml).unwrap();
    let runs = out.path().join("sweep");
    ok(&with_hub(&["matrix", s(&sweep), "--out-dir", s(&runs), "-q"], "http://127.0.0.1:9", cache.path(), &offline));
    let m = read(&runs.join("smol__f16-f16.json"))["manifest"]["model"].clone();
    assert_eq!((m["hub"]["reference"].as_str(), m["hub"]["revision"].as_str()), (Some(format!("{REPO}:Q4_1").as_str()), Some(COMMIT)));
    assert_eq!(m["sha256"], files[0].sha256.as_str());
}

#[test]
fn a_cut_download_resumes_where_it_stopped() {
    let files = files();
    let hub = serve(files.clone());
    let cache = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let reference = format!("{REPO}/{WHOLE}");
    hub.behaviour.lock().unwrap().cut_next = true;
    let o = with_hub(&prompt_args(&reference), &hub.url, cache.path(), &[]);
    assert_clean_failure(&o, out.path(), "run again to resume it");
    let blobs = cache.path().join(format!("models--{}", REPO.replace('/', "--"))).join("blobs");
    let part = blobs.join(format!("{}.part", files[0].sha256));
    let kept = std::fs::metadata(&part).expect("the partial download is kept").len();
    assert!(kept > 0 && (kept as usize) < files[0].bytes.len(), "kept {kept} bytes");

    assert_model_read(&with_hub(&prompt_args(&reference), &hub.url, cache.path(), &[]));
    let seen = hub.seen.lock().unwrap().clone();
    assert!(seen.iter().any(|r| r.range.as_deref() == Some(&format!("bytes={kept}-"))), "no request resumed at byte {kept}: {seen:?}");
    assert_eq!(hex(&std::fs::read(snapshot(cache.path()).join(WHOLE)).unwrap()), files[0].sha256);
    assert!(!part.exists());
}

#[test]
fn a_gated_repository_needs_a_token_that_is_never_shown() {
    let hub = serve(files());
    hub.behaviour.lock().unwrap().token = Some("hf_secret_test_token".into());
    let cache = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let reference = format!("{REPO}/{WHOLE}");
    let o = with_hub(&prompt_args(&reference), &hub.url, cache.path(), &[]);
    assert_clean_failure(
        &o,
        out.path(),
        "answered 401 (unauthorized): the repository is gated or private, or does not exist; set HF_TOKEN",
    );
    let o = with_hub(&prompt_args(&reference), &hub.url, cache.path(), &[("HF_TOKEN", "hf_wrong")]);
    assert_clean_failure(&o, out.path(), "refused the token");
    assert!(!String::from_utf8_lossy(&o.stderr).contains("hf_wrong"));
    let o = with_hub(&prompt_args(&reference), &hub.url, cache.path(), &[("HF_TOKEN", "hf_secret_test_token")]);
    assert_model_read(&o);
    let shown = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(!shown.contains("hf_secret_test_token"), "the token was printed");
    assert!(hub.seen.lock().unwrap().iter().any(|r| r.authorization.as_deref() == Some("Bearer hf_secret_test_token")));
}

#[test]
fn quants_split_models_and_what_matches_nothing_or_too_much() {
    let hub = serve(files());
    let cache = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    // `:Q4_1` matches the whole file and the split one: which is meant?
    let o = with_hub(&prompt_args(&format!("{REPO}:q4_1")), &hub.url, cache.path(), &[]);
    assert_clean_failure(&o, out.path(), "2 model files match q4_1");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(WHOLE) && err.contains("split/SmolLM2-135M-Instruct.Q4_1-00001-of-00003.gguf"), "{err}");
    // A quant the repository does not have lists what it has.
    let o = with_hub(&prompt_args(&format!("{REPO}:Q2_K")), &hub.url, cache.path(), &[]);
    assert_clean_failure(&o, out.path(), "no model file matches Q2_K; the repository has 2 GGUF model files");
    // An unknown repository or revision.
    let o = with_hub(&prompt_args("posrecall-test/nothing-here:Q4_1"), &hub.url, cache.path(), &[]);
    assert_clean_failure(&o, out.path(), "has no repository posrecall-test/nothing-here at revision main (404)");
    let o = with_hub(&prompt_args(&format!("{REPO}:Q4_1@v9")), &hub.url, cache.path(), &[]);
    assert_clean_failure(&o, out.path(), "at revision v9 (404)");
    // A split model by its first part: every part comes, and loads.
    let first = format!("{REPO}/split/SmolLM2-135M-Instruct.Q4_1-00001-of-00003.gguf");
    assert_model_read(&with_hub(&prompt_args(&first), &hub.url, cache.path(), &[]));
    for i in 1..=3 {
        assert!(snapshot(cache.path()).join(format!("split/SmolLM2-135M-Instruct.Q4_1-{i:05}-of-00003.gguf")).is_file(), "part {i}");
    }
    assert!(!snapshot(cache.path()).join(WHOLE).exists(), "a file not asked for was downloaded");
    // And the parts load as one model: a forced pass reads every weight.
    let run = out.path().join("split.json");
    let dense = fixture("dense.js");
    let args = [
        "bench",
        &first,
        "--corpus",
        s(&dense),
        "--crop-lines",
        "1:60",
        "--forced-only",
        "--count",
        "1",
        "--lines",
        "4",
        "-q",
        "-o",
        s(&run),
    ];
    ok(&with_hub(&args, &hub.url, cache.path(), &[]));
    let forced = &read(&run)["targets"][0]["forced"];
    assert!(forced["tokens"].as_u64().unwrap() > 0 && forced["mean_logprob"].as_f64().unwrap() < 0.0, "{forced}");
}

/// A hub (or a mirror) that sends other bytes than the file it lists: of the
/// right length, the checksum is not the listed one (the sha256 of an LFS
/// file, the git blob id of a file kept in git), a one-line error, and
/// nothing of it stays in the cache (no blob, no snapshot link, no partial
/// download); cut short and announced as whole, the size is not the listed
/// one, a one-line error, and only the partial download stays, which no run
/// takes for the file but the next one resumes. Either way the next run
/// ends with the listed file, and loads it.
#[test]
fn a_download_that_is_not_the_listed_file_is_refused_and_fetched_again() {
    let files = files();
    let reference = format!("{REPO}/{WHOLE}");
    for (corruption, in_git) in [(Corruption::Flipped, false), (Corruption::Truncated, false), (Corruption::Flipped, true)] {
        let hub = serve(files.clone());
        let cache = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        hub.behaviour.lock().unwrap().corrupt_next = Some(corruption);
        hub.behaviour.lock().unwrap().in_git = in_git;
        let o = with_hub(&prompt_args(&reference), &hub.url, cache.path(), &[]);
        let size = files[0].bytes.len();
        let blob = if in_git { &files[0].git_id } else { &files[0].sha256 };
        let kind = if in_git { "git blob id" } else { "sha256" };
        let (message, partial) = match corruption {
            Corruption::Flipped => (format!("{WHOLE}: the downloaded file's {kind} is "), vec![]),
            Corruption::Truncated => {
                (format!("the hub sent {} of the {size} bytes it lists; run again to resume", size / 2), vec![format!("blobs/{blob}.part")])
            }
        };
        assert_clean_failure(&o, out.path(), &message);
        if let Corruption::Flipped = corruption {
            let tail = format!("…, the hub lists {}… (removed; run again to download it afresh)", &blob[..12]);
            assert!(String::from_utf8_lossy(&o.stderr).contains(&tail), "{}", String::from_utf8_lossy(&o.stderr));
        }
        let repo_dir = cache.path().join(format!("models--{}", REPO.replace('/', "--")));
        let kept: Vec<String> = walkdir::WalkDir::new(&repo_dir)
            .into_iter()
            .flatten()
            .filter(|e| !e.file_type().is_dir() && !e.path().starts_with(repo_dir.join("refs")))
            .map(|e| e.path().strip_prefix(&repo_dir).unwrap().display().to_string())
            .collect();
        assert_eq!(kept, partial, "{corruption:?} in git {in_git}: what the cache keeps");

        assert_model_read(&with_hub(&prompt_args(&reference), &hub.url, cache.path(), &[]));
        let link = snapshot(cache.path()).join(WHOLE);
        assert_eq!(hex(&std::fs::read(&link).unwrap()), files[0].sha256, "{corruption:?} in git {in_git}");
        assert_eq!(std::fs::canonicalize(&link).unwrap().file_name().unwrap().to_string_lossy(), blob.as_str());
    }
}

/// A cached file that changed after its download (bytes flipped at the same
/// size, or cut short) is not trusted, whether its blob is named by an LFS
/// sha256 or by a git blob id: offline it is refused in one line that says
/// so; online it is fetched again, and the cache holds the listed file once
/// more.
#[test]
fn a_cached_file_changed_after_its_download_is_fetched_again() {
    let files = files();
    let reference = format!("{REPO}/{WHOLE}");
    for (cut, in_git) in [(false, false), (true, false), (false, true)] {
        let hub = serve(files.clone());
        hub.behaviour.lock().unwrap().in_git = in_git;
        let cache = tempfile::tempdir().unwrap();
        let out = tempfile::tempdir().unwrap();
        assert_model_read(&with_hub(&prompt_args(&reference), &hub.url, cache.path(), &[]));
        let blob = std::fs::canonicalize(snapshot(cache.path()).join(WHOLE)).unwrap();
        let mut bytes = std::fs::read(&blob).unwrap();
        match cut {
            false => bytes[4096..8192].iter_mut().for_each(|b| *b ^= 0xff),
            true => bytes.truncate(bytes.len() / 2),
        }
        std::fs::write(&blob, &bytes).unwrap();
        let o = with_hub(&prompt_args(&reference), "http://127.0.0.1:9", cache.path(), &[("HF_HUB_OFFLINE", "1")]);
        let kind = if in_git { "git blob id" } else { "sha256" };
        assert_clean_failure(&o, out.path(), &format!("is not the file the hub listed (its {kind} is"));
        assert!(String::from_utf8_lossy(&o.stderr).contains("it changed after the download"));
        let before = hub.seen.lock().unwrap().len();
        assert_model_read(&with_hub(&prompt_args(&reference), &hub.url, cache.path(), &[]));
        assert!(hub.seen.lock().unwrap().len() > before, "cut {cut} in git {in_git}: not fetched again");
        assert_eq!(hex(&std::fs::read(snapshot(cache.path()).join(WHOLE)).unwrap()), files[0].sha256, "cut {cut} in git {in_git}");
    }
}

/// Every file under `root` but the hub cache, with its bytes.
fn outside_the_cache(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let cache = root.join("cache");
    let mut files: Vec<(PathBuf, Vec<u8>)> = walkdir::WalkDir::new(root)
        .into_iter()
        .flatten()
        .filter(|e| !e.path().starts_with(&cache) && !e.file_type().is_dir())
        .map(|e| (e.path().to_path_buf(), std::fs::read(e.path()).unwrap_or_default()))
        .collect();
    files.sort();
    files
}

/// A hostile or broken hub (or mirror named by HF_ENDPOINT): what it sends
/// never becomes a path outside the cache (a commit, a file name, a header,
/// a revision, a ref read offline), no request waits for ever or follows
/// redirects without end, and each case is a one-line error that names the
/// hub without its password and prints server-sent names escaped. The
/// files beside the cache are byte-identical afterwards.
#[test]
fn a_hostile_hub_writes_nothing_outside_the_cache_and_ends_cleanly() {
    let files = files();
    let root = tempfile::tempdir().unwrap();
    let cache = root.path().join("cache");
    let out = root.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let victim = root.path().join("notes.txt");
    std::fs::write(&victim, "the user's notes\n").unwrap();
    let before = outside_the_cache(root.path());
    let victim_s = victim.display().to_string();
    let victim_dir = root.path().display().to_string();
    let reference = format!("{REPO}/{WHOLE}");
    let quick = [("HF_HUB_DOWNLOAD_TIMEOUT", "1")];
    let (corrupt, stalled) =
        (format!("the hub lists {}", &files[0].sha256[..12]), format!("sent nothing for 1 s while downloading {WHOLE} (kept"));
    let cases: Vec<(Hostile, &str, bool)> = vec![
        // (what the hub does, what the one line says, whether the cache stays empty of files)
        (Hostile::Commit("../../../../notes"), "sent the commit \"../../../../notes\" (not 40 hex digits)", true),
        (Hostile::Commit(Box::leak(victim_dir.clone().into_boxed_str())), "(not 40 hex digits)", true),
        (Hostile::FileName("../../../evil.Q4_1.gguf"), "the file name \"../../../evil.Q4_1.gguf\" (not a relative path", true),
        (Hostile::FileName(Box::leak(format!("{victim_dir}/evil.gguf").into_boxed_str())), "not a relative path inside", true),
        (Hostile::FileName("evil\n\u{1b}[31m.gguf"), "\"evil\\n\\u{1b}[31m.gguf\"", true),
        (Hostile::Headers(format!("\"{victim_s}\"")), &corrupt, false),
        (Hostile::StallListing, "sent nothing for 1 s while the file list", true),
        (Hostile::SlowListing, "the file list took longer than 2 s to arrive (twice the timeout)", true),
        // A size the disk cannot hold (and one that would wrap a count).
        (Hostile::Size(1_000_000_000_000_000), "bytes free; free some space, or set HF_HOME", true),
        (Hostile::Size(u64::MAX), "18446744073709551615 bytes and the cache's file system has", true),
        (Hostile::StallFile, &stalled, false),
        (Hostile::Redirect(None), "could not be asked for the file list: it redirected (302) without a Location", true),
        (Hostile::Redirect(Some("/again")), "could not be asked for the file list: it redirected more than 5 times", true),
        // Another scheme is refused as such (not read, not counted as a
        // loop), and shown without its query.
        (
            Hostile::Redirect(Some("file:///etc/passwd?sig=hunter4hunter")),
            "could not be asked for the file list: it redirected (302) to a non-HTTP(S) URL, \"file:///etc/passwd?…\" (not followed)",
            true,
        ),
        (Hostile::Status("403 Forbidden"), "answered 403 (forbidden)", true),
        (Hostile::Status("500 Internal Server Error"), "it answered 500 for the repository", true),
    ];
    let mut failures = Vec::new();
    for (hostile, needle, cache_empty) in cases {
        let _ = std::fs::remove_dir_all(&cache);
        let hub = serve(files.clone());
        hub.behaviour.lock().unwrap().hostile = Some(hostile.clone());
        let started = std::time::Instant::now();
        let o = with_hub(&prompt_args(&reference), &hub.url, &cache, &quick);
        let took = started.elapsed();
        let result = std::panic::catch_unwind(|| {
            assert_clean_failure(&o, &out, needle);
            // A stall ends at the timeout (1 s a wait), not the server's 30 s.
            assert!(took.as_secs() < 20, "took {took:?}");
            assert_eq!(outside_the_cache(root.path()), before, "a file beside the cache changed");
            let requests = hub.seen.lock().unwrap().len();
            assert!(requests <= 8, "{requests} requests");
            if cache_empty {
                let kept: Vec<_> = walkdir::WalkDir::new(&cache)
                    .into_iter()
                    .flatten()
                    .filter(|e| !e.file_type().is_dir())
                    .map(|e| e.into_path())
                    .collect();
                assert!(kept.is_empty(), "the cache keeps {kept:?}");
            }
        });
        if result.is_err() {
            failures.push(format!("{hostile:?}"));
        }
    }
    assert!(failures.is_empty(), "failed: {failures:?}");

    // A listed name that would reorder or hide text on a terminal is shown
    // escaped, so that it cannot pass for another.
    let hub = serve(files.clone());
    hub.behaviour.lock().unwrap().hostile = Some(Hostile::FileName("evil\u{202e}\u{200b}fdp.gguf"));
    let o = with_hub(&prompt_args(&format!("{REPO}/absent.gguf")), &hub.url, &cache, &[]);
    assert_clean_failure(&o, &out, "evil\\u{202e}\\u{200b}fdp.gguf");
    // The password in HF_ENDPOINT is never shown.
    let hub = serve(files.clone());
    hub.behaviour.lock().unwrap().hostile = Some(Hostile::Status("404 Not Found"));
    let with_password = hub.url.replace("http://", "http://user:hunter2@");
    let o = with_hub(&prompt_args(&reference), &with_password, &cache, &[]);
    assert_clean_failure(&o, &out, &format!("the hub at {} has no repository", hub.url));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("hunter2"));
    // Nor a query-string secret, the same rule for every URL shown.
    let with_query = format!("{}/?key=hunter3hunter", hub.url);
    let o = with_hub(&prompt_args(&reference), &with_query, &cache, &[]);
    assert_clean_failure(&o, &out, &format!("the hub at {}/?… has no repository", hub.url));
    assert!(!String::from_utf8_lossy(&o.stderr).contains("hunter3"), "{}", String::from_utf8_lossy(&o.stderr));
    // A revision that is a path, and a bad timeout, are refused before any request.
    let seen = hub.seen.lock().unwrap().len();
    for revision in [victim_s.as_str(), "../..", "main/../../x"] {
        let o = with_hub(&prompt_args(&format!("{reference}@{revision}")), &hub.url, &cache, &[]);
        assert_clean_failure(&o, &out, "");
    }
    let o = with_hub(&prompt_args(&reference), &hub.url, &cache, &[("HF_HUB_DOWNLOAD_TIMEOUT", "soon")]);
    assert_clean_failure(&o, &out, "HF_HUB_DOWNLOAD_TIMEOUT=\"soon\" is not a number of seconds");
    // A hub cache that is a file, or lies under one: said so, before any request.
    for file_cache in [victim.clone(), victim.join("hub"), PathBuf::from(format!("{victim_s}/"))] {
        let o = with_hub(&prompt_args(&reference), &hub.url, &file_cache, &[]);
        assert_clean_failure(&o, &out, &format!("{victim_s} is a file, not a folder (HF_HUB_CACHE or HF_HOME"));
    }
    assert_eq!(hub.seen.lock().unwrap().len(), seen, "a refused reference reached the hub");
    // A ref in the cache that names a path, read offline: refused, not followed.
    let refs = cache.join(format!("models--{}", REPO.replace('/', "--"))).join("refs");
    std::fs::create_dir_all(&refs).unwrap();
    std::fs::write(refs.join("main"), "../..").unwrap();
    let o = with_hub(&prompt_args(&reference), "http://127.0.0.1:9", &cache, &[("HF_HUB_OFFLINE", "1")]);
    assert_clean_failure(&o, &out, "holds \"../..\", not a commit");
    assert_eq!(outside_the_cache(root.path()), before);
    // A snapshot whose model is a FIFO, with two links back to itself and a
    // dangling one: offline, a one-line error at once (no hang); online, the
    // file is fetched and linked over them.
    std::fs::write(refs.join("main"), COMMIT).unwrap();
    let snap = snapshot(&cache);
    std::fs::create_dir_all(&snap).unwrap();
    assert!(std::process::Command::new("mkfifo").arg(snap.join(WHOLE)).status().unwrap().success());
    std::os::unix::fs::symlink(".", snap.join("a")).unwrap();
    std::os::unix::fs::symlink(".", snap.join("b")).unwrap();
    std::os::unix::fs::symlink("../../blobs/gone", snap.join("m-Q8_0.gguf")).unwrap();
    let started = std::time::Instant::now();
    let o = with_hub(&prompt_args(&reference), "http://127.0.0.1:9", &cache, &[("HF_HUB_OFFLINE", "1")]);
    assert_clean_failure(&o, &out, "not in the hub cache");
    assert!(started.elapsed().as_secs() < 20, "{:?}", started.elapsed());
    let hub = serve(files.clone());
    assert_model_read(&with_hub(&prompt_args(&reference), &hub.url, &cache, &[]));
    assert_eq!(hex(&std::fs::read(snap.join(WHOLE)).unwrap()), files[0].sha256);
}
