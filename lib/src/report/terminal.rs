//! The terminal view: a colour-coded diff per target and one aggregate line.
//!
//! Colours follow the method: gray matched, orange missing, yellow
//! hallucinated, blue extra (and, under the codeneedle policy, cyan
//! re-indented). Without colour (not a terminal, or `NO_COLOR`
//! set) every line carries a marker instead, so a log stays readable.

use crate::record::run::{LadderRecord, NOT_MEASURED, Summary, TargetResult, Totals};
use crate::score::LineStatus;
use console::Style;
use std::fmt::Write as _;

/// The marker and style of each class.
fn look(status: LineStatus, color: bool) -> (&'static str, Style) {
    let base = Style::new().force_styling(color);
    match status {
        LineStatus::Matched => ("=", base.color256(245)),
        LineStatus::Missing => ("-", base.color256(208)),
        LineStatus::Hallucinated => ("?", base.yellow()),
        LineStatus::Extra => ("+", base.blue()),
        LineStatus::Reindented => ("~", base.cyan()),
    }
}

/// The legend printed once above the diffs.
pub fn legend(color: bool) -> String {
    [
        (LineStatus::Matched, "matched"),
        (LineStatus::Missing, "missing"),
        (LineStatus::Hallucinated, "hallucinated"),
        (LineStatus::Extra, "extra"),
    ]
    .into_iter()
    .map(|(s, word)| {
        let (mark, style) = look(s, color);
        style.apply_to(format!("{mark} {word}")).to_string()
    })
    .collect::<Vec<_>>()
    .join("   ")
}

/// One target's diff: a heading, then every scored line with its class.
/// A target with no answer (`--forced-only`) has its heading and forced
/// metrics alone.
pub fn target_diff(t: &TargetResult, lines: usize, color: bool) -> String {
    let mut out = String::new();
    let bold = |s: &str| Style::new().force_styling(color).bold().apply_to(s.to_string());
    match &t.score {
        Some(s) => {
            let phrases = super::score_phrases(s, lines);
            let (verdict, counts) = phrases.split_first().map_or(("", &[][..]), |(v, c)| (v.as_str(), c));
            let _ = writeln!(out, "{} {}  line {}  depth {:.2}  {}", bold(verdict), bold(&t.name), t.line, t.depth, counts.join("  "));
        }
        None => {
            let _ = writeln!(out, "{}  line {}  depth {:.2}  no answer generated", bold(&t.name), t.line, t.depth);
        }
    }
    if let Some(f) = &t.forced {
        let _ = writeln!(out, "  teacher-forced: {}", forced_line(f));
    }
    for l in t.score.iter().flat_map(|s| &s.lines) {
        let (mark, style) = look(l.status, color);
        let _ = writeln!(out, "  {}", style.apply_to(format!("{mark} {}", clip(&l.text))));
    }
    out
}

/// An answer line cut to a screenful.
fn clip(text: &str) -> std::borrow::Cow<'_, str> {
    super::clip(text, 160)
}

/// `passes/count, matched, missing (truncated), hallucinated, extra` as one line.
/// Where no answer was generated: the count, and recall not measured.
pub fn totals_line(t: &Totals) -> String {
    match &t.recall {
        Some(r) => match (r.scored, r.reindented) {
            // codeneedle's counts: of the scored lines, re-indented apart, no truncation.
            (Some(scored), Some(reindented)) => format!(
                "{}/{} passed (codeneedle policy), {} matched of {scored} scored, {} missing, {reindented} re-indented, {} hallucinated, {} extra",
                r.passes, t.count, r.matched, r.missing, r.hallucinated, r.extra
            ),
            // posrecall with --credit code: of the code lines.
            (Some(scored), None) => format!(
                "{}/{} passed, {} matched of {scored} code lines, {} missing ({} truncated), {} hallucinated, {} extra",
                r.passes, t.count, r.matched, r.missing, r.truncated, r.hallucinated, r.extra
            ),
            _ => format!(
                "{}/{} passed, {} matched, {} missing ({} truncated), {} hallucinated, {} extra",
                r.passes, t.count, r.matched, r.missing, r.truncated, r.hallucinated, r.extra
            ),
        },
        None => format!("{}, no answer generated: recall {NOT_MEASURED}", targets(t.count)),
    }
}

