//! Sweeps: `[params]` switches that reach every run, the error when no
//! one kept range fits every model, and a sweep file's lists writing the
//! run files a `bench` list writes.

use crate::common;

use common::*;
use posrecall::bench::plan::{NoSharedRange, plan_shared};
use posrecall::corpus::Source;
use posrecall::engine::model;
use posrecall::prompt::Probe;
use posrecall::targets::crop::CropMode;
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;

#[test]
fn closed_book_and_rename_in_params_reach_every_run() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let toml = format!(
        "[corpus]\npath = {:?}\ncrop_lines = \"1:150\"\n[params]\ncount = 2\nlines = 5\nmax_new_tokens = 8\nthreads = 2\n\
         closed_book = true\nrename = true\nseed = 5\n[[model]]\nname = \"s\"\npath = {:?}\nkv = [\"f16\"]\n",
        s(&fixture("dense.js")),
        s(&smollm2()),
    );
    let path = dir.path().join("m.toml");
    std::fs::write(&path, toml).unwrap();
    let out = dir.path().join("runs");
    ok(&posrecall(&["matrix", s(&path), "--out-dir", s(&out), "--quiet"]));
    let run = read(&out.join("s__f16-f16.json"));
    // Renamed with the sweep's seed: the functions asked about are not in
    // the file as written.
    assert_eq!(run["manifest"]["corpus"]["rename"]["seed"], 5);
    let original = std::fs::read_to_string(fixture("dense.js")).unwrap();
    for t in run["targets"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        assert!(!original.contains(&format!("function {name}(")), "{name} was not renamed");
        // Closed book: asked again without the file, and recorded.
        assert!(t["closed_book"]["response"].is_string(), "{name}");
        let with = t["matched"].as_i64().unwrap();
        let without = t["closed_book"]["matched"].as_i64().unwrap();
        assert_eq!(t["context_matched"].as_i64().unwrap(), with - without, "{name}");
    }
    assert!(run["summary"]["closed_book"].is_object());
}

#[test]
fn no_range_that_fits_every_model_is_a_clear_error() {
    let _g = serial();
    let src = Source::open(&fixture("dense.js")).unwrap();
    let (s, g) = (model::load(&smollm2(), 0).unwrap(), model::load(&gemma3(), 0).unwrap());
    // SmolLM2 keeps a small window with one function; Gemma needs four
    // functions, which that window does not hold, and keeps a range larger
    // than SmolLM2's cap: no range serves both.
    let mut small = plan_options(target_spec(1, 10, None), 16, Probe::Auto);
    small.crop = CropMode::Densest;
    small.max_prefix_tokens = Some(400);
    let large = plan_options(target_spec(4, 10, None), 16, Probe::Auto);
    let e = plan_shared(&[&s, &g], &["small", "large"], &src, &[small, large], &posrecall::support::progress::Quiet)
        .err()
        .expect("no shared range");
    let msg = format!("{e:#}");
    assert!(e.downcast_ref::<NoSharedRange>().is_some(), "{msg}");
    assert!(msg.contains("no one range of lines fits every model"), "{msg}");
    assert!(msg.contains("`small`") && msg.contains("`large`"), "names the models: {msg}");
}

/// A run file as `scripts/dev/run-identity` compares it: without `timings`,
/// any `*_ms` and `prefill_tok_s` (the measured times, the only fields
/// that differ between two runs of one binary), and with the output folder
/// it was written in named `DIR`.
fn as_compared(path: &Path, out_dir: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap().replace(s(out_dir), "DIR");
    without_timings(serde_json::from_str(&text).unwrap())
}

/// `v` without its reference parts: the reference a run was measured
/// against (`reference`) and what was measured (`kld`, `kld_by_quarter`, …).
fn without_reference(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|k, _| !(k == "reference" || k.starts_with("kld")));
            map.values_mut().for_each(without_reference);
        }
        Value::Array(items) => items.iter_mut().for_each(without_reference),
        _ => {}
    }
}

/// A `models.toml` that spells a `bench` list (a KV list and a list of
/// context sizes) writes the run files the command line writes: the same
/// files, each the same once compared as `scripts/dev/run-identity`
/// compares runs. One part differs by design, in the second context size's
/// runs only: a `bench` list measures every run against its first run's
/// reference, a sweep file each entry against its own `reference_kv` run,
/// so there the sweep's f16 run saves a reference where bench's is
/// measured, and its q8_0 run names another reference file; those runs are
/// compared without their reference parts. The first context size's runs
/// are compared whole, and the reference file both made byte for byte.
#[test]
fn a_models_toml_list_writes_the_run_files_of_the_bench_list() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let (sweep_out, bench_out) = (dir.path().join("sweep"), dir.path().join("bench"));
    let model = smollm2();
    let stem = model.file_stem().unwrap().to_str().unwrap().to_string();
    let toml = format!(
        "[corpus]\npath = {:?}\ncrop = \"densest\"\nmax_tokens = 300\n[params]\ncount = 1\nlines = 4\nmax_new_tokens = 8\nthreads = 2\n\
         [[model]]\nname = {stem:?}\npath = {:?}\nkv = [\"f16\", \"q8_0\"]\nctx = [1024, 2048]\nreference_kv = \"f16\"\n",
        s(&fixture("dense.js")),
        s(&model),
    );
    let path = dir.path().join("models.toml");
    std::fs::write(&path, toml).unwrap();
    ok(&posrecall(&["matrix", s(&path), "--out-dir", s(&sweep_out), "--quiet"]));
    ok(&posrecall(&[
        "bench",
        s(&model),
        "--corpus",
        s(&fixture("dense.js")),
        "--crop",
        "densest",
        "--max-prefix-tokens",
        "300",
        "--count",
        "1",
        "--lines",
        "4",
        "--max-new-tokens",
        "8",
        "--threads",
        "2",
        "--kv",
        "f16,q8_0",
        "--ctx",
        "1024,2048",
        "--out-dir",
        s(&bench_out),
        "--quiet",
    ]));
    let runs = |d: &Path| -> BTreeSet<String> {
        let names = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned());
        names.filter(|n| n.ends_with(".json")).collect()
    };
    let expected: BTreeSet<String> = ["ctx_1024__f16-f16", "ctx_1024__q8_0-q8_0", "ctx_2048__f16-f16", "ctx_2048__q8_0-q8_0"]
        .iter()
        .map(|r| format!("{stem}-{r}.json"))
        .collect();
    assert_eq!(runs(&sweep_out), expected);
    assert_eq!(runs(&bench_out), expected);
    for name in &expected {
        let (mut ours, mut bench) = (as_compared(&sweep_out.join(name), &sweep_out), as_compared(&bench_out.join(name), &bench_out));
        if name.contains("ctx_2048") {
            without_reference(&mut ours);
            without_reference(&mut bench);
        }
        assert!(ours == bench, "{name} differs:\n{}\n{}", serde_json::to_string(&ours).unwrap(), serde_json::to_string(&bench).unwrap());
    }
    let reference = format!("{stem}-ctx_1024__f16-f16.ref");
    assert_eq!(std::fs::read(sweep_out.join(&reference)).unwrap(), std::fs::read(bench_out.join(&reference)).unwrap());
}
