//! Shared helpers: running the binary, reading its output, and the real
//! models.
//!
//! The models are the real GGUF files `scripts/env/fetch-models` caches; a
//! missing model fails the test with what to run, it never skips.
#![allow(dead_code)]

use posrecall::bench::PlanOptions;
use posrecall::prompt::Probe;
use posrecall::settings::Named;
use posrecall::settings::{ContextConfig, CtxSize, FlashAttn, KvType};
use posrecall::targets::TargetSpec;
use posrecall::targets::crop::{CropMode, LineRange};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard, OnceLock};

/// Model tests share two cores: one at a time keeps timings and runtime sane.
static MODEL_LOCK: Mutex<()> = Mutex::new(());

pub fn serial() -> MutexGuard<'static, ()> {
    MODEL_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A model file in the cache, checked once per test process against the
/// sha256 `scripts/env/fetch-models` pins in `var` (hashing 250 MB takes a
/// second or two, so the result is kept in `checked`). Another file under
/// the same name (a partial download, another quantisation) would make every
/// model test measure something else.
fn model(file: &str, var: &str, checked: &'static OnceLock<Result<PathBuf, String>>) -> PathBuf {
    let verified = checked.get_or_init(|| {
        let p = posrecall::support::fsutil::cache_dir().join("models").join(file);
        if !p.exists() {
            return Err(format!("{} is missing: run scripts/env/fetch-models (the tests use real models)", p.display()));
        }
        let want = pinned_sha256(var);
        let got = posrecall::support::fsutil::file_sha256(&p).map_err(|e| format!("{e:#}"))?;
        if got != want {
            return Err(format!(
                "{} has sha256 {got}, not the {want} that scripts/env/fetch-models pins ({var}): \
                 run scripts/env/fetch-models, which downloads it again",
                p.display()
            ));
        }
        Ok(p)
    });
    verified.clone().unwrap_or_else(|e| panic!("{e}"))
}

/// The sha256 assigned to `var` in `scripts/env/fetch-models` (`VAR=<64 hex>`),
/// read at test time so that the script stays the one place it is pinned.
fn pinned_sha256(var: &str) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/env/fetch-models");
    let text = std::fs::read_to_string(&script).unwrap_or_else(|e| panic!("cannot read {}: {e}", script.display()));
    let prefix = format!("{var}=");
    let value = text.lines().find_map(|l| l.trim().strip_prefix(&prefix)).map(str::trim);
    match value {
        Some(v) if v.len() == 64 && v.bytes().all(|b| b.is_ascii_hexdigit()) => v.to_ascii_lowercase(),
        _ => panic!("{} pins no sha256 as {var}=<64 hex digits>", script.display()),
    }
}

pub fn smollm2() -> PathBuf {
    static CHECKED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    model("SmolLM2-135M-Instruct.Q4_1.gguf", "SMOL_SHA", &CHECKED)
}

pub fn gemma3() -> PathBuf {
    static CHECKED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    model("gemma-3-270m-q4_k_m.gguf", "GEMMA_SHA", &CHECKED)
}

/// Qwen2.5-Coder-0.5B-Instruct (Q4_K_M): a code model that really recalls.
pub fn qwen_coder() -> PathBuf {
    static CHECKED: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    model("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf", "QWEN05_SHA", &CHECKED)
}

/// The default corpus (lodash 4.17.21's `lodash.js`), where
/// `scripts/env/fetch-corpus` puts it (it honours POSRECALL_CACHE and
/// XDG_CACHE_HOME as posrecall does).
pub fn lodash() -> PathBuf {
    let path = posrecall::support::fsutil::default_corpus_path();
    assert!(path.is_file(), "the default corpus is missing ({}): run scripts/env/fetch-corpus first", path.display());
    path
}

/// A run file as `scripts/dev/run-identity` compares them: without
/// `timings` and without any measured `*_ms` or `prefill_tok_s`, the only
/// fields that differ between two runs of one binary.
pub fn without_timings(mut v: Value) -> Value {
    fn strip(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.retain(|k, _| !(k.ends_with("_ms") || k == "prefill_tok_s"));
                m.values_mut().for_each(strip);
            }
            Value::Array(a) => a.iter_mut().for_each(strip),
            _ => {}
        }
    }
    v.as_object_mut().unwrap().remove("timings");
    strip(&mut v);
    v
}

