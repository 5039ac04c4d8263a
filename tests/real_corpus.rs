//! The real default corpus (lodash 4.17.21's `lodash.js`) through the built
//! binary: the default 16 targets, their ground truth checked against the file
//! read independently, and a perfect answer set scored.
//!
//! The corpus is fetched by `scripts/env/fetch-corpus` into the cache folder
//! (`$POSRECALL_CACHE`, else `$XDG_CACHE_HOME/posrecall`, else
//! `~/.cache/posrecall`). Without it these tests fail; they never skip.

use crate::common;

use common::{lodash, ok, posrecall, s};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::Path;

/// sha256 of lodash 4.17.21's `lodash.js`, as pinned in `scripts/env/fetch-corpus`.
const LODASH_SHA256: &str = "4c04561befdf653aef017a42ac5addf68ea943cdfca6bdee5ce04e04e8139f54";

/// Runs the binary and returns its stdout, failing on an error.
fn run(args: &[&str]) -> String {
    ok(&posrecall(args))
}

fn default_targets(corpus: &Path) -> Value {
    serde_json::from_str(&run(&["targets", s(corpus), "--json"])).expect("targets --json prints JSON")
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().unwrap().iter().map(|l| l.as_str().unwrap().to_string()).collect()
}

#[test]
fn default_corpus_is_the_pinned_lodash() {
    let bytes = std::fs::read(lodash()).unwrap();
    let sha: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(sha, LODASH_SHA256, "the cached corpus is not lodash 4.17.21: rerun scripts/env/fetch-corpus");
}

#[test]
fn sixteen_targets_spread_over_every_depth_quarter() {
    let file = default_targets(&lodash());
    let targets = file["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 16);
    assert_eq!(file["corpus"]["sha256"], LODASH_SHA256);
    assert_eq!(file["corpus"]["crop"]["first_line"], 1);
    assert_eq!(file["corpus"]["crop"]["last_line"], 17209);
    let mut quarters = [0usize; 4];
    for t in targets {
        let d = t["depth"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&d), "{}: depth {d}", t["name"]);
        quarters[((d * 4.0) as usize).min(3)] += 1;
    }
    assert!(quarters.iter().all(|&q| q >= 1), "targets per depth quarter: {quarters:?}");
    let lines: Vec<u64> = targets.iter().map(|t| t["line"].as_u64().unwrap()).collect();
    assert!(lines.windows(2).all(|w| w[0] < w[1]), "file order: {lines:?}");
}

#[test]
fn expected_lines_are_the_lines_after_the_brace_line() {
    let path = lodash();
    let text = std::fs::read_to_string(&path).unwrap();
    let file_lines: Vec<&str> = text.lines().collect();
    let file = default_targets(&path);
    for t in file["targets"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        let line = t["line"].as_u64().unwrap() as usize; // 1-based declaration line
        let header = t["header"].as_str().unwrap();
        let header_lines: Vec<&str> = header.split('\n').collect();
        // The header is the file's text from the declaration line on, through the brace.
        for (k, h) in header_lines.iter().enumerate() {
            let actual = file_lines[line - 1 + k];
            if k + 1 < header_lines.len() {
                assert_eq!(actual, *h, "{name}: header line {k}");
            } else {
                assert!(actual.starts_with(h), "{name}: {actual:?} does not start with {h:?}");
            }
        }
        assert!(header.ends_with('{'), "{name}: {header:?}");
        assert!(header_lines[0].contains(&format!("function {name}(")), "{name}: {header:?}");
        let byte_offset = t["byte_offset"].as_u64().unwrap() as usize;
        let line_start: usize = file_lines[..line - 1].iter().map(|l| l.len() + 1).sum();
        assert_eq!(&text[line_start..line_start + header.len()], header, "{name}: line/header/byte offset disagree");
        assert!(byte_offset >= line_start && byte_offset < line_start + header.len(), "{name}");

        let brace = line - 1 + header_lines.len() - 1;
        let want: Vec<String> = file_lines[brace + 1..brace + 21].iter().map(|l| l.to_string()).collect();
        assert_eq!(strings(&t["expected"]), want, "{name}: expected lines");
        let extra: Vec<String> = file_lines[brace + 21..brace + 41].iter().map(|l| l.to_string()).collect();
        assert_eq!(strings(&t["extra_window"]), extra, "{name}: extra window");
    }
}

#[test]
fn scoring_the_expected_lines_gives_sixteen_passes() {
    let path = lodash();
    let dir = tempfile::TempDir::new().unwrap();
    let file = default_targets(&path);
    let tpath = dir.path().join("targets.json");
    std::fs::write(&tpath, serde_json::to_string(&file).unwrap()).unwrap();
    let responses: String = file["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let response = strings(&t["expected"]).join("\n");
            serde_json::json!({"name": t["name"], "response": response}).to_string() + "\n"
        })
        .collect();
    let rpath = dir.path().join("responses.jsonl");
    std::fs::write(&rpath, responses).unwrap();
    let out = dir.path().join("run.json");
    let printed = run(&["score", s(&tpath), s(&rpath), "--out", s(&out), "--quiet"]);
    let run: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let sum = &run["summary"];
    assert_eq!((sum["passes"].as_u64(), sum["count"].as_u64()), (Some(16), Some(16)), "{sum}");
    assert_eq!(sum["matched"], 320, "{sum}");
    for key in ["missing", "truncated", "hallucinated", "extra"] {
        assert_eq!(sum[key], 0, "summary.{key}: {sum}");
    }
    assert!(printed.starts_with("16/16 passed, 320 matched"), "{printed}");
}
