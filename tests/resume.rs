//! A run that stops loses nothing: a `bench` run killed after some targets
//! leaves a readable run file marked unfinished, `bench --resume` asks only
//! the rest (the prefix loaded from the prefix cache), and the finished file
//! is the uninterrupted run's; report and compare mark the unfinished run.

use crate::common;

use common::*;
use posrecall::record::run::RunFile;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Four targets of dense.js, short answers: SmolLM2 asks them in seconds.
const RUN: &[&str] = &["--count", "4", "--lines", "4", "--crop-lines", "1:100", "--kv", "f16", "--max-new-tokens", "24", "--threads", "2"];
const ASKED: usize = 4;
/// Targets the interrupted run has written when it is killed.
const KILL_AFTER: usize = 2;

/// `bench` of `model` on dense.js with [`RUN`], writing `out`, then `extra`.
fn bench_args(model: &Path, out: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["bench", s(model), "--corpus", s(&fixture("dense.js"))].map(String::from).to_vec();
    args.extend(RUN.iter().map(|a| a.to_string()));
    args.extend(["--quiet", "--out", s(out)].map(String::from));
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

/// Runs the binary with owned arguments.
fn run(args: &[String]) -> std::process::Output {
    posrecall(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// Starts the run, reads its run file every few milliseconds until it holds
/// `KILL_AFTER` targets, then kills the process (SIGKILL). Every read of
/// the file while the run writes it must load as a run file: the writes
/// are atomic, so no read ever sees half a file.
fn run_and_kill(args: &[String], out: &Path) -> RunFile {
    let mut child = Command::new(bin()).args(args).env("NO_COLOR", "1").stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let started = Instant::now();
    let mut reads = 0;
    loop {
        if out.exists() {
            let partial = RunFile::load(out).unwrap_or_else(|e| panic!("read {reads}: the unfinished run file does not load: {e:#}"));
            reads += 1;
            if partial.targets.len() >= KILL_AFTER {
                child.kill().unwrap();
                child.wait().unwrap();
                break;
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the run ended ({status}) before it had written {KILL_AFTER} targets");
        }
        assert!(started.elapsed() < Duration::from_secs(600), "no {KILL_AFTER} targets after 10 minutes");
        std::thread::sleep(Duration::from_millis(5));
    }
    RunFile::load(out).expect("the file the killed run left loads")
}

#[test]
fn an_interrupted_run_resumed_is_the_uninterrupted_run() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let (whole, part, cache) = (dir.path().join("whole.json"), dir.path().join("part.json"), dir.path().join("cache"));
    let model = smollm2();
    ok(&run(&bench_args(&model, &whole, &[])));

    // The interrupted run evaluates the prefix and keeps it in the cache.
    let with_cache = ["--prefix-cache", s(&cache)];
    let partial = run_and_kill(&bench_args(&model, &part, &with_cache), &part);
    let k = partial.targets.len();
    assert!((KILL_AFTER..ASKED).contains(&k), "{k} targets written");
    assert_eq!(partial.unfinished.map(|u| u.asked), Some(ASKED));
    assert!(partial.timings.is_none(), "an unfinished run has no timings");
    assert_eq!(partial.summary.total.count, k);
    let whole_run = read(&whole);
    let raw = without_timings(read(&part));
    assert_eq!(raw["targets"].as_array().unwrap()[..], whole_run["targets"].as_array().unwrap()[..k], "the first {k} targets as finished");
    assert_eq!(raw["unfinished"], serde_json::json!({ "asked": ASKED }));

    // Report marks it; compare refuses to pair it.
    let report = ok(&posrecall(&["report", s(&part), s(&whole)]));
    assert!(report.contains(&format!("unfinished: {k} of {ASKED} targets")), "{report}");
    let compare = posrecall(&["compare", s(&whole), s(&part)]);
    assert!(!compare.status.success());
    let err = String::from_utf8_lossy(&compare.stderr);
    assert!(err.contains(&format!("is an unfinished run (unfinished: {k} of {ASKED} targets)")), "{err}");

    // A changed key is refused, naming it, and the file is left as it was.
    let before = std::fs::read(&part).unwrap();
    let pass = whole_run["manifest"]["params"]["pass"].as_u64().unwrap();
    let changed = run(&bench_args(&model, &part, &["--prefix-cache", s(&cache), "--resume", "--pass", &(pass + 1).to_string()]));
    let err = String::from_utf8_lossy(&changed.stderr);
    let named = format!("--resume: {} is another run: its params.pass is {pass}, this run's is {}", part.display(), pass + 1);
    assert!(!changed.status.success() && err.contains(&named), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(std::fs::read(&part).unwrap(), before);

    // What a run killed mid-write leaves (its temporary file, written
    // before this run began) is cleared when the file is finished; a link
    // of that name and another output's temporary file are not touched.
    let hour_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    let temporary = |name: &str| {
        let path = dir.path().join(name);
        std::fs::File::create(&path).unwrap().set_modified(hour_ago).unwrap();
        path
    };
    let (stale, others) = (temporary(".part.json.tmp-4242-AbCdEf"), temporary(".whole.json.tmp-4242-AbCdEf"));
    let (link, kept) = (dir.path().join(".part.json.tmp-1-link"), dir.path().join("kept.txt"));
    std::fs::write(&kept, "not a temporary file").unwrap();
    std::os::unix::fs::symlink(&kept, &link).unwrap();

    // Resumed: only the rest is asked, from the cached prefix.
    ok(&run(&bench_args(&model, &part, &["--prefix-cache", s(&cache), "--resume"])));
    assert!(!stale.exists(), "the killed run's temporary file is left");
    assert!(others.exists() && link.symlink_metadata().is_ok(), "another output's temporary file or a link was removed");
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "not a temporary file");
    let resumed = read(&part);
    assert_eq!(resumed["timings"]["resumed_targets"], k);
    assert_eq!(resumed["timings"]["prefix_source"], "cache", "no second prefill");
    assert_eq!(resumed["timings"]["query_ms"].as_array().unwrap().len(), ASKED - k, "only the rest was asked");
    assert_eq!(without_timings(resumed), without_timings(whole_run), "the resumed run's file is the uninterrupted one's");

    // Resuming a finished run asks nothing and leaves it as it is.
    let finished = std::fs::read(&part).unwrap();
    let again = run(&bench_args(&model, &part, &["--resume"]));
    ok(&again);
    assert!(String::from_utf8_lossy(&again.stderr).contains("is a finished run of this configuration"));
    assert_eq!(std::fs::read(&part).unwrap(), finished);
}

#[test]
fn resume_refuses_what_it_cannot_finish() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.json");
    // The model is never loaded: a file cut after its vocabulary proves it.
    let models = tempfile::tempdir().unwrap();
    let model = unloadable_model(models.path());
    let out = s(&missing).to_string();
    let no_out: Vec<String> = bench_args(&model, &missing, &["--resume"]).into_iter().filter(|a| a != "--out" && *a != out).collect();
    assert_clean_failure(&run(&no_out), dir.path(), "--resume finishes the unfinished run file --out names; give --out FILE");
    assert_clean_failure(&run(&bench_args(&model, &missing, &["--resume"])), dir.path(), "does not exist: there is no run to finish");
    for (extra, flag) in [
        (&["--closed-book"][..], "--closed-book"),
        (&["--lengths", "400,800"], "--lengths"),
        (&["--save-reference", "x.ref"], "--save-reference"),
        (&["--parallel", "2", "--check-sequential"], "--check-sequential"),
    ] {
        let args = bench_args(&model, &missing, &[&["--resume"], extra].concat());
        assert_clean_failure(&run(&args), dir.path(), &format!("does not combine with {flag}"));
    }
}
