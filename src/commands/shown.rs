//! The terminal as a run's sink: what `bench` prints while its runs go,
//! above the progress bars.

use crate::commands::hint;
use crate::commands::progress::Terminal;
use anyhow::Result;
use posrecall::bench;
use posrecall::record::run::TargetResult;
use posrecall::report::terminal;
use posrecall::support::progress::Notes as _;
use posrecall::sweep::{SweepRun, SweepSink};
use std::time::Instant;

/// The terminal as a run's sink: per target its diff, per ladder window a
/// heading (unless quiet), above the bars; the first failed write stops
/// the output.
pub struct Run<'a> {
    pub term: &'a Terminal,
    pub quiet: bool,
    pub color: bool,
    pub lines: usize,
    pub crop: posrecall::targets::crop::CropMode,
    pub stdout: Result<()>,
}

impl Run<'_> {
    /// Prints `text` and a newline above the bars, unless quiet or an
    /// earlier write failed.
    fn print(&mut self, text: String) {
        if !self.quiet && self.stdout.is_ok() {
            self.stdout = self.term.out(&format!("{text}\n"));
        }
    }
}

impl bench::Sink for Run<'_> {
    fn starting(&mut self, answers: bool) {
        // Without answers there are no marked lines to explain.
        if answers {
            self.print(format!("{}\n", terminal::legend(self.color)));
        }
    }

    fn window(&mut self, length: usize, plan: &bench::Plan) {
        let (crop, tokens) = (&plan.crop, plan.prefix_tokens.len());
        self.print(format!(
            "== length {}: lines {}..{}, {tokens} tokens ==",
            bench::ladder::label(length),
            crop.first_line,
            crop.last_line
        ));
    }

    fn result(&mut self, r: &TargetResult) {
        self.print(terminal::target_diff(r, self.lines, self.color));
    }

    fn explain(&self, e: anyhow::Error) -> anyhow::Error {
        hint(e, Some(self.crop))
    }
}

/// The terminal as the list's sink: a line per finished run.
pub struct List<'a> {
    pub term: &'a Terminal,
    pub quiet: bool,
    /// The lines on standard output, else on standard error.
    pub to_stdout: bool,
    pub crop: posrecall::targets::crop::CropMode,
}

impl List<'_> {
    fn line(&self, line: &str) -> Result<()> {
        if self.quiet {
            return Ok(());
        }
        match self.to_stdout {
            true => self.term.out(&format!("{line}\n")),
            false => {
                self.term.note(line);
                Ok(())
            }
        }
    }
}

impl SweepSink for List<'_> {
    fn skipped(&mut self, r: &SweepRun) -> Result<()> {
        self.line(&format!("{}: {}", r.id, super::SKIPPED))
    }

    fn finished(&mut self, r: &SweepRun, run: &posrecall::record::run::RunFile, started: Instant) -> Result<()> {
        self.line(&format!("{}: {} ({:.1} s)", r.id, terminal::totals_line(&run.summary.total), started.elapsed().as_secs_f64()))
    }

    fn explain(&self, e: anyhow::Error) -> anyhow::Error {
        hint(e, Some(self.crop))
    }
}
