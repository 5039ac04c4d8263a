//! The timing model that `scripts/gpu/gpu-check` times in place of a model too
//! large to send (`scripts/gpu/timing_model.py`): the real model's header and
//! tensor table, random weights of the same types, the same bytes wherever
//! it is written, and a model llama.cpp computes finite values with.

use crate::common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn python() -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/env/python-env");
    let o = Command::new(&script).output().expect("cannot run scripts/env/python-env");
    assert!(o.status.success(), "scripts/env/python-env failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// Runs scripts/gpu/timing_model.py with `args` and returns what it printed (a sha256).
fn timing_model(args: &[&str]) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/gpu/timing_model.py");
    let o = Command::new(python()).arg(&script).args(args).output().expect("cannot run timing_model.py");
    assert!(o.status.success(), "timing_model.py {args:?} failed: {}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

fn bytes(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()))
}

#[test]
fn a_timing_model_has_the_real_models_header_other_weights_and_finite_outputs() {
    let _g = serial();
    let real = smollm2();
    let dir = tempfile::tempdir().unwrap();
    let stem = dir.path().join("smollm2-timing");
    let recorded = timing_model(&["header", s(&real), s(&stem)]);
    let out = dir.path().join("smollm2-timing.gguf");
    let header = stem.with_extension("header");
    let table = stem.with_extension("json");
    let expanded = timing_model(&["expand", s(&header), s(&table), s(&out)]);

    // The same bytes as the expansion `header` checked, by another hash.
    assert_eq!(expanded, recorded);
    assert_eq!(posrecall::support::fsutil::file_sha256(&out).unwrap(), recorded);
    // The real model's header byte for byte and its size; other weights.
    let (model, timing) = (bytes(&real), bytes(&out));
    let head = bytes(&header);
    assert!(head.len() > 1_000_000, "SmolLM2's header holds its 49,152-token vocabulary");
    assert_eq!(&timing[..head.len()], &model[..head.len()]);
    assert_eq!(timing.len(), model.len());
    let differ = model[head.len()..].iter().zip(&timing[head.len()..]).filter(|(a, b)| a != b).count();
    assert!(differ > (model.len() - head.len()) / 2, "{differ} weight bytes differ");

    // llama.cpp loads it and computes with it: 8 generated tokens exactly,
    // and a forced pass whose log-probabilities are finite numbers (a NaN or
    // infinite weight, which random bytes give, would make them null).
    let run = dir.path().join("run.json");
    let dense = fixture("dense.js");
    ok(&posrecall(&[
        "bench",
        s(&out),
        "--corpus",
        s(&dense),
        "--crop-lines",
        "1:40",
        "--count",
        "1",
        "--lines",
        "4",
        "--fixed-tokens",
        "8",
        "--draft",
        "none",
        "--quiet",
        "--out",
        s(&run),
    ]));
    let r = read(&run);
    assert_eq!(r["timings"]["generated_tokens"], 8, "{}", r["timings"]);
    let logprob = r["summary"]["forced"]["mean_logprob"].as_f64();
    assert!(logprob.is_some_and(f64::is_finite), "forced mean log-prob {:?}", r["summary"]["forced"]);
}
