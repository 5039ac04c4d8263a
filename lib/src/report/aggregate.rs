//! The plain data every report format is made from: the runs as loaded, one
//! aggregate [`Row`] per run, and the per-target [`Grid`] of runs that were
//! asked about the same targets.
//!
//! Nothing here formats anything; the format modules (table, markdown, csv,
//! json, html) each turn these values into text.

use crate::record::run::{NOT_MEASURED, Recall, RunFile, TargetResult, Totals};
use anyhow::{Context, Result, bail};
use serde::Serialize;
use std::path::{Path, PathBuf};

/// One run file as read, with the label reports show for it.
#[derive(Debug, Clone)]
pub struct LoadedRun {
    /// Where it came from (`None` for a run that was never written, e.g. `bench --html` without `--out`).
    pub path: Option<PathBuf>,
    /// Short name in column headings: the file stem, or the full path when two stems collide.
    pub label: String,
    pub run: RunFile,
}

impl LoadedRun {
    /// How error messages name this run.
    pub fn display(&self) -> String {
        match &self.path {
            Some(p) => p.display().to_string(),
            None => self.label.clone(),
        }
    }
}

/// Reads every input: a file must be a run file; a folder stands for every
/// `*.json` in it that parses as a run file, sorted by file name. The result
/// is never empty, and all runs have the same `params.lines`.
pub fn load_inputs(inputs: &[PathBuf], shown: &dyn crate::support::progress::Notes) -> Result<Vec<LoadedRun>> {
    if inputs.is_empty() {
        bail!("no run files given");
    }
    let mut runs: Vec<PathRun> = Vec::new();
    let mut notes = Vec::new();
    for input in inputs {
        if input.is_dir() {
            let (found, skipped) = load_folder(input)?;
            if found.is_empty() {
                let others = match skipped.len() {
                    0 => String::new(),
                    1 => "; its one .json file is not a run file".to_string(),
                    n => format!("; its {n} .json files are not run files"),
                };
                bail!("{} holds no run files (the *.json files bench and score write){others}", input.display());
            }
            runs.extend(found);
            notes.extend(skipped);
        } else {
            let run = RunFile::load(input)?;
            runs.push((input.clone(), run));
        }
    }
    let loaded = label_runs(runs);
    check_same_lines(&loaded)?;
    // An unfinished run is shown as one, never as the whole run.
    for r in loaded.iter().filter(|r| r.run.unfinished.is_some()) {
        notes.push(format!("{} is an unfinished run: its figures are of the {} targets it finished", r.display(), r.run.targets.len()));
    }
    // Only a report that goes ahead says what it left out.
    for note in notes {
        shown.note(&format!("note: {note}"));
    }
    Ok(loaded)
}

/// A run file and where it was read.
type PathRun = (PathBuf, RunFile);

