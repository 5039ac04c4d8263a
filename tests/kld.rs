//! KL divergence against a reference run (`bench --save-reference`,
//! `--reference`) and the context's own contribution (`--closed-book`), on
//! the real SmolLM2 and Gemma 3 models.

use crate::common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// 4 targets of 8 lines in lines 1..100 of dense.js (863 tokens), one per
/// depth quarter, forced pass only.
const SMALL: &[&str] = &["--count", "4", "--lines", "8", "--crop-lines", "1:100", "--forced-only"];

fn bench(model: &Path, corpus: &str, extra: &[&str]) -> Output {
    Command::new(bin())
        .arg("bench")
        .arg(model)
        .args(["--corpus", &fixture(corpus).display().to_string(), "--threads", "2", "--quiet"])
        .args(extra)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn kld(run: &Value, i: usize) -> &Value {
    &run["targets"][i]["forced"]["kld"]
}

fn tokens(v: &Value) -> Vec<f64> {
    v["tokens"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect()
}

#[test]
fn reference_divergence_is_zero_for_itself_and_grows_with_coarser_kv() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).display().to_string();
    let m = smollm2();
    ok(&bench(&m, "dense.js", &[SMALL, &["--kv", "f16", "--save-reference", &p("ref"), "--out", &p("base.json")]].concat()));
    assert!(dir.path().join("ref.sha256").exists());
    let base = read(&dir.path().join("base.json"));
    assert!(base["targets"][0]["forced"].get("kld").is_none(), "a saving run compares with nothing");

    // The same command and settings: exactly zero at every token.
    ok(&bench(&m, "dense.js", &[SMALL, &["--kv", "f16", "--reference", &p("ref"), "--out", &p("same.json")]].concat()));
    let same = read(&dir.path().join("same.json"));
    let mut forced_tokens = 0;
    for i in 0..4 {
        let k = kld(&same, i);
        let t = tokens(k);
        assert_eq!(t.len(), same["targets"][i]["forced"]["tokens"].as_u64().unwrap() as usize);
        assert!(t.iter().all(|&x| x == 0.0), "{}: {t:?}", same["targets"][i]["name"]);
        assert_eq!((k["mean"].as_f64(), k["max"].as_f64()), (Some(0.0), Some(0.0)));
        assert_eq!(k["same_top1"].as_f64(), Some(1.0));
        assert_eq!(k["mean_delta_p"].as_f64(), Some(0.0));
        // The forced token's own probability, kept in the reference, is this run's too.
        assert!(k["token_delta_p"].as_array().unwrap().iter().all(|d| d.as_f64() == Some(0.0)), "{k}");
        assert_eq!(k["token_delta_p"].as_array().unwrap().len(), t.len());
        assert_eq!(k["top_changed"].as_array().map(Vec::len), Some(0), "{k}");
        forced_tokens += t.len();
        // The forced readings themselves are the reference run's.
        assert_eq!(same["targets"][i]["forced"]["mean_logprob"], base["targets"][i]["forced"]["mean_logprob"]);
    }
    let summary = &same["summary"]["forced"]["kld"];
    assert_eq!(summary["tokens"].as_u64().unwrap() as usize, forced_tokens);
    assert_eq!(summary["mean"].as_f64(), Some(0.0));
    let stats = &summary["stats"];
    assert_eq!(stats["tokens"].as_u64().unwrap() as usize, forced_tokens);
    for figure in [&stats["kld"]["max"], &stats["kld"]["mean_se"], &stats["delta_p"]["min"], &stats["delta_p_rms"], &stats["same_top_p_se"]]
    {
        assert_eq!(figure.as_f64(), Some(0.0), "{stats}");
    }
    assert_eq!(stats["same_top_p"].as_f64(), Some(1.0));
    let reference = &same["manifest"]["reference"];
    assert_eq!(reference["type_k"], "f16");
    assert_eq!(reference["top_k"], 256);
    assert_eq!(reference["sha256"].as_str().unwrap(), std::fs::read_to_string(p("ref.sha256")).unwrap().trim());

    // Coarser KV types move the distributions, q4_0 more than q8_0: the
    // figures of docs/GUIDE.md, "KV precision against a reference", read
    // from there: the forced tokens, the tolerance, then for the AVX-512
    // kernels and for the AVX2 ones the mean nats per token and the share
    // of the same top-1 (in %) for q8_0 and q4_0. The kernels that ran pick
    // the set.
    let stated = doc_numbers("docs/GUIDE.md", "Measured\non SmolLM2 over 4 targets of `tests/fixtures/dense.js`");
    assert_eq!(stated.len(), 10, "docs/GUIDE.md's KLD figures are not the ten numbers this test reads: {stated:?}");
    let (tokens_stated, tolerance) = (stated[0], stated[1]);
    let kernels = same["manifest"]["runtime"]["cpu_features"].as_array().unwrap();
    let set = if kernels.iter().any(|f| f == "AVX512") { &stated[2..6] } else { &stated[6..10] };
    let [q8_mean, q8_top1, q4_mean, q4_top1] = set[..] else { unreachable!() };
    assert_eq!(forced_tokens as f64, tokens_stated, "docs/GUIDE.md's count of forced tokens");
    assert_eq!(tolerance, 25.0, "docs/GUIDE.md states the tolerance the test holds");
    let mut means = Vec::new();
    for (kv, readme_mean, readme_top1) in [("q8_0", q8_mean, q8_top1 / 100.0), ("q4_0", q4_mean, q4_top1 / 100.0)] {
        let out = p(&format!("{kv}.json"));
        ok(&bench(&m, "dense.js", &[SMALL, &["--kv", kv, "--reference", &p("ref"), "--out", &out]].concat()));
        let r = read(Path::new(&out));
        let s = &r["summary"]["forced"]["kld"];
        let mean = s["mean"].as_f64().unwrap();
        assert!(mean > 0.0, "{kv}: {s}");
        assert!((mean / readme_mean - 1.0).abs() <= 0.25, "{kv}: mean KLD {mean}, docs/GUIDE.md says {readme_mean} (±25%)");
        let top1 = s["same_top1"].as_f64().unwrap();
        assert!((top1 - readme_top1).abs() <= 0.02, "{kv}: same top-1 {top1}, docs/GUIDE.md says {readme_top1}");
        assert!(s["p99"].as_f64().unwrap() >= mean && s["max"].as_f64().unwrap() >= s["p99"].as_f64().unwrap());
        // Per line: the mean over its tokens, and the target mean is their token-weighted mean.
        for i in 0..4 {
            let k = kld(&r, i);
            let t = tokens(k);
            assert!((t.iter().sum::<f64>() / t.len() as f64 - k["mean"].as_f64().unwrap()).abs() < 1e-6);
            assert_line_means(&r["targets"][i], &m);
        }
        let quarters = r["summary"]["forced"]["kld_by_quarter"].as_array().unwrap();
        assert_eq!(quarters.iter().filter(|q| !q.is_null()).count(), 4, "one target per quarter");
        means.push(mean);
    }
    assert!(means[1] > means[0], "q4_0 {} should diverge more than q8_0 {}", means[1], means[0]);

    // Reports: the table's KLD columns, the chart, and the paired test.
    let (q8, q4) = (p("q8_0.json"), p("q4_0.json"));
    let table = ok(&posrecall(&["report", &q8, &q4]));
    for col in ["KLD mean", "KLD p99", "same top-1", "reference"] {
        assert!(table.contains(col), "{col} missing from:\n{table}");
    }
    assert!(table.contains(&format!("{:.5}", means[1])), "{table}");
    // CSV: one header for a reference run and runs measured against it,
    // every row with every column, the divergence empty where there is none.
    let csv = ok(&posrecall(&["report", &p("base.json"), &q8, &q4, "--format", "csv"]));
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let header = reader.headers().unwrap().clone();
    let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 3, "{csv}");
    assert!(rows.iter().all(|r| r.len() == header.len()), "{csv}");
    let col = |name: &str| header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no {name} column: {csv}"));
    assert_eq!(&rows[0][col("kld_mean")], "", "{csv}");
    for (row, mean) in rows[1..].iter().zip(&means) {
        let got: f64 = row[col("kld_mean")].parse().unwrap();
        assert!((got - mean).abs() <= 1e-12 * mean.max(1.0), "{got} vs {mean}");
        assert!(row[col("kld_tokens")].parse::<usize>().unwrap() > 0 && row[col("reference")].contains("f16/f16"), "{csv}");
    }
    let html = dir.path().join("r.html");
    ok(&posrecall(&["report", &q8, &q4, "--format", "html", "--out", s(&html)]));
    assert!(std::fs::read_to_string(&html).unwrap().contains("id=\"chart-kld\""));
    let verdict = ok(&posrecall(&["compare", &q8, &q4]));
    assert!(verdict.contains("KL divergence: B is farther from the reference"), "{verdict}");
    let json: Value = serde_json::from_str(&ok(&posrecall(&["compare", &q8, &q4, "--json"]))).unwrap();
    assert_eq!(json["wilcoxon_kld"]["n"], 4);
    // Runs measured against different references are not compared on KLD.
    let base_json = p("base.json");
    let v: Value = serde_json::from_str(&ok(&posrecall(&["compare", &base_json, &q4, "--json"]))).unwrap();
    assert!(v.get("wilcoxon_kld").is_none());
}

