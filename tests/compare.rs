//! `posrecall compare` on hand-made run files (tests/fixtures/compare/): no
//! model needed.
//!
//! The fixtures are 16-target runs (10 lines per target, pass at 5):
//! - a.json / b.json: bench runs of one model with f16 and q4_0 KV caches, with
//!   teacher-forced metrics; 1 target passes only in A, 5 only in B; two
//!   targets are out of depth order in the file.
//! - c.json / d.json: score runs without teacher-forced metrics; 8 flips, all
//!   toward D.
//! - lines6.json: b.json with `params.lines` 6; other_targets.json: b.json with
//!   the sixth target renamed; not_a_run.json: JSON that is not a run file.
//!
//! Every expected number below was computed independently of this crate by a
//! Python 3 script using only the standard library, reading the same fixture
//! files: McNemar as Fraction(2·Σ_{j≤min(b,c)} math.comb(b+c, j), 2^(b+c));
//! Wilson by its closed form with z = 1.959963984540054; Wilcoxon by
//! enumerating all 2^n sign patterns (itertools.product) over the mid-ranks of
//! the nonzero differences, in Fractions (top1_share values read as decimal
//! Fractions, so ties are exact); the sample size by trying every N from 1
//! upward with power(N) = Σ_d C(N,d)·pd^d·(1−pd)^(N−d)·P[reject | d], the
//! critical value per d from integer binomial sums.

use posrecall::report::compare::{Flip, compare};
use posrecall::run::RunFile;
use posrecall::score::Normalize;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/compare")
        .join(name)
}

