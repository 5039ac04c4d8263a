//! The engine on hybrid recurrent models: llama.cpp's `qwen35` (gated
//! DeltaNet layers with full attention every 2nd layer) and `qwen35moe` (the
//! same with a mixture of experts), as tiny random-weight models that
//! `scripts/dev/make-tiny-models` builds. Their memory is llama.cpp's hybrid
//! memory: a KV cache for the attention layers and a recurrent state (conv
//! and SSM rows) for the others, which cannot be rolled back position by
//! position. Every answer is forced to a fixed length (random weights end
//! early otherwise); the answers are noise, only their equality matters.

use crate::common;

use common::*;
use posrecall::bench::plan;
use posrecall::corpus::Source;
use posrecall::engine::model;
use posrecall::engine::session::Session;
use posrecall::prompt::Probe;
use posrecall::settings::KvType;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

const TOKENS: usize = 12;

/// Restored snapshots (lean and full) answer as fresh contexts do (f16 and
/// q8_0 attention cache), and a context emptied for a closed-book question answers as a
/// context that never held anything.
#[test]
fn hybrid_restore_equals_fresh_context_and_empties_cleanly() {
    let _g = serial();
    for (name, path) in tiny_hybrids() {
        let m = model::load(&path, gpu_layers()).unwrap();
        assert!(m.recurrent_or_hybrid, "{name}: llama.cpp must see recurrent memory");
        let src = Source::open(&fixture("dense.js")).unwrap();
        let p = plan(&m, &src, &plan_options(target_spec(3, 6, Some((1, 80))), TOKENS, Probe::Auto), &posrecall::support::progress::Quiet)
            .unwrap();
        // More than one batch: the prefix is evaluated in chunks.
        let n_batch = context(p.n_ctx, KvType::F16, false).n_batch as usize;
        assert!(p.prefix_tokens.len() > n_batch, "{name}: prefix of {} tokens", p.prefix_tokens.len());
        for kv in [KvType::F16, KvType::Q8_0] {
            assert_restore_equivalence(&m, &p, &context(p.n_ctx, kv, false), fixed(TOKENS));
        }

        // Emptied after restores (the closed-book pass) vs never filled.
        let cfg = context(p.n_ctx, KvType::F16, false);
        let mut s = Session::new(&m, &cfg).unwrap();
        s.prefill(&p.prefix_tokens, |_| {}).unwrap();
        s.snapshot().unwrap();
        s.restore().unwrap();
        let with_file = s.generate_with(&p.queries[0], fixed(TOKENS), |_| false).unwrap();
        s.start_empty().unwrap();
        let emptied = s.generate_with(&p.queries[0], fixed(TOKENS), |_| false).unwrap();
        let mut never = Session::new(&m, &cfg).unwrap();
        let blank = never.generate_with(&p.queries[0], fixed(TOKENS), |_| false).unwrap();
        assert_eq!(emptied.tokens, blank.tokens, "{name}: an emptied context still holds state");
        assert_ne!(with_file.tokens, blank.tokens, "{name}: the prefix changes nothing");
        // And the snapshot comes back after it.
        s.restore().unwrap();
        let again = s.generate_with(&p.queries[0], fixed(TOKENS), |_| false).unwrap();
        assert_eq!(again.tokens, with_file.tokens, "{name}: restore after emptying");
    }
}

