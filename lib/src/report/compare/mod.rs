//! The paired comparison behind `posrecall compare A.json B.json` of two runs asked
//! about the same targets, with exact tests and a verdict in plain words.
//!
//! Per target: Δmatched = B − A and whether the pass flipped. Then the pass
//! rates with Wilson 95% intervals, an exact McNemar test on the flips, an
//! exact Wilcoxon signed-rank test on Δmatched (and on Δtop1_share when both
//! runs have teacher-forced metrics), and how many targets would give 80%
//! power to detect the observed pass-rate difference. The statistics live in
//! [`crate::score::stats`]; this module pairs the targets and refuses runs that are
//! not comparable; [`verdict`] words the result.

use crate::settings::Named;
// The command prints the text view from here.
use crate::decode::draft::DraftMode;
use crate::record::run::{DecodeMode, MadeBy, RunFile};
mod verdict;

use crate::score::stats::{self, SampleSize, Wilcoxon};
use anyhow::{Result, bail};
use serde::Serialize;
use std::path::Path;
pub use verdict::render_text;

/// Significance level of every test, and of the power calculation.
pub(crate) const ALPHA: f64 = 0.05;
/// The power the sample-size estimate asks for.
pub(crate) const POWER: f64 = 0.8;
/// The largest number of targets the sample-size search tries.
pub(crate) const POWER_CAP: u64 = 100_000;
/// Version of the compare JSON (docs/RUN_FORMAT.md, "Compare JSON").
pub(crate) const COMPARE_FORMAT: u32 = 1;

/// One run as the comparison describes it.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    /// The run file as given.
    pub file: String,
    /// Model name, build and KV types from the manifest, else the file name.
    pub label: String,
    pub count: usize,
    /// The run's recall; absent where either run generated no answers
    /// (`bench --forced-only`), so there is no recall to compare.
    #[serde(flatten)]
    pub recall: Option<SideRecall>,
    /// Mean teacher-forced top-1 share over the targets with it in both runs.
    pub top1_share_mean: Option<f64>,
    /// The divergence from the reference over the run's targets, every token
    /// alike, with llama-perplexity's figures; only where both runs were
    /// measured against the same reference file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kld: Option<crate::score::kld::KldSummary>,
}

/// One run's recall over the shared targets.
#[derive(Debug, Clone, Serialize)]
pub struct SideRecall {
    pub passes: usize,
    pub pass_rate: f64,
    /// Wilson 95% score interval of the pass rate.
    pub wilson95: [f64; 2],
    /// Matched lines over all targets.
    pub matched: usize,
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
    /// Both answers' recall; absent where either run generated no answers.
    #[serde(flatten)]
    pub recall: Option<RowRecall>,
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

/// One target's recall in both runs.
#[derive(Debug, Clone, Serialize)]
pub struct RowRecall {
    pub matched_a: usize,
    pub matched_b: usize,
    /// matched_b − matched_a.
    pub delta: i64,
    pub pass_a: bool,
    pub pass_b: bool,
    pub flip: Option<Flip>,
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
    /// The recall tests; absent where either run generated no answers
    /// (`bench --forced-only`).
    #[serde(flatten)]
    pub recall: Option<RecallTests>,
    /// On top1_share_delta over the targets with teacher-forced metrics in both runs.
    pub wilcoxon_top1_share: Option<Wilcoxon>,
    /// On kld_b − kld_a, when both runs were measured against the same reference.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wilcoxon_kld: Option<Wilcoxon>,
    pub verdict: String,
    /// Differences in how the two runs decoded, which the reader should weigh.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Two length ladders: the same comparison per length, shortest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub per_length: Vec<LengthComparison>,
}

/// The paired tests on recall: pass flips, matched lines, and the power.
#[derive(Debug, Clone, Serialize)]
pub struct RecallTests {
    pub mcnemar: McNemarResult,
    pub wilcoxon_matched: Wilcoxon,
    pub power: PowerResult,
}

/// One length of two ladders compared.
#[derive(Debug, Clone, Serialize)]
pub struct LengthComparison {
    pub length: usize,
    pub comparison: Comparison,
}

/// Two runs scored under different policies or credits: their counts are
/// made of different things (codeneedle leaves blank lines out of both
/// counts, `--credit code` comments and docstrings too), so no difference
/// between them means anything until one is rescored.
///
/// Needs no hint: the message says what fixes it, and `compare`'s face adds
/// the command line that does.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot compare {a} and {b}: they were scored under different policies ({} vs {}); rescore one under the other's policy, which needs no model",
    scoring_words(*a_policy, *a_credit),
    scoring_words(*b_policy, *b_credit)
)]
pub struct PoliciesDiffer {
    pub a: String,
    pub b: String,
    pub a_policy: crate::score::Policy,
    pub b_policy: crate::score::Policy,
    pub a_credit: crate::score::Credit,
    pub b_credit: crate::score::Credit,
}