/// SmolLM2 cut after its first 8 MiB, in `dir`: its header, metadata and
/// vocabulary read as the whole model's, but llama.cpp cannot load its
/// weights. A refusal that must come before the model loads is proved by
/// getting that refusal with this file, not llama.cpp's failure to load it.
pub fn unloadable_model(dir: &Path) -> PathBuf {
    use std::io::Read;
    let mut head = Vec::new();
    std::fs::File::open(smollm2()).unwrap().take(8 << 20).read_to_end(&mut head).unwrap();
    let path = dir.join("cut-SmolLM2.gguf");
    std::fs::write(&path, head).unwrap();
    path
}

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// The numbers a document states in the paragraph that holds `marker`,
/// after it, in order: every word that reads as a number once brackets,
/// commas, colons, full stops, `%`, `±` and `×` around it are taken off (so `q8_0` or `4K`
/// are not numbers, `98.7%),` is 98.7). Tests hold the figures the
/// documentation states by reading them here, not from a copy.
pub fn doc_numbers(doc: &str, marker: &str) -> Vec<f64> {
    let text = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(doc)).unwrap();
    let at = text.find(marker).unwrap_or_else(|| panic!("{doc} no longer says {marker:?}"));
    let rest = &text[at + marker.len()..];
    let paragraph = &rest[..rest.find("\n\n").unwrap_or(rest.len())];
    paragraph
        .split_whitespace()
        .filter_map(|w| w.trim_matches(|c: char| "()[],.;:%×±*`".contains(c)).replace(',', "").parse::<f64>().ok())
        .filter(|n| n.is_finite())
        .collect()
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_posrecall")
}

/// Runs the binary with `args`, without colour and without any proxy (the
/// `ask` tests serve on loopback), then `env` on top.
pub fn posrecall_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(bin());
    cmd.args(args).env_remove("CLICOLOR_FORCE").env("NO_COLOR", "1");
    for v in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] {
        cmd.env_remove(v);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("cannot run the posrecall binary")
}

/// [`posrecall_with`] and no extra environment.
pub fn posrecall(args: &[&str]) -> Output {
    posrecall_with(args, &[])
}

/// Asserts success and returns stdout.
pub fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "posrecall failed ({}):\nstdout: {}\nstderr: {}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout.clone()).expect("stdout is UTF-8")
}

/// A path as an argument.
pub fn s(p: &Path) -> &str {
    p.to_str().expect("test paths are UTF-8")
}

/// A JSON file (a run file, a targets file).
pub fn read(p: &Path) -> Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{} is not JSON: {e}", p.display()))
}

pub fn target_spec(count: usize, lines: usize, crop: Option<(usize, usize)>) -> TargetSpec {
    TargetSpec { count, lines, crop_lines: crop.map(|(first, last)| LineRange { first, last }), ..TargetSpec::default() }
}

pub fn plan_options(target: TargetSpec, max_new: usize, probe: Probe) -> PlanOptions {
    PlanOptions {
        target,
        probe,
        crop: CropMode::Head,
        ctx: CtxSize::Auto,
        max_prefix_tokens: None,
        max_new_tokens: Some(max_new),
        ..PlanOptions::default()
    }
}

/// Layers the engine tests offload: `POSRECALL_TEST_GPU_LAYERS` (a GPU
/// build runs the same tests on its device, as `scripts/gpu/test-gpu` does),
/// else none.
pub fn gpu_layers() -> u32 {
    match std::env::var("POSRECALL_TEST_GPU_LAYERS") {
        Ok(v) => v.trim().parse().unwrap_or_else(|_| panic!("POSRECALL_TEST_GPU_LAYERS={v} is not a number")),
        Err(_) => 0,
    }
}

pub fn context(n_ctx: u32, kv: KvType, swa_full: bool) -> ContextConfig {
    ContextConfig::sequential(n_ctx, (kv, kv), FlashAttn::Auto, swa_full, Some(2), gpu_layers())
}

/// One clear line on stderr naming `needle`, a non-zero exit, no panic,
/// nothing on stdout, and nothing written into `dir`.
pub fn assert_clean_failure(o: &Output, dir: &Path, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "expected failure, got success");
    assert!(!err.contains("panicked"), "panic: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got: {err}");
    assert!(lines[0].starts_with("posrecall: error:"), "{err}");
    assert!(lines[0].contains(needle), "`{needle}` not in: {err}");
    assert!(o.stdout.is_empty(), "output on stdout: {}", String::from_utf8_lossy(&o.stdout));
    let left: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "files left behind: {left:?}");
}

