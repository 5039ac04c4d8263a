//! Context extension as llama-server spells it (`--rope-scaling`,
//! `--rope-scale`, `--rope-freq-base`, `--rope-freq-scale`, `--yarn-orig-ctx`):
//! the settings reach llama.cpp (a scaled run's forced log-probabilities are
//! not the unscaled run's on the same window, YaRN's are not linear
//! scaling's, YaRN's original context counts, and a frequency scale is the
//! inverse of a scale), they are recorded, and `--ctx
//! auto` goes past the trained context only with a scaling.

use crate::common;

use common::*;
use serde_json::{Value, json};

fn forced_logprobs(run: &Value) -> Vec<f64> {
    run["targets"].as_array().unwrap().iter().map(|t| t["forced"]["mean_logprob"].as_f64().unwrap()).collect()
}

#[test]
fn rope_settings_reach_llama_cpp_and_are_recorded() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let (model, dense) = (smollm2(), fixture("dense.js"));
    let run = |extra: &[&str], name: &str| {
        let out = dir.path().join(name);
        // A small window at f16 (the forced pass reads every position's
        // rotation at any length); the default q8_0 prefills 2.5x slower.
        let mut args = vec![
            "bench",
            s(&model),
            "--corpus",
            s(&dense),
            "--crop-lines",
            "1:120",
            "--forced-only",
            "--count",
            "2",
            "--lines",
            "6",
            "--kv",
            "f16",
            "-q",
            "-o",
            s(&out),
        ];
        args.extend_from_slice(extra);
        ok(&posrecall(&args));
        read(&out)
    };
    let plain = run(&[], "plain.json");
    let yarn = run(&["--rope-scaling", "yarn", "--rope-scale", "2", "--yarn-orig-ctx", "8192"], "yarn.json");
    let base = run(&["--rope-freq-base", "10000"], "base.json");
    // YaRN is not linear scaling by the same factor, its original context
    // matters (4096 is not SmolLM2's trained 8192), and a frequency scale
    // of 1/2 is a scale of 2.
    let linear = run(&["--rope-scaling", "linear", "--rope-scale", "2"], "linear.json");
    let yarn_4k = run(&["--rope-scaling", "yarn", "--rope-scale", "2", "--yarn-orig-ctx", "4096"], "yarn-4k.json");
    let freq_scale = run(&["--rope-scaling", "linear", "--rope-freq-scale", "0.5"], "freq-scale.json");

    assert!(plain["manifest"]["context"].get("rope").is_none(), "an unscaled run records no rope: {}", plain["manifest"]["context"]);
    assert_eq!(yarn["manifest"]["context"]["rope"], json!({"scaling": "yarn", "freq_scale": 0.5, "yarn_orig_ctx": 8192}));
    assert_eq!(base["manifest"]["context"]["rope"], json!({"freq_base": 10000.0}));
    // The same window and targets, other positions' rotations: other log-probabilities.
    assert_eq!(plain["manifest"]["corpus"]["crop"], yarn["manifest"]["corpus"]["crop"]);
    let (p, y, b) = (forced_logprobs(&plain), forced_logprobs(&yarn), forced_logprobs(&base));
    assert_eq!(p.len(), 2);
    let (l, y4, f) = (forced_logprobs(&linear), forced_logprobs(&yarn_4k), forced_logprobs(&freq_scale));
    for i in 0..2 {
        assert!((p[i] - y[i]).abs() > 1e-4, "target {i}: YaRN x2 left the forced log-prob at {}", p[i]);
        assert!((p[i] - b[i]).abs() > 1e-4, "target {i}: another base frequency left the forced log-prob at {}", p[i]);
        assert!((p[i] - l[i]).abs() > 1e-4, "target {i}: linear x2 left the forced log-prob at {}", p[i]);
        assert!((y[i] - l[i]).abs() > 1e-4, "target {i}: YaRN x2 gave linear x2's forced log-prob {}", l[i]);
        assert!((y[i] - y4[i]).abs() > 1e-4, "target {i}: YaRN from 4096 tokens gave YaRN from 8192's {}", y[i]);
    }
    assert_eq!(f, l, "--rope-freq-scale 0.5 is --rope-scale 2");
    assert_eq!(linear["manifest"]["context"]["rope"], json!({"scaling": "linear", "freq_scale": 0.5}));
    assert_eq!(freq_scale["manifest"]["context"]["rope"], linear["manifest"]["context"]["rope"]);
    assert_eq!(yarn_4k["manifest"]["context"]["rope"]["yarn_orig_ctx"], 4096);
}