fn bench(model: &Path, extra: &[&str], out: &Path) -> (Value, String) {
    let o = Command::new(bin())
        .arg("bench")
        .arg(model)
        .arg("--corpus")
        .arg(fixture("dense.js"))
        .args(["--threads", "2", "--quiet", "--count", "3", "--lines", "6", "--crop-lines", "1:80", "--kv", "f16"])
        .args(["--fixed-tokens", &TOKENS.to_string()])
        .args(extra)
        .arg("--out")
        .arg(out)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    ok(&o);
    (read(out), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// Each target's answer and its forced-pass metrics (without
/// `context_gain`, which only a closed-book run has).
fn answers(r: &Value) -> Vec<(Value, Value)> {
    let forced = |t: &Value| {
        let mut f = t["forced"].clone();
        if let Some(o) = f.as_object_mut() {
            o.remove("context_gain");
        }
        f
    };
    r["targets"].as_array().unwrap().iter().map(|t| (t["response"].clone(), forced(t))).collect()
}

/// `bench` end to end on each hybrid model: two runs answer identically (the
/// second from the prefix cache the first saved), `--parallel` falls back to
/// one question at a time and says why, and `--closed-book` leaves the
/// answers with the file unchanged.
#[test]
fn hybrid_bench_is_deterministic_caches_the_prefix_and_falls_back_from_parallel() {
    let _g = serial();
    for (name, path) in tiny_hybrids() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let cache_args = ["--prefix-cache", cache.to_str().unwrap()];
        let (first, _) = bench(&path, &cache_args, &dir.path().join("first.json"));
        assert_eq!(first["timings"]["prefix_source"], "prefill", "{name}");
        let (cached, _) = bench(&path, &cache_args, &dir.path().join("cached.json"));
        assert_eq!(cached["timings"]["prefix_source"], "cache", "{name}");
        let reference = answers(&first);
        assert!(reference.iter().all(|(_, f)| f["tokens"].as_u64().unwrap() > 0), "{name}: forced pass ran");
        assert_eq!(reference, answers(&cached), "{name}: answers from the cached prefix differ");
        for t in first["targets"].as_array().unwrap() {
            assert_eq!(t["generated_tokens"], TOKENS, "{name}");
        }

        // Its layers as scripts/dev/tiny_models.py writes them: four, every
        // second one full attention, the others recurrent with no KV cache.
        assert_eq!(
            first["manifest"]["model"]["layers"],
            serde_json::json!({"total": 4, "full_attention": 2, "sliding_window": 0, "window": 0, "recurrent": 2}),
            "{name}"
        );
        assert_eq!(first["manifest"]["runtime"]["restore"], "lean", "{name}");
        let (full, _) = bench(&path, &["--restore", "full"], &dir.path().join("full.json"));
        assert_eq!(full["manifest"]["runtime"]["restore"], "full", "{name}");
        assert_eq!(reference, answers(&full), "{name}: full and lean restores answer differently");
        let (lean_bytes, full_bytes) =
            (first["timings"]["snapshot_bytes"].as_u64().unwrap(), full["timings"]["snapshot_bytes"].as_u64().unwrap());
        assert!(lean_bytes > 0 && lean_bytes * 10 < full_bytes, "{name}: lean {lean_bytes} bytes, full {full_bytes}");

        let (par, err) = bench(&path, &["--parallel", "3"], &dir.path().join("parallel.json"));
        assert_eq!(par["manifest"]["params"]["decode_mode"], "sequential", "{name}");
        let why = par["manifest"]["runtime"]["parallel_fallback"].as_str().unwrap_or_default();
        assert!(why.contains("recurrent"), "{name}: fallback reason {why:?}");
        assert!(err.contains("one question at a time"), "{name}: {err}");
        assert_eq!(reference, answers(&par), "{name}: the fallback answers differently");

        let (cb, _) = bench(&path, &["--closed-book"], &dir.path().join("closed.json"));
        assert_eq!(reference, answers(&cb), "{name}: the closed-book pass changed the answers");
        for t in cb["targets"].as_array().unwrap() {
            assert!(t["closed_book"]["prompt_tokens"].as_u64().unwrap() > 0, "{name}");
            assert!(t["forced"]["context_gain"]["top1_share"].is_number(), "{name}: the forced pass ran without the file too");
        }
    }
}

/// A snapshot that would not fit in the memory allowed is refused before the
/// prefill, in one line that names what fits.
#[test]
fn a_snapshot_too_large_for_memory_is_refused_early() {
    let _g = serial();
    let (_, path) = tiny_hybrids().into_iter().next().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let run = |extra: &[&str]| {
        Command::new(bin())
            .arg("bench")
            .arg(&path)
            .arg("--corpus")
            .arg(fixture("dense.js"))
            .args(["--threads", "2", "--quiet", "--count", "2", "--lines", "4", "--kv", "f16"])
            .args(extra)
            .arg("--out")
            .arg(&out)
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    };
    // The full snapshot (~1.3 MiB here) does not fit in 100 KiB; the lean one
    // (the recurrent state alone) does. Its size, from the tiny models'
    // dimensions (scripts/dev/tiny_models.py): two Gated DeltaNet layers (0 and
    // 2 of 4), each keeping f32 conv rows, (kernel 4 - 1) x (2 key dims of
    // 2 heads x 16 + 4 value heads x 16), and a 16 x 16 state per value head.
    let (kernel, k_heads, v_heads, head) = (4, 2, 4, 16);
    let per_layer = 4 * ((kernel - 1) * (2 * k_heads * head + v_heads * head) + v_heads * head * head);
    let lean_kib = format!("{:.1} KiB", (2 * per_layer) as f64 / 1024.0);
    let o = run(&["--restore", "full", "--snapshot-memory", "100KiB"]);
    assert_clean_failure(&o, dir.path(), &format!("--restore lean ({lean_kib}) fits"));
    // Not even the lean one fits in 4 KiB, whatever the prefix.
    let o = run(&["--snapshot-memory", "4KiB"]);
    assert_clean_failure(&o, dir.path(), "no prefix fits");
    // Gemma 3's lean snapshot (its window layers' cells, 15 KiB a token up
    // to the 512-token window) grows with a short prefix: the error names the
    // longest prefix that fits.
    let o = Command::new(bin())
        .arg("bench")
        .arg(gemma3())
        .arg("--corpus")
        .arg(fixture("dense.js"))
        .args(["--count", "2", "--kv", "f16", "--snapshot-memory", "4MiB", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert_clean_failure(&o, dir.path(), "a prefix of at most 273 tokens fits (--max-prefix-tokens)");
}
