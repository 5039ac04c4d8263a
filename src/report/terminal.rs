//! The terminal view: a colour-coded diff per target and one aggregate line.
//!
//! Colours follow the method: gray matched, orange missing, yellow
//! hallucinated, blue extra. Without colour (not a terminal, or `NO_COLOR`
//! set) every line carries a marker instead, so a log stays readable.

use crate::run::{Summary, TargetResult, Totals};
use crate::score::LineStatus;
use console::Style;
use std::fmt::Write as _;
use std::io::IsTerminal;

/// Whether stdout should be coloured: a terminal, and `NO_COLOR` unset or empty.
pub fn stdout_wants_color() -> bool {
    std::io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The marker and style of each class.
fn look(status: LineStatus, color: bool) -> (&'static str, Style) {
    let base = Style::new().force_styling(color);
    match status {
        LineStatus::Matched => ("=", base.color256(245)),
        LineStatus::Missing => ("-", base.color256(208)),
        LineStatus::Hallucinated => ("?", base.yellow()),
        LineStatus::Extra => ("+", base.blue()),
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
pub fn target_diff(t: &TargetResult, lines: usize, color: bool) -> String {
    let mut out = String::new();
    let verdict = if t.pass { "PASS" } else { "FAIL" };
    let _ = writeln!(
        out,
        "{} {}  line {}  depth {:.2}  matched {}/{}  missing {} (truncated {})  hallucinated {}  extra {}",
        Style::new().force_styling(color).bold().apply_to(verdict),
        Style::new().force_styling(color).bold().apply_to(&t.name),
        t.line,
        t.depth,
        t.matched,
        lines,
        t.missing,
        t.truncated,
        t.hallucinated,
        t.extra
    );
    if let Some(f) = &t.forced {
        let _ = writeln!(out, "  teacher-forced: {}", forced_line(f));
    }
    for l in &t.lines {
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
pub fn totals_line(t: &Totals) -> String {
    format!(
        "{}/{} passed, {} matched, {} missing ({} truncated), {} hallucinated, {} extra",
        t.passes, t.count, t.matched, t.missing, t.truncated, t.hallucinated, t.extra
    )
}

/// One target's teacher-forced metrics as one line.
fn forced_line(f: &crate::forced::Forced) -> String {
    super::forced_phrases(f).join(", ")
}

/// The aggregate and the per-quarter breakdown.
pub fn summary(s: &Summary) -> String {
    let mut out = format!("{}\n", totals_line(&s.total));
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
            let _ = writeln!(
                out,
                "against the reference: KLD mean {:.5}, p99 {:.4}, max {:.4}, same top-1 {:.1}%, mean Δp {:+.4} ({} tokens)",
                k.mean,
                k.p99,
                k.max,
                100.0 * k.same_top1,
                k.mean_delta_p,
                k.tokens
            );
        }
        if let Some(g) = &f.context_gain {
            let _ = writeln!(
                out,
                "the file adds (forced, with − without): top-1 share {:+.3}, mean log-prob {:+.3}",
                g.top1_share, g.mean_logprob
            );
        }
    }
    for (i, q) in s.by_quarter.iter().enumerate() {
        if q.count > 0 {
            let _ = writeln!(
                out,
                "  depth {:.2}-{:.2}: {}",
                i as f64 / 4.0,
                (i + 1) as f64 / 4.0,
                totals_line(q)
            );
        }
    }
    out
}