/// A composition in words: matched of lines per kind.
pub(crate) fn composition_line(c: &crate::score::Composition) -> String {
    let prose = c.prose();
    let mut out = format!(
        "code {} matched of {}, prose {} of {} (comments {} of {}, docstrings {} of {})",
        c.code.matched,
        c.code.lines,
        prose.matched,
        prose.lines,
        c.comment.matched,
        c.comment.lines,
        c.docstring.matched,
        c.docstring.lines
    );
    if let Some(b) = c.blank {
        let _ = write!(out, ", blank {} of {}", b.matched, b.lines);
    }
    out
}

fn targets(n: usize) -> String {
    format!("{n} target{}", if n == 1 { "" } else { "s" })
}

/// A ladder cell: passes/targets and matched lines.
fn grid_cell(t: &Totals) -> String {
    match (&t.recall, t.count) {
        (_, 0) => "·".to_string(),
        (Some(r), _) => format!("{}/{} {:>4}", r.passes, t.count, r.matched),
        (None, _) => "-".to_string(),
    }
}

/// One target's teacher-forced metrics as one line.
fn forced_line(f: &crate::score::forced::Forced) -> String {
    super::forced_phrases(f).join(", ")
}

/// A run's divergence from its reference in one line: llama-perplexity's
/// headline figures where the run file has them (KLD mean ± s.e., p99, max,
/// RMS Δp ± s.e., same top p ± s.e.; the full list is in the exports), else
/// the older figures.
pub(crate) fn kld_line(k: &crate::score::kld::KldSummary) -> String {
    match &k.stats {
        Some(s) => format!(
            "KLD mean {:.5} ± {:.5}, p99 {:.4}, max {:.4}; RMS Δp {:.3} ± {:.3}%, same top p {:.2} ± {:.2}% ({} tokens)",
            s.kld.mean,
            s.kld.mean_se,
            s.kld.p99,
            s.kld.max,
            100.0 * s.delta_p_rms,
            100.0 * s.delta_p_rms_se,
            100.0 * s.same_top_p,
            100.0 * s.same_top_p_se,
            s.tokens
        ),
        None => format!(
            "KLD mean {:.5}, p99 {:.4}, max {:.4}, same top-1 {:.1}%, mean Δp {:+.4} ({} tokens)",
            k.mean,
            k.p99,
            k.max,
            100.0 * k.same_top1,
            k.mean_delta_p,
            k.tokens
        ),
    }
}