/// The tiny random-weight hybrid models `scripts/dev/make-tiny-models` builds
/// (qwen35, qwen35moe), as (name, path); the script is run once per test
/// process, building them on first use and checking their pinned sha256.
/// Their answers are noise: they test the engine on recurrent memory, not
/// recall.
pub fn tiny_hybrids() -> Vec<(String, PathBuf)> {
    static BUILT: OnceLock<Result<Vec<(String, PathBuf)>, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/dev/make-tiny-models");
        let o = Command::new(&script).output().map_err(|e| format!("cannot run {}: {e}", script.display()))?;
        if !o.status.success() {
            return Err(format!("{} failed: {}", script.display(), String::from_utf8_lossy(&o.stderr)));
        }
        let models: Vec<(String, PathBuf)> = String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter_map(|l| l.split_once('\t'))
            .map(|(name, path)| (name.to_string(), PathBuf::from(path)))
            .collect();
        if models.len() < 2 {
            return Err(format!("{} printed {} models, expected qwen35 and qwen35moe", script.display(), models.len()));
        }
        Ok(models)
    });
    built.clone().unwrap_or_else(|e| panic!("{e}"))
}

/// A test model made by one of llama.cpp's own tools (`scripts/env/NAME
/// --test-model`: gguf-split's split SmolLM2, quantize's requantised one),
/// the tool compiled against this build's llama.cpp: the target folder
/// holding the binary under test.
pub fn tool_test_model(script_name: &str) -> Result<PathBuf, String> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/env").join(script_name);
    let target = Path::new(bin()).parent().and_then(Path::parent).expect("target/release/posrecall");
    let o = Command::new(&script)
        .arg("--test-model")
        .env("CARGO_TARGET_DIR", target)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if !o.status.success() {
        return Err(format!("{} failed: {}", script.display(), String::from_utf8_lossy(&o.stderr)));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
}

/// Generation up to `max_new` tokens, stopping at end-of-generation.
pub fn free(max_new: usize) -> posrecall::engine::session::Limit {
    posrecall::engine::session::Limit { max_new, fixed: false }
}

/// Exactly `n` tokens per answer (random-weight models end early otherwise).
pub fn fixed(n: usize) -> posrecall::engine::session::Limit {
    posrecall::engine::session::Limit { max_new: n, fixed: true }
}

/// Answers `plan`'s targets from restored snapshots, restoring both ways
/// (lean and full), then each one again from a fresh context that evaluated
/// the same prefix in the same chunks and never restored anything; the greedy
/// outputs must be byte-identical. Returns the snapshot bytes, lean and full.
pub fn assert_restore_equivalence(
    m: &posrecall::engine::model::Model,
    p: &posrecall::bench::Plan,
    cfg: &ContextConfig,
    limit: posrecall::engine::session::Limit,
) -> (usize, usize) {
    use posrecall::engine::session::Session;
    use posrecall::settings::RestoreMode;
    let mut fresh_answers = Vec::new();
    for (t, q) in p.targets.iter().zip(&p.queries) {
        let mut fresh = Session::new(m, cfg).unwrap();
        fresh.prefill(&p.prefix_tokens, |_| {}).unwrap();
        let f = fresh.generate_with(q, limit, |_| false).unwrap();
        assert!(!f.tokens.is_empty(), "{}: nothing generated", t.name);
        fresh_answers.push(f);
    }
    // The answers really differ between targets: the question matters.
    assert!(fresh_answers.windows(2).any(|w| w[0].text != w[1].text), "all answers identical");
    let mut bytes = Vec::new();
    for mode in [RestoreMode::Lean, RestoreMode::Full] {
        let mut s = Session::new(m, cfg).unwrap();
        s.set_restore_mode(mode);
        s.prefill(&p.prefix_tokens, |_| {}).unwrap();
        bytes.push(s.snapshot().unwrap());
        for ((t, q), f) in p.targets.iter().zip(&p.queries).zip(&fresh_answers) {
            s.restore().unwrap();
            let r = s.generate_with(q, limit, |_| false).unwrap();
            assert_eq!(
                r.tokens,
                f.tokens,
                "{} ({}, {mode} restore): restored answer differs from a fresh context",
                t.name,
                cfg.type_k.as_str()
            );
            assert_eq!(r.text, f.text);
        }
    }
    assert!(bytes[1] > 0, "a full snapshot holds the prefix");
    // The estimate a run checks against host memory before the prefill is
    // the measured size, give or take llama.cpp's per-cell position and
    // sequence ids and per-layer headers.
    let shape = m.state_shape(cfg.type_k, cfg.type_v);
    let prefix = p.prefix_tokens.len() as u64;
    // What llama.cpp adds to the cells' K and V rows: per cell written its
    // position and sequence ids (a few u32s, once per memory of a hybrid:
    // 24 bytes a cell measured on the tiny hybrids), per layer a type and a
    // row size, and a header; no more than 2% of the data on top of that. A
    // lean snapshot writes only the sliding-window layers' window of cells.
    let layers = shape.full_attn_layers + shape.swa_layers + shape.recurrent_layers;
    for (mode, measured) in [(RestoreMode::Lean, bytes[0]), (RestoreMode::Full, bytes[1])] {
        let estimate = shape.snapshot_bytes(prefix, mode);
        let cells = match mode {
            RestoreMode::Full => prefix,
            // At most the window and one batch of cells.
            RestoreMode::Lean if shape.swa_layers > 0 => prefix.min(shape.n_swa + 512),
            RestoreMode::Lean => 0,
        };
        let slack = measured as u64 / 50 + cells * 32 + layers * 64 + 1024;
        assert!(
            estimate.abs_diff(measured as u64) <= slack,
            "{mode} snapshot: estimated {estimate} bytes, measured {measured} ({shape:?})"
        );
    }
    assert!(bytes[0] < bytes[1], "the lean snapshot ({} bytes) is not smaller than the full one ({})", bytes[0], bytes[1]);
    (bytes[0], bytes[1])
}