/// The run files in one folder, by file name, and a note for each `.json`
/// in it that is not a run file (other files are not looked at).
fn load_folder(dir: &Path) -> Result<(Vec<PathRun>, Vec<String>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .with_context(|| format!("cannot read folder {}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.extension().is_some_and(|e| e == "json")
                && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    files.sort_by(|a, b| a.file_name().cmp(&b.file_name()));
    let mut runs = Vec::new();
    let mut skipped = Vec::new();
    for f in files {
        match RunFile::load(&f) {
            Ok(run) => runs.push((f, run)),
            // A run under the old scoring rule is a run, not a stray file:
            // leaving it out would silently change what the folder means.
            Err(e) if e.is::<crate::record::run::OldScoring>() => return Err(e),
            Err(e) => skipped.push(format!("skipped {}: {}", f.display(), e.root_cause())),
        }
    }
    Ok((runs, skipped))
}

/// Labels are file stems, unless two runs share one: then every run is
/// labelled by its path as given; an unfinished run's label says so
/// (`run (unfinished: 7 of 16 targets)`).
fn label_runs(runs: Vec<PathRun>) -> Vec<LoadedRun> {
    let stem = |p: &Path| p.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| p.display().to_string());
    let stems: Vec<String> = runs.iter().map(|(p, _)| stem(p)).collect();
    let unique = stems.iter().enumerate().all(|(i, s)| !stems[..i].contains(s));
    runs.into_iter()
        .zip(stems)
        .map(|((path, run), s)| {
            let label = if unique { s } else { path.display().to_string() };
            // Every table, export and page names a run by its label: an
            // unfinished run says so wherever it is named.
            let label = match run.unfinished_label() {
                Some(u) => format!("{label} ({u})"),
                None => label,
            };
            LoadedRun { label, path: Some(path), run }
        })
        .collect()
}

/// Runs scored against different numbers of lines cannot share a table
/// (other differences are shown side by side; pairing runs target by target
/// asks for more: [`crate::report::compare::check_pairable`]).
pub(crate) fn check_same_lines(runs: &[LoadedRun]) -> Result<()> {
    if let Some(first) = runs.first() {
        let lines = first.run.manifest.params.lines;
        if let Some(other) = runs.iter().find(|r| r.run.manifest.params.lines != lines) {
            return Err(
                DifferentLines { first: (first.display(), lines), other: (other.display(), other.run.manifest.params.lines) }.into()
            );
        }
    }
    Ok(())
}

/// Two runs asked for different numbers of lines per answer: (run, LINES) each.
#[derive(Debug, thiserror::Error)]
#[error("cannot compare runs with different lines per answer: {} has {}, {} has {}", first.0, first.1, other.0, other.1)]
pub struct DifferentLines {
    pub first: (String, usize),
    pub other: (String, usize),
}

/// One run's line in the aggregate table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    /// The run's label (file stem).
    pub run: String,
    /// GGUF `general.name`, else the model file name; for `score` runs
    /// `MODEL @ URL` (`score --model`, `--url`), else `external (<corpus file>)`.
    pub model: String,
    /// `manifest.model.build`; empty for `score` runs.
    pub build: String,
    /// The quantisation (`manifest.model.file_type`); empty when unknown.
    pub quant: String,
    pub kv_k: String,
    pub kv_v: String,
    /// llama.cpp's KV rotation, as [`crate::settings::Rotation`] words it;
    /// `None` in run files made before it was recorded.
    pub kv_rotation: Option<String>,
    pub count: usize,
    /// The recall totals; `None` where no answer was generated (`bench
    /// --forced-only`): not measured, so no report prints a figure.
    #[serde(flatten)]
    pub recall: Option<Recall>,
    /// Prefix tokens per second of the prefill; `None` without timings or prefill.
    pub prefill_tok_s: Option<f64>,
    /// Generated tokens per decode step (`summary.draft`); `None` for runs
    /// that did not count them.
    pub tokens_per_step: Option<f64>,
    /// Teacher-forced means (`summary.forced`); `None` for runs without them
    /// (`score` runs, older run files).
    pub top1_share: Option<f64>,
    pub mean_logprob: Option<f64>,
    pub lines_exact_share: Option<f64>,
    /// Closed-book totals (`bench --closed-book`): matched lines with no file
    /// in the context, and matched − that, what only the context explains.
    pub closed_book_matched: Option<usize>,
    pub context_matched: Option<i64>,
    /// Divergence from the run's reference (`bench --reference`), and the
    /// reference's build and KV types (`build k/v`).
    pub kld: Option<crate::score::kld::KldSummary>,
    pub reference: Option<String>,
}

