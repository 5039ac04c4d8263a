//! llama-perplexity's KL-divergence statistics (`summary.forced.kld.stats`,
//! per run and per depth quarter) against numpy's, recomputed by
//! `scripts/oracles/kld-stats` from the per-token values the run file keeps,
//! on a real SmolLM2 run measured against a reference with another KV type.

use crate::common;

use common::*;
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

/// 4 targets of 8 lines in lines 1..100 of dense.js, one per depth quarter,
/// forced pass only (as tests/kld.rs).
const SMALL: &[&str] = &["--count", "4", "--lines", "8", "--crop-lines", "1:100", "--forced-only", "--threads", "2"];

fn bench(extra: &[&str]) -> String {
    let corpus = fixture("dense.js");
    ok(&posrecall(&[&["bench", s(&smollm2()), "--corpus", s(&corpus)], SMALL, extra].concat()))
}

/// What numpy makes of a run file: `{"all": FIGURES, "quarters": [...]}`.
fn oracle(run: &Path) -> Value {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/oracles/kld-stats");
    let o = Command::new(&script).arg(run).output().expect("bash runs scripts/oracles/kld-stats");
    assert!(o.status.success(), "kld-stats failed: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The run file's statistics as the oracle names them (`kld.p99_9` as `kld_p99_9`).
fn flattened(stats: &Value) -> Map<String, Value> {
    let mut out = Map::new();
    for (k, v) in stats.as_object().unwrap() {
        match v.as_object() {
            Some(inner) => out.extend(inner.iter().map(|(k2, x)| (format!("{k}_{k2}"), x.clone()))),
            None => {
                out.insert(k.clone(), v.clone());
            }
        }
    }
    out
}

/// Every figure equal to numpy's within 1e-9 relative (1e-15 absolute for
/// values at 0, where the two interpolations may cancel differently).
fn assert_same(ours: &Value, numpy: &Value, scope: &str) {
    let (ours, numpy) = (flattened(ours), numpy.as_object().unwrap());
    let names = |m: &Map<String, Value>| m.keys().cloned().collect::<Vec<_>>();
    assert_eq!(names(&ours), names(numpy), "{scope}: the figures themselves");
    for (name, x) in &ours {
        let (x, y) = (x.as_f64().unwrap(), numpy[name].as_f64().unwrap());
        assert!((x - y).abs() <= 1e-9 * x.abs().max(y.abs()) + 1e-15, "{scope} {name}: posrecall {x}, numpy {y}");
    }
}

#[test]
fn llama_perplexity_statistics_equal_numpys_on_the_stored_tokens() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).display().to_string();
    bench(&["--kv", "f16", "--save-reference", &p("ref"), "--out", &p("base.json"), "--quiet"]);
    let shown = bench(&["--kv", "q4_0", "--reference", &p("ref"), "--out", &p("q4.json")]);
    let run = read(Path::new(&p("q4.json")));
    let numpy = oracle(Path::new(&p("q4.json")));

    let forced = &run["summary"]["forced"];
    let stats = &forced["kld"]["stats"];
    assert_same(stats, &numpy["all"], "run");
    let quarters = forced["kld_by_quarter"].as_array().unwrap();
    for (q, k) in quarters.iter().enumerate() {
        assert_same(&k["stats"], &numpy["quarters"][q], &format!("quarter {q}"));
    }
    // q4_0 against f16 moves the distributions: the figures are not all 0,
    // and some top token changed, so the standard errors are exercised.
    let n = stats["tokens"].as_u64().unwrap();
    assert!(n > 100 && stats["kld"]["mean_se"].as_f64().unwrap() > 0.0, "{stats}");
    assert!(stats["same_top_p"].as_f64().unwrap() < 1.0 && stats["delta_p_rms_se"].as_f64().unwrap() > 0.0, "{stats}");
    // The older figures keep their values beside them.
    let k = &forced["kld"];
    assert_eq!(k["mean"], stats["kld"]["mean"]);
    assert!((k["same_top1"].as_f64().unwrap() - stats["same_top_p"].as_f64().unwrap()).abs() < 1e-12);

    // The terminal gives the headline figures; the exports the rest.
    let mean = stats["kld"]["mean"].as_f64().unwrap();
    let line = shown.lines().find(|l| l.starts_with("against the reference: ")).unwrap_or_else(|| panic!("{shown}"));
    assert!(line.contains(&format!("KLD mean {mean:.5} ± ")) && line.contains("same top p") && line.contains("RMS Δp"), "{line}");
    let csv = ok(&posrecall(&["report", &p("base.json"), &p("q4.json"), "--format", "csv"]));
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let header = reader.headers().unwrap().clone();
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no {name} column: {csv}"));
    assert_eq!(&rows[0][col("stats_kld_p99_9")], "", "no reference, no statistics: {csv}");
    for (name, v) in flattened(stats) {
        let got: f64 = rows[1][col(&format!("stats_{name}"))].parse().unwrap();
        assert_eq!(got, v.as_f64().unwrap(), "csv {name}");
    }
    let json: Value = serde_json::from_str(&ok(&posrecall(&["report", &p("q4.json"), "--format", "json"]))).unwrap();
    assert_eq!(&json["runs"][0]["kld"]["stats"], stats);
    assert_eq!(&json["runs"][0]["kld_by_quarter"], &forced["kld_by_quarter"]);
    let md = ok(&posrecall(&["report", &p("q4.json"), "--format", "md"]));
    assert!(md.contains("as llama-perplexity reports it") && md.contains("| 99.9% |") && md.contains("same top p %"), "{md}");
    assert!(md.contains(&format!("| {mean:.6} |")), "{md}");
    let html = dir.path().join("r.html");
    ok(&posrecall(&["report", &p("q4.json"), "--format", "html", "--out", s(&html)]));
    assert!(std::fs::read_to_string(&html).unwrap().contains("as llama-perplexity reports it"));
    // compare, of two runs against one reference: each side's figures.
    bench(&["--kv", "q8_0", "--reference", &p("ref"), "--out", &p("q8.json"), "--quiet"]);
    let text = ok(&posrecall(&["compare", &p("q8.json"), &p("q4.json")]));
    assert!(
        text.contains("against the reference A: KLD mean") && text.contains(&format!("against the reference B: KLD mean {mean:.5}")),
        "{text}"
    );
    let c: Value = serde_json::from_str(&ok(&posrecall(&["compare", &p("q8.json"), &p("q4.json"), "--json"]))).unwrap();
    assert_eq!(&c["b"]["kld"]["stats"], stats);
}
