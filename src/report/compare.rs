//! The paired comparison behind `posrecall compare A.json B.json` of two runs asked
//! about the same targets, with exact tests and a verdict in plain words.
//!
//! Per target: Δmatched = B − A and whether the pass flipped. Then the pass
//! rates with Wilson 95% intervals, an exact McNemar test on the flips, an
//! exact Wilcoxon signed-rank test on Δmatched (and on Δtop1_share when both
//! runs have teacher-forced metrics), and how many targets would give 80%
//! power to detect the observed pass-rate difference. The statistics live in
//! [`crate::stats`]; this module pairs the targets, refuses runs that are not
//! comparable, and words the result.

use crate::run::RunFile;
use crate::stats::{self, SampleSize, Wilcoxon};
use anyhow::{Result, bail};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// Significance level of every test, and of the power calculation.
pub const ALPHA: f64 = 0.05;
/// The power the sample-size estimate asks for.
pub const POWER: f64 = 0.8;
/// The largest number of targets the sample-size search tries.
pub const POWER_CAP: u64 = 100_000;
/// Version of the compare JSON (docs/RUN_FORMAT.md, "Compare JSON").
pub const COMPARE_FORMAT: u32 = 1;

/// One run as the comparison describes it.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    /// The run file as given.
    pub file: String,
    /// Model name, build and KV types from the manifest, else the file name.
    pub label: String,
    pub passes: usize,
    pub count: usize,
    pub pass_rate: f64,
    /// Wilson 95% score interval of the pass rate.
    pub wilson95: [f64; 2],
    /// Matched lines over all targets.
    pub matched: usize,
    /// Mean teacher-forced top-1 share over the targets with it in both runs.
    pub top1_share_mean: Option<f64>,
}

/// Which way a target's pass flipped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Flip {
    /// A passes, B fails.
    AOnly,
    /// A fails, B passes.
    BOnly,
}

/// One shared target.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub name: String,
    pub line: usize,
    /// The window it was asked in, when the runs are length ladders.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub length: Option<usize>,
    pub depth: f64,
    pub matched_a: usize,
    pub matched_b: usize,
    /// matched_b − matched_a.
    pub delta: i64,
    pub pass_a: bool,
    pub pass_b: bool,
    pub flip: Option<Flip>,
    pub top1_share_a: Option<f64>,
    pub top1_share_b: Option<f64>,
    /// top1_share_b − top1_share_a, when both are present.
    pub top1_share_delta: Option<f64>,
    /// Mean KL divergence from the runs' shared reference (`forced.kld.mean`),
    /// when both runs were measured against the same reference file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kld_a: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kld_b: Option<f64>,
}

/// Pass flips and the exact McNemar test on them.
#[derive(Debug, Clone, Serialize)]
pub struct McNemarResult {
    /// Targets A passes and B fails.
    pub a_only: usize,
    /// Targets A fails and B passes.
    pub b_only: usize,
    pub p: f64,
}

/// How many targets would detect the observed pass-rate difference.
#[derive(Debug, Clone, Serialize)]
pub struct PowerResult {
    pub alpha: f64,
    pub power: f64,
    /// Observed per-target probability of an A-only pass (a_only / targets).
    pub p10: f64,
    /// Observed per-target probability of a B-only pass (b_only / targets).
    pub p01: f64,
    /// `found`, `not_reachable` (no difference: a_only = b_only) or `beyond_cap`.
    pub status: &'static str,
    /// The smallest number of targets found to give `power`; null unless `found`.
    pub targets: Option<u64>,
    /// The largest number of targets searched.
    pub cap: u64,
    #[serde(skip)]
    pub sample_size: SampleSize,
}