impl Row {
    pub fn of(r: &LoadedRun) -> Row {
        let m = &r.run.manifest;
        let model = match &m.model {
            Some(info) => info.name.clone().filter(|n| !n.trim().is_empty()).unwrap_or_else(|| {
                Path::new(&info.path).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| info.path.clone())
            }),
            None if m.external.as_ref().and_then(|e| e.label()).is_some() => {
                m.external.as_ref().and_then(|e| e.label()).unwrap_or_default()
            }
            None => {
                let corpus = Path::new(&m.corpus.path)
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| m.corpus.path.clone());
                format!("external ({corpus})")
            }
        };
        let t = &r.run.summary.total;
        let forced = r.run.summary.forced.as_ref();
        let prefill_tok_s = r
            .run
            .timings
            .as_ref()
            .and_then(|t| (t.prefill_ms > 0.0 && t.prefill_tokens > 0).then(|| t.prefill_tokens as f64 / t.prefill_ms * 1000.0));
        Row {
            run: r.label.clone(),
            model,
            build: m.model.as_ref().map(|i| i.build.clone()).unwrap_or_default(),
            quant: m.model.as_ref().and_then(|i| i.file_type.clone()).unwrap_or_default(),
            kv_k: m.context.as_ref().map(|c| c.type_k.to_string()).unwrap_or_default(),
            kv_v: m.context.as_ref().map(|c| c.type_v.to_string()).unwrap_or_default(),
            kv_rotation: m.context.as_ref().and_then(|c| c.kv_rotation).map(|r| r.to_string()),
            count: t.count,
            recall: t.recall.clone(),
            prefill_tok_s,
            tokens_per_step: r.run.summary.draft.as_ref().map(|d| d.tokens_per_step),
            top1_share: forced.map(|f| f.top1_share),
            mean_logprob: forced.map(|f| f.mean_logprob),
            lines_exact_share: forced.map(|f| f.lines_exact_share),
            closed_book_matched: r.run.summary.closed_book.as_ref().map(|c| c.matched),
            context_matched: r.run.summary.closed_book.as_ref().map(|c| c.context_matched),
            kld: forced.and_then(|f| f.kld.clone()),
            reference: m.reference.as_ref().map(|x| format!("{} {}/{}", x.build, x.type_k, x.type_v)),
        }
    }

    /// `k/v`, or empty when the run has no context (score runs).
    pub fn kv(&self) -> String {
        if self.kv_k.is_empty() && self.kv_v.is_empty() {
            return String::new();
        }
        match self.kv_rotation.as_deref() {
            Some("off") => format!("{}/{} rot off", self.kv_k, self.kv_v),
            _ => format!("{}/{}", self.kv_k, self.kv_v),
        }
    }

    /// Prefill speed with one decimal, empty when absent.
    pub fn prefill(&self) -> String {
        self.prefill_tok_s.map(|v| format!("{v:.1}")).unwrap_or_default()
    }

    /// Whether the run has closed-book answers.
    pub(crate) fn has_closed_book(&self) -> bool {
        self.closed_book_matched.is_some()
    }

    /// Whether the run has teacher-forced metrics.
    pub(crate) fn has_forced(&self) -> bool {
        self.top1_share.is_some()
    }
}

/// The aggregate rows, in the order the runs were given.
pub fn rows(runs: &[LoadedRun]) -> Vec<Row> {
    runs.iter().map(Row::of).collect()
}

/// One cell of the per-target grid.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Cell {
    /// Matched lines and pass; `None` where no answer was generated.
    pub score: Option<(usize, bool)>,
    /// The target's teacher-forced top-1 share; `None` without forced metrics.
    pub top1_share: Option<f64>,
}

/// One target across runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GridRow {
    pub name: String,
    pub line: usize,
    pub depth: f64,
    /// What its LINES lines are made of (the first run's record; every
    /// run asked the same lines); absent where the run file has no composition.
    #[serde(flatten)]
    pub lines: Option<ClassLines>,
    /// One per run, in run order.
    pub cells: Vec<Cell>,
}

/// A target's code and prose (comment and docstring) lines, and whether
/// prose outnumbers code ([`crate::score::Composition::prose_dominated`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ClassLines {
    pub code_lines: usize,
    pub prose_lines: usize,
    pub prose_dominated: bool,
}

impl ClassLines {
    fn of(c: &crate::score::Composition) -> ClassLines {
        ClassLines { code_lines: c.code.lines, prose_lines: c.prose().lines, prose_dominated: c.prose_dominated() }
    }
}