/// The prefix token count `prompt` prints (on stderr, after the prompt).
fn prefix_tokens(o: &std::process::Output) -> usize {
    ok(o);
    let err = String::from_utf8_lossy(&o.stderr);
    let line = err.lines().find(|l| l.starts_with("prefix: ")).unwrap_or_else(|| panic!("no prefix line in:\n{err}"));
    line["prefix: ".len()..].split(' ').next().unwrap().parse().unwrap()
}

#[test]
fn auto_context_goes_past_the_trained_one_only_with_a_scaling() {
    let model = smollm2();
    let prompt = |extra: &[&str], target: &str| {
        let mut args = vec!["prompt", s(&model), "--target", target, "--count", "8", "--max-prefix-tokens", "12000", "--crop", "densest"];
        args.extend_from_slice(extra);
        posrecall(&args)
    };
    // A target of each run: the first one the refusal of a made-up name lists.
    let target_of = |extra: &[&str]| {
        let o = prompt(extra, "no-such-function");
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        let list = err.split_once("targets (").and_then(|(_, r)| r.split_once(')')).unwrap_or_else(|| panic!("{err}")).0.to_string();
        list.split(", ").next().unwrap().to_string()
    };
    let plain = prefix_tokens(&prompt(&[], &target_of(&[])));
    let scaled_args = ["--rope-scaling", "linear", "--rope-scale", "2"];
    let scaled = prefix_tokens(&prompt(&scaled_args, &target_of(&scaled_args)));
    assert!(plain < 8192, "SmolLM2 was trained on 8192 tokens: a prefix of {plain}");
    assert!(scaled > 11_000, "twice the trained context holds the 12000 asked for: a prefix of {scaled}");
    // Scaling `none` scales nothing (and takes no factor: see below).
    let none_args = ["--rope-scaling", "none"];
    assert!(prefix_tokens(&prompt(&none_args, &target_of(&none_args))) < 8192);

    // What does not fit the trained context says which flags go past it; a
    // fixed context does not.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let o = posrecall(&["bench", s(&model), "--crop", "none", "-o", s(&out)]);
    assert_clean_failure(
        &o,
        dir.path(),
        "past the model's trained context (8192 tokens), set a RoPE scaling, e.g. --rope-scaling yarn --rope-scale 4",
    );
    let o = posrecall(&["bench", s(&model), "--crop", "none", "--ctx", "8000", "-o", s(&out)]);
    assert_clean_failure(&o, dir.path(), "or a larger --ctx");
    assert!(!String::from_utf8_lossy(&o.stderr).contains("rope"), "a fixed context is not the trained one's cap");
}

#[test]
fn bad_rope_values_are_refused_when_parsed() {
    let model = smollm2();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    for (flags, needle) in [
        (vec!["--rope-scale", "0"], "--rope-scale: 0 is not from 1/1024 to 1024"),
        (vec!["--rope-scale", "nan"], "--rope-scale: NaN is not from 1/1024"),
        (vec!["--rope-freq-scale", "1025"], "--rope-freq-scale: 1025 is not from 1/1024 to 1024"),
        (vec!["--rope-freq-base=-5"], "--rope-freq-base: -5 is not from 1 to"),
        (vec!["--rope-scaling", "ntk"], "invalid value 'ntk'"),
        (vec!["--yarn-orig-ctx", "0"], "--yarn-orig-ctx: 0 is not a token count from 1 to"),
        (vec!["--rope-scale", "4", "--rope-freq-scale", "0.25"], "--rope-scale and --rope-freq-scale are both given"),
        // 1/N must stay finite; a scale with no scaling would be ignored.
        (vec!["--rope-scale", "1e-45"], "is not from 1/1024 to 1024"),
        (vec!["--rope-scaling", "none", "--rope-scale", "4"], "--rope-scale: 4 with RoPE scaling none changes nothing"),
    ] {
        let mut args = vec!["bench", s(&model), "-o", s(&out)];
        args.extend_from_slice(&flags);
        let o = posrecall(&args);
        assert!(!o.status.success(), "{flags:?} was accepted");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(needle), "{flags:?}: `{needle}` not in {err}");
        assert!(!out.exists());
    }
}
