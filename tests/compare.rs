//! `posrecall compare` on hand-made run files (tests/fixtures/compare/): no
//! model needed.
//!
//! The fixtures are 16-target runs (10 lines per target, pass at 5):
//! - a.json / b.json: bench runs of one model with f16 and q4_0 KV caches, with
//!   teacher-forced metrics; 1 target passes only in A, 5 only in B; two
//!   targets are out of depth order in the file.
//! - c.json / d.json: score runs without teacher-forced metrics; 8 flips, all
//!   toward D.
//! - lines6.json: b.json asked 6 lines (`params.lines` 6, each score cut to 6
//!   lines as the scorer would count them); other_targets.json: b.json with
//!   the sixth target renamed; not_a_run.json: JSON that is not a run file.
//!
//! Every expected statistic below is cited from an independent source, never
//! from this crate: `scripts/oracles/stats-reference` (Python 3, standard library only)
//! recomputes each one exactly from its definition, reading the same fixture
//! files: McNemar as Fraction(2·Σ_{j≤min(b,c)} math.comb(b+c, j), 2^(b+c));
//! Wilson by its closed form in 50-digit decimals with z = 1.959963984540054;
//! Wilcoxon by enumerating all 2^n sign patterns (itertools.product) over the
//! mid-ranks of the nonzero differences, in Fractions (top1_share values read
//! as decimal Fractions, so ties are exact); the sample size by trying every N
//! from 1 upward with power(N) = Σ_d C(N,d)·pd^d·(1−pd)^(N−d)·P[reject | d]
//! in exact integer arithmetic, the critical value per d from integer
//! binomial sums. Run it to regenerate them; its output is grouped by the
//! fixture pair ("tests/compare.rs, a.json against b.json").
//!
//! The same values are also recomputed on every test run by the [`reference`]
//! module below (integers and brute force, no code shared with lib/src/score/stats.rs),
//! in `cited_values_match_an_independent_enumeration`: a cited constant that
//! drifts from its definition, or from the fixtures, fails there.

use posrecall::record::run::{DecodeMode, RunFile};
use posrecall::report::compare::{Comparison, Flip};

fn compare(a: &RunFile, a_path: &Path, b: &RunFile, b_path: &Path) -> anyhow::Result<Comparison> {
    Comparison::new(a, a_path, b, b_path)
}
use posrecall::score::Normalize;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/compare").join(name)
}

fn load(name: &str) -> RunFile {
    RunFile::load(&fixture(name)).unwrap_or_else(|e| panic!("{name}: {e:#}"))
}

fn posrecall(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_posrecall")).args(args).env("NO_COLOR", "1").output().unwrap()
}

fn compare_files(a: &str, b: &str, extra: &[&str]) -> Output {
    let (pa, pb) = (fixture(a), fixture(b));
    let mut args = vec!["compare", pa.to_str().unwrap(), pb.to_str().unwrap()];
    args.extend_from_slice(extra);
    posrecall(&args)
}

fn close(actual: f64, expected: f64) {
    assert!((actual - expected).abs() <= 1e-6, "{actual} != {expected} (tolerance 1e-6)");
}

/// The one stderr line of a failed command.
fn error_line(o: &Output) -> String {
    assert!(!o.status.success(), "expected failure, got success");
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty(), "stdout: {}", String::from_utf8_lossy(&o.stdout));
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(err.starts_with("posrecall: error: "), "{err}");
    err
}

#[test]
fn fixtures_are_run_files() {
    for name in ["a.json", "b.json", "c.json", "d.json", "lines6.json", "other_targets.json"] {
        let run = load(name);
        assert_eq!(run.targets.len(), 16, "{name}");
        for t in &run.targets {
            assert_eq!(t.score.as_ref().unwrap().pass, t.score.as_ref().unwrap().matched >= run.manifest.params.pass, "{name} {}", t.name);
        }
    }
    assert!(RunFile::load(&fixture("not_a_run.json")).is_err());
}

/// An exact Wilcoxon signed-rank result as cited.
struct Signed {
    n: usize,
    zeros: usize,
    w_plus: f64,
    w_minus: f64,
    p: f64,
}