/// The aggregate and the per-quarter breakdown.
pub fn summary(s: &Summary) -> String {
    let mut out = format!("{}\n", totals_line(&s.total));
    if let Some(c) = s.total.recall.as_ref().and_then(|r| r.composition.as_ref()) {
        let _ = writeln!(out, "made of: {}", composition_line(c));
    }
    if let Some(c) = &s.closed_book {
        let _ = writeln!(
            out,
            "closed book (no file): {}/{} passed, {} matched; the context explains {} matched lines",
            c.passes, s.total.count, c.matched, c.context_matched
        );
    }
    if let Some(f) = &s.forced {
        let _ = writeln!(
            out,
            "teacher-forced: top-1 share {:.3}, mean log-prob {:.3}, {:.1}% of lines exact, {} near ties",
            f.top1_share,
            f.mean_logprob,
            100.0 * f.lines_exact_share,
            f.near_ties
        );
        if let Some(k) = &f.kld {
            let _ = writeln!(out, "against the reference: {}", kld_line(k));
        }
        if let Some(g) = &f.context_gain {
            let _ = writeln!(
                out,
                "the file adds (forced, with − without): top-1 share {:+.3}, mean log-prob {:+.3}",
                g.top1_share, g.mean_logprob
            );
        }
    }
    if let Some(d) = &s.draft
        && d.stats.proposed > 0
    {
        let _ = writeln!(
            out,
            "drafts: {} of {} draft tokens kept ({} from the ground truth, {} from the file); {} tokens in {} decode steps, {:.2} per step",
            d.stats.accepted,
            d.stats.proposed,
            d.stats.by_source.truth.accepted,
            d.stats.by_source.file.accepted,
            d.generated_tokens,
            d.stats.steps,
            d.tokens_per_step
        );
    }
    if let Some(e) = &s.undrafted {
        let gap = e.max_parting_gap.map(|g| format!(", the widest logit gap where they part {g:.3}")).unwrap_or_default();
        let _ = writeln!(
            out,
            "without drafts: {} of {} answers identical, {} differ (matched lines {:+}, passes changed {}){gap}",
            e.identical, e.targets, e.differing, e.matched_difference, e.pass_changes
        );
    }
    for (i, q) in s.by_quarter.iter().enumerate() {
        if q.count > 0 {
            // Without recall the totals line has said why once.
            let line = if q.recall.is_some() { totals_line(q) } else { targets(q.count) };
            let _ = writeln!(out, "  depth {:.2}-{:.2}: {line}", i as f64 / 4.0, (i + 1) as f64 / 4.0);
        }
    }
    out
}

/// A length ladder as a depth × length grid: per cell the passes over the
/// targets and the matched lines; then per length the pass rate with its
/// 95% interval and the forced top-1 share, and the effective length.
pub fn ladder_grid(l: &LadderRecord) -> String {
    use crate::record::run::length_label as label;
    const W: usize = 14;
    let mut out = String::from("recall by depth and length (passes/targets, matched lines):\n");
    let _ = write!(out, "{:<11}", "depth");
    for r in &l.rungs {
        let _ = write!(out, "{:>W$}", format!("{} ({})", label(r.length), r.prefix_tokens));
    }
    out.push('\n');
    for q in 0..4 {
        let _ = write!(out, "{:<11}", format!("{:.2}-{:.2}", q as f64 / 4.0, (q + 1) as f64 / 4.0));
        for r in &l.rungs {
            let _ = write!(out, "{:>W$}", grid_cell(&r.summary.by_quarter[q]));
        }
        out.push('\n');
    }
    let _ = write!(out, "{:<11}", "all");
    for r in &l.rungs {
        let _ = write!(out, "{:>W$}", grid_cell(&r.summary.total));
    }
    out.push('\n');
    let _ = write!(out, "{:<11}", "pass rate");
    for r in &l.rungs {
        let _ = write!(out, "{:>W$}", format!("{:.2}", r.pass_rate));
    }
    out.push('\n');
    let _ = write!(out, "{:<11}", "  95% CI");
    for r in &l.rungs {
        let _ = write!(out, "{:>W$}", format!("{:.2}-{:.2}", r.pass_low, r.pass_high));
    }
    out.push('\n');
    if l.rungs.iter().any(|r| r.summary.forced.is_some()) {
        let _ = write!(out, "{:<11}", "top-1");
        for r in &l.rungs {
            let cell = r.summary.forced.as_ref().map_or("-".to_string(), |f| format!("{:.3}", f.top1_share));
            let _ = write!(out, "{cell:>W$}");
        }
        out.push('\n');
    }
    let effective = match l.effective_length {
        Some(n) => label(n),
        None => "below the shortest length".to_string(),
    };
    let _ = writeln!(out, "effective length (pass rate >= {:.2} at every length up to it): {effective}", l.effective_at);
    if let Some(s) = &l.stopped {
        let _ = writeln!(out, "note: {s}");
    }
    out
}