/// A policy, and its credit where it is not the default: "codeneedle",
/// "posrecall, credit code".
fn scoring_words(policy: crate::score::Policy, credit: crate::score::Credit) -> String {
    match credit.is_default() {
        true => policy.to_string(),
        false => format!("{policy}, credit {credit}"),
    }
}

/// Refuses two runs that were not asked the same questions under the same
/// scoring: then per-target differences would mean nothing.
pub(crate) fn check_pairable(a: &RunFile, a_path: &Path, b: &RunFile, b_path: &Path) -> Result<()> {
    let (an, bn) = (a_path.display(), b_path.display());
    // A run that stopped before its end is not yet the run it names: its
    // figures would stand for targets it never asked.
    for (run, name) in [(a, &an), (b, &bn)] {
        if let Some(unfinished) = run.unfinished_label() {
            bail!("cannot compare {an} and {bn}: {name} is an unfinished run ({unfinished}); finish it first");
        }
    }
    let (pa, pb) = (&a.manifest.params, &b.manifest.params);
    if (pa.policy, pa.credit) != (pb.policy, pb.credit) {
        return Err(PoliciesDiffer {
            a: an.to_string(),
            b: bn.to_string(),
            a_policy: pa.policy,
            b_policy: pb.policy,
            a_credit: pa.credit,
            b_credit: pb.credit,
        }
        .into());
    }
    let scoring = [
        ("lines", pa.lines.to_string(), pb.lines.to_string()),
        ("pass", pa.pass.to_string(), pb.pass.to_string()),
        ("normalize", pa.normalize.as_str().to_string(), pb.normalize.as_str().to_string()),
        ("skip_blank", pa.skip_blank.to_string(), pb.skip_blank.to_string()),
    ];
    for (key, x, y) in scoring {
        if x != y {
            bail!("cannot compare {an} and {bn}: they were scored differently ({key} {x} vs {y})");
        }
    }
    if pa.anchor != pb.anchor {
        bail!("cannot compare {an} and {bn}: they were asked differently (anchor {} vs {})", pa.anchor, pb.anchor);
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
        bail!("cannot compare {an} and {bn}: their targets differ ({} vs {} targets)", a.targets.len(), b.targets.len());
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
    let show = |l: Option<Vec<usize>>| match l {
        None => "one window, no ladder".to_string(),
        Some(v) => format!("lengths {}", v.iter().map(|&n| crate::record::run::length_label(n)).collect::<Vec<_>>().join(", ")),
    };
    if lengths(a) != lengths(b) {
        bail!("cannot compare {an} and {bn}: they were asked at different lengths ({} against {})", show(lengths(a)), show(lengths(b)));
    }
    Ok(())
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// Two ladders asked at different lengths, cut to the lengths both have
/// where each such length kept the same window in both (a q8_0 ladder run
/// to 16k against an f16 one run to 32k), and a note naming what was left
/// out; `None` where there is nothing to cut, or nothing in common.
fn at_common_lengths(a: &RunFile, b: &RunFile) -> Option<(RunFile, RunFile, String)> {
    let (la, lb) = (a.ladder.as_ref()?, b.ladder.as_ref()?);
    let window =
        |l: &crate::record::run::LadderRecord, length: usize| l.rungs.iter().find(|g| g.length == length).map(|g| g.crop.sha256.clone());
    let common: Vec<usize> =
        la.rungs.iter().map(|g| g.length).filter(|&n| window(lb, n).is_some_and(|w| Some(w) == window(la, n))).collect();
    let all = |l: &crate::record::run::LadderRecord| l.rungs.iter().map(|g| g.length).collect::<Vec<_>>();
    if common.is_empty() || (common == all(la) && common == all(lb)) {
        return None;
    }
    let left = |l: &crate::record::run::LadderRecord| {
        l.rungs
            .iter()
            .map(|g| g.length)
            .filter(|n| !common.contains(n))
            .map(crate::record::run::length_label)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (only_a, only_b) = (left(la), left(lb));
    let side = |name: &str, lengths: &str| (!lengths.is_empty()).then(|| format!("{name}'s {lengths}"));
    let out: Vec<String> = [side("A", &only_a), side("B", &only_b)].into_iter().flatten().collect();
    let note = format!(
        "compared at the lengths both ladders ran on the same windows ({}); left out: {}",
        common.iter().map(|&n| crate::record::run::length_label(n)).collect::<Vec<_>>().join(", "),
        out.join(" and ")
    );
    Some((a.at_lengths(&common), b.at_lengths(&common), note))
}

impl Comparison {
    /// The paired comparison of B against A (differences are B − A), its
    /// verdict worded. Ladders asked at different lengths are compared at
    /// the lengths they share.
    pub fn new(a: &RunFile, a_path: &Path, b: &RunFile, b_path: &Path) -> Result<Comparison> {
        compare(a, a_path, b, b_path)
    }
}

/// [`Comparison::new`].
fn compare(a: &RunFile, a_path: &Path, b: &RunFile, b_path: &Path) -> Result<Comparison> {
    if let Some((a, b, note)) = at_common_lengths(a, b) {
        let mut c = compare(&a, a_path, &b, b_path)?;
        c.notes.insert(0, note);
        return Ok(c);
    }
    check_pairable(a, a_path, b, b_path)?;
    let rows = paired_rows(a, b);
    let n = rows.len();
    let top1_deltas: Vec<f64> = rows.iter().filter_map(|r| r.top1_share_delta).collect();
    let kld_deltas: Vec<f64> = rows.iter().filter_map(|r| Some(r.kld_b? - r.kld_a?)).collect();
    let mut c = Comparison {
        format: COMPARE_FORMAT,
        a: side(&rows, a, a_path, |r| r.recall.as_ref().map(|x| (x.pass_a, x.matched_a)), |r| r.top1_share_a),
        b: side(&rows, b, b_path, |r| r.recall.as_ref().map(|x| (x.pass_b, x.matched_b)), |r| r.top1_share_b),
        targets_count: n,
        lines: a.manifest.params.lines,
        pass: a.manifest.params.pass,
        alpha: ALPHA,
        recall: recall_tests(&rows),
        wilcoxon_top1_share: (!top1_deltas.is_empty()).then(|| stats::wilcoxon_signed_rank(&top1_deltas)),
        wilcoxon_kld: (!kld_deltas.is_empty()).then(|| stats::wilcoxon_signed_rank(&kld_deltas)),
        targets: rows,
        verdict: String::new(),
        notes: decoding_notes(a, b),
        per_length: Vec::new(),
    };
    if same_reference(a, b) {
        let kld = |r: &RunFile| crate::score::kld::KldSummary::of(r.targets.iter().filter_map(|t| t.forced.as_ref()?.kld.as_ref()));
        (c.a.kld, c.b.kld) = (kld(a), kld(b));
    }
    c.notes.extend(same_label_note(a, a_path, b, b_path));
    // The words read the figures above, so they are written last.
    c.verdict = verdict::verdict(&c);
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
/// Divergences compare only when both runs measured them against one reference.
fn same_reference(a: &RunFile, b: &RunFile) -> bool {
    let reference = |r: &RunFile| r.manifest.reference.as_ref().map(|x| x.sha256.clone());
    reference(a).is_some() && reference(a) == reference(b)
}

fn paired_rows(a: &RunFile, b: &RunFile) -> Vec<Row> {
    let same_reference = same_reference(a, b);
    let kld = |t: &crate::record::run::TargetResult| same_reference.then(|| t.forced.as_ref()?.kld.as_ref().map(|k| k.mean)).flatten();
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
                recall: x.score.as_ref().zip(y.score.as_ref()).map(|(sa, sb)| RowRecall {
                    matched_a: sa.matched,
                    matched_b: sb.matched,
                    delta: sb.matched as i64 - sa.matched as i64,
                    pass_a: sa.pass,
                    pass_b: sb.pass,
                    flip: match (sa.pass, sb.pass) {
                        (true, false) => Some(Flip::AOnly),
                        (false, true) => Some(Flip::BOnly),
                        _ => None,
                    },
                }),
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
    PowerResult { alpha: ALPHA, power: POWER, p10, p01, status, targets, cap: POWER_CAP, sample_size }
}

/// The recall tests over the rows, where both runs measured recall (each
/// row has it or none does: a run generates all its answers or none).
fn recall_tests(rows: &[Row]) -> Option<RecallTests> {
    let recall: Vec<&RowRecall> = rows.iter().map(|r| r.recall.as_ref()).collect::<Option<_>>()?;
    let a_only = recall.iter().filter(|r| r.flip == Some(Flip::AOnly)).count();
    let b_only = recall.iter().filter(|r| r.flip == Some(Flip::BOnly)).count();
    let deltas: Vec<f64> = recall.iter().map(|r| r.delta as f64).collect();
    Some(RecallTests {
        mcnemar: McNemarResult { a_only, b_only, p: stats::mcnemar_exact(a_only as u64, b_only as u64) },
        wilcoxon_matched: stats::wilcoxon_signed_rank(&deltas),
        power: power(a_only, b_only, rows.len()),
    })
}

/// One run's side of the comparison; `recall` reads its pass and matched
/// lines from a row (`None` where recall is not compared), `top1` its
/// top-1 share. The mean top-1 share is over the targets both runs have
/// forced metrics for.
fn side(rows: &[Row], run: &RunFile, path: &Path, recall: fn(&Row) -> Option<(bool, usize)>, top1: fn(&Row) -> Option<f64>) -> Side {
    let n = rows.len();
    let scored: Option<Vec<(bool, usize)>> = rows.iter().map(recall).collect();
    let forced: Vec<f64> = rows.iter().filter(|r| r.top1_share_delta.is_some()).filter_map(top1).collect();
    Side {
        file: path.display().to_string(),
        label: label(run, path),
        count: n,
        recall: scored.map(|scored| {
            let passes = scored.iter().filter(|s| s.0).count();
            let (lo, hi) = stats::wilson95(passes as u64, n as u64);
            SideRecall { passes, pass_rate: passes as f64 / n as f64, wilson95: [lo, hi], matched: scored.iter().map(|s| s.1).sum() }
        }),
        top1_share_mean: (!forced.is_empty()).then(|| forced.iter().sum::<f64>() / forced.len() as f64),
        kld: None,
    }
}

/// Notes on runs that decoded differently: answers of a parallel run can part
/// from sequential ones at near ties, and so can drafted answers from
/// undrafted ones; fixed-length answers are a
/// throughput measurement, not a recall one.
fn decoding_notes(a: &RunFile, b: &RunFile) -> Vec<String> {
    let mode = |r: &RunFile| {
        let p = &r.manifest.params;
        match (p.decode_mode, p.parallel) {
            (Some(DecodeMode::Parallel), Some(n)) => format!("parallel {n}"),
            (Some(m), _) => m.to_string(),
            (None, _) => "unrecorded".to_string(),
        }
    };
    let mut notes = Vec::new();
    let (ma, mb) = (mode(a), mode(b));
    if ma != mb && a.manifest.command == MadeBy::Bench && b.manifest.command == MadeBy::Bench {
        notes.push(format!(
            "A decoded {ma}, B {mb}: batched and one-token decodes can round differently, so some answers may part at near ties (docs/GUIDE.md, Parallel decoding)"
        ));
    }
    // Older runs recorded no draft mode: they decoded one token per step.
    let draft = |r: &RunFile| r.manifest.params.draft.unwrap_or(DraftMode::None);
    let (da, db) = (draft(a), draft(b));
    let generated = |r: &RunFile| r.manifest.command == MadeBy::Bench && r.manifest.params.decode_mode != Some(DecodeMode::ForcedOnly);
    if da != db && generated(a) && generated(b) {
        notes.push(format!(
            "A drafted its answers in draft mode {da}, B in draft mode {db}: a batch that verifies drafts can round differently \
             from a one-token step, so some answers may part at near ties (docs/GUIDE.md, Exact speculative decoding)"
        ));
    }
    if let Some(note) = kernels_note(a, b) {
        notes.push(note);
    }
    if let Some(note) = rotation_note(a, b) {
        notes.push(note);
    }
    let (fa, fb) = (a.manifest.params.fixed_tokens, b.manifest.params.fixed_tokens);
    if fa != fb {
        let show = |f: Option<usize>| f.map_or("normal answers".to_string(), |t| format!("exactly {t} tokens per answer"));
        notes.push(format!("A generated {}, B {}", show(fa), show(fb)));
    }
    notes
}

/// Two runs whose header names them alike (same model name, build and KV)
/// although they ran another model file or another probe: the label alone
/// would let the reader take a quant A/B, or chat against completion, for
/// two runs of one setting.
fn same_label_note(a: &RunFile, a_path: &Path, b: &RunFile, b_path: &Path) -> Option<String> {
    if label(a, a_path) != label(b, b_path) {
        return None;
    }
    let mut differ = Vec::new();
    if let (Some(ma), Some(mb)) = (&a.manifest.model, &b.manifest.model)
        && ma.sha256 != mb.sha256
    {
        differ.push(format!("the model file's sha256 (A {}, B {})", short(&ma.sha256), short(&mb.sha256)));
    }
    let (pa, pb) = (a.manifest.params.probe, b.manifest.params.probe);
    if pa != pb {
        let show = |p: Option<crate::prompt::ProbeKind>| p.map_or("unrecorded", |p| p.as_str());
        differ.push(format!("the probe (A {}, B {})", show(pa), show(pb)));
    }
    (!differ.is_empty()).then(|| format!("A and B are labelled alike but differ in {}", differ.join(" and ")))
}

/// Two runs computed by different CPU kernels (a portable AVX2 build and a
/// native AVX-512 one), and whether that is all that sets them apart.
fn kernels_note(a: &RunFile, b: &RunFile) -> Option<String> {
    let (fa, fb) = (a.manifest.runtime.cpu_features.as_ref()?, b.manifest.runtime.cpu_features.as_ref()?);
    if fa == fb {
        return None;
    }
    let mut b_as_a = b.manifest.clone();
    b_as_a.runtime.cpu_features = Some(fa.clone());
    let only = crate::record::keys::resume_key(&a.manifest) == crate::record::keys::resume_key(&b_as_a);
    let (ja, jb) = (fa.join(" "), fb.join(" "));
    Some(match only {
        true => format!(
            "A and B differ only in the CPU kernels llama.cpp ran (A {ja}; B {jb}): they round differently, so answers can part at near ties"
        ),
        false => format!("A ran the CPU kernels {ja}; B {jb}"),
    })
}

/// Two runs whose KV caches llama.cpp rotated differently, and whether that
/// is all that sets them apart (every other field of the run's key equal).
fn rotation_note(a: &RunFile, b: &RunFile) -> Option<String> {
    let (ca, cb) = (a.manifest.context.as_ref()?, b.manifest.context.as_ref()?);
    let shown = |r: Option<crate::settings::Rotation>| r.map_or("unrecorded".to_string(), |r| r.to_string());
    let (ra, rb) = (shown(ca.kv_rotation), shown(cb.kv_rotation));
    if ra == rb {
        return None;
    }
    let mut b_as_a = b.manifest.clone();
    if let Some(c) = b_as_a.context.as_mut() {
        c.kv_rotation = ca.kv_rotation;
    }
    let only = crate::record::keys::resume_key(&a.manifest) == crate::record::keys::resume_key(&b_as_a);
    Some(match only {
        true => format!("A and B differ only in llama.cpp's KV rotation (A {ra}, B {rb}): what the comparison measures is the rotation"),
        false => format!("A's KV rotation was {ra}, B's {rb}"),
    })
}

/// How the header names a run: model name, build and KV types from the
/// manifest (bench runs), else the file name (score runs).
fn label(run: &RunFile, path: &Path) -> String {
    let file = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_else(|| path.display().to_string());
    let Some(m) = &run.manifest.model else {
        return format!("{file} (scored answers)");
    };
    let model_file = Path::new(&m.path).file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_else(|| m.path.clone());
    let name = m.name.clone().filter(|n| !n.is_empty()).unwrap_or(model_file);
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
        if let Some(r) = ctx.kv_rotation.filter(|r| r.mode == crate::settings::KvRotation::Off) {
            parts.push(format!("rotation {r}"));
        }
    }
    parts.join(", ")
}