#[test]
fn the_stored_top_k_bounds_the_full_vocabulary_divergence() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).display().to_string();
    let m = smollm2();
    let one = [SMALL, &["--only", "formatDuration"]].concat();
    // The whole vocabulary (49,152 tokens) at every position: the exact divergence.
    ok(&bench(&m, "dense.js", &[&one[..], &["--kv", "f16", "--save-reference", &p("full"), "--reference-top-k", "1000000"]].concat()));
    ok(&bench(&m, "dense.js", &[&one[..], &["--kv", "f16", "--save-reference", &p("top")]].concat()));
    ok(&bench(&m, "dense.js", &[&one[..], &["--kv", "q4_0", "--reference", &p("full"), "--out", &p("exact.json")]].concat()));
    ok(&bench(&m, "dense.js", &[&one[..], &["--kv", "q4_0", "--reference", &p("top"), "--out", &p("bound.json")]].concat()));
    let exact = read(&dir.path().join("exact.json"));
    let bound = read(&dir.path().join("bound.json"));
    assert_eq!(exact["manifest"]["reference"]["top_k"], 49152);
    let (e, b) = (tokens(kld(&exact, 0)), tokens(kld(&bound, 0)));
    assert_eq!(e.len(), b.len());
    for (i, (x, y)) in e.iter().zip(&b).enumerate() {
        assert!(y <= &(x + 1e-6), "token {i}: the top-256 figure {y} is above the exact {x}");
    }
    let (em, bm) = (kld(&exact, 0)["mean"].as_f64().unwrap(), kld(&bound, 0)["mean"].as_f64().unwrap());
    // Measured 1.81% below on this target (escapeHtml: 1.9%, docs/METHOD.md);
    // a bound that loosened past 2.5% would no longer be docs/GUIDE.md's figure.
    assert!(em > 0.0 && (em - bm) / em < 0.025, "exact {em}, top-256 {bm}: the bound should be within 2.5%");
}

