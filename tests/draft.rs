//! Exact speculative decoding (`--draft`): drafts from the ground truth and
//! the file are verified in one batch, and the answers are the ones
//! step-by-step greedy decoding gives. Each drafted run here also answers
//! every question without drafts (`--check-draft`); an answer may part from
//! the undrafted one only where the undrafted run's two best logits were
//! nearly tied (batched verification can round a position's logits
//! differently).

use crate::common;

use common::*;
use serde_json::Value;

/// A near tie where a batch's rounding can flip the greedy choice: twice
/// the forced pass's threshold ([`posrecall::score::forced::NEAR_TIE_EPS`]).
/// Batched partings measured here go up to 0.28 logits for drafts and 0.73
/// for parallel answers (docs/AGREEMENT.md); SmolLM2 parts at 0.254 on
/// dense.js, just over the forced pass's 0.25.
const NEAR_TIE: f64 = 2.0 * posrecall::score::forced::NEAR_TIE_EPS as f64;

fn lodash() -> std::path::PathBuf {
    let p = posrecall::support::fsutil::default_corpus_path();
    assert!(p.exists(), "{} is missing: run scripts/fetch-corpus", p.display());
    p
}

fn bench(model: &std::path::Path, extra: &[&str]) -> Value {
    bench_on(model, &lodash(), extra)
}

fn bench_on(model: &std::path::Path, corpus: &std::path::Path, extra: &[&str]) -> Value {
    let dir = tempfile::TempDir::new().unwrap();
    let out = dir.path().join("run.json");
    let mut args = vec!["bench", s(model), "--corpus", s(corpus), "--no-forced", "--threads", "2", "--quiet", "--out", s(&out)];
    args.extend_from_slice(extra);
    ok(&posrecall(&args));
    read(&out)
}

/// Every target's drafted answer equals its undrafted one, or parts from
/// it at a near tie; returns how many were identical.
fn assert_exact(run: &Value) -> usize {
    let targets = run["targets"].as_array().unwrap();
    let mut identical = 0;
    for t in targets {
        let c = &t["undrafted"];
        assert!(c.is_object(), "{} was not checked without drafts: {t}", t["name"]);
        if c["identical"] == true {
            identical += 1;
            continue;
        }
        let gap = c["parting_gap"].as_f64().unwrap_or(f64::INFINITY);
        assert!(
            gap < NEAR_TIE,
            "{}: the drafted answer parts from the undrafted one after {} tokens, where the logit gap was {gap} (not a near tie)\ndrafted: {:?}\nundrafted: {:?}",
            t["name"],
            c["common_tokens"],
            t["response"],
            c["response"]
        );
    }
    let e = &run["summary"]["undrafted"];
    assert_eq!(e["targets"].as_u64().unwrap() as usize, targets.len(), "{e}");
    assert_eq!(e["identical"].as_u64().unwrap() as usize, identical, "{e}");
    identical
}

#[test]
fn a_model_that_recalls_takes_several_tokens_per_step_and_answers_as_without_drafts() {
    let _serial = serial();
    // Qwen2.5-Coder-0.5B recalls this window (tests/qwen_coder.rs): most of
    // every answer is a copy, which the ground truth drafts.
    // The f16 window is evaluated once: the `lookup` run after it loads it
    // from a prefix cache (tests/bench_cli.rs holds that a cached prefix
    // answers as a prefill does). q8_0 asks 2 of the 4 questions: each one
    // is answered twice (with and without drafts).
    let cache = tempfile::TempDir::new().unwrap();
    let window = ["--crop-lines", "700:850", "--lines", "8", "--prefix-cache", s(cache.path())];
    let mut f16_answers = Vec::new();
    for (kv, count) in [("f16", 4), ("q8_0", 2)] {
        let mut args = window.to_vec();
        let count_arg = count.to_string();
        args.extend(["--kv", kv, "--count", &count_arg, "--check-draft"]);
        let run = bench(&qwen_coder(), &args);
        assert_eq!(run["manifest"]["params"]["draft"], "truth", "the default mode is recorded");
        assert_eq!(run["manifest"]["params"]["draft_max"], 16);
        assert!(run["manifest"]["runtime"]["draft_fallback"].is_null(), "{}", run["manifest"]["runtime"]);
        let identical = assert_exact(&run);
        assert_eq!(identical, count, "{kv}: every answer as without drafts: {}", run["summary"]["undrafted"]);
        let d = &run["summary"]["draft"];
        let per_step = d["tokens_per_step"].as_f64().unwrap();
        assert!(per_step >= 2.0, "{kv}: a model that copies takes at least 2 tokens per step, not {per_step}: {d}");
        let truth = d["by_source"]["truth"]["accepted"].as_u64().unwrap();
        assert!(truth * 2 > d["accepted"].as_u64().unwrap(), "{kv}: most kept draft tokens come from the ground truth: {d}");
        assert!(d["accepted"].as_u64().unwrap() <= d["proposed"].as_u64().unwrap(), "{d}");
        // The steps are counted per target and add up.
        let steps: u64 = run["targets"].as_array().unwrap().iter().map(|t| t["draft"]["steps"].as_u64().unwrap()).sum();
        assert_eq!(steps, d["steps"].as_u64().unwrap(), "{d}");
        // The run's decode steps are its drafted answers' (each evaluates the
        // last token and its draft), not the check's.
        let ts = &run["timings"]["decode_steps"];
        let (d_steps, d_proposed) = (d["steps"].as_u64().unwrap(), d["proposed"].as_u64().unwrap());
        assert_eq!(ts["generation_only_tokens"].as_u64().unwrap(), d_steps + d_proposed, "{kv}: {ts} {d}");
        assert_eq!(ts["steps"].as_u64().unwrap(), d_steps + count as u64, "{kv}: one step per question and the answers': {ts}");
        // Fewer than half as many steps as tokens.
        let generated = d["generated_tokens"].as_u64().unwrap();
        assert!(d["steps"].as_u64().unwrap() * 2 <= generated, "{kv}: {d}");
        if kv == "f16" {
            // Identical to the undrafted answers, as checked above.
            f16_answers = run["targets"].as_array().unwrap().iter().map(|t| t["response"].clone()).collect();
        }
    }
    lookup_drafts_from_the_file(cache.path(), &f16_answers);
}

