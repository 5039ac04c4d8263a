//! The human-readable tables (aggregate, per-target grid, pass rate by depth
//! quarter) as plain cells; table.rs, markdown.rs and html.rs each lay the
//! same cells out their own way.

use crate::record::run::{NOT_MEASURED, Recall};
use crate::report::aggregate::{Cell, Grid, LoadedRun, Row, pass_rate, quarter_label};

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
                    let k = r.kld.as_ref();
                    row.extend([
                        opt(k.map(|k| k.mean), |v| format!("{v:.5}")),
                        opt(k.map(|k| k.p99), |v| format!("{v:.4}")),
                        opt(k.map(|k| k.same_top1), |v| format!("{:.1}%", 100.0 * v)),
                        r.reference.clone().unwrap_or_default(),
                    ]);
                }
                row
            })
            .collect(),
    }
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

/// Targets by depth × runs; each cell the matched lines and the verdict
/// (and the top-1 share).
pub fn grid(grid: &Grid, runs: &[LoadedRun]) -> Tabular {
    let mut header = strings(&["target", "line", "depth"]);
    header.extend(runs.iter().map(|r| r.label.clone()));
    let mut numeric = vec![false, true, true];
    numeric.extend(runs.iter().map(|_| true));
    Tabular {
        header,
        numeric,
        rows: grid
            .rows
            .iter()
            .map(|g| {
                let mut row = vec![g.name.clone(), g.line.to_string(), format!("{:.2}", g.depth)];
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
    format!("Matched lines of {} per target; ✓ pass ({pass} matched), ✗ fail{forced}.", grid.lines)
}