/// A target's `forced.kld.line_mean` holds, for each expected line, the
/// mean of the run file's per-token divergences over that line's tokens: a
/// token belongs to the line its text starts on. The tokens and their
/// lines are found here from llama.cpp's tokenizer directly (not through
/// posrecall): the forced text (the scaffold, then every expected line
/// with its newline) tokenized as the forced pass feeds it, each token's
/// text detokenized, and the newlines before its first byte counted. (Each
/// line tokenized on its own would not do: BPE merges a newline with the
/// next line's indent or a blank line, so a line's tokens in context are
/// not its tokens alone.) A token given to the wrong line, a mean over the
/// wrong tokens, or a line left at zero fails.
pub fn assert_line_means(target: &Value, model: &Path) {
    use llama_cpp_2::model::{LlamaModel, params::LlamaModelParams};
    let k = &target["forced"]["kld"];
    let floats = |v: &Value| -> Vec<f64> { v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect() };
    let (t, means) = (floats(&k["tokens"]), floats(&k["line_mean"]));
    let expected: Vec<&str> = target["expected"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
    assert_eq!(means.len(), expected.len(), "one mean per expected line: {k}");
    let scaffold = target["forced"]["scaffold"].as_str().unwrap_or_default();
    let text: String = std::iter::once(scaffold.to_string()).chain(expected.iter().map(|l| format!("{l}\n"))).collect();

    let backend = posrecall::engine::backend().unwrap();
    let params = LlamaModelParams::default().with_vocab_only(true);
    let vocab_model = LlamaModel::load_from_file(backend, model, &params).unwrap();
    let vocab = vocab_model.vocab();
    let tokens = vocab.tokenize(text.as_bytes(), false, false);
    let mut at = 0;
    let mut sums = vec![(0.0f64, 0usize); expected.len()];
    let mut scored = 0;
    for tok in tokens {
        let piece = vocab.token_to_piece(tok, false, None);
        let start = at;
        at += piece.len();
        if start < scaffold.len() {
            continue; // the scaffold's tokens are not scored
        }
        let line = text.as_bytes()[scaffold.len()..start].iter().filter(|&&b| b == b'\n').count();
        assert!(scored < t.len(), "more forced tokens than the run file's {}: {k}", t.len());
        sums[line].0 += t[scored];
        sums[line].1 += 1;
        scored += 1;
    }
    assert_eq!(at, text.len(), "the tokens spell the forced text");
    assert_eq!(scored, t.len(), "the run file's forced tokens are the forced text's: {k}");
    // The tokens are stored as f32, the means computed in f64.
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1e-4);
    for (line, ((sum, n), mean)) in sums.iter().zip(&means).enumerate() {
        let want = if *n == 0 { 0.0 } else { sum / *n as f64 };
        assert!(close(want, *mean), "line {} ({:?}): mean {mean}, its {n} tokens' mean {want}: {k}", line + 1, expected[line]);
    }
}