/// The same window at f16 with `--draft lookup`, its prefix loaded from
/// `cache`: the same answers as without drafts (`undrafted`).
fn lookup_drafts_from_the_file(cache: &std::path::Path, undrafted: &[Value]) {
    let window = ["--crop-lines", "700:850", "--count", "4", "--lines", "8", "--kv", "f16", "--prefix-cache", s(cache)];
    let mut args = window.to_vec();
    args.extend(["--draft", "lookup", "--draft-max", "8"]);
    let lookup = bench(&qwen_coder(), &args);
    assert_eq!(lookup["timings"]["prefix_source"], "cache", "the f16 window was evaluated before");
    assert_eq!(lookup["manifest"]["params"]["draft_max"], 8);
    let d = &lookup["summary"]["draft"];
    assert_eq!(d["by_source"]["truth"]["proposed"], 0, "lookup drafts only from the file: {d}");
    assert!(d["by_source"]["file"]["accepted"].as_u64().unwrap() > 0, "{d}");
    assert!(d["tokens_per_step"].as_f64().unwrap() > 1.5, "{d}");
    let targets = lookup["targets"].as_array().unwrap();
    assert_eq!(targets.len(), undrafted.len());
    for (t, u) in targets.iter().zip(undrafted) {
        assert_eq!(&t["response"], u, "{}", t["name"]);
    }
}

/// `--draft none`: one step per generated token, nothing proposed, and the
/// mode recorded (SmolLM2, 4 short answers).
#[test]
fn without_drafts_every_step_is_one_token() {
    let _serial = serial();
    let none = bench_on(
        &smollm2(),
        &fixture("dense.js"),
        &["--crop-lines", "1:100", "--count", "4", "--lines", "6", "--kv", "f16", "--max-new-tokens", "48", "--draft", "none"],
    );
    assert_eq!(none["manifest"]["params"]["draft"], "none");
    assert!(none["manifest"]["params"]["draft_max"].is_null());
    let d = &none["summary"]["draft"];
    assert_eq!(d["proposed"], 0, "{d}");
    let generated = d["generated_tokens"].as_u64().unwrap();
    // One step per generated token (the first comes from the question's
    // step, and the end-of-generation token after the last is not counted),
    // but for an answer cut at its line limit or budget, whose last token is
    // never evaluated: at most one step fewer per target.
    let steps = d["steps"].as_u64().unwrap();
    assert!(steps <= generated && steps + 4 >= generated, "{steps} steps for {generated} tokens: {d}");
    assert!(generated > 4 * 8, "{generated} tokens: the answers are long enough to count steps on");
}

#[test]
fn a_model_that_does_not_recall_answers_as_without_drafts() {
    let _serial = serial();
    // SmolLM2 recalls little of lodash: drafts are mostly rejected. 48
    // tokens an answer: it rambles to its budget otherwise.
    let run = bench_on(
        &smollm2(),
        &fixture("dense.js"),
        &["--crop-lines", "1:100", "--count", "4", "--lines", "6", "--kv", "f16", "--max-new-tokens", "48", "--check-draft"],
    );
    assert_exact(&run);
    let d = &run["summary"]["draft"];
    assert!(d["proposed"].as_u64().unwrap() > 0, "{d}");
}

