//! `bench A.gguf B.gguf --kv f16,q8_0 …`: a list as a sweep
//! ([`Sweep::of_bench`]), one entry per model, context size and probe, run
//! by the sweep's own loop (each entry's model loaded once, every entry
//! planned on one shared range so every instance is asked the same
//! questions, the first instance the others' reference, each run's file in
//! the output folder), and its table ([`crate::report::list_table`]).

use super::{Sweep, SweepOptions, SweepSink, run_sweep};
use crate::bench::instances::Item;
use crate::bench::{BenchOptions, ValidOptions};
use crate::corpus::{CorpusSpec, Source};
use crate::prompt::Probe;
use crate::record::run::RunFile;
use crate::report::aggregate::LoadedRun;
use crate::report::list_table::{self, ListRow};
use crate::settings::CtxSize;
use crate::support::progress::Show;
use anyhow::{Result, bail};
use std::path::{Path, PathBuf};

/// What a `bench` list crosses: its models (files, split first parts, hub
/// references), context sizes and probes, each combination run at every
/// item ([`crate::bench::instances::items`]).
#[derive(Debug, Clone)]
pub struct BenchList {
    pub models: Vec<PathBuf>,
    pub ctx: Vec<CtxSize>,
    pub probe: Vec<Probe>,
    pub items: Vec<Item>,
}

impl BenchList {
    /// How many runs the list makes.
    pub fn len(&self) -> usize {
        self.models.len() * self.ctx.len().max(1) * self.probe.len().max(1) * self.items.len()
    }

    /// Whether it makes no run at all (never, once checked).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A model list that cannot run: told before any model work.
#[derive(Debug, thiserror::Error)]
pub enum ModelListError {
    #[error("the model {0} is listed twice: the two would be the same runs")]
    Twice(String),
    #[error("the model {0} does not exist")]
    Missing(String),
    #[error("the model {0} is {1}, not a model file")]
    NotAFile(String, &'static str),
    #[error(
        "the models {0} and {1} would write run files of one name ({2}): the run files are named by the model's file name; rename or copy one"
    )]
    SameName(String, String, String),
    #[error("a build label names one model build, and the list has {0} models: each is labelled by its file name")]
    BuildOfMany(usize),
}

/// Runs every instance of `list` on the `spec` corpus, each with `opts` but
/// the instance's model, context size, probe and item, writing the run files
/// into `sweep_opts.out_dir` (with `resume`, a finished run file of the same
/// configuration there is kept, as a sweep's); returns the table's rows, in
/// the order of the instances.
pub fn run_list(
    list: &BenchList,
    opts: ValidOptions,
    spec: &CorpusSpec,
    sweep_opts: SweepOptions,
    sink: &mut dyn SweepSink,
    show: &dyn Show,
) -> Result<Vec<ListRow>> {
    let models = named_models(&list.models, opts.build.as_deref())?;
    // A reference given is read and verified first, as `bench::open` does
    // for one run: each item reads it only once the model has loaded, so a
    // folder or a garbage file would cost a model load to find.
    if let Some(path) = opts.reference.as_deref() {
        crate::record::reference::Reference::load(path)?;
    }
    let src = Source::open_spec(spec, opts.plan.target.rename_seed())?;
    if let Some(note) = src.error_note() {
        show.note(&note);
    }
    let ctx = if list.ctx.is_empty() { vec![opts.plan.ctx] } else { list.ctx.clone() };
    let probe = if list.probe.is_empty() { vec![opts.plan.probe] } else { list.probe.clone() };
    // The list resumes run by run (`sweep_opts.resume`); no run finishes a
    // file of its own.
    let base = BenchOptions { resume: false, ..opts.into_inner() };
    let sweep = Sweep::of_bench(&models, base, &ctx, &probe, &list.items, spec);
    let runs = sweep.runs();
    let templates = vec![None; sweep.models.len()];
    let outcome = run_sweep(&sweep, templates, &runs, &src, &sweep_opts, sink, show)?;
    // The rows in the instances' order: entry by entry, item by item.
    let mut loaded = Vec::with_capacity(runs.len());
    for (i, entry) in sweep.models.iter().enumerate() {
        for item in entry.items() {
            let Some(r) = runs.iter().find(|r| r.model == i && r.item() == item) else {
                bail!("internal: the list's instance {} {item} has no run", entry.name);
            };
            let path = r.file(&sweep_opts.out_dir);
            let run = RunFile::load(&path)?;
            loaded.push(LoadedRun { path: Some(path), label: r.id.clone(), run });
        }
    }
    let mut rows = list_table::rows(&loaded)?;
    for row in &mut rows {
        row.kld_missing = outcome.unmeasured.iter().find(|(id, _)| *id == row.run).map(|(_, why)| why.clone());
    }
    Ok(rows)
}

/// The list's models with their run files' names, checked before any model
/// work: each exists (or is a hub reference), none twice, no two names alike.
fn named_models(models: &[PathBuf], build: Option<&str>) -> Result<Vec<(PathBuf, String)>> {
    if models.len() > 1 && build.is_some() {
        return Err(ModelListError::BuildOfMany(models.len()).into());
    }
    let mut named: Vec<(PathBuf, String)> = Vec::with_capacity(models.len());
    for m in models {
        let shown = m.display().to_string();
        if !crate::support::hub::is_reference(&shown) {
            match std::fs::metadata(m) {
                Err(_) => return Err(ModelListError::Missing(shown).into()),
                Ok(md) if md.is_dir() => return Err(ModelListError::NotAFile(shown, "a folder").into()),
                Ok(md) if !md.is_file() => return Err(ModelListError::NotAFile(shown, "a FIFO, socket or device").into()),
                Ok(_) => {}
            }
        }
        let same =
            |a: &Path| a == m.as_path() || std::fs::canonicalize(a).ok().is_some_and(|c| std::fs::canonicalize(m).is_ok_and(|d| c == d));
        if named.iter().any(|(p, _)| same(p)) {
            return Err(ModelListError::Twice(shown).into());
        }
        let name = run_name(m, build);
        // Case apart: a file system that does not tell case apart would make them one file.
        if let Some((p, _)) = named.iter().find(|(_, n)| n.to_lowercase() == name.to_lowercase()) {
            return Err(ModelListError::SameName(p.display().to_string(), shown, name).into());
        }
        named.push((m.clone(), name));
    }
    Ok(named)
}

/// The list's run files' model name: the build label, else the model file's
/// stem, in the letters a sweep's model names allow.
pub(crate) fn run_name(model: &Path, build: Option<&str>) -> String {
    let stem = model.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let raw = build.map(str::to_string).unwrap_or(stem);
    let mut name: String = raw.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' }).collect();
    while name.contains("__") {
        name = name.replace("__", "_");
    }
    if name.is_empty() { "model".to_string() } else { name }
}

impl crate::settings::Explain for ModelListError {
    fn explain(&self, n: &dyn crate::settings::Names) -> String {
        match self {
            ModelListError::BuildOfMany(_) => format!("{}: {self}", n.name(crate::settings::Setting::Build)),
            other => other.to_string(),
        }
    }
}
