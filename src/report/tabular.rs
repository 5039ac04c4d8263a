//! The human-readable tables (aggregate, per-target grid, pass rate by depth
//! quarter) as plain cells; table.rs, markdown.rs and html.rs each lay the
//! same cells out their own way.

use crate::report::aggregate::{Grid, LoadedRun, Row, pass_rate, quarter_label};

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

/// The aggregate: one row per run.
pub fn aggregate(rows: &[Row]) -> Tabular {
    Tabular {
        header: strings(&[
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
        ]),
        numeric: vec![
            false, false, false, false, false, true, true, true, true, true, true, true,
        ],
        rows: rows
            .iter()
            .map(|r| {
                vec![
                    r.run.clone(),
                    r.model.clone(),
                    r.build.clone(),
                    r.quant.clone(),
                    r.kv(),
                    format!("{}/{}", r.passes, r.count),
                    r.matched.to_string(),
                    r.missing.to_string(),
                    r.truncated.to_string(),
                    r.hallucinated.to_string(),
                    r.extra.to_string(),
                    r.prefill(),
                ]
            })
            .collect(),
    }
}

/// The mark of a grid cell: matched lines, then ✓ (pass) or ✗ (fail).
pub fn cell_text(matched: usize, pass: bool) -> String {
    format!("{matched} {}", if pass { "✓" } else { "✗" })
}

/// Targets by depth × runs; each cell the matched lines and the verdict.
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
                let mut row = vec![
                    g.name.clone(),
                    g.line.to_string(),
                    format!("{:.2}", g.depth),
                ];
                row.extend(g.cells.iter().map(|c| cell_text(c.matched, c.pass)));
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
pub fn grid_caption(grid: &Grid, runs: &[LoadedRun]) -> String {
    let passes: Vec<usize> = runs.iter().map(|r| r.run.manifest.params.pass).collect();
    let pass = if passes.windows(2).all(|w| w[0] == w[1]) {
        format!("{} or more", passes[0])
    } else {
        "each run's --pass or more".to_string()
    };
    format!(
        "Matched lines of {} per target; ✓ pass ({pass} matched), ✗ fail.",
        grid.lines
    )
}