#[test]
fn a_sliding_window_model_drafts_with_its_whole_cache_and_a_hybrid_does_not() {
    let _serial = serial();
    // Gemma 3's window-only cache may reuse cells a rejected draft needs back:
    // no drafts, and the run says why.
    // 48 tokens an answer: a model that does not recall rambles to its
    // budget, and what is checked (the fallback, exact drafts) shows in a few
    // lines.
    let window = ["--crop-lines", "1:100", "--count", "3", "--lines", "6", "--kv", "f16", "--max-new-tokens", "48"];
    let run = bench_on(&gemma3(), &fixture("dense.js"), &window);
    assert_eq!(run["manifest"]["params"]["draft"], "none", "{}", run["manifest"]["params"]);
    let why = run["manifest"]["runtime"]["draft_fallback"].as_str().unwrap_or_default();
    assert!(why.contains("sliding-window"), "{why}");
    // With the whole cache kept, drafts are exact.
    let mut args = window.to_vec();
    args.extend(["--swa-full", "on", "--check-draft"]);
    let run = bench_on(&gemma3(), &fixture("dense.js"), &args);
    assert_eq!(run["manifest"]["params"]["draft"], "truth");
    assert_exact(&run);
    assert!(run["summary"]["draft"]["proposed"].as_u64().unwrap() > 0);

    let (name, hybrid) = tiny_hybrids().into_iter().next().expect("a tiny hybrid model");
    let run = bench_on(&hybrid, &fixture("dense.js"), &["--crop-lines", "1:80", "--count", "2", "--lines", "4", "--max-new-tokens", "16"]);
    let why = run["manifest"]["runtime"]["draft_fallback"].as_str().unwrap_or_default();
    assert!(why.contains("recurrent"), "{name}: {why}");
    assert_eq!(run["manifest"]["params"]["draft"], "none");
}

#[test]
fn parallel_answers_are_drafted_too() {
    let _serial = serial();
    // Four sequences at once, each verifying its own drafts in its part of
    // every step; the sequential check answers one token per step, so a
    // difference is the batch's arithmetic, at a near tie.
    let run = bench(
        &qwen_coder(),
        &["--crop-lines", "700:850", "--count", "4", "--lines", "8", "--kv", "f16", "--parallel", "4", "--check-sequential"],
    );
    assert_eq!(run["manifest"]["params"]["decode_mode"], "parallel");
    assert_eq!(run["manifest"]["params"]["draft"], "truth");
    let d = &run["summary"]["draft"];
    assert!(d["tokens_per_step"].as_f64().unwrap() >= 2.0, "{d}");
    for t in run["targets"].as_array().unwrap() {
        let c = &t["sequential"];
        let gap = c["parting_gap"].as_f64().unwrap_or(0.0);
        assert!(c["identical"] == true || gap < NEAR_TIE, "{}: parts at a gap of {gap}: {c}", t["name"]);
    }
}

#[test]
fn bad_draft_settings_are_one_line_errors() {
    let dir = tempfile::TempDir::new().unwrap();
    let model = smollm2();
    let corpus = lodash();
    let cases: &[(&[&str], &str)] = &[
        (&["--draft-max", "0"], "--draft-max"),
        (&["--draft-max", "100000"], "--draft-max"),
        (&["--draft", "always"], "--draft"),
        (&["--draft", "none", "--check-draft"], "--check-draft"),
        (&["--parallel", "2", "--check-draft"], "--check-draft"),
    ];
    for (extra, needle) in cases {
        let out = dir.path().join("run.json");
        let mut args = vec!["bench", s(&model), "--corpus", s(&corpus), "--out", s(&out)];
        args.extend_from_slice(extra);
        let o = posrecall(&args);
        assert_clean_failure(&o, dir.path(), needle);
    }
    // models.toml's keys, named with the file.
    for (line, needle) in [("draft = \"sometimes\"", "params.draft"), ("draft_max = 0", "params.draft_max")] {
        let toml = dir.path().join("models.toml");
        std::fs::write(&toml, format!("[params]\n{line}\n\n[[model]]\nname = \"m\"\npath = \"{}\"\nkv = [\"f16\"]\n", model.display()))
            .unwrap();
        let o = posrecall(&["matrix", s(&toml), "--list"]);
        assert!(!o.status.success(), "{line} was accepted");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle) && err.trim().lines().count() == 1, "{line}: {err}");
    }
}