fn load(name: &str) -> RunFile {
    RunFile::load(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e:#}"))
}

fn posrecall(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_posrecall"))
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

fn compare_files(a: &str, b: &str, extra: &[&str]) -> Output {
    let (pa, pb) = (fixture(a), fixture(b));
    let mut args = vec!["compare", pa.to_str().unwrap(), pb.to_str().unwrap()];
    args.extend_from_slice(extra);
    posrecall(&args)
}

fn close(actual: f64, expected: f64) {
    assert!(
        (actual - expected).abs() <= 1e-6,
        "{actual} != {expected} (tolerance 1e-6)"
    );
}

/// The one stderr line of a failed command.
fn error_line(o: &Output) -> String {
    assert!(!o.status.success(), "expected failure, got success");
    assert_eq!(o.status.code(), Some(1));
    assert!(
        o.stdout.is_empty(),
        "stdout: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(err.starts_with("posrecall: error: "), "{err}");
    err
}

#[test]
fn fixtures_are_run_files() {
    for name in [
        "a.json",
        "b.json",
        "c.json",
        "d.json",
        "lines6.json",
        "other_targets.json",
    ] {
        let run = load(name);
        assert_eq!(run.targets.len(), 16, "{name}");
        for t in &run.targets {
            assert_eq!(
                t.pass,
                t.matched >= run.manifest.params.pass,
                "{name} {}",
                t.name
            );
        }
    }
    assert!(RunFile::load(&fixture("not_a_run.json")).is_err());
}

#[test]
fn a_against_b_numbers() {
    let c = compare(
        &load("a.json"),
        &fixture("a.json"),
        &load("b.json"),
        &fixture("b.json"),
    )
    .unwrap();
    assert_eq!(c.targets_count, 16);
    assert_eq!((c.a.passes, c.b.passes), (8, 12));
    assert_eq!((c.mcnemar.a_only, c.mcnemar.b_only), (1, 5));
    // McNemar: 2·(C(6,0) + C(6,1))/2^6 = 7/32.
    close(c.mcnemar.p, 0.21875);
    // Wilson 95%: 8/16 and 12/16.
    close(c.a.wilson95[0], 0.279995636103);
    close(c.a.wilson95[1], 0.720004363897);
    close(c.b.wilson95[0], 0.505016834645);
    close(c.b.wilson95[1], 0.898179325088);
    // Wilcoxon on Δmatched: 4 zeros dropped, mid-ranks; p = 21/256.
    let w = c.wilcoxon_matched;
    assert_eq!((w.n, w.zeros), (12, 4));
    close(w.w_plus, 61.5);
    close(w.w_minus, 16.5);
    close(w.p, 0.08203125);
    // Wilcoxon on Δtop1_share: 3 zeros dropped, float ties within tolerance; p = 263/4096.
    let w = c
        .wilcoxon_top1_share
        .expect("both runs have forced metrics");
    assert_eq!((w.n, w.zeros), (13, 3));
    close(w.w_plus, 72.0);
    close(w.w_minus, 19.0);
    close(w.p, 0.064208984375);
    close(c.a.top1_share_mean.unwrap(), 0.574375);
    close(c.b.top1_share_mean.unwrap(), 0.625);
    // Smallest N with exact-McNemar power ≥ 0.8 at p10 = 1/16, p01 = 5/16.
    assert_eq!(c.power.targets, Some(49));
    assert_eq!(c.power.status, "found");
    close(c.power.p10, 1.0 / 16.0);
    close(c.power.p01, 5.0 / 16.0);
    // Rows by depth: baseRange (0.68) comes before toNumber (0.70), unlike the files.
    let names: Vec<&str> = c.targets.iter().map(|r| r.name.as_str()).collect();
    let (r, t) = (
        names.iter().position(|n| *n == "baseRange").unwrap(),
        names.iter().position(|n| *n == "toNumber").unwrap(),
    );
    assert!(r < t, "{names:?}");
    assert!(c.targets.windows(2).all(|w| w[0].depth <= w[1].depth));
    let flips: Vec<(&str, Flip)> = c
        .targets
        .iter()
        .filter_map(|r| r.flip.map(|f| (r.name.as_str(), f)))
        .collect();
    assert_eq!(
        flips,
        [
            ("arrayEach", Flip::BOnly),
            ("memoize", Flip::BOnly),
            ("baseMerge", Flip::AOnly),
            ("equalArrays", Flip::BOnly),
            ("baseRange", Flip::BOnly),
            ("stringToPath", Flip::BOnly),
        ]
    );
    let merge = c.targets.iter().find(|r| r.name == "baseMerge").unwrap();
    assert_eq!((merge.matched_a, merge.matched_b, merge.delta), (5, 3, -2));
    close(merge.top1_share_delta.unwrap(), -0.06);
}

#[test]
fn c_against_d_numbers() {
    let c = compare(
        &load("c.json"),
        &fixture("c.json"),
        &load("d.json"),
        &fixture("d.json"),
    )
    .unwrap();
    assert_eq!((c.a.passes, c.b.passes), (5, 13));
    assert_eq!((c.mcnemar.a_only, c.mcnemar.b_only), (0, 8));
    // McNemar: 2·C(8,0)/2^8 = 1/128.
    close(c.mcnemar.p, 0.0078125);
    close(c.a.wilson95[0], 0.141646438548);
    close(c.a.wilson95[1], 0.555956441653);
    close(c.b.wilson95[0], 0.569911190380);
    close(c.b.wilson95[1], 0.934084009286);
    // All 11 nonzero differences positive: p = 2/2^11.
    let w = c.wilcoxon_matched;
    assert_eq!((w.n, w.zeros), (11, 5));
    close(w.w_plus, 66.0);
    close(w.w_minus, 0.0);
    close(w.p, 0.0009765625);
    assert!(c.wilcoxon_top1_share.is_none());
    assert!(c.a.top1_share_mean.is_none());
    // p10 = 0, p01 = 1/2.
    assert_eq!(c.power.targets, Some(15));
}

#[test]
fn a_against_c_mixes_bench_and_score_runs() {
    // Same targets and crop: comparable; only A has forced metrics, so no top-1 test.
    let c = compare(
        &load("a.json"),
        &fixture("a.json"),
        &load("c.json"),
        &fixture("c.json"),
    )
    .unwrap();
    assert_eq!((c.mcnemar.a_only, c.mcnemar.b_only), (4, 1));
    close(c.mcnemar.p, 0.375); // 2·(1 + 5)/32
    let w = c.wilcoxon_matched;
    assert_eq!((w.n, w.zeros), (14, 2));
    close(w.w_plus, 28.0);
    close(w.w_minus, 77.0);
    close(w.p, 0.133666992188); // 1095/8192
    assert!(c.wilcoxon_top1_share.is_none());
    assert_eq!(c.power.targets, Some(74)); // p10 = 4/16, p01 = 1/16
}

#[test]
fn text_output() {
    let o = compare_files("a.json", "b.json", &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stderr.is_empty());
    let text = String::from_utf8(o.stdout).unwrap();
    let has = |s: &str| assert!(text.contains(s), "missing {s:?} in\n{text}");
    has("A: Fixture LM 1B, fixture-1b.Q4_K_M.gguf, KV f16");
    has("B: Fixture LM 1B, fixture-1b.Q4_K_M.gguf, KV q4_0");
    has("16 shared targets, 10 lines each, pass at 5 matched");
    has("pass rate A: 8/16 = 50.0%  (Wilson 95% 28.0% – 72.0%)");
    has("pass rate B: 12/16 = 75.0%  (Wilson 95% 50.5% – 89.8%)");
    has("flips: 1 A only (A pass, B fail), 5 B only (A fail, B pass); exact McNemar p = 0.219");
    has("n = 12 (4 zero differences dropped), W+ = 61.5, W− = 16.5, p = 0.082");
    has("n = 13 (3 zero differences dropped), W+ = 72, W− = 19, p = 0.0642");
    has("power: 49 targets give 80% power");
    has(
        "verdict: B passes 4 more targets (12/16 vs 8/16), but with 6 flips (1 toward A, 5 toward B) \
         the difference is not significant (exact McNemar p = 0.219, α = 0.05); about 49 targets \
         would give 80% power to detect a difference of this size.",
    );
    has("B matches 18 more lines in total");
    has("Teacher-forced top-1 share: B higher (A 0.574, B 0.625, mean over 16 targets)");
    // The per-target table: flip markers on the right rows, rows by depth.
    let row = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no row {name}"))
            .to_string()
    };
    assert!(row("baseMerge").ends_with("A only"), "{}", row("baseMerge"));
    assert!(row("arrayEach").ends_with("B only"), "{}", row("arrayEach"));
    assert!(!row("baseFlatten").contains("only"));
    let pos = |name: &str| text.find(&format!("\n{name} ")).unwrap();
    assert!(pos("baseRange") < pos("toNumber"));

    // Significant, without teacher-forced metrics.
    let o = compare_files("c.json", "d.json", &[]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("A: c.json (scored answers)"), "{text}");
    assert!(
        text.contains(
            "B passes 8 more targets (13/16 vs 5/16); with 8 flips (all toward B) the difference is \
             significant (exact McNemar p = 0.00781, α = 0.05)"
        ),
        "{text}"
    );
    assert!(!text.contains("top-1"), "{text}");
}

#[test]
fn json_output() {
    let o = compare_files("a.json", "b.json", &["--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["format"], 1);
    assert_eq!(v["targets_count"], 16);
    assert_eq!(v["lines"], 10);
    assert_eq!(v["pass"], 5);
    assert_eq!(v["a"]["passes"], 8);
    assert_eq!(v["b"]["passes"], 12);
    assert!(v["a"]["file"].as_str().unwrap().ends_with("a.json"));
    close(v["a"]["wilson95"][0].as_f64().unwrap(), 0.279995636103);
    close(v["b"]["wilson95"][1].as_f64().unwrap(), 0.898179325088);
    assert_eq!(v["mcnemar"]["a_only"], 1);
    assert_eq!(v["mcnemar"]["b_only"], 5);
    close(v["mcnemar"]["p"].as_f64().unwrap(), 0.21875);
    close(v["wilcoxon_matched"]["p"].as_f64().unwrap(), 0.08203125);
    close(v["wilcoxon_matched"]["w_plus"].as_f64().unwrap(), 61.5);
    close(
        v["wilcoxon_top1_share"]["p"].as_f64().unwrap(),
        0.064208984375,
    );
    assert_eq!(v["power"]["status"], "found");
    assert_eq!(v["power"]["targets"], 49);
    assert_eq!(v["power"]["cap"], 100_000);
    let rows = v["targets"].as_array().unwrap();
    assert_eq!(rows.len(), 16);
    let merge = rows.iter().find(|r| r["name"] == "baseMerge").unwrap();
    assert_eq!(merge["flip"], "a_only");
    assert_eq!(merge["delta"], -2);
    assert_eq!(merge["pass_a"], true);
    assert_eq!(merge["pass_b"], false);
    let each = rows.iter().find(|r| r["name"] == "arrayEach").unwrap();
    assert_eq!(each["flip"], "b_only");
    assert!(rows.iter().find(|r| r["name"] == "baseFlatten").unwrap()["flip"].is_null());
    assert!(
        v["verdict"]
            .as_str()
            .unwrap()
            .starts_with("B passes 4 more targets")
    );

    let o = compare_files("c.json", "d.json", &["--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["wilcoxon_top1_share"].is_null());
    assert!(v["a"]["top1_share_mean"].is_null());
    close(v["mcnemar"]["p"].as_f64().unwrap(), 0.0078125);

    // A run against itself: nothing differs, no sample size.
    let o = compare_files("a.json", "a.json", &["--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["power"]["status"], "not_reachable");
    assert!(v["power"]["targets"].is_null());
    assert_eq!(v["mcnemar"]["p"], 1.0);
    assert_eq!(v["wilcoxon_matched"]["n"], 0);
    assert_eq!(v["wilcoxon_matched"]["p"], 1.0);
}

#[test]
fn same_run_twice() {
    let o = compare_files("a.json", "a.json", &[]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.contains(
            "verdict: A and B pass exactly the same targets (8/16); there are no flips to test."
        ),
        "{text}"
    );
}

#[test]
fn refuses_different_lines() {
    let err = error_line(&compare_files("a.json", "lines6.json", &[]));
    assert!(err.contains("cannot compare"), "{err}");
    assert!(err.contains("lines 10 vs 6"), "{err}");
}

#[test]
fn refuses_different_targets() {
    let err = error_line(&compare_files("a.json", "other_targets.json", &[]));
    assert!(err.contains("their targets differ"), "{err}");
    assert!(err.contains("memoize") && err.contains("throttle"), "{err}");
}

#[test]
fn not_a_run_file_is_one_error_line() {
    let err = error_line(&compare_files("a.json", "not_a_run.json", &[]));
    assert!(
        err.contains("not_a_run.json is not a posrecall run file"),
        "{err}"
    );
    let err = error_line(&compare_files("no_such_file.json", "a.json", &[]));
    assert!(err.contains("no_such_file.json"), "{err}");
}

#[test]
fn refuses_other_differences() {
    let a = load("a.json");
    let p = fixture("a.json");
    let refused = |b: RunFile, what: &str| {
        let e = compare(&a, &p, &b, &fixture("b.json"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cannot compare") && e.contains(what),
            "{what}: {e}"
        );
        assert_eq!(e.lines().count(), 1);
    };
    let mut b = load("b.json");
    b.manifest.params.pass = 6;
    refused(b, "pass 5 vs 6");
    let mut b = load("b.json");
    b.manifest.params.normalize = Normalize::Exact;
    refused(b, "normalize trim vs exact");
    let mut b = load("b.json");
    b.manifest.params.skip_blank = true;
    refused(b, "skip_blank false vs true");
    let mut b = load("b.json");
    b.manifest.corpus.crop.sha256 = "0".repeat(64);
    refused(b, "different text");
    let mut b = load("b.json");
    b.targets.pop();
    refused(b, "16 vs 15 targets");
    let mut b = load("b.json");
    b.targets.swap(0, 1);
    refused(b, "their targets differ (target 1 is baseFlatten");
}

#[test]
fn runs_that_decoded_differently_carry_a_note() {
    let a = load("a.json");
    let same = compare(&a, &fixture("a.json"), &load("b.json"), &fixture("b.json")).unwrap();
    assert!(same.notes.is_empty(), "{:?}", same.notes);

    let mut b = load("b.json");
    b.manifest.params.decode_mode = Some("parallel".into());
    b.manifest.params.parallel = Some(16);
    b.manifest.params.fixed_tokens = Some(128);
    let c = compare(&a, &fixture("a.json"), &b, &fixture("b.json")).unwrap();
    assert_eq!(c.notes.len(), 2, "{:?}", c.notes);
    assert!(c.notes[0].contains("parallel 16"), "{}", c.notes[0]);
    assert!(c.notes[1].contains("exactly 128 tokens"), "{}", c.notes[1]);
    let text = posrecall::report::compare::render_text(&c);
    assert!(text.contains("note: A decoded sequential, B parallel 16"), "{text}");
}

#[test]
fn runs_scored_under_the_old_blank_line_rule_are_refused() {
    // A format-1 run file: the same run as a.json, as the previous scoring
    // rule (blank lines anchoring the alignment) wrote it.
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("old.json");
    let text = std::fs::read_to_string(fixture("a.json")).unwrap();
    let v1 = text.replacen("\"format\": 2,", "\"format\": 1,", 1);
    assert_ne!(v1, text, "a.json is a format-2 run file");
    std::fs::write(&old, v1).unwrap();
    let b = fixture("b.json");
    for args in [
        vec!["compare", old.to_str().unwrap(), b.to_str().unwrap()],
        vec!["report", old.to_str().unwrap(), b.to_str().unwrap()],
        vec!["report", dir.path().to_str().unwrap()],
    ] {
        let err = error_line(&posrecall(&args));
        assert!(err.contains("old.json was scored under run-file format 1"), "{args:?}: {err}");
        assert!(err.contains("blank lines"), "says why: {err}");
    }
}
