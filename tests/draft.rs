//! Exact speculative decoding (`--draft`): drafts from the ground truth and
//! the file are verified in one batch, and the answers are the ones
//! step-by-step greedy decoding gives. Each drafted run here is compared,
//! byte for byte, with an independent `--draft none` run of the same
//! questions; an answer may part from that one only where the drafted run's
//! own check (`--check-draft`, which answers again without drafts) gave the
//! `--draft none` answer too and found the two best logits nearly tied there
//! (batched verification can round a position's logits differently).

use crate::common;

use common::*;
use serde_json::Value;

/// A near tie where a batch's rounding can flip the greedy choice. The
/// widest batched partings docs/AGREEMENT.md records are 0.53 logits for
/// drafts (Gemma 3, q8_0) and 0.73 for parallel answers; a defect in the
/// drafting (a wrong token kept, a cache not cut back) parts where the
/// undrafted choice led by whole logits. One logit separates the two with
/// room for another CPU's rounding.
const NEAR_TIE: f64 = 1.0;

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

/// The same questions answered by an independent `--draft none` run:
/// `run_args` without `--check-draft`, on the same model and corpus.
fn without_drafts(model: &std::path::Path, corpus: &std::path::Path, run_args: &[&str]) -> Value {
    let mut args: Vec<&str> = run_args.iter().copied().filter(|a| *a != "--check-draft").collect();
    args.extend(["--draft", "none"]);
    let none = bench_on(model, corpus, &args);
    assert_eq!(none["manifest"]["params"]["draft"], "none");
    none
}

/// Every target's drafted answer equals, byte for byte, its answer in
/// `none` (an independent `--draft none` run), or parts from it where the
/// run's own check (`--check-draft`) answered exactly as `none` did and
/// found the two best logits nearly tied. Every target must carry that
/// check. Returns how many answers were byte-identical to `none`'s.
fn assert_exact(run: &Value, none: &Value) -> usize {
    agrees_with(run, none, "undrafted")
}

/// [`assert_exact`] for the check named `check` (`undrafted` or `sequential`).
fn agrees_with(run: &Value, none: &Value, check: &str) -> usize {
    let targets = run["targets"].as_array().unwrap();
    let plain = none["targets"].as_array().unwrap();
    assert_eq!(targets.len(), plain.len(), "the same questions without drafts");
    let mut identical = 0;
    for (t, n) in targets.iter().zip(plain) {
        assert_eq!(t["name"], n["name"], "the same questions in the same order");
        let c = &t[check];
        assert!(c.is_object(), "{} was not checked ({check}): {t}", t["name"]);
        let (drafted, undrafted) = (t["response"].as_str().unwrap(), n["response"].as_str().unwrap());
        // The check's own answer is the independent run's: the same length.
        let undrafted_tokens = n["generated_tokens"].as_u64().unwrap();
        assert_eq!(c["sequential_tokens"].as_u64(), Some(undrafted_tokens), "{}: {c}", t["name"]);
        let (common, drafted_tokens) = (c["common_tokens"].as_u64().unwrap(), t["generated_tokens"].as_u64().unwrap());
        if drafted == undrafted {
            identical += 1;
            assert_eq!(c["identical"], true, "{}: the check finds a difference the independent run does not: {c}", t["name"]);
            // The same answer shares every token.
            assert_eq!((common, drafted_tokens), (undrafted_tokens, undrafted_tokens), "{}: shared prefix {c}", t["name"]);
            continue;
        }
        // Answers that part share a prefix shorter than the longer of them,
        // and no longer than the shorter.
        assert!(
            common <= drafted_tokens.min(undrafted_tokens) && common < drafted_tokens.max(undrafted_tokens),
            "{}: shared prefix of {common} tokens, answers of {drafted_tokens} and {undrafted_tokens}: {c}",
            t["name"]
        );
        assert_eq!(c["identical"], false, "{}: the check missed a difference: {c}", t["name"]);
        assert_eq!(c["response"].as_str(), Some(undrafted), "{}: the check's undrafted answer is not the `--draft none` answer", t["name"]);
        let gap = c["parting_gap"].as_f64().expect("a parting answer records the logit gap where it parts");
        assert!(
            gap < NEAR_TIE,
            "{}: the drafted answer parts from the undrafted one after {} tokens, where the logit gap was {gap} (not a near tie)\ndrafted: {drafted:?}\nundrafted: {undrafted:?}",
            t["name"],
            c["common_tokens"],
        );
    }
    let e = &run["summary"][check];
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
    // docs/GUIDE.md's figures for this window, held to ±10%: truth drafts at
    // f16 and q8_0, then lookup drafts.
    let stated = doc_numbers("docs/GUIDE.md", "Tokens per step that `tests/draft.rs` reads here and holds to a tenth:");
    let [f16_per_step, q8_per_step, lookup_per_step] = stated[..] else { panic!("docs/GUIDE.md's tokens per step: {stated:?}") };
    let cache = tempfile::TempDir::new().unwrap();
    let window = ["--crop-lines", "700:850", "--lines", "8", "--prefix-cache", s(cache.path())];
    let mut f16_answers = Vec::new();
    for (kv, count) in [("f16", 4), ("q8_0", 2)] {
        let mut args = window.to_vec();
        let count_arg = count.to_string();
        args.extend(["--kv", kv, "--count", &count_arg, "--check-draft"]);
        let run = bench(&qwen_coder(), &args);
        let none = without_drafts(&qwen_coder(), &lodash(), &args);
        assert_eq!(run["manifest"]["params"]["draft"], "truth", "the default mode is recorded");
        assert_eq!(run["manifest"]["params"]["draft_max"], 16);
        assert!(run["manifest"]["runtime"]["draft_fallback"].is_null(), "{}", run["manifest"]["runtime"]);
        let identical = assert_exact(&run, &none);
        assert_eq!(identical, count, "{kv}: every answer as without drafts: {}", run["summary"]["undrafted"]);
        let d = &run["summary"]["draft"];
        let per_step = d["tokens_per_step"].as_f64().unwrap();
        let stated = if kv == "f16" { f16_per_step } else { q8_per_step };
        assert!((per_step / stated - 1.0).abs() <= 0.1, "{kv}: {per_step} tokens per step, docs/GUIDE.md says {stated}: {d}");
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
            f16_answers = none["targets"].as_array().unwrap().iter().map(|t| t["response"].clone()).collect();
        }
    }
    lookup_drafts_from_the_file(cache.path(), &f16_answers, lookup_per_step);
}