/// Targets (by depth) × runs, for runs asked about the same targets.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Grid {
    pub lines: usize,
    pub rows: Vec<GridRow>,
}

impl Grid {
    /// Whether any cell has a teacher-forced top-1 share.
    pub(crate) fn has_forced(&self) -> bool {
        self.rows.iter().any(|r| r.cells.iter().any(|c| c.top1_share.is_some()))
    }

    /// The grid, when every run has the same target names in the same order
    /// and the same `params.lines`; otherwise `None`.
    pub fn of(runs: &[LoadedRun]) -> Option<Grid> {
        let first = runs.first()?;
        let same = runs.iter().all(|r| {
            r.run.targets.len() == first.run.targets.len()
                && r.run.targets.iter().zip(&first.run.targets).all(|(a, b)| a.name == b.name && a.length == b.length)
                && r.run.manifest.params.lines == first.run.manifest.params.lines
        });
        if !same {
            return None;
        }
        let mut rows: Vec<GridRow> = first
            .run
            .targets
            .iter()
            .enumerate()
            .map(|(i, t)| GridRow {
                name: with_length(&t.name, t.length),
                line: t.line,
                depth: t.depth,
                lines: t.score.as_ref().and_then(|s| s.composition.as_ref()).map(ClassLines::of),
                cells: runs
                    .iter()
                    .map(|r| {
                        let t = &r.run.targets[i];
                        Cell { score: t.score.as_ref().map(|s| (s.matched, s.pass)), top1_share: t.forced.as_ref().map(|f| f.top1_share) }
                    })
                    .collect(),
            })
            .collect();
        rows.sort_by(|a, b| a.depth.total_cmp(&b.depth));
        Some(Grid { lines: first.run.manifest.params.lines, rows })
    }
}

/// The depth range of quarter `q` (0..4) as text, e.g. `0.25-0.50`.
pub(crate) fn quarter_label(q: usize) -> String {
    format!("{:.2}-{:.2}", q as f64 / 4.0, (q + 1) as f64 / 4.0)
}

/// `passes/count (pct%)`, `-` for a quarter without targets, or "not
/// measured" where no answer was generated.
pub fn pass_rate(t: &Totals) -> String {
    match (&t.recall, t.count) {
        (_, 0) => "-".into(),
        (Some(r), n) => format!("{}/{n} ({:.0}%)", r.passes, 100.0 * r.passes as f64 / n as f64),
        (None, _) => NOT_MEASURED.into(),
    }
}

/// One target of the diff views: its name and line, and the result of each
/// run that asked about it (`None` where a run did not).
pub(crate) struct TargetColumn<'a> {
    pub name: &'a str,
    pub line: usize,
    /// The ladder length it was asked at (`bench --lengths`).
    pub length: Option<usize>,
    pub depth: f64,
    pub results: Vec<Option<&'a TargetResult>>,
}

/// Every target asked about by any run (the same name at the same line is one
/// target), by depth, with each run's result side by side.
pub(crate) fn target_columns(runs: &[LoadedRun]) -> Vec<TargetColumn<'_>> {
    let mut out: Vec<TargetColumn<'_>> = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        for t in &r.run.targets {
            let at = out.iter().position(|c| c.name == t.name && c.line == t.line && c.length == t.length);
            let col = match at {
                Some(k) => &mut out[k],
                None => {
                    out.push(TargetColumn {
                        name: &t.name,
                        line: t.line,
                        length: t.length,
                        depth: t.depth,
                        results: vec![None; runs.len()],
                    });
                    out.last_mut().expect("just pushed")
                }
            };
            col.results[i] = Some(t);
        }
    }
    out.sort_by(|a, b| a.length.cmp(&b.length).then(a.depth.total_cmp(&b.depth)));
    out
}

/// A target's name, with the ladder length it was asked at: `name @4k`.
pub(crate) fn with_length(name: &str, length: Option<usize>) -> String {
    match length {
        Some(l) => format!("{name} @{}", crate::record::run::length_label(l)),
        None => name.to_string(),
    }
}
