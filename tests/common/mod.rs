//! Shared helpers for the tests that run real models.
//!
//! The models are the two real GGUF files `scripts/fetch-models` caches; a
//! missing model fails the test with what to run, it never skips.
#![allow(dead_code)]

use posrecall::cli::{CtxSize, KvType, OnOffAuto, ProbeKind, TargetArgs};
use posrecall::commands::bench::PlanOptions;
use posrecall::crop::{CropMode, LineRange};
use posrecall::engine::session::ContextConfig;
use posrecall::score::Normalize;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::{Mutex, MutexGuard};

/// Model tests share two cores: one at a time keeps timings and runtime sane.
static MODEL_LOCK: Mutex<()> = Mutex::new(());

pub fn serial() -> MutexGuard<'static, ()> {
    MODEL_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn model(file: &str) -> PathBuf {
    let p = posrecall::fsutil::cache_dir().join("models").join(file);
    assert!(
        p.exists(),
        "{} is missing: run scripts/fetch-models (the tests use real models)",
        p.display()
    );
    p
}

pub fn smollm2() -> PathBuf {
    model("SmolLM2-135M-Instruct.Q4_1.gguf")
}

pub fn gemma3() -> PathBuf {
    model("gemma-3-270m-q4_k_m.gguf")
}

pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_posrecall")
}

pub fn target_args(count: usize, lines: usize, crop: Option<(usize, usize)>) -> TargetArgs {
    TargetArgs {
        count,
        lines,
        seed: 1,
        crop_lines: crop.map(|(first, last)| LineRange { first, last }),
        skip_blank: false,
        rename: false,
        pass: None,
        normalize: Normalize::Trim,
    }
}

pub fn plan_options(target: TargetArgs, max_new: usize, probe: ProbeKind) -> PlanOptions {
    PlanOptions {
        target,
        probe,
        crop: CropMode::Head,
        ctx: CtxSize::Auto,
        max_tokens: None,
        max_new_tokens: Some(max_new),
    }
}

pub fn context(n_ctx: u32, kv: KvType, swa_full: bool) -> ContextConfig {
    ContextConfig {
        n_ctx,
        n_batch: 512,
        n_ubatch: 512,
        threads: 2,
        type_k: kv,
        type_v: kv,
        flash_attn: OnOffAuto::Auto,
        swa_full,
        n_seq: 1,
        kv_unified: false,
    }
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
