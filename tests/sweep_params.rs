//! Sweeps: `[params]` switches that reach every run, and the error when no
//! one kept range fits every model.

use crate::common;

use common::*;
use posrecall::bench::plan::{NoSharedRange, plan_shared};
use posrecall::corpus::Source;
use posrecall::engine::model;
use posrecall::prompt::Probe;
use posrecall::targets::crop::CropMode;

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