/// The same window at f16 with `--draft lookup`, its prefix loaded from
/// `cache`: byte for byte the answers of the `--draft none` run (`undrafted`).
fn lookup_drafts_from_the_file(cache: &std::path::Path, undrafted: &[Value], stated_per_step: f64) {
    let window = ["--crop-lines", "700:850", "--count", "4", "--lines", "8", "--kv", "f16", "--prefix-cache", s(cache)];
    let mut args = window.to_vec();
    args.extend(["--draft", "lookup", "--draft-max", "8"]);
    let lookup = bench(&qwen_coder(), &args);
    assert_eq!(lookup["timings"]["prefix_source"], "cache", "the f16 window was evaluated before");
    assert_eq!(lookup["manifest"]["params"]["draft_max"], 8);
    let d = &lookup["summary"]["draft"];
    assert_eq!(d["by_source"]["truth"]["proposed"], 0, "lookup drafts only from the file: {d}");
    assert!(d["by_source"]["file"]["accepted"].as_u64().unwrap() > 0, "{d}");
    let per_step = d["tokens_per_step"].as_f64().unwrap();
    assert!((per_step / stated_per_step - 1.0).abs() <= 0.1, "{per_step} tokens per step, docs/GUIDE.md says {stated_per_step}: {d}");
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
    let args = ["--crop-lines", "1:100", "--count", "4", "--lines", "6", "--kv", "f16", "--max-new-tokens", "48", "--check-draft"];
    let run = bench_on(&smollm2(), &fixture("dense.js"), &args);
    assert_exact(&run, &without_drafts(&smollm2(), &fixture("dense.js"), &args));
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
    assert_exact(&run, &without_drafts(&gemma3(), &fixture("dense.js"), &args));
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
    let window = ["--crop-lines", "700:850", "--count", "4", "--lines", "8", "--kv", "f16"];
    let mut args = window.to_vec();
    args.extend(["--parallel", "4", "--check-sequential"]);
    let run = bench(&qwen_coder(), &args);
    assert_eq!(run["manifest"]["params"]["decode_mode"], "parallel");
    assert_eq!(run["manifest"]["params"]["draft"], "truth");
    // The drafts are the ground truth and the answers those of one
    // sequence, so each sequence takes as many tokens a step as it does
    // alone: docs/GUIDE.md's f16 figure for this window, to ±10%.
    let stated = doc_numbers("docs/GUIDE.md", "Tokens per step that `tests/draft.rs` reads here and holds to a tenth:")[0];
    let d = &run["summary"]["draft"];
    let per_step = d["tokens_per_step"].as_f64().unwrap();
    assert!((per_step / stated - 1.0).abs() <= 0.1, "{per_step} tokens per step in parallel, docs/GUIDE.md says {stated} alone: {d}");
    // Each answer as one sequence without drafts gives it, or parting at a
    // near tie from an answer the check gave exactly as that run did.
    agrees_with(&run, &without_drafts(&qwen_coder(), &lodash(), &window), "sequential");
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
