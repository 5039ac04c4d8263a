//! `--format json`: the "Report JSON" shape documented in docs/RUN_FORMAT.md;
//! `--format jsonl`: its run entries, one compact object per line (no grid).

use crate::record::run::Totals;
use crate::report::aggregate::{Grid, LoadedRun, Row, rows};
use crate::report::export::Exporter;
use anyhow::Result;
use serde::Serialize;

/// Version of the report JSON shape.
pub(crate) const REPORT_FORMAT: u32 = 1;

#[derive(Serialize)]
struct Report<'a> {
    format: u32,
    runs: Vec<RunEntry<'a>>,
    /// Present when every run was asked about the same targets.
    grid: Option<Grid>,
}

#[derive(Serialize)]
struct RunEntry<'a> {
    /// The run file as given (null for a run that was not read from a file).
    file: Option<String>,
    #[serde(flatten)]
    row: Row,
    lines: usize,
    pass: usize,
    by_quarter: &'a [Totals; 4],
    /// The divergence from the reference per depth quarter, llama-perplexity's
    /// figures included (`summary.forced.kld_by_quarter`); absent without a reference.
    #[serde(skip_serializing_if = "Option::is_none")]
    kld_by_quarter: Option<&'a [Option<crate::score::kld::KldSummary>; 4]>,
}

pub(crate) struct Json {
    /// One run entry per line instead of the whole report.
    pub lines: bool,
}

impl Exporter for Json {
    fn render(&self, runs: &[LoadedRun]) -> Result<String> {
        let report = Report {
            format: REPORT_FORMAT,
            runs: runs
                .iter()
                .zip(rows(runs))
                .map(|(r, row)| RunEntry {
                    file: r.path.as_ref().map(|p| p.display().to_string()),
                    row,
                    lines: r.run.manifest.params.lines,
                    pass: r.run.manifest.params.pass,
                    by_quarter: &r.run.summary.by_quarter,
                    kld_by_quarter: r.run.summary.forced.as_ref().and_then(|f| f.kld_by_quarter.as_ref()),
                })
                .collect(),
            grid: Grid::of(runs),
        };
        if self.lines {
            let mut text = String::new();
            for run in &report.runs {
                text.push_str(&serde_json::to_string(run)?);
                text.push('\n');
            }
            return Ok(text);
        }
        let mut text = serde_json::to_string_pretty(&report)?;
        text.push('\n');
        Ok(text)
    }
}