#[test]
fn a_reference_for_other_settings_or_damaged_is_refused() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).display().to_string();
    let m = smollm2();
    let only = [SMALL, &["--only", "formatDuration"]].concat();
    ok(&bench(&m, "dense.js", &[&only[..], &["--kv", "f16", "--save-reference", &p("ref")]].concat()));
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let out = out_dir.join("run.json").display().to_string();
    let reference = p("ref");
    let refuse = |model: &Path, extra: &[&str], needle: &str| {
        let args = [extra, &["--reference", &reference, "--out", &out]].concat();
        assert_clean_failure(&bench(model, "dense.js", &args), &out_dir, needle);
    };
    fn with<'a>(crop: &'a str, lines: &'a str) -> [&'a str; 7] {
        ["--count", "4", "--lines", lines, "--crop-lines", crop, "--forced-only"]
    }
    refuse(&m, &with("1:90", "8"), "it kept other lines of the corpus (lines 1..100, this run keeps lines 1..90)");
    refuse(&m, &with("1:100", "9"), "it asked for 8 lines per target, this run for 9");
    refuse(&m, SMALL, "has no target named `");
    refuse(&m, &[&only[..], &["--probe", "completion"]].concat(), "it used the chat probe, this run the completion probe");
    refuse(&gemma3(), &only, "another vocabulary (49152 tokens, against 262144 here)");
    refuse(&m, &["--count", "4", "--lines", "8", "--only", "formatDuration", "--no-forced"], "drop --no-forced");

    // Another build of the same model is accepted: llama-quantize's Q8_0 of
    // the Q4_1 file (scripts/env/quantize) has the same vocabulary and other
    // weights, so it is measured against the Q4_1 run's reference, with a
    // note that the divergence measures the two builds too.
    let requantised = tool_test_model("quantize").unwrap_or_else(|e| panic!("{e}"));
    let o = bench(&requantised, "dense.js", &[&only[..], &["--kv", "f16", "--reference", &reference, "--out", &out]].concat());
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("note: the reference was made by another model file (SmolLM2-135M-Instruct.Q4_1"), "{err}");
    let r = read(Path::new(&out));
    assert_eq!(r["manifest"]["model"]["file_type"], "Q8_0", "{}", r["manifest"]["model"]);
    assert_eq!(r["manifest"]["reference"]["build"], "SmolLM2-135M-Instruct.Q4_1.gguf", "{}", r["manifest"]["reference"]);
    assert_ne!(r["manifest"]["reference"]["model_sha256"], r["manifest"]["model"]["sha256"]);
    let k = kld(&r, 0);
    assert_eq!(tokens(k).len(), r["targets"][0]["forced"]["tokens"].as_u64().unwrap() as usize);
    // Other weights: the distributions move.
    assert!(k["mean"].as_f64().unwrap() > 0.0, "{k}");
    std::fs::remove_file(&out).unwrap();

    // One flipped byte, then no sidecar: refused before the model is loaded.
    let mut bytes = std::fs::read(p("ref")).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(p("ref"), &bytes).unwrap();
    refuse(&m, &only, "does not match");
    std::fs::remove_file(p("ref.sha256")).unwrap();
    refuse(&m, &only, "no checksum file");
    // Not a reference at all, with a checksum that vouches for it.
    std::fs::write(p("ref"), "{}\n").unwrap();
    std::fs::write(p("ref.sha256"), format!("{}\n", posrecall::support::fsutil::sha256_hex(b"{}\n"))).unwrap();
    refuse(&m, &only, "not a posrecall reference file");
}

#[test]
fn the_file_in_context_raises_the_forced_pass_on_invented_code() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    // Lines 1..100 (about 2,100 tokens) hold 4 functions of 8 lines.
    let args = [
        "--count",
        "4",
        "--lines",
        "8",
        "--crop-lines",
        "1:100",
        "--forced-only",
        "--closed-book",
        "--kv",
        "f16",
        "--out",
        out.to_str().unwrap(),
    ];
    ok(&bench(&smollm2(), "distinct.js", &args));
    let r = read(&out);
    let mut gains = Vec::new();
    for t in r["targets"].as_array().unwrap() {
        let g = &t["forced"]["context_gain"];
        gains.push(g["mean_logprob"].as_f64().unwrap());
        assert!(g["top1_share"].as_f64().unwrap() > 0.0, "{}: {g}", t["name"]);
    }
    let s = &r["summary"]["forced"]["context_gain"];
    let mean = gains.iter().sum::<f64>() / gains.len() as f64;
    assert!((s["mean_logprob"].as_f64().unwrap() - mean).abs() < 1e-9);
    // Invented identifiers and numbers: only the file can make them likely.
    assert!(mean > 1.0, "the file should add over a nat per token on average: {gains:?}");
}