/// The paired statistics of one fixture pair, each cited from
/// `scripts/oracles/stats-reference` (section "tests/compare.rs, A against B") and
/// recomputed by [`reference`] in `cited_values_match_an_independent_enumeration`.
struct Cited {
    a: &'static str,
    b: &'static str,
    /// Passes in A, in B (of 16).
    passes: (usize, usize),
    /// Targets that pass in A only, in B only.
    flips: (usize, usize),
    mcnemar_p: f64,
    wilson_a: [f64; 2],
    wilson_b: [f64; 2],
    wilcoxon_matched: Signed,
    /// On Δtop1_share; `None` unless both runs have teacher-forced metrics.
    wilcoxon_top1: Option<Signed>,
    /// Smallest N with exact-McNemar power ≥ 0.8 at α = 0.05, p10 = A only / 16,
    /// p01 = B only / 16.
    power_targets: u64,
}

const A_B: Cited = Cited {
    a: "a.json",
    b: "b.json",
    passes: (8, 12),
    flips: (1, 5),
    // 7/32 = 2·(C(6,0) + C(6,1))/2^6.
    mcnemar_p: 0.21875,
    // Wilson 95% of 8/16 and 12/16 (closed form, 50-digit decimals).
    wilson_a: [0.279995636103, 0.720004363897],
    wilson_b: [0.505016834645, 0.898179325088],
    // Δmatched: 4 zeros dropped, mid-ranks; p = 21/256 (all 2^12 sign patterns).
    wilcoxon_matched: Signed { n: 12, zeros: 4, w_plus: 61.5, w_minus: 16.5, p: 0.08203125 },
    // Δtop1_share: 3 zeros dropped, exact decimal ties; p = 263/4096 (2^13 patterns).
    wilcoxon_top1: Some(Signed { n: 13, zeros: 3, w_plus: 72.0, w_minus: 19.0, p: 0.064208984375 }),
    // p10 = 1/16, p01 = 5/16: power(48) = 0.799858, power(49) = 0.809569.
    power_targets: 49,
};

const C_D: Cited = Cited {
    a: "c.json",
    b: "d.json",
    passes: (5, 13),
    flips: (0, 8),
    // 1/128 = 2·C(8,0)/2^8.
    mcnemar_p: 0.0078125,
    // Wilson 95% of 5/16 and 13/16.
    wilson_a: [0.141646438548, 0.555956441653],
    wilson_b: [0.569911190380, 0.934084009286],
    // All 11 nonzero differences positive: p = 2/2^11.
    wilcoxon_matched: Signed { n: 11, zeros: 5, w_plus: 66.0, w_minus: 0.0, p: 0.0009765625 },
    wilcoxon_top1: None,
    // p10 = 0, p01 = 1/2: power(14) = 0.788025, power(15) = 0.849121.
    power_targets: 15,
};

const A_C: Cited = Cited {
    a: "a.json",
    b: "c.json",
    passes: (8, 5),
    flips: (4, 1),
    // 3/8 = 2·(C(5,0) + C(5,1))/2^5.
    mcnemar_p: 0.375,
    wilson_a: [0.279995636103, 0.720004363897],
    wilson_b: [0.141646438548, 0.555956441653],
    // p = 1095/8192 (all 2^14 sign patterns).
    wilcoxon_matched: Signed { n: 14, zeros: 2, w_plus: 28.0, w_minus: 77.0, p: 0.1336669921875 },
    // Only A has forced metrics.
    wilcoxon_top1: None,
    // p10 = 4/16, p01 = 1/16: power(73) = 0.798833, power(74) = 0.804791.
    power_targets: 74,
};

fn compare_pair(cited: &Cited) -> posrecall::report::compare::Comparison {
    let (a, b) = (cited.a, cited.b);
    compare(&load(a), &fixture(a), &load(b), &fixture(b)).unwrap()
}

fn check_signed(got: &posrecall::score::stats::Wilcoxon, cited: &Signed) {
    assert_eq!((got.n, got.zeros), (cited.n, cited.zeros));
    close(got.w_plus, cited.w_plus);
    close(got.w_minus, cited.w_minus);
    close(got.p, cited.p);
}