/// The whole comparison: what `--json` prints and the text is made from.
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    pub format: u32,
    pub a: Side,
    pub b: Side,
    /// Shared targets.
    pub targets_count: usize,
    pub lines: usize,
    pub pass: usize,
    pub alpha: f64,
    /// By depth.
    pub targets: Vec<Row>,
    pub mcnemar: McNemarResult,
    pub wilcoxon_matched: Wilcoxon,
    /// On top1_share_delta over the targets with teacher-forced metrics in both runs.
    pub wilcoxon_top1_share: Option<Wilcoxon>,
    /// On kld_b − kld_a, when both runs were measured against the same reference.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wilcoxon_kld: Option<Wilcoxon>,
    pub power: PowerResult,
    pub verdict: String,
    /// Differences in how the two runs decoded, which the reader should weigh.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Two length ladders: the same comparison per length, shortest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_length: Vec<LengthComparison>,
}

/// One length of two ladders compared.
#[derive(Debug, Clone, Serialize)]
pub struct LengthComparison {
    pub length: usize,
    pub comparison: Comparison,
}

/// Refuses two runs that were not asked the same questions under the same
/// scoring: then per-target differences would mean nothing.
pub fn check_pairable(a: &RunFile, a_path: &Path, b: &RunFile, b_path: &Path) -> Result<()> {
    let (an, bn) = (a_path.display(), b_path.display());
    let (pa, pb) = (&a.manifest.params, &b.manifest.params);
    let scoring = [
        ("lines", pa.lines.to_string(), pb.lines.to_string()),
        ("pass", pa.pass.to_string(), pb.pass.to_string()),
        (
            "normalize",
            pa.normalize.as_str().to_string(),
            pb.normalize.as_str().to_string(),
        ),
        (
            "skip_blank",
            pa.skip_blank.to_string(),
            pb.skip_blank.to_string(),
        ),
    ];
    for (key, x, y) in scoring {
        if x != y {
            bail!("cannot compare {an} and {bn}: they were scored differently ({key} {x} vs {y})");
        }
    }
    let (ca, cb) = (&a.manifest.corpus.crop, &b.manifest.corpus.crop);
    if ca.sha256 != cb.sha256 {
        bail!(
            "cannot compare {an} and {bn}: they were given different text (corpus crop sha256 {} vs {})",
            short(&ca.sha256),
            short(&cb.sha256)
        );
    }
    if a.targets.len() != b.targets.len() {
        bail!(
            "cannot compare {an} and {bn}: their targets differ ({} vs {} targets)",
            a.targets.len(),
            b.targets.len()
        );
    }
    for (i, (x, y)) in a.targets.iter().zip(&b.targets).enumerate() {
        if x.name != y.name || x.line != y.line || x.length != y.length {
            bail!(
                "cannot compare {an} and {bn}: their targets differ (target {} is {} at line {} vs {} at line {})",
                i + 1,
                x.name,
                x.line,
                y.name,
                y.line
            );
        }
    }
    if a.targets.is_empty() {
        bail!("cannot compare {an} and {bn}: they have no targets");
    }
    let lengths = |r: &RunFile| r.ladder.as_ref().map(|l| l.rungs.iter().map(|g| g.length).collect::<Vec<_>>());
    if lengths(a) != lengths(b) {
        bail!("cannot compare {an} and {bn}: they were asked at different lengths ({:?} vs {:?})", lengths(a), lengths(b));
    }
    Ok(())
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// The paired comparison of B against A (differences are B − A).
pub fn compare(a: &RunFile, a_path: &Path, b: &RunFile, b_path: &Path) -> Result<Comparison> {
    check_pairable(a, a_path, b, b_path)?;
    let rows = paired_rows(a, b);
    let n = rows.len();
    let a_only = rows.iter().filter(|r| r.flip == Some(Flip::AOnly)).count();
    let b_only = rows.iter().filter(|r| r.flip == Some(Flip::BOnly)).count();
    let mcnemar = McNemarResult {
        a_only,
        b_only,
        p: stats::mcnemar_exact(a_only as u64, b_only as u64),
    };
    let deltas: Vec<f64> = rows.iter().map(|r| r.delta as f64).collect();
    let top1_deltas: Vec<f64> = rows.iter().filter_map(|r| r.top1_share_delta).collect();
    let kld_deltas: Vec<f64> = rows.iter().filter_map(|r| Some(r.kld_b? - r.kld_a?)).collect();
    let mut c = Comparison {
        format: COMPARE_FORMAT,
        a: side(&rows, a, a_path, |r| (r.pass_a, r.matched_a, r.top1_share_a)),
        b: side(&rows, b, b_path, |r| (r.pass_b, r.matched_b, r.top1_share_b)),
        targets_count: n,
        lines: a.manifest.params.lines,
        pass: a.manifest.params.pass,
        alpha: ALPHA,
        mcnemar,
        wilcoxon_matched: stats::wilcoxon_signed_rank(&deltas),
        wilcoxon_top1_share: (!top1_deltas.is_empty()).then(|| stats::wilcoxon_signed_rank(&top1_deltas)),
        wilcoxon_kld: (!kld_deltas.is_empty()).then(|| stats::wilcoxon_signed_rank(&kld_deltas)),
        power: power(a_only, b_only, n),
        targets: rows,
        verdict: String::new(),
        notes: decoding_notes(a, b),
        per_length: Vec::new(),
    };
    c.verdict = verdict(&c);
    if let Some(l) = &a.ladder {
        for g in &l.rungs {
            let (x, y) = (a.at_length(g.length), b.at_length(g.length));
            c.per_length.push(LengthComparison { length: g.length, comparison: compare(&x, a_path, &y, b_path)? });
        }
    }
    Ok(c)
}

/// One row per target, paired by position (the pairing check made sure
/// they are the same targets), ordered by depth.
fn paired_rows(a: &RunFile, b: &RunFile) -> Vec<Row> {
    // Divergences compare only when both runs measured them against one reference.
    let reference = |r: &RunFile| r.manifest.reference.as_ref().map(|x| x.sha256.clone());
    let same_reference = reference(a).is_some() && reference(a) == reference(b);
    let kld = |t: &crate::run::TargetResult| {
        same_reference.then(|| t.forced.as_ref()?.kld.as_ref().map(|k| k.mean)).flatten()
    };
    let mut rows: Vec<Row> = a
        .targets
        .iter()
        .zip(&b.targets)
        .map(|(x, y)| {
            let fa = x.forced.as_ref().map(|f| f.top1_share);
            let fb = y.forced.as_ref().map(|f| f.top1_share);
            Row {
                name: x.name.clone(),
                line: x.line,
                length: x.length,
                depth: x.depth,
                matched_a: x.matched,
                matched_b: y.matched,
                delta: y.matched as i64 - x.matched as i64,
                pass_a: x.pass,
                pass_b: y.pass,
                flip: match (x.pass, y.pass) {
                    (true, false) => Some(Flip::AOnly),
                    (false, true) => Some(Flip::BOnly),
                    _ => None,
                },
                top1_share_a: fa,
                top1_share_b: fb,
                top1_share_delta: fa.zip(fb).map(|(p, q)| q - p),
                kld_a: kld(x),
                kld_b: kld(y),
            }
        })
        .collect();
    // A ladder's rows by length, then depth: a function may be asked at
    // several lengths.
    rows.sort_by(|x, y| x.length.cmp(&y.length).then(x.depth.total_cmp(&y.depth)));
    rows
}

/// How many targets would give [`POWER`] to detect the observed flips.
fn power(a_only: usize, b_only: usize, n: usize) -> PowerResult {
    let (p10, p01) = (a_only as f64 / n as f64, b_only as f64 / n as f64);
    let sample_size = stats::mcnemar_targets_for_power(p10, p01, ALPHA, POWER, POWER_CAP);
    let (status, targets) = match sample_size {
        SampleSize::Targets(t) => ("found", Some(t)),
        SampleSize::NotReachable => ("not_reachable", None),
        SampleSize::BeyondCap(_) => ("beyond_cap", None),
    };
    PowerResult {
        alpha: ALPHA,
        power: POWER,
        p10,
        p01,
        status,
        targets,
        cap: POWER_CAP,
        sample_size,
    }
}

/// One run's side of the comparison; `pick` reads its pass, matched lines
/// and top-1 share from a row. The mean top-1 share is over the targets
/// both runs have forced metrics for.
fn side(rows: &[Row], run: &RunFile, path: &Path, pick: fn(&Row) -> (bool, usize, Option<f64>)) -> Side {
    let n = rows.len();
    let passes = rows.iter().filter(|r| pick(r).0).count();
    let (lo, hi) = stats::wilson95(passes as u64, n as u64);
    let forced: Vec<f64> = rows.iter().filter(|r| r.top1_share_delta.is_some()).filter_map(|r| pick(r).2).collect();
    Side {
        file: path.display().to_string(),
        label: label(run, path),
        passes,
        count: n,
        pass_rate: passes as f64 / n as f64,
        wilson95: [lo, hi],
        matched: rows.iter().map(|r| pick(r).1).sum(),
        top1_share_mean: (!forced.is_empty()).then(|| forced.iter().sum::<f64>() / forced.len() as f64),
    }
}

/// Notes on runs that decoded differently: answers of a parallel run can part
/// from sequential ones at near ties, and fixed-length answers are a
/// throughput measurement, not a recall one.
fn decoding_notes(a: &RunFile, b: &RunFile) -> Vec<String> {
    let mode = |r: &RunFile| {
        let p = &r.manifest.params;
        match (p.decode_mode.as_deref(), p.parallel) {
            (Some("parallel"), Some(n)) => format!("parallel {n}"),
            (Some(m), _) => m.to_string(),
            (None, _) => "unrecorded".to_string(),
        }
    };
    let mut notes = Vec::new();
    let (ma, mb) = (mode(a), mode(b));
    if ma != mb && a.manifest.command == "bench" && b.manifest.command == "bench" {
        notes.push(format!(
            "A decoded {ma}, B {mb}: batched and one-token decodes can round differently, so some answers may part at near ties (README, Parallel decoding)"
        ));
    }
    let (fa, fb) = (a.manifest.params.fixed_tokens, b.manifest.params.fixed_tokens);
    if fa != fb {
        let show = |f: Option<usize>| f.map_or("normal answers".to_string(), |t| format!("exactly {t} tokens per answer"));
        notes.push(format!("A generated {}, B {}", show(fa), show(fb)));
    }
    notes
}

/// How the header names a run: model name, build and KV types from the
/// manifest (bench runs), else the file name (score runs).
fn label(run: &RunFile, path: &Path) -> String {
    let file = path
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    let Some(m) = &run.manifest.model else {
        return format!("{file} (scored answers)");
    };
    let model_file = Path::new(&m.path)
        .file_name()
        .map(|f| f.to_string_lossy().into_owned())
        .unwrap_or_else(|| m.path.clone());
    let name = m
        .name
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or(model_file);
    let mut parts = vec![name.clone()];
    if !m.build.is_empty() && m.build != name {
        parts.push(m.build.clone());
    }
    if let Some(ctx) = &run.manifest.context {
        if ctx.type_k == ctx.type_v {
            parts.push(format!("KV {}", ctx.type_k));
        } else {
            parts.push(format!("KV {}/{}", ctx.type_k, ctx.type_v));
        }
    }
    parts.join(", ")
}

/// A p-value for people: three significant digits, "1" at the top, and
/// scientific notation below 0.001.
pub fn fmt_p(p: f64) -> String {
    if p >= 0.9995 {
        return "1".to_string();
    }
    if p < 0.001 {
        return format!("{p:.2e}");
    }
    let decimals = (2 - p.log10().floor() as i64).max(0) as usize;
    let s = format!("{p:.decimals$}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn significance(p: f64) -> &'static str {
    if p <= ALPHA {
        "significant"
    } else {
        "not significant"
    }
}

/// The verdict in plain words: the pass rates, then matched lines, then the
/// teacher-forced top-1 share when both runs have it.
fn verdict(c: &Comparison) -> String {
    let mut out = passes_verdict(c);
    matched_verdict(c, &mut out);
    top1_verdict(c, &mut out);
    kld_verdict(c, &mut out);
    out
}

/// The verdict on the divergence from the shared reference: which run's
/// distributions are farther from it, target by target.
fn kld_verdict(c: &Comparison, out: &mut String) {
    let Some(w) = &c.wilcoxon_kld else { return };
    let mean = |pick: fn(&Row) -> Option<f64>| {
        let v: Vec<f64> = c.targets.iter().filter_map(pick).collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    };
    let (ka, kb) = (mean(|r| r.kld_a), mean(|r| r.kld_b));
    if w.n == 0 {
        out.push_str(" KL divergence from the reference is the same on every target.");
        return;
    }
    let who = if kb > ka {
        "B is farther from the reference"
    } else if kb < ka {
        "A is farther from the reference"
    } else {
        "equal means"
    };
    let _ = write!(
        out,
        " KL divergence: {who} (mean per target A {ka:.5}, B {kb:.5} nats per token); Wilcoxon signed-rank p = {}, {} at α = {ALPHA}.",
        fmt_p(w.p),
        significance(w.p)
    );
}

/// The verdict on passes: which run passes more, the flips, McNemar, power.
fn passes_verdict(c: &Comparison) -> String {
    let n = c.targets_count;
    let (pa, pb) = (c.a.passes, c.b.passes);
    let (x, y) = (c.mcnemar.a_only, c.mcnemar.b_only);
    let flips = x + y;
    let p = fmt_p(c.mcnemar.p);
    if flips == 0 {
        format!("A and B pass exactly the same targets ({pa}/{n}); there are no flips to test.")
    } else if pa == pb {
        format!(
            "A and B pass the same number of targets ({pa}/{n} each): {} in each direction cancel out (exact McNemar p = {p}).",
            plural(x, "flip", "flips")
        )
    } else {
        let (winner, more, hi, lo) = if pb > pa {
            ("B", pb - pa, pb, pa)
        } else {
            ("A", pa - pb, pa, pb)
        };
        let spread = if x == 0 || y == 0 {
            format!("all toward {winner}")
        } else {
            format!("{x} toward A, {y} toward B")
        };
        let sig = c.mcnemar.p <= ALPHA;
        let mut s = format!(
            "{winner} passes {} ({hi}/{n} vs {lo}/{n}){} with {} ({spread}) the difference is {} (exact McNemar p = {p}, α = {ALPHA})",
            plural(more, "more target", "more targets"),
            if sig { ";" } else { ", but" },
            plural(flips, "flip", "flips"),
            significance(c.mcnemar.p),
        );
        match c.power.sample_size {
            SampleSize::Targets(t) => {
                let _ = write!(
                    s,
                    "; about {t} targets would give {:.0}% power to detect a difference of this size.",
                    100.0 * POWER
                );
            }
            SampleSize::BeyondCap(cap) => {
                let _ = write!(
                    s,
                    "; more than {cap} targets would be needed for {:.0}% power to detect a difference this small.",
                    100.0 * POWER
                );
            }
            SampleSize::NotReachable => s.push('.'),
        }
        s
    }
}

/// The verdict on matched lines (Wilcoxon on Δmatched).
fn matched_verdict(c: &Comparison, out: &mut String) {
    let n = c.targets_count;
    let w = &c.wilcoxon_matched;
    let total: i64 = c.targets.iter().map(|r| r.delta).sum();
    if w.n == 0 {
        out.push_str(" Matched lines are the same on every target.");
    } else {
        let who = if total > 0 {
            format!(
                "B matches {} in total",
                plural(total as usize, "more line", "more lines")
            )
        } else if total < 0 {
            format!(
                "A matches {} in total",
                plural((-total) as usize, "more line", "more lines")
            )
        } else {
            "A and B match the same number of lines in total".to_string()
        };
        let _ = write!(
            out,
            " Matched lines: {who} ({:.2} per target on average); Wilcoxon signed-rank p = {}, {} at α = {ALPHA}.",
            total.unsigned_abs() as f64 / n as f64,
            fmt_p(w.p),
            significance(w.p)
        );
    }
}

/// The verdict on the teacher-forced top-1 share, when both runs have it.
fn top1_verdict(c: &Comparison, out: &mut String) {
    if let (Some(w), Some(ta), Some(tb)) = (
        &c.wilcoxon_top1_share,
        c.a.top1_share_mean,
        c.b.top1_share_mean,
    ) {
        if w.n == 0 {
            out.push_str(" Teacher-forced top-1 share is the same on every target.");
        } else {
            let who = if tb > ta {
                "B higher"
            } else if tb < ta {
                "A higher"
            } else {
                "equal means"
            };
            let _ = write!(
                out,
                " Teacher-forced top-1 share: {who} (A {ta:.3}, B {tb:.3}, mean over {}); Wilcoxon signed-rank p = {}, {} at α = {ALPHA}.",
                plural(w.n + w.zeros, "target", "targets"),
                fmt_p(w.p),
                significance(w.p)
            );
        }
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

fn fmt_rank(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

fn wilcoxon_line(w: &Wilcoxon) -> String {
    if w.n == 0 {
        return format!(
            "all {} differences are zero, nothing to test (p = 1)",
            w.zeros
        );
    }
    let dropped = if w.zeros > 0 {
        format!(
            " ({} dropped)",
            plural(w.zeros, "zero difference", "zero differences")
        )
    } else {
        String::new()
    };
    format!(
        "Wilcoxon signed-rank on B − A: n = {}{dropped}, W+ = {}, W− = {}, p = {}",
        w.n,
        fmt_rank(w.w_plus),
        fmt_rank(w.w_minus),
        fmt_p(w.p)
    )
}

/// The text view: header, per-target table by depth, tests, verdict.
pub fn render_text(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "A: {}  [{}]", c.a.label, c.a.file);
    let _ = writeln!(out, "B: {}  [{}]", c.b.label, c.b.file);
    let _ = writeln!(
        out,
        "{} shared targets, {} lines each, pass at {} matched; Δ = B − A",
        c.targets_count, c.lines, c.pass
    );
    for n in &c.notes {
        let _ = writeln!(out, "note: {n}");
    }
    out.push('\n');

    target_table(c, &mut out);
    tests_text(c, &mut out);
    out.push('\n');
    let _ = writeln!(out, "verdict: {}", c.verdict);
    if !c.per_length.is_empty() {
        length_table(c, &mut out);
    }
    out
}

/// Two ladders per length: passes, matched lines and the paired tests.
fn length_table(c: &Comparison, out: &mut String) {
    let _ = writeln!(out, "\nper length (Δ = B − A):");
    let _ = writeln!(
        out,
        "{:>8} {:>9} {:>9} {:>11} {:>10} {:>9} {:>11}",
        "length", "A passes", "B passes", "McNemar p", "matched Δ", "Wilcoxon p", "top-1 Δ"
    );
    for l in &c.per_length {
        let x = &l.comparison;
        let top1 = match (x.a.top1_share_mean, x.b.top1_share_mean) {
            (Some(p), Some(q)) => format!("{:+.3}", q - p),
            _ => "-".into(),
        };
        let _ = writeln!(
            out,
            "{:>8} {:>9} {:>9} {:>11} {:>+10} {:>9} {:>11}",
            crate::run::length_label(l.length),
            format!("{}/{}", x.a.passes, x.targets_count),
            format!("{}/{}", x.b.passes, x.targets_count),
            fmt_p(x.mcnemar.p),
            x.b.matched as i64 - x.a.matched as i64,
            fmt_p(x.wilcoxon_matched.p),
            top1
        );
    }
}

/// The per-target table: matched lines, passes and flips, by depth.
fn target_table(c: &Comparison, out: &mut String) {
    let has_forced = c.targets.iter().any(|r| r.top1_share_delta.is_some());
    let w_name = c
        .targets
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(6);
    let ladder = c.targets.iter().any(|r| r.length.is_some());
    let length = |r: Option<usize>| match (ladder, r) {
        (false, _) => String::new(),
        (true, l) => format!("{:>6}  ", l.map_or("-".to_string(), crate::run::length_label)),
    };
    let mut head = format!(
        "{}{:<w_name$}  {:>5}  {:>9}  {:>9}  {:>4}  {:>6}  {:>6}",
        if ladder { format!("{:>6}  ", "length") } else { String::new() },
        "target", "depth", "matched A", "matched B", "Δ", "pass A", "pass B"
    );
    if has_forced {
        head.push_str(&format!("  {:>7}", "Δtop-1"));
    }
    head.push_str("  flip");
    let _ = writeln!(*out, "{}", head.trim_end());
    let mark = |p: bool| if p { "✓" } else { "✗" };
    for r in &c.targets {
        let mut line = format!(
            "{}{:<w_name$}  {:>5.2}  {:>9}  {:>9}  {:>4}  {:>6}  {:>6}",
            length(r.length),
            r.name,
            r.depth,
            r.matched_a,
            r.matched_b,
            if r.delta == 0 {
                "0".to_string()
            } else {
                format!("{:+}", r.delta)
            },
            mark(r.pass_a),
            mark(r.pass_b),
        );
        if has_forced {
            let d = r
                .top1_share_delta
                .map(|d| {
                    if d.abs() <= stats::TIE_TOLERANCE {
                        "0".to_string()
                    } else {
                        format!("{d:+.3}")
                    }
                })
                .unwrap_or_else(|| "-".into());
            line.push_str(&format!("  {d:>7}"));
        }
        line.push_str(match r.flip {
            Some(Flip::AOnly) => "  A only",
            Some(Flip::BOnly) => "  B only",
            None => "",
        });
        let _ = writeln!(*out, "{}", line.trim_end());
    }
    out.push('\n');
}

/// The pass rates, the tests and the power estimate.
fn tests_text(c: &Comparison, out: &mut String) {
    for (name, s) in [("A", &c.a), ("B", &c.b)] {
        let _ = writeln!(
            *out,
            "pass rate {name}: {}/{} = {}  (Wilson 95% {} – {})",
            s.passes,
            s.count,
            pct(s.pass_rate),
            pct(s.wilson95[0]),
            pct(s.wilson95[1])
        );
    }
    let _ = writeln!(
        *out,
        "flips: {} A only (A pass, B fail), {} B only (A fail, B pass); exact McNemar p = {}",
        c.mcnemar.a_only,
        c.mcnemar.b_only,
        fmt_p(c.mcnemar.p)
    );
    let _ = writeln!(
        *out,
        "matched lines: A {}, B {}; {}",
        c.a.matched,
        c.b.matched,
        wilcoxon_line(&c.wilcoxon_matched)
    );
    if let (Some(w), Some(ta), Some(tb)) = (
        &c.wilcoxon_top1_share,
        c.a.top1_share_mean,
        c.b.top1_share_mean,
    ) {
        let _ = writeln!(
            *out,
            "teacher-forced top-1 share (mean of {}): A {ta:.3}, B {tb:.3}; {}",
            plural(w.n + w.zeros, "target", "targets"),
            wilcoxon_line(w)
        );
    }
    let rates = format!(
        "exact McNemar at α = {}, observed flip rates {}/{n} A only and {}/{n} B only",
        c.power.alpha,
        c.mcnemar.a_only,
        c.mcnemar.b_only,
        n = c.targets_count
    );
    let pw = 100.0 * c.power.power;
    let _ = match c.power.sample_size {
        SampleSize::Targets(t) => writeln!(*out, "power: {t} targets give {pw:.0}% power ({rates})"),
        SampleSize::NotReachable => {
            writeln!(*out, "power: no pass-rate difference to detect ({rates})")
        }
        SampleSize::BeyondCap(cap) => writeln!(
            *out,
            "power: more than {cap} targets needed for {pw:.0}% power ({rates})"
        ),
    };
}
