//! `--format table`: aligned plain text for the terminal, with the colour
//! diffs of terminal.rs before it when asked for.

use crate::report::aggregate::{Grid, LoadedRun, rows};
use crate::report::export::Exporter;
use crate::report::tabular::{self, Tabular};
use crate::report::terminal;
use anyhow::Result;
use std::fmt::Write as _;

pub struct Table {
    /// Every run's per-target diff, before the tables.
    pub diff: bool,
    /// Colour the diffs (else each line carries a marker).
    pub color: bool,
}

impl Exporter for Table {
    fn render(&self, runs: &[LoadedRun]) -> Result<String> {
        let mut out = String::new();
        if self.diff {
            if runs.iter().any(|r| r.run.summary.total.recall.is_some()) {
                let _ = writeln!(out, "{}\n", terminal::legend(self.color));
            }
            for r in runs {
                let _ = writeln!(out, "== {} ==\n", r.label);
                for t in &r.run.targets {
                    let _ = writeln!(out, "{}", terminal::target_diff(t, r.run.manifest.params.lines, self.color));
                }
            }
        }
        out.push_str(&aligned(&tabular::aggregate(&rows(runs))));
        if runs.len() > 1 {
            out.push_str(&comparison(runs));
        }
        // A ladder's grid is what `bench --lengths` printed at its end; a
        // rescored ladder has no other place to show its new one.
        for r in runs {
            if let Some(l) = &r.run.ladder {
                let _ = write!(out, "\n== {} ==\n{}", r.label, terminal::ladder_grid(l));
            }
        }
        Ok(out)
    }
}

/// The per-target grid and pass rate by depth quarter, for several runs.
fn comparison(runs: &[LoadedRun]) -> String {
    let mut out = String::new();
    match Grid::of(runs) {
        Some(grid) => {
            let _ = writeln!(out, "\nPer target, by depth. {}", tabular::grid_caption(&grid, runs));
            out.push_str(&aligned(&tabular::grid(&grid, runs)));
        }
        None => out.push_str("\n(No per-target grid: the runs were not asked about the same targets.)\n"),
    }
    let _ = writeln!(out, "\nPass rate by depth quarter:");
    out.push_str(&aligned(&tabular::quarters(runs)));
    out
}

/// Columns padded to their widest cell, two spaces apart, a rule under the header.
pub fn aligned(t: &Tabular) -> String {
    let width = |s: &str| console::measure_text_width(s);
    let mut widths: Vec<usize> = t.header.iter().map(|h| width(h)).collect();
    for row in &t.rows {
        for (i, c) in row.iter().enumerate() {
            widths[i] = widths[i].max(width(c));
        }
    }
    let line = |cells: &[String]| {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let pad = " ".repeat(widths[i] - width(c));
                if t.numeric[i] { format!("{pad}{c}") } else { format!("{c}{pad}") }
            })
            .collect();
        format!("{}\n", parts.join("  ").trim_end())
    };
    let mut out = line(&t.header);
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    out.push_str(&format!("{}\n", rule.join("  ")));
    for row in &t.rows {
        out.push_str(&line(row));
    }
    out
}
