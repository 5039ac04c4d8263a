//! `--format md`: GitHub-flavoured Markdown that pastes into an issue. The
//! diffs (with `--diff`) are fenced blocks with the plain markers, one
//! collapsible `<details>` per run.

use crate::report::aggregate::{Grid, LoadedRun, rows};
use crate::report::export::Exporter;
use crate::report::tabular::{self, Tabular};
use crate::report::terminal;
use anyhow::Result;
use std::fmt::Write as _;

pub struct Markdown {
    pub diff: bool,
}

impl Exporter for Markdown {
    fn render(&self, runs: &[LoadedRun]) -> Result<String> {
        let mut out = table(&tabular::aggregate(&rows(runs)));
        if runs.len() > 1 {
            match Grid::of(runs) {
                Some(grid) => {
                    let _ = writeln!(out, "\n### Per target, by depth\n\n{}\n", tabular::grid_caption(&grid, runs));
                    out.push_str(&table(&tabular::grid(&grid, runs)));
                }
                None => out.push_str("\n_No per-target grid: the runs were not asked about the same targets._\n"),
            }
            out.push_str("\n### Pass rate by depth quarter\n\n");
            out.push_str(&table(&tabular::quarters(runs)));
        }
        if let (Some(kld), Some(delta_p)) = (tabular::kld_stats(runs), tabular::delta_p_stats(runs)) {
            let _ = writeln!(out, "\n### Against the reference, as llama-perplexity reports it\n\n{}\n", tabular::KLD_STATS_CAPTION);
            out.push_str(&table(&kld));
            out.push('\n');
            out.push_str(&table(&delta_p));
        }
        if self.diff {
            out.push_str("\n### Diffs\n\n`=` matched, `-` missing, `?` hallucinated, `+` extra\n");
            for r in runs {
                let _ = writeln!(
                    out,
                    "\n<details><summary>{}: {} passed</summary>\n",
                    html_escape::encode_text(&r.label),
                    r.run.summary.total.pass_rate()
                );
                for target in &r.run.targets {
                    let diff = terminal::target_diff(target, r.run.manifest.params.lines, false);
                    out.push_str(&fenced(&diff));
                }
                out.push_str("\n</details>\n");
            }
        }
        Ok(out)
    }
}

/// A GFM table; every column right-aligned where numeric.
pub fn table(t: &Tabular) -> String {
    let row = |cells: &[String]| {
        let cells: Vec<String> = cells.iter().map(|c| cell(c)).collect();
        format!("| {} |\n", cells.join(" | "))
    };
    let mut out = row(&t.header);
    let rule: Vec<&str> = t.numeric.iter().map(|n| if *n { "---:" } else { "---" }).collect();
    let _ = writeln!(out, "|{}|", rule.join("|"));
    for r in &t.rows {
        out.push_str(&row(r));
    }
    out
}

/// A table cell: pipes escaped, no line breaks, no HTML.
fn cell(text: &str) -> String {
    text.replace('\\', "\\\\").replace('|', "\\|").replace('<', "&lt;").replace(['\n', '\r'], " ")
}

/// A fenced code block longer than any backtick run inside it.
fn fenced(text: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in text.chars() {
        run = if c == '`' { run + 1 } else { 0 };
        longest = longest.max(run);
    }
    let fence = "`".repeat((longest + 1).max(3));
    format!("\n{fence}text\n{}\n{fence}\n", text.trim_end())
}
