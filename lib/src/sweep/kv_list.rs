//! `bench MODEL --kv A,B,…`: a KV list as a sweep of one model
//! ([`Sweep::of_bench`]), run by the sweep's own loop (the model loaded
//! once, the first item's run the others' reference, each run's file in
//! the output folder), and its table ([`crate::report::kv_table`]).

use super::{Sweep, SweepOptions, SweepSink, run_sweep};
use crate::bench::ValidOptions;
use crate::bench::kv_list::KvItem;
use crate::corpus::{CorpusSpec, Source};
use crate::record::run::RunFile;
use crate::report::aggregate::LoadedRun;
use crate::report::kv_table::{self, KvRow};
use crate::support::progress::Show;
use anyhow::Result;
use std::path::{Path, PathBuf};

/// Runs every item of a KV list on `model` and the `spec` corpus, each with
/// `opts` but its KV types and rotation, writing the run files into
/// `out_dir`; returns the table's rows, in the order of `items`.
pub fn run_kv_list(
    model: &Path,
    opts: ValidOptions,
    items: &[KvItem],
    spec: &CorpusSpec,
    out_dir: PathBuf,
    sink: &mut dyn SweepSink,
    show: &dyn Show,
) -> Result<Vec<KvRow>> {
    let name = run_name(model, opts.build.as_deref());
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
    let sweep_opts = SweepOptions { out_dir, resume: false, prefix_cache: opts.prefix_cache.clone(), decode: opts.decode.clone() };
    let sweep = Sweep::of_bench(model, &name, opts.into_inner(), items, spec);
    let runs = sweep.runs();
    run_sweep(&sweep, vec![None], &runs, &src, &sweep_opts, sink, show)?;
    let mut loaded = Vec::with_capacity(items.len());
    for item in items {
        let Some(r) = runs.iter().find(|r| (r.kv_k, r.kv_v, r.rotation) == (item.k, item.v, item.rotation)) else { continue };
        let path = r.file(&sweep_opts.out_dir);
        let run = RunFile::load(&path)?;
        loaded.push(LoadedRun { path: Some(path), label: r.id.clone(), run });
    }
    kv_table::rows(&loaded)
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
