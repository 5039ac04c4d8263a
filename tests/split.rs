//! A split model, as the hub publishes them: SmolLM2 split into three parts
//! by llama.cpp's own `llama-gguf-split` (`scripts/env/gguf-split --test-model`).
//! Given its first part, posrecall loads every part, records each, and its
//! run equals the run of the file it was split from but for the model's file
//! record; a missing, foreign, misnamed or cut-short part is a one-line error naming it.

use crate::common;

use common::*;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The first part of the split SmolLM2, made once per test process.
fn split_smollm2() -> PathBuf {
    static MADE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    MADE.get_or_init(|| tool_test_model("gguf-split")).clone().unwrap_or_else(|e| panic!("{e}"))
}

fn parts(first: &Path) -> Vec<PathBuf> {
    (1..=3).map(|i| first.with_file_name(format!("SmolLM2-135M-Instruct.Q4_1-{i:05}-of-00003.gguf"))).collect()
}

fn sha256_of(p: &Path) -> String {
    let bytes = std::fs::read(p).unwrap();
    Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_split_model_runs_as_the_file_it_was_split_from() {
    let _g = serial();
    let first = split_smollm2();
    let dir = tempfile::tempdir().unwrap();
    // A small run: what is checked is that the split model's run is the
    // whole file's, which any window shows.
    let dense = fixture("dense.js");
    let small = ["--corpus", s(&dense), "--crop-lines", "1:100", "--count", "2", "--lines", "6", "--max-new-tokens", "24", "--kv", "f16"];
    let run = |model: &Path, name: &str| {
        let out = dir.path().join(name);
        let args = [&["bench", s(model), "-q", "-o", s(&out)][..], &small].concat();
        ok(&posrecall(&args));
        read(&out)
    };
    let split = run(&first, "split.json");
    let whole = run(&smollm2(), "whole.json");

    // Every part is recorded, in order, with its size and sha256.
    let model = &split["manifest"]["model"];
    let recorded = model["parts"].as_array().expect("a split model's parts");
    let files = parts(&first);
    assert_eq!(recorded.len(), 3);
    let mut total = 0;
    for (r, f) in recorded.iter().zip(&files) {
        assert_eq!(r["path"], f.display().to_string());
        assert_eq!(r["size_bytes"].as_u64(), Some(std::fs::metadata(f).unwrap().len()));
        assert_eq!(r["sha256"].as_str(), Some(sha256_of(f).as_str()));
        total += std::fs::metadata(f).unwrap().len();
    }
    assert_eq!(model["size_bytes"].as_u64(), Some(total));
    // One identity for the whole model, as docs/RUN_FORMAT.md defines it.
    let listed: String = files.iter().map(|f| format!("{}\n", sha256_of(f))).collect();
    let identity: String = Sha256::digest(format!("split:\n{listed}").as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(model["sha256"].as_str(), Some(identity.as_str()));
    assert_ne!(model["sha256"], whole["manifest"]["model"]["sha256"]);
    // Named as the file it was split from.
    assert_eq!(model["build"], "SmolLM2-135M-Instruct.Q4_1.gguf");
    assert!(whole["manifest"]["model"].get("parts").is_none(), "a whole file lists no parts");

    // The rest of the run file is the whole file's: the same answers, scores,
    // forced log-probabilities and settings.
    let (mut a, mut b) = (without_timings(split.clone()), without_timings(whole.clone()));
    for m in [&mut a, &mut b] {
        let model = m["manifest"]["model"].as_object_mut().unwrap();
        for k in ["path", "sha256", "size_bytes", "parts"] {
            model.remove(k);
        }
    }
    assert_eq!(a, b, "the split model's run differs from the whole file's beyond the model's file record");

    // Measured against the whole file's distributions, the split model
    // diverges by nothing (the same weights), and the run says that the
    // reference came from another model file.
    let reference = dir.path().join("whole.ref");
    let forced = [&small[..], &["--forced-only", "-q"]].concat();
    ok(&posrecall(&[&["bench", s(&smollm2())][..], &forced, &["--save-reference", s(&reference)]].concat()));
    let out = dir.path().join("measured.json");
    let o = posrecall(&[&["bench", s(&first)][..], &forced, &["--reference", s(&reference), "-o", s(&out)]].concat());
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("note: the reference was made by another model file (SmolLM2-135M-Instruct.Q4_1.gguf"), "{err}");
    let measured = read(&out);
    assert_eq!(measured["manifest"]["reference"]["model_sha256"], whole["manifest"]["model"]["sha256"]);
    for t in measured["targets"].as_array().unwrap() {
        assert_eq!(t["forced"]["kld"]["mean"].as_f64(), Some(0.0), "{}", t["forced"]["kld"]);
    }
}

#[test]
fn a_missing_foreign_or_misnamed_part_is_named_before_anything_loads() {
    let first = split_smollm2();
    let files = parts(&first);
    let models = tempfile::tempdir().unwrap();
    let link = |from: &Path, name: &str| std::os::unix::fs::symlink(from, models.path().join(name)).unwrap();
    let names: Vec<String> = files.iter().map(|f| f.file_name().unwrap().to_string_lossy().into_owned()).collect();
    let first_here = models.path().join(&names[0]);
    let out = tempfile::tempdir().unwrap();
    let bench = |model: &Path| {
        let o = out.path().join("run.json");
        posrecall(&["bench", s(model), "--count", "1", "-o", s(&o)])
    };

    // Part 2 missing.
    link(&files[0], &names[0]);
    link(&files[2], &names[2]);
    let o = bench(&first_here);
    assert_clean_failure(
        &o,
        out.path(),
        &format!("part 2 of 3 of the split model, {}, is missing", models.path().join(&names[1]).display()),
    );

    // Part 3 is another part under its name.
    std::fs::remove_file(models.path().join(&names[2])).unwrap();
    link(&files[1], &names[1]);
    link(&files[1], &names[2]);
    let o = bench(&first_here);
    assert_clean_failure(&o, out.path(), "does not belong to this split model: it says it is part 2 of 3, not part 3 of 3");

    // Part 3 cut short (a download that stopped): named, not the first part.
    std::fs::remove_file(models.path().join(&names[2])).unwrap();
    let whole = std::fs::read(&files[2]).unwrap();
    std::fs::write(models.path().join(&names[2]), &whole[..whole.len() / 2]).unwrap();
    let o = bench(&first_here);
    assert_clean_failure(
        &o,
        out.path(),
        &format!(
            "could not load part 3 of 3 of the split model, {}: it is cut short (its tensors end at byte {}, the file has {})",
            models.path().join(&names[2]).display(),
            whole.len(),
            whole.len() / 2
        ),
    );

    // Part 3 whole, in place, and holding a tensor this model does not have
    // (one name changed): llama.cpp names no part, so the message says the
    // split model and its other parts.
    let mut foreign = whole.clone();
    let at = foreign.windows(4).position(|w| w == b"blk.").unwrap();
    foreign[at..at + 4].copy_from_slice(b"blq.");
    std::fs::write(models.path().join(&names[2]), &foreign).unwrap();
    let o = bench(&first_here);
    assert_clean_failure(
        &o,
        out.path(),
        &format!("could not load the split model {} or one of its other 2 parts (a part from another model", first_here.display()),
    );

    // A part other than the first.
    let o = bench(&files[1]);
    assert_clean_failure(&o, out.path(), &format!("is part 2 of 3 of a split model; give its first part, {}", files[0].display()));

    // A first part whose name llama.cpp cannot find the others by.
    link(&files[0], "renamed.gguf");
    let o = bench(&models.path().join("renamed.gguf"));
    assert_clean_failure(&o, out.path(), "its name does not end in -00001-of-00003.gguf");

    // `prompt` reads the same parts.
    let o = posrecall(&["prompt", s(&files[2]), "--target", "x"]);
    assert_clean_failure(&o, out.path(), "is part 3 of 3 of a split model");
}
