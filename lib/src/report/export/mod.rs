//! The one trait every report format implements, the choice of format, and
//! one module per format beneath them.
//!
//! Adding a format is one file here: a type implementing [`Exporter`], and a
//! line in [`exporter`].

pub mod charts;
pub mod csv;
pub mod html;
pub mod json;
pub mod markdown;
pub mod table;

use crate::report::aggregate::LoadedRun;
use anyhow::Result;

/// Turns loaded runs into the whole text of one report.
pub trait Exporter {
    fn render(&self, runs: &[LoadedRun]) -> Result<String>;
}

crate::settings::named_choice! {
    /// The format of a report (or of a KV list's table).
    #[derive(Default)]
    pub enum Format {
        /// Aligned plain text for the terminal.
        #[default]
        Table,
        /// GitHub-flavoured Markdown (pastes into an issue).
        Md,
        /// A header row and one row per run.
        Csv,
        /// The documented "Report JSON" shape (docs/RUN_FORMAT.md).
        Json,
        /// JSON lines: one compact object per run (per row of a list's table).
        Jsonl,
        /// One self-contained HTML page: table, chart and every diff.
        Html,
    }
}

/// What a report shows besides the aggregate.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Include the per-target diffs (table and md; HTML always has them).
    pub diff: bool,
    /// Colour the terminal table's diffs.
    pub color: bool,
}

/// A format that has no place for the per-target diffs.
#[derive(Debug, thiserror::Error)]
#[error("the {} format has no per-target diffs (table, md and html have them; the HTML page always does)", .0)]
pub struct NoDiffs(pub Format);

/// The exporter of `format`, or an error when `opts` ask for something it
/// cannot show.
pub fn exporter(format: Format, opts: Options) -> Result<Box<dyn Exporter>> {
    Ok(match format {
        Format::Table => Box::new(table::Table { diff: opts.diff, color: opts.color }),
        Format::Md => Box::new(markdown::Markdown { diff: opts.diff }),
        Format::Csv | Format::Json | Format::Jsonl if opts.diff => return Err(NoDiffs(format).into()),
        Format::Csv => Box::new(csv::Csv),
        Format::Json => Box::new(json::Json { lines: false }),
        Format::Jsonl => Box::new(json::Json { lines: true }),
        Format::Html => Box::new(html::Html),
    })
}
