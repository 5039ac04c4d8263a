//! The wording of `posrecall compare`: the verdict in plain words and the
//! text view (header, per-target table, tests, verdict) of a
//! [`Comparison`] that [`crate::report::compare`] made.

use super::{ALPHA, Comparison, Flip, POWER, RecallTests, Row};
use crate::score::stats::{self, SampleSize, Wilcoxon};
use std::fmt::Write as _;

/// A p-value for people: three significant digits, "1" at the top, and
/// scientific notation below 0.001.
pub(crate) fn fmt_p(p: f64) -> String {
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
    if p <= ALPHA { "significant" } else { "not significant" }
}

/// The verdict in plain words: the pass rates, then matched lines, then the
/// teacher-forced top-1 share when both runs have it.
/// Where a run generated no answers, recall is not compared, and the
/// verdict says so first.
pub(super) fn verdict(c: &Comparison) -> String {
    let mut out = match &c.recall {
        Some(t) => {
            let mut out = passes_verdict(c, t);
            matched_verdict(c, t, &mut out);
            out
        }
        None => NO_RECALL.to_string(),
    };
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

/// What the verdict and the text view say where either run generated no
/// answers (`bench --forced-only`).
const NO_RECALL: &str = "Recall is not compared: a run that generated no answers (forced-only) has none measured.";

/// The matched lines of both sides (the sides have recall where `t` is).
fn matched_lines(c: &Comparison) -> (usize, usize) {
    let m = |s: &super::Side| s.recall.as_ref().map_or(0, |r| r.matched);
    (m(&c.a), m(&c.b))
}

/// The verdict on passes: which run passes more, the flips, McNemar, power.
fn passes_verdict(c: &Comparison, t: &RecallTests) -> String {
    let n = c.targets_count;
    let passes = |s: &super::Side| s.recall.as_ref().map_or(0, |r| r.passes);
    let (pa, pb) = (passes(&c.a), passes(&c.b));
    let (x, y) = (t.mcnemar.a_only, t.mcnemar.b_only);
    let flips = x + y;
    let p = fmt_p(t.mcnemar.p);
    if flips == 0 {
        format!("A and B pass exactly the same targets ({pa}/{n}); there are no flips to test.")
    } else if pa == pb {
        format!(
            "A and B pass the same number of targets ({pa}/{n} each): {} in each direction cancel out (exact McNemar p = {p}).",
            plural(x, "flip", "flips")
        )
    } else {
        let (winner, more, hi, lo) = if pb > pa { ("B", pb - pa, pb, pa) } else { ("A", pa - pb, pa, pb) };
        let spread = if x == 0 || y == 0 { format!("all toward {winner}") } else { format!("{x} toward A, {y} toward B") };
        let sig = t.mcnemar.p <= ALPHA;
        let mut s = format!(
            "{winner} passes {} ({hi}/{n} vs {lo}/{n}){} with {} ({spread}) the difference is {} (exact McNemar p = {p}, α = {ALPHA})",
            plural(more, "more target", "more targets"),
            if sig { ";" } else { ", but" },
            plural(flips, "flip", "flips"),
            significance(t.mcnemar.p),
        );
        match t.power.sample_size {
            SampleSize::Targets(t) => {
                let _ = write!(s, "; about {t} targets would give {:.0}% power to detect a difference of this size.", 100.0 * POWER);
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
fn matched_verdict(c: &Comparison, t: &RecallTests, out: &mut String) {
    let n = c.targets_count;
    let w = &t.wilcoxon_matched;
    let (ma, mb) = matched_lines(c);
    let total = mb as i64 - ma as i64;
    if w.n == 0 {
        out.push_str(" Matched lines are the same on every target.");
    } else {
        let who = if total > 0 {
            format!("B matches {} in total", plural(total as usize, "more line", "more lines"))
        } else if total < 0 {
            format!("A matches {} in total", plural((-total) as usize, "more line", "more lines"))
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
    for (name, s) in [("A", &c.a), ("B", &c.b)] {
        if let Some(k) = &s.kld {
            let _ = writeln!(*out, "against the reference {name}: {}", crate::report::terminal::kld_line(k));
        }
    }
    if let (Some(w), Some(ta), Some(tb)) = (&c.wilcoxon_top1_share, c.a.top1_share_mean, c.b.top1_share_mean) {
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
    if x.fract() == 0.0 { format!("{x:.0}") } else { format!("{x:.1}") }
}

fn wilcoxon_line(w: &Wilcoxon) -> String {
    if w.n == 0 {
        return format!("all {} differences are zero, nothing to test (p = 1)", w.zeros);
    }
    let dropped =
        if w.zeros > 0 { format!(" ({} dropped)", plural(w.zeros, "zero difference", "zero differences")) } else { String::new() };
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
    let pass = match c.recall {
        Some(_) => format!(", pass at {} matched", c.pass),
        None => String::new(),
    };
    let _ = writeln!(out, "{} shared targets, {} lines each{pass}; Δ = B − A", c.targets_count, c.lines);
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
        let passes = |s: &super::Side| s.recall.as_ref().map_or("-".into(), |r| format!("{}/{}", r.passes, x.targets_count));
        let (ma, mb) = matched_lines(x);
        let (p_flips, delta, p_matched) = match &x.recall {
            Some(t) => (fmt_p(t.mcnemar.p), format!("{:+}", mb as i64 - ma as i64), fmt_p(t.wilcoxon_matched.p)),
            None => ("-".into(), "-".into(), "-".into()),
        };
        let _ = writeln!(
            out,
            "{:>8} {:>9} {:>9} {:>11} {:>10} {:>9} {:>11}",
            crate::record::run::length_label(l.length),
            passes(&x.a),
            passes(&x.b),
            p_flips,
            delta,
            p_matched,
            top1
        );
    }
}

/// The per-target table: matched lines, passes and flips, by depth.
fn target_table(c: &Comparison, out: &mut String) {
    let has_forced = c.targets.iter().any(|r| r.top1_share_delta.is_some());
    let w_name = c.targets.iter().map(|r| r.name.chars().count()).max().unwrap_or(0).max(6);
    let ladder = c.targets.iter().any(|r| r.length.is_some());
    let length = |r: Option<usize>| match (ladder, r) {
        (false, _) => String::new(),
        (true, l) => format!("{:>6}  ", l.map_or("-".to_string(), crate::record::run::length_label)),
    };
    // Without recall (a forced-only run), the matched and pass columns are
    // left out, not filled with figures nobody measured.
    let recall = c.recall.is_some();
    let mut head = format!("{}{:<w_name$}  {:>5}", if ladder { format!("{:>6}  ", "length") } else { String::new() }, "target", "depth");
    if recall {
        head.push_str(&format!("  {:>9}  {:>9}  {:>4}  {:>6}  {:>6}", "matched A", "matched B", "Δ", "pass A", "pass B"));
    }
    if has_forced {
        head.push_str(&format!("  {:>7}", "Δtop-1"));
    }
    if recall {
        head.push_str("  flip");
    }
    let _ = writeln!(*out, "{}", head.trim_end());
    let mark = |p: bool| if p { "✓" } else { "✗" };
    for r in &c.targets {
        let mut line = format!("{}{:<w_name$}  {:>5.2}", length(r.length), r.name, r.depth);
        if let Some(x) = &r.recall {
            line.push_str(&format!(
                "  {:>9}  {:>9}  {:>4}  {:>6}  {:>6}",
                x.matched_a,
                x.matched_b,
                if x.delta == 0 { "0".to_string() } else { format!("{:+}", x.delta) },
                mark(x.pass_a),
                mark(x.pass_b),
            ));
        }
        if has_forced {
            let d = r
                .top1_share_delta
                .map(|d| if d.abs() <= stats::TIE_TOLERANCE { "0".to_string() } else { format!("{d:+.3}") })
                .unwrap_or_else(|| "-".into());
            line.push_str(&format!("  {d:>7}"));
        }
        line.push_str(match r.recall.as_ref().and_then(|x| x.flip) {
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
    match &c.recall {
        Some(t) => recall_text(c, t, out),
        None => {
            let _ = writeln!(*out, "{NO_RECALL}");
        }
    }
    if let (Some(w), Some(ta), Some(tb)) = (&c.wilcoxon_top1_share, c.a.top1_share_mean, c.b.top1_share_mean) {
        let _ = writeln!(
            *out,
            "teacher-forced top-1 share (mean of {}): A {ta:.3}, B {tb:.3}; {}",
            plural(w.n + w.zeros, "target", "targets"),
            wilcoxon_line(w)
        );
    }
}

/// The pass rates, the flips and McNemar, matched lines, and the power.
fn recall_text(c: &Comparison, t: &RecallTests, out: &mut String) {
    for (name, s) in [("A", &c.a), ("B", &c.b)] {
        let Some(r) = &s.recall else { continue };
        let _ = writeln!(
            *out,
            "pass rate {name}: {}/{} = {}  (Wilson 95% {} – {})",
            r.passes,
            s.count,
            pct(r.pass_rate),
            pct(r.wilson95[0]),
            pct(r.wilson95[1])
        );
    }
    let _ = writeln!(
        *out,
        "flips: {} A only (A pass, B fail), {} B only (A fail, B pass); exact McNemar p = {}",
        t.mcnemar.a_only,
        t.mcnemar.b_only,
        fmt_p(t.mcnemar.p)
    );
    let (ma, mb) = matched_lines(c);
    let _ = writeln!(*out, "matched lines: A {ma}, B {mb}; {}", wilcoxon_line(&t.wilcoxon_matched));
    let rates = format!(
        "exact McNemar at α = {}, observed flip rates {}/{n} A only and {}/{n} B only",
        t.power.alpha,
        t.mcnemar.a_only,
        t.mcnemar.b_only,
        n = c.targets_count
    );
    let pw = 100.0 * t.power.power;
    let _ = match t.power.sample_size {
        SampleSize::Targets(t) => writeln!(*out, "power: {t} targets give {pw:.0}% power ({rates})"),
        SampleSize::NotReachable => {
            writeln!(*out, "power: no pass-rate difference to detect ({rates})")
        }
        SampleSize::BeyondCap(cap) => writeln!(*out, "power: more than {cap} targets needed for {pw:.0}% power ({rates})"),
    };
}
