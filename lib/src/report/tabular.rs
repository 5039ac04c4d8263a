//! The human-readable tables (aggregate, per-target grid, pass rate by depth
//! quarter) as plain cells; table.rs, markdown.rs and html.rs each lay the
//! same cells out their own way.

use crate::record::run::{NOT_MEASURED, Recall};
use crate::report::aggregate::{Cell, ClassLines, Grid, LoadedRun, Row, pass_rate, quarter_label};
use crate::score::kld::KldStats;

/// A table of text cells; `numeric[i]` says column `i` is right-aligned.
#[derive(Debug, Clone, PartialEq)]
pub struct Tabular {
    pub header: Vec<String>,
    pub numeric: Vec<bool>,
    pub rows: Vec<Vec<String>>,
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The aggregate: one row per run. The teacher-forced columns (top-1 share,
/// mean log-prob, share of lines exact) are there when any run has them,
/// blank for the runs that do not.
pub fn aggregate(rows: &[Row]) -> Tabular {
    let forced = rows.iter().any(Row::has_forced);
    let closed = rows.iter().any(Row::has_closed_book);
    let kld = rows.iter().any(|r| r.kld.is_some());
    let steps = rows.iter().any(|r| r.tokens_per_step.is_some());
    let made_of = rows.iter().any(|r| composition(r).is_some());
    let mut header = strings(&[
        "run",
        "model",
        "build",
        "quant",
        "KV k/v",
        "passed",
        "matched",
        "missing",
        "truncated",
        "hallucinated",
        "extra",
        "prefill tok/s",
    ]);
    let mut numeric = vec![false, false, false, false, false, true, true, true, true, true, true, true];
    if made_of {
        header.extend(strings(&["code matched", "prose matched"]));
        numeric.extend([true, true]);
    }
    if steps {
        header.push("tok/step".into());
        numeric.push(true);
    }
    if forced {
        header.extend(strings(&["top-1 share", "mean log-prob", "lines exact"]));
        numeric.extend([true, true, true]);
    }
    if closed {
        header.extend(strings(&["closed-book matched", "context matched"]));
        numeric.extend([true, true]);
    }
    if kld {
        header.extend(strings(&["KLD mean", "KLD p99", "same top-1", "reference"]));
        numeric.extend([true, true, true, false]);
    }
    Tabular {
        header,
        numeric,
        rows: rows
            .iter()
            .map(|r| {
                let mut row = vec![
                    r.run.clone(),
                    r.model.clone(),
                    r.build.clone(),
                    r.quant.clone(),
                    r.kv(),
                    r.recall.as_ref().map_or(NOT_MEASURED.into(), |x| format!("{}/{}", x.passes, r.count)),
                    recall(r, |x| x.matched),
                    recall(r, |x| x.missing),
                    recall(r, |x| x.truncated),
                    recall(r, |x| x.hallucinated),
                    recall(r, |x| x.extra),
                    r.prefill(),
                ];
                if made_of {
                    row.extend(made_of_cells(r));
                }
                if steps {
                    row.push(opt(r.tokens_per_step, |v| format!("{v:.2}")));
                }
                if forced {
                    row.extend([
                        opt(r.top1_share, |v| format!("{v:.3}")),
                        opt(r.mean_logprob, |v| format!("{v:.3}")),
                        opt(r.lines_exact_share, |v| format!("{:.1}%", 100.0 * v)),
                    ]);
                }
                if closed {
                    row.extend([
                        r.closed_book_matched.map(|v| v.to_string()).unwrap_or_default(),
                        r.context_matched.map(|v| v.to_string()).unwrap_or_default(),
                    ]);
                }
                if kld {
                    row.extend(kld_cells(r));
                }
                row
            })
            .collect(),
    }
}

/// A run's composition, where it has one.
fn composition(r: &Row) -> Option<&crate::score::Composition> {
    r.recall.as_ref()?.composition.as_ref()
}

/// The code and prose cells of the aggregate: matched of lines, blank
/// without a composition.
fn made_of_cells(r: &Row) -> [String; 2] {
    let of = |t: crate::score::composition::Tally| format!("{}/{}", t.matched, t.lines);
    let c = composition(r);
    [c.map(|c| of(c.code)).unwrap_or_default(), c.map(|c| of(c.prose())).unwrap_or_default()]
}

/// The divergence cells of the aggregate: mean, p99, same top-1, the
/// reference; blank without a reference.
fn kld_cells(r: &Row) -> [String; 4] {
    let k = r.kld.as_ref();
    [
        opt(k.map(|k| k.mean), |v| format!("{v:.5}")),
        opt(k.map(|k| k.p99), |v| format!("{v:.4}")),
        opt(k.map(|k| k.same_top1), |v| format!("{:.1}%", 100.0 * v)),
        r.reference.clone().unwrap_or_default(),
    ]
}

/// A recall count, blank where recall was not measured.
fn recall(r: &Row, pick: fn(&Recall) -> usize) -> String {
    r.recall.as_ref().map(|x| pick(x).to_string()).unwrap_or_default()
}

/// A present value formatted, an absent one blank.
fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map(f).unwrap_or_default()
}

/// The mark of a grid cell: matched lines, then ✓ (pass) or ✗ (fail), then
/// the teacher-forced top-1 share when there is one (`12 ✓ · 0.93`).
pub(crate) fn cell_text(c: &Cell) -> String {
    let mark = match c.score {
        Some((matched, pass)) => format!("{matched} {}", if pass { "✓" } else { "✗" }),
        None => "-".into(),
    };
    match c.top1_share {
        Some(t) => format!("{mark} · {t:.2}"),
        None => mark,
    }
}

/// A target's code and prose lines, `9/3`, flagged where prose dominates
/// (`2/6 prose-dominated`).
fn class_lines_text(l: ClassLines) -> String {
    match l.prose_dominated {
        true => format!("{}/{} {}", l.code_lines, l.prose_lines, crate::report::PROSE_FLAG),
        false => format!("{}/{}", l.code_lines, l.prose_lines),
    }
}

/// Targets by depth × runs; each cell the matched lines and the verdict
/// (and the top-1 share).
pub fn grid(grid: &Grid, runs: &[LoadedRun]) -> Tabular {
    let made_of = grid.rows.iter().any(|g| g.lines.is_some());
    let mut header = strings(&["target", "line", "depth"]);
    let mut numeric = vec![false, true, true];
    if made_of {
        header.push("code/prose lines".into());
        numeric.push(false);
    }
    header.extend(runs.iter().map(|r| r.label.clone()));
    numeric.extend(runs.iter().map(|_| true));
    Tabular {
        header,
        numeric,
        rows: grid
            .rows
            .iter()
            .map(|g| {
                let mut row = vec![g.name.clone(), g.line.to_string(), format!("{:.2}", g.depth)];
                if made_of {
                    row.push(g.lines.map(class_lines_text).unwrap_or_default());
                }
                row.extend(g.cells.iter().map(cell_text));
                row
            })
            .collect(),
    }
}

/// Pass rate per depth quarter (`summary.by_quarter`): quarters × runs.
pub fn quarters(runs: &[LoadedRun]) -> Tabular {
    let mut header = strings(&["depth"]);
    header.extend(runs.iter().map(|r| r.label.clone()));
    let mut numeric = vec![false];
    numeric.extend(runs.iter().map(|_| true));
    Tabular {
        header,
        numeric,
        rows: (0..4)
            .map(|q| {
                let mut row = vec![quarter_label(q)];
                row.extend(runs.iter().map(|r| pass_rate(&r.run.summary.by_quarter[q])));
                row
            })
            .collect(),
    }
}

/// What the grid's marks mean, for a line under it.
pub(crate) fn grid_caption(grid: &Grid, runs: &[LoadedRun]) -> String {
    let passes: Vec<usize> = runs.iter().map(|r| r.run.manifest.params.pass).collect();
    let pass = if passes.windows(2).all(|w| w[0] == w[1]) {
        format!("{} or more", passes[0])
    } else {
        "each run's pass threshold or more".to_string()
    };
    let forced = if grid.has_forced() {
        "; after ·, the teacher-forced top-1 share (of the expected tokens, those the model ranked first)"
    } else {
        ""
    };
    let made_of = match grid.rows.iter().any(|g| g.lines.is_some()) {
        true => format!(
            " Code/prose lines: the target's code lines and its comment and docstring lines among the {}; {} where prose outnumbers code.",
            grid.lines,
            crate::report::PROSE_FLAG
        ),
        false => String::new(),
    };
    format!("Matched lines of {} per target; ✓ pass ({pass} matched), ✗ fail{forced}.{made_of}", grid.lines)
}

/// What the statistics tables hold, for a line above them.
pub(crate) const KLD_STATS_CAPTION: &str = "llama-perplexity's KL-divergence figures over the forced tokens of each run \
     (all, then per depth quarter): KL(reference ‖ run) in nats per token; Δp, the forced token's probability in the run \
     minus in the reference, in %; ± is the standard error (docs/METHOD.md §4d).";

/// One column of a statistics table: its heading and how a cell reads.
type StatColumn = (&'static str, fn(&KldStats) -> String);

/// llama-perplexity's KL-divergence figures (`summary.forced.kld.stats`),
/// one row per run over all its forced tokens, then one per depth quarter
/// that has targets; KLD in nats, as llama-perplexity prints it. `None`
/// when no run has them.
pub fn kld_stats(runs: &[LoadedRun]) -> Option<Tabular> {
    let columns: [StatColumn; 13] = [
        ("KLD mean", |s| format!("{:.6}", s.kld.mean)),
        ("± s.e.", |s| format!("{:.6}", s.kld.mean_se)),
        ("max", |s| format!("{:.6}", s.kld.max)),
        ("99.9%", |s| format!("{:.6}", s.kld.p99_9)),
        ("99%", |s| format!("{:.6}", s.kld.p99)),
        ("95%", |s| format!("{:.6}", s.kld.p95)),
        ("90%", |s| format!("{:.6}", s.kld.p90)),
        ("median", |s| format!("{:.6}", s.kld.median)),
        ("10%", |s| format!("{:.6}", s.kld.p10)),
        ("5%", |s| format!("{:.6}", s.kld.p5)),
        ("1%", |s| format!("{:.6}", s.kld.p1)),
        ("0.1%", |s| format!("{:.6}", s.kld.p0_1)),
        ("min", |s| format!("{:.6}", s.kld.min)),
    ];
    stats_table(runs, &columns)
}

/// llama-perplexity's token-probability figures: Δp (the forced token's
/// probability, run − reference), its RMS and the share of tokens with the
/// same most likely token, each ± its standard error where it gives one; in
/// percent, as llama-perplexity prints them. Rows as [`kld_stats`].
pub fn delta_p_stats(runs: &[LoadedRun]) -> Option<Tabular> {
    let columns: [StatColumn; 19] = [
        ("Δp mean %", |s| pct(s.delta_p.mean)),
        ("± s.e.", |s| pct(s.delta_p.mean_se)),
        ("max", |s| pct(s.delta_p.max)),
        ("99.9%", |s| pct(s.delta_p.p99_9)),
        ("99%", |s| pct(s.delta_p.p99)),
        ("95%", |s| pct(s.delta_p.p95)),
        ("90%", |s| pct(s.delta_p.p90)),
        ("75%", |s| pct(s.delta_p.p75)),
        ("median", |s| pct(s.delta_p.median)),
        ("25%", |s| pct(s.delta_p.p25)),
        ("10%", |s| pct(s.delta_p.p10)),
        ("5%", |s| pct(s.delta_p.p5)),
        ("1%", |s| pct(s.delta_p.p1)),
        ("0.1%", |s| pct(s.delta_p.p0_1)),
        ("min", |s| pct(s.delta_p.min)),
        ("RMS Δp %", |s| pct(s.delta_p_rms)),
        ("± s.e.", |s| pct(s.delta_p_rms_se)),
        ("same top p %", |s| pct(s.same_top_p)),
        ("± s.e.", |s| pct(s.same_top_p_se)),
    ];
    stats_table(runs, &columns)
}

/// A fraction as llama-perplexity prints it: ×100, three decimals.
fn pct(v: f64) -> String {
    format!("{:.3}", 100.0 * v)
}

/// The rows of a statistics table: per run, its whole and its quarters.
fn stats_table(runs: &[LoadedRun], columns: &[StatColumn]) -> Option<Tabular> {
    let mut rows = Vec::new();
    for r in runs {
        let Some(f) = r.run.summary.forced.as_ref() else { continue };
        let Some(whole) = f.kld.as_ref().and_then(|k| k.stats.as_ref()) else { continue };
        let quarters = f.kld_by_quarter.iter().flatten().enumerate();
        let scopes = std::iter::once(("all".to_string(), whole))
            .chain(quarters.filter_map(|(q, k)| Some((quarter_label(q), k.as_ref()?.stats.as_ref()?))));
        for (scope, s) in scopes {
            let mut row = vec![r.label.clone(), scope, s.tokens.to_string()];
            row.extend(columns.iter().map(|(_, cell)| cell(s)));
            rows.push(row);
        }
    }
    if rows.is_empty() {
        return None;
    }
    let mut header = strings(&["run", "depth", "tokens"]);
    header.extend(columns.iter().map(|(h, _)| h.to_string()));
    let mut numeric = vec![false, false, true];
    numeric.extend(columns.iter().map(|_| true));
    Some(Tabular { header, numeric, rows })
}