/// `compare` finds every cited statistic of the pair.
fn check_cited(c: &posrecall::report::compare::Comparison, cited: &Cited) {
    assert_eq!(c.targets_count, 16);
    let (a, b, t) = (c.a.recall.as_ref().unwrap(), c.b.recall.as_ref().unwrap(), c.recall.as_ref().unwrap());
    assert_eq!((a.passes, b.passes), cited.passes);
    assert_eq!((t.mcnemar.a_only, t.mcnemar.b_only), cited.flips);
    close(t.mcnemar.p, cited.mcnemar_p);
    for (got, want) in [(a.wilson95, cited.wilson_a), (b.wilson95, cited.wilson_b)] {
        close(got[0], want[0]);
        close(got[1], want[1]);
    }
    check_signed(&t.wilcoxon_matched, &cited.wilcoxon_matched);
    match (&c.wilcoxon_top1_share, &cited.wilcoxon_top1) {
        (Some(got), Some(want)) => check_signed(got, want),
        (None, None) => {}
        (got, _) => panic!("top-1 Wilcoxon: {got:?}"),
    }
    assert_eq!(t.power.targets, Some(cited.power_targets));
    assert_eq!(t.power.status, "found");
    close(t.power.p10, cited.flips.0 as f64 / 16.0);
    close(t.power.p01, cited.flips.1 as f64 / 16.0);
}

#[test]
fn a_against_b_numbers() {
    let c = compare_pair(&A_B);
    check_cited(&c, &A_B);
    // Means of the fixtures' top1_share: 919/1600 and 5/8 (scripts/oracles/stats-reference).
    close(c.a.top1_share_mean.unwrap(), 0.574375);
    close(c.b.top1_share_mean.unwrap(), 0.625);
    // Rows by depth: baseRange (0.68) comes before toNumber (0.70), unlike the files.
    let names: Vec<&str> = c.targets.iter().map(|r| r.name.as_str()).collect();
    let (r, t) = (names.iter().position(|n| *n == "baseRange").unwrap(), names.iter().position(|n| *n == "toNumber").unwrap());
    assert!(r < t, "{names:?}");
    assert!(c.targets.windows(2).all(|w| w[0].depth <= w[1].depth));
    let flips: Vec<(&str, Flip)> = c.targets.iter().filter_map(|r| r.recall.as_ref()?.flip.map(|f| (r.name.as_str(), f))).collect();
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
    // baseMerge in the fixtures: matched 5 and 3, top1_share 0.70 and 0.64.
    let merge = c.targets.iter().find(|r| r.name == "baseMerge").unwrap();
    let m = merge.recall.as_ref().unwrap();
    assert_eq!((m.matched_a, m.matched_b, m.delta), (5, 3, -2));
    close(merge.top1_share_delta.unwrap(), -0.06);
}

#[test]
fn c_against_d_numbers() {
    let c = compare_pair(&C_D);
    check_cited(&c, &C_D);
    assert!(c.a.top1_share_mean.is_none());
}

#[test]
fn a_against_c_mixes_bench_and_score_runs() {
    // Same targets and crop: comparable; only A has forced metrics, so no top-1 test.
    let c = compare_pair(&A_C);
    check_cited(&c, &A_C);
    assert!(c.b.top1_share_mean.is_none());
}

#[test]
fn text_output() {
    let o = compare_files("a.json", "b.json", &[]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stderr.is_empty());
    let text = String::from_utf8(o.stdout).unwrap();
    let has = |s: &str| assert!(text.contains(s), "missing {s:?} in\n{text}");
    // The numbers are A_B's cited values as printed (3 significant digits); 18
    // more lines is Σ(matched B − matched A) over the fixtures (scripts/oracles/stats-reference).
    has("A: Fixture LM 1B, fixture-1b.Q4_K_M.gguf, KV f16");
    has("B: Fixture LM 1B, fixture-1b.Q4_K_M.gguf, KV q4_0");
    has("16 shared targets, 10 lines each, pass at 5 matched");
    has("pass rate A: 8/16 = 50.0%  (Wilson 95% 28.0% – 72.0%)");
    has("pass rate B: 12/16 = 75.0%  (Wilson 95% 50.5% – 89.8%)");
    has("flips: 1 A only (A pass, B fail), 5 B only (A fail, B pass); exact McNemar p = 0.219");
    has("n = 12 (4 zero differences dropped), W+ = 61.5, W− = 16.5, p = 0.082");
    has("n = 13 (3 zero differences dropped), W+ = 72, W− = 19, p = 0.0642");
    has("power: 49 targets give 80% power");
    has("verdict: B passes 4 more targets (12/16 vs 8/16), but with 6 flips (1 toward A, 5 toward B) \
         the difference is not significant (exact McNemar p = 0.219, α = 0.05); about 49 targets \
         would give 80% power to detect a difference of this size.");
    has("B matches 18 more lines in total");
    has("Teacher-forced top-1 share: B higher (A 0.574, B 0.625, mean over 16 targets)");
    // The per-target table: flip markers on the right rows, rows by depth.
    let row = |name: &str| text.lines().find(|l| l.starts_with(&format!("{name} "))).unwrap_or_else(|| panic!("no row {name}")).to_string();
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
    // The cited statistics of a.json against b.json (A_B above).
    close(v["a"]["wilson95"][0].as_f64().unwrap(), A_B.wilson_a[0]);
    close(v["b"]["wilson95"][1].as_f64().unwrap(), A_B.wilson_b[1]);
    assert_eq!(v["mcnemar"]["a_only"], A_B.flips.0);
    assert_eq!(v["mcnemar"]["b_only"], A_B.flips.1);
    close(v["mcnemar"]["p"].as_f64().unwrap(), A_B.mcnemar_p);
    close(v["wilcoxon_matched"]["p"].as_f64().unwrap(), A_B.wilcoxon_matched.p);
    close(v["wilcoxon_matched"]["w_plus"].as_f64().unwrap(), A_B.wilcoxon_matched.w_plus);
    let top1 = A_B.wilcoxon_top1.as_ref().unwrap();
    close(v["wilcoxon_top1_share"]["p"].as_f64().unwrap(), top1.p);
    assert_eq!(v["power"]["status"], "found");
    assert_eq!(v["power"]["targets"], A_B.power_targets);
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
    assert!(v["verdict"].as_str().unwrap().starts_with("B passes 4 more targets"));

    let o = compare_files("c.json", "d.json", &["--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["wilcoxon_top1_share"].is_null());
    assert!(v["a"]["top1_share_mean"].is_null());
    close(v["mcnemar"]["p"].as_f64().unwrap(), C_D.mcnemar_p);

    // A run against itself: nothing differs, no sample size.
    let o = compare_files("a.json", "a.json", &["--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["power"]["status"], "not_reachable");
    assert!(v["power"]["targets"].is_null());
    assert_eq!(v["mcnemar"]["p"], 1.0);
    assert_eq!(v["wilcoxon_matched"]["n"], 0);
    assert_eq!(v["wilcoxon_matched"]["p"], 1.0);
}

/// Two copies of a.json, each recording other CPU kernels (and B, when
/// `kv` says, another KV type), compared as text.
fn compare_kernels(kv: Option<&str>) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut run: serde_json::Value = serde_json::from_slice(&std::fs::read(fixture("a.json")).unwrap()).unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    run["manifest"]["runtime"]["cpu_features"] = serde_json::json!(["SSE3", "AVX", "AVX2"]);
    std::fs::write(&a, serde_json::to_vec(&run).unwrap()).unwrap();
    run["manifest"]["runtime"]["cpu_features"] = serde_json::json!(["SSE3", "AVX", "AVX2", "AVX512"]);
    if let Some(kv) = kv {
        run["manifest"]["context"]["type_k"] = kv.into();
    }
    std::fs::write(&b, serde_json::to_vec(&run).unwrap()).unwrap();
    let o = posrecall(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap()
}

#[test]
fn runs_on_other_cpu_kernels_are_noted() {
    let text = compare_kernels(None);
    assert!(
        text.contains(
            "A and B differ only in the CPU kernels llama.cpp ran (A SSE3 AVX AVX2; B SSE3 AVX AVX2 AVX512): they round differently"
        ),
        "{text}"
    );
    let text = compare_kernels(Some("q8_0"));
    assert!(text.contains("A ran the CPU kernels SSE3 AVX AVX2; B SSE3 AVX AVX2 AVX512"), "{text}");
    assert!(!text.contains("differ only in the CPU kernels"), "{text}");
    // Runs that record the same kernels, or none, get no note.
    assert!(!String::from_utf8(compare_files("a.json", "b.json", &[]).stdout).unwrap().contains("CPU kernels"));
}

#[test]
fn same_run_twice() {
    let o = compare_files("a.json", "a.json", &[]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("verdict: A and B pass exactly the same targets (8/16); there are no flips to test."), "{text}");
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
    assert!(err.contains("not_a_run.json is not a posrecall run file"), "{err}");
    let err = error_line(&compare_files("no_such_file.json", "a.json", &[]));
    assert!(err.contains("no_such_file.json"), "{err}");
}

#[test]
fn refuses_other_differences() {
    let a = load("a.json");
    let p = fixture("a.json");
    let refused = |b: RunFile, what: &str| {
        let e = compare(&a, &p, &b, &fixture("b.json")).unwrap_err().to_string();
        assert!(e.contains("cannot compare") && e.contains(what), "{what}: {e}");
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
    b.manifest.params.decode_mode = Some(DecodeMode::Parallel);
    b.manifest.params.parallel = Some(16);
    b.manifest.params.fixed_tokens = Some(128);
    let c = compare(&a, &fixture("a.json"), &b, &fixture("b.json")).unwrap();
    assert_eq!(c.notes.len(), 2, "{:?}", c.notes);
    assert!(c.notes[0].contains("parallel 16"), "{}", c.notes[0]);
    assert!(c.notes[1].contains("exactly 128 tokens"), "{}", c.notes[1]);
    let text = posrecall::report::compare::render_text(&c);
    assert!(text.contains("note: A decoded sequential, B parallel 16"), "{text}");

    // An older run (no draft mode recorded: one token per step) against a
    // drafted one.
    let mut b = load("b.json");
    b.manifest.params.draft = Some(posrecall::decode::draft::DraftMode::Truth);
    let c = compare(&a, &fixture("a.json"), &b, &fixture("b.json")).unwrap();
    assert_eq!(c.notes.len(), 1, "{:?}", c.notes);
    assert!(c.notes[0].contains("draft mode none, B in draft mode truth"), "{}", c.notes[0]);
}

/// Runs labelled alike (model name, build, KV) but made by another model
/// file or another probe say so: the header alone would present a quant A/B
/// or chat against completion as two runs of one setting.
#[test]
fn runs_labelled_alike_but_of_another_model_or_probe_are_noted() {
    let a = load("a.json");
    let same = compare(&a, &fixture("a.json"), &a, &fixture("a.json")).unwrap();
    assert!(same.notes.is_empty(), "{:?}", same.notes);
    let mut b = a.clone();
    b.manifest.model.as_mut().unwrap().sha256 = "9".repeat(64);
    b.manifest.params.probe = Some(posrecall::prompt::ProbeKind::Completion);
    let c = compare(&a, &fixture("a.json"), &b, &fixture("b.json")).unwrap();
    assert_eq!(c.a.label, c.b.label);
    assert_eq!(
        c.notes,
        [
            "A and B are labelled alike but differ in the model file's sha256 (A 5de3a8420644, B 999999999999) and the probe (A chat, B completion)"
        ]
    );
    // Labelled apart (another KV), the difference is the label's to show.
    let mut other = load("b.json");
    other.manifest.model.as_mut().unwrap().sha256 = "9".repeat(64);
    let c = compare(&a, &fixture("a.json"), &other, &fixture("b.json")).unwrap();
    assert!(c.notes.is_empty(), "{:?}", c.notes);
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

/// The statistics written again from their definitions, in integers and by
/// brute force, sharing no code with lib/src/score/stats.rs (which uses log-space
/// binomials, a rank-sum dynamic programme and a memoised power search): the
/// independent source the cited constants are checked against in CI.
/// `scripts/oracles/stats-reference` does the same in exact Python arithmetic.
mod reference {
    use std::sync::OnceLock;

    /// The largest number of trials the tables here cover.
    pub const MAX_N: usize = 120;

    /// C(n, k) from Pascal's triangle, exact in u128 up to [`MAX_N`].
    pub fn choose(n: usize, k: usize) -> u128 {
        static PASCAL: OnceLock<Vec<Vec<u128>>> = OnceLock::new();
        let rows = PASCAL.get_or_init(|| {
            let mut rows: Vec<Vec<u128>> = vec![vec![1]];
            for n in 1..=MAX_N {
                let prev = &rows[n - 1];
                let row = (0..=n).map(|k| if k == 0 || k == n { 1 } else { prev[k - 1] + prev[k] }).collect();
                rows.push(row);
            }
            rows
        });
        if k > n { 0 } else { rows[n][k] }
    }

    /// Σ_{j ≤ min(b, c)} C(b + c, j): the McNemar tail count out of 2^(b+c).
    fn tail(b: usize, c: usize) -> u128 {
        (0..=b.min(c)).map(|j| choose(b + c, j)).sum()
    }

    /// Exact two-sided McNemar p = min(1, 2·tail / 2^(b+c)).
    pub fn mcnemar(b: usize, c: usize) -> f64 {
        (2.0 * tail(b, c) as f64 / (1u128 << (b + c)) as f64).min(1.0)
    }

    /// Whether the exact McNemar test rejects (b, c) at α = 0.05 = 1/20, in
    /// integers: 2·tail / 2^n ≤ 1/20 ⟺ 40·tail ≤ 2^n.
    fn rejects(b: usize, c: usize) -> bool {
        40 * tail(b, c) <= 1u128 << (b + c)
    }

    /// Exact two-sided Wilcoxon signed-rank test on integer differences
    /// (ratios scaled to integers first): zeros dropped, tied |d| share their
    /// mean rank. Returns (n, zeros, 2·W+, 2·W−, p), p counted over all 2^n
    /// sign patterns: min(1, 2·min(#{W+ ≤ w}, #{W+ ≥ w}) / 2^n).
    pub fn wilcoxon(diffs: &[i64]) -> (usize, usize, u64, u64, f64) {
        let nz: Vec<i64> = diffs.iter().copied().filter(|&d| d != 0).collect();
        // Doubled mid-rank of |d|: ranks below+1 ..= below+equal, mean doubled.
        let rank2: Vec<u64> = nz
            .iter()
            .map(|d| {
                let below = nz.iter().filter(|e| e.abs() < d.abs()).count();
                let equal = nz.iter().filter(|e| e.abs() == d.abs()).count();
                (2 * below + equal + 1) as u64
            })
            .collect();
        let plus: u64 = nz.iter().zip(&rank2).filter(|(d, _)| **d > 0).map(|(_, r)| r).sum();
        let total: u64 = rank2.iter().sum();
        let (mut le, mut ge) = (0u64, 0u64);
        for signs in 0u64..1 << nz.len() {
            let w: u64 = (0..nz.len()).filter(|i| signs >> i & 1 == 1).map(|i| rank2[i]).sum();
            le += (w <= plus) as u64;
            ge += (w >= plus) as u64;
        }
        let p = (2.0 * le.min(ge) as f64 / (1u64 << nz.len()) as f64).min(1.0);
        (nz.len(), diffs.len() - nz.len(), plus, total - plus, p)
    }

    /// Power of the exact McNemar test at α = 0.05 with `n` targets: the sum,
    /// over d discordant targets of which b pass in A only, of the trinomial
    /// probability C(n,d)·C(d,b)·p10^b·p01^(d−b)·(1−p10−p01)^(n−d) of the
    /// splits the test rejects.
    pub fn power(n: usize, p10: f64, p01: f64) -> f64 {
        let q = 1.0 - p10 - p01;
        let mut total = 0.0;
        for d in 0..=n {
            for b in (0..=d).filter(|&b| rejects(b, d - b)) {
                total += choose(n, d) as f64 * choose(d, b) as f64 * p10.powi(b as i32) * p01.powi((d - b) as i32) * q.powi((n - d) as i32);
            }
        }
        total
    }

    /// The smallest n with power(n) ≥ 0.8, trying n = 1, 2, … up to [`MAX_N`].
    pub fn targets_for_power(p10: f64, p01: f64) -> Option<usize> {
        (1..=MAX_N).find(|&n| power(n, p10, p01) >= 0.8)
    }
}

/// (n, zeros, W+, W−, p) of a cited Wilcoxon result, W± doubled to integers.
fn doubled(s: &Signed) -> (usize, usize, u64, u64, f64) {
    (s.n, s.zeros, (2.0 * s.w_plus) as u64, (2.0 * s.w_minus) as u64, s.p)
}

/// Recomputes one pair's cited statistics from the fixture files with [`reference`].
fn check_against_reference(cited: &Cited) {
    let (ra, rb) = (load(cited.a), load(cited.b));
    let pairs: Vec<_> = ra.targets.iter().zip(&rb.targets).collect();
    let count =
        |f: fn(bool, bool) -> bool| pairs.iter().filter(|(x, y)| f(x.score.as_ref().unwrap().pass, y.score.as_ref().unwrap().pass)).count();
    let passes = (count(|a, _| a), count(|_, b| b));
    let flips = (count(|a, b| a && !b), count(|a, b| !a && b));
    assert_eq!((passes, flips), (cited.passes, cited.flips), "{}", cited.a);
    close(reference::mcnemar(flips.0, flips.1), cited.mcnemar_p);
    let matched: Vec<i64> =
        pairs.iter().map(|(x, y)| y.score.as_ref().unwrap().matched as i64 - x.score.as_ref().unwrap().matched as i64).collect();
    let got = reference::wilcoxon(&matched);
    let want = doubled(&cited.wilcoxon_matched);
    assert_eq!((got.0, got.1, got.2, got.3), (want.0, want.1, want.2, want.3), "{} Δmatched", cited.a);
    close(got.4, want.4);
    if let Some(top1) = &cited.wilcoxon_top1 {
        // top1_share has at most two decimals in the fixtures: in hundredths
        // the differences are integers, so zeros and ties are exact.
        let hundredths = |t: &posrecall::record::run::TargetResult| (t.forced.as_ref().unwrap().top1_share * 100.0).round() as i64;
        let d: Vec<i64> = pairs.iter().map(|(x, y)| hundredths(y) - hundredths(x)).collect();
        let got = reference::wilcoxon(&d);
        let want = doubled(top1);
        assert_eq!((got.0, got.1, got.2, got.3), (want.0, want.1, want.2, want.3));
        close(got.4, want.4);
    }
    let (p10, p01) = (flips.0 as f64 / 16.0, flips.1 as f64 / 16.0);
    let n = reference::targets_for_power(p10, p01).expect("within MAX_N");
    assert_eq!(n as u64, cited.power_targets, "{} against {}", cited.a, cited.b);
}

/// The Wilson interval's closed form, (p + z²/2n ± z·√(p(1−p)/n + z²/4n²)) / (1 + z²/n),
/// written out from the textbook.
fn wilson_reference(k: usize, n: usize) -> [f64; 2] {
    let (p, n, z) = (k as f64 / n as f64, n as f64, 1.959963984540054f64);
    let centre = p + z * z / (2.0 * n);
    let spread = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
    let scale = 1.0 + z * z / n;
    [(centre - spread) / scale, (centre + spread) / scale]
}

#[test]
fn cited_values_match_an_independent_enumeration() {
    for cited in [&A_B, &C_D, &A_C] {
        check_against_reference(cited);
        for (k, want) in [(cited.passes.0, cited.wilson_a), (cited.passes.1, cited.wilson_b)] {
            let got = wilson_reference(k, 16);
            close(got[0], want[0]);
            close(got[1], want[1]);
        }
    }
    // The power figures and sample sizes cited in lib/src/score/stats.rs's own tests
    // (power_matches_brute_force, sample_size_search); those at N = 300, 301
    // and the cap of 500 are past MAX_N and come from scripts/oracles/stats-reference only.
    let power = |n, p10, p01, want: f64| {
        let got = reference::power(n, p10, p01);
        assert!((got - want).abs() <= 1e-10, "power({n}, {p10}, {p01}) = {got}, cited {want}");
    };
    power(20, 0.25, 0.05, 0.195620828283);
    power(16, 0.0625, 0.25, 0.093835826255);
    power(5, 0.5, 0.1, 0.0);
    power(6, 1.0, 0.0, 1.0);
    assert_eq!(reference::targets_for_power(0.25, 0.05), Some(61));
    assert_eq!(reference::targets_for_power(0.0625, 0.25), Some(74));
}
