//! Running a benchmark: the library behind `posrecall bench` and `matrix`.
//!
//! A run is a short sequence of steps, each in its own file: [`options`]
//! holds what a run is given and the one `validate()`; [`plan`] decides
//! everything before decoding (probe, kept range, targets, context size;
//! [`ladder`] for several lengths); [`decoding`] decides how the answers are
//! decoded (one at a time or N at once) and the context that needs;
//! [`execute`] evaluates the prefix once and runs the passes; [`record`]
//! builds the run file. [`run`] is the one sequence of those steps, for a
//! plain run and a ladder, with or without a reference. The commands turn
//! flags into [`BenchOptions`], call [`run`] and print; the sweep, a layer
//! above, turns `models.toml` into one set of options per run and calls
//! [`run`] for each. Nothing here knows a flag, a sweep, or the terminal.

pub mod decoding;
pub mod execute;
pub mod instances;
pub mod ladder;
pub mod manifest;
pub mod options;
pub mod plan;
pub mod resume;

/// The most tokens one answer may generate.
pub const MAX_NEW_TOKENS: usize = 131_072;
/// The most CPU threads a run may ask for.
pub(crate) const MAX_THREADS: usize = 1_024;

pub use decoding::{DecodeError, DecodeOptions, Decoding, MemoryLimit};
pub use execute::{ExecOptions, Executed, check_reference, execute};
pub use manifest::RunSpec;
pub use options::{BenchOptions, Invalid, Numeric, OptionsError, ValidOptions, check_plan};
pub use plan::{Plan, PlanError, PlanOptions, plan};
pub use resume::{NotThisRun, RunOut};

use crate::corpus::Source;
use crate::engine::model::Model;
use crate::engine::prefix_cache::PrefixCache;
use crate::record::reference::{Mismatch, Reference};
use crate::record::run::{RunFile, TargetResult};
use crate::settings::{ContextConfig, ContextSettings};
use crate::support::progress::ms;
use crate::support::progress::{Notes, Progress};
use anyhow::Result;
use std::cell::RefCell;
use std::path::PathBuf;
use std::time::Instant;

/// What a run asks: one window, or a ladder of windows.
// One per run, never in a collection: boxing the plan would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Planned {
    Plain(Plan),
    Ladder(ladder::Ladder),
}

impl Planned {
    /// The plan the run's context and record follow: the longest window's
    /// for a ladder.
    pub(crate) fn run_plan(&self) -> &Plan {
        match self {
            Planned::Plain(p) => p,
            Planned::Ladder(l) => l.longest(),
        }
    }

    /// Every target the run asks, in order, as (name, line).
    pub fn targets(&self) -> Vec<(String, usize)> {
        let plans: Vec<&Plan> = match self {
            Planned::Plain(p) => vec![p],
            Planned::Ladder(l) => l.rungs.iter().map(|r| &r.plan).collect(),
        };
        plans.iter().flat_map(|p| p.targets.iter().map(|t| (t.name.clone(), t.line))).collect()
    }

    pub(crate) fn is_ladder(&self) -> bool {
        matches!(self, Planned::Ladder(_))
    }
}

/// What a run reads besides its options: the model, the corpus, and the
/// reference it is measured against.
pub struct Opened {
    pub model: Model,
    pub src: Source,
    pub reference: Option<Reference>,
}

/// Reads what a run reads, cheapest first, so that a bad reference or
/// corpus costs no model load: the reference (read and verified), the
/// corpus, then the model (a path, or a hub reference resolved to one), with
/// the GPU layers the options ask for. The model records what was
/// offloaded and where it came from; the options stay as they were given.
pub fn open(
    model_path: &std::path::Path,
    corpus: &crate::corpus::CorpusSpec,
    opts: &ValidOptions,
    notes: &dyn Notes,
    progress: &dyn Progress,
) -> Result<Opened> {
    let reference = opts.reference.as_deref().map(Reference::load).transpose()?;
    let src = Source::open_spec(corpus, opts.plan.target.rename_seed())?;
    if let Some(note) = src.error_note() {
        notes.note(&note);
    }
    let (model_path, origin) = crate::support::hub::locate(model_path, progress)?;
    let mut model = crate::engine::model::load(&model_path, opts.context.gpu_layers)?;
    model.origin = origin;
    if let Some(note) = offload_note(opts.context.gpu_layers, model.gpu_layers) {
        notes.note(&format!("note: {note}"));
    }
    Ok(Opened { model, src, reference })
}

/// What to say when layers were asked to go to a GPU and none went: the
/// build has no GPU device, and a user who asked for an offload should not
/// read CPU timings as GPU ones. `None` when nothing was asked (or the
/// default, which offloads only what a GPU there is can hold).
fn offload_note(asked: u32, offloaded: u32) -> Option<String> {
    (asked > 0 && asked != crate::engine::device::GPU_LAYERS_AUTO && offloaded == 0).then(|| {
        format!("{asked} layers were asked to go to a GPU, but this build has no GPU device to offload to; the whole model runs on the CPU")
    })
}

/// Plans a run of `model` on `src`: a ladder when lengths are given.
pub fn plan_run(model: &Model, src: &Source, opts: &ValidOptions, notes: &dyn Notes) -> Result<Planned> {
    let o = opts.planning();
    Ok(match &opts.lengths {
        Some(lengths) => Planned::Ladder(ladder::plan_ladder(model, src, &o, lengths, notes)?),
        None => Planned::Plain(plan(model, src, &o, notes)?),
    })
}

/// Where a run shows what it does: the face passes one in.
pub trait Sink {
    /// Everything is checked and decided; the prefix is about to be
    /// evaluated (nothing is shown before this, so that a run refused while
    /// deciding prints only its error). `answers`: answers are generated and
    /// scored (not `--forced-only`).
    fn starting(&mut self, _answers: bool) {}
    /// A ladder window is about to be asked (`length` tokens asked for).
    fn window(&mut self, _length: usize, _plan: &Plan) {}
    /// One target's result, as soon as it is done.
    fn result(&mut self, _r: &TargetResult) {}
    /// Rewrites an error from the library as the face's user reads it (the
    /// flag that fixes it); errors it does not know pass through.
    fn explain(&self, e: anyhow::Error) -> anyhow::Error {
        e
    }
}

/// The surroundings of a run that are not options: how it shows progress,
/// and when it started.
pub struct Env<'a> {
    /// Where the run's bars go.
    pub progress: &'a dyn Progress,
    /// The run's start, as its command measures it (`timings.total_ms`).
    pub started: Instant,
    /// Where the run's notes go.
    pub notes: &'a dyn Notes,
    /// The run file, written as each target finishes (a plain run's; a
    /// ladder's is written whole, by its command); with the file to finish
    /// when resuming.
    pub out: Option<RunOut<'a>>,
}

/// A reference that does not measure this run.
#[derive(Debug, thiserror::Error)]
#[error("reference {}: {mismatch}", .path.display())]
pub(crate) struct ReferenceMismatch {
    pub path: PathBuf,
    pub mismatch: Mismatch,
}

/// Runs what `planned` asks with `opts` and returns its run file; the
/// reference file is written first when the options say to save one.
/// `reference` is the file `opts.reference` names, read before the model was
/// loaded.
pub fn run(
    model: &Model,
    src: &Source,
    planned: &Planned,
    opts: &ValidOptions,
    reference: Option<&Reference>,
    env: &Env,
    sink: &mut dyn Sink,
) -> Result<RunFile> {
    let (cfg, decoding) =
        decide(model, planned.run_plan(), &opts.context, &opts.decode, model.gpu_layers, true).map_err(|e| sink.explain(e))?;
    decoding.notes.iter().for_each(|n| env.notes.note(n));
    let spec = RunSpec {
        model,
        src,
        plan: planned.run_plan(),
        cfg: &cfg,
        build: opts.build.as_deref(),
        origin: model.origin.as_ref(),
        target: &opts.plan.target,
        decoding: &decoding,
        reference,
    };
    if let Some(r) = reference {
        let mismatch = |mismatch| ReferenceMismatch { path: r.path.clone(), mismatch };
        r.header.identity.check(&spec.reference_identity()).map_err(mismatch)?;
        check_reference(model, spec.plan, r).map_err(mismatch)?;
        reference_notes(&r.header.source, model, env);
    }
    let cache = opts.prefix_cache.as_deref().map(PrefixCache::new).transpose()?;
    let exec = ExecOptions {
        decoding: &decoding,
        prefix_cache: cache.as_ref().map(|c| (c, spec.prefix_cache_key())),
        closed_book: opts.closed_book,
        progress: env.progress,
        save_top_k: opts.save_reference.as_ref().map(|_| opts.top_k()),
        reference,
        notes: env.notes,
    };
    let score_opts = opts.plan.target.score_options();
    let ladder = match planned {
        Planned::Plain(plan) => {
            let manifest = spec.manifest();
            let kept = match resume::start(opts.resume, env.out, &manifest, plan, decoding.check_draft, env.notes) {
                Ok(resume::Start::Kept(kept)) => kept,
                Ok(resume::Start::Finished(run)) => return Ok(*run),
                Err(e) => return Err(sink.explain(e)),
            };
            let resumed = kept.iter().flatten().count();
            let rest = resume::remaining(plan, &kept);
            let mut partial = resume::Partial::new(env.out, manifest, kept);
            sink.starting(!opts.decode.forced_only);
            let mut executed = execute(model, &rest, &cfg, &score_opts, &exec, |r| {
                partial.finished(r, env.notes);
                sink.result(r)
            })?;
            // The reference file before the run file: a finished reference run always has it.
            if let (Some(path), Some(saved)) = (&opts.save_reference, &executed.saved) {
                spec.save_reference(path, opts.save_reference_made, opts.top_k(), saved)?;
            }
            let asked = std::mem::take(&mut executed.results);
            let results = partial.into_results(asked).ok_or_else(|| anyhow::anyhow!("a target of the run was not asked"))?;
            let mut run = spec.run_file(Executed { results, ..executed }, ms(env.started));
            if let Some(t) = run.timings.as_mut().filter(|_| resumed > 0) {
                t.resumed_targets = Some(resumed);
            }
            return Ok(run);
        }
        Planned::Ladder(l) => l,
    };
    sink.starting(!opts.decode.forced_only);
    let keys: Vec<String> = ladder.rungs.iter().map(|r| RunSpec { plan: &r.plan, ..spec.clone() }.prefix_cache_key()).collect();
    let exec = ExecOptions { prefix_cache: None, ..exec };
    let sink = RefCell::new(sink);
    let lx = ladder::execute_ladder(
        model,
        ladder,
        &cfg,
        &decoding,
        &score_opts,
        &exec,
        cache.as_ref().map(|c| (c, keys.as_slice())),
        |r| sink.borrow_mut().window(r.length, &r.plan),
        |r| sink.borrow_mut().result(r),
    )?;
    Ok(spec.ladder_run_file(lx, ladder.stopped.clone(), opts.effective_at, ms(env.started)))
}

/// How a planned run decodes for these context settings, and its context.
/// `gpu_layers`: what the run's load offloads (the model's own when it is
/// loaded for the run; a resume check on the planning load gives what the
/// run's load will offload). `to_run`: see [`DecodeOptions::decoding`].
pub(crate) fn decide(
    model: &Model,
    plan: &Plan,
    context: &ContextSettings,
    decode: &DecodeOptions,
    gpu_layers: u32,
    to_run: bool,
) -> Result<(ContextConfig, Decoding)> {
    let sequential = ContextConfig {
        kv_rotation: Some(model.rotation(context.kv_rotation, context.kv.0, context.kv.1)),
        gpu_layers,
        ..context.config(plan.n_ctx)
    };
    let decoding = decode.decoding(model, plan, &sequential, to_run)?;
    Ok((decoding.context(sequential, plan), decoding))
}

/// Layers offloaded when none are asked for: on a build with a GPU backend,
/// as many as fit in the device's memory (resolved when the model is loaded,
/// see [`crate::engine::device::resolve_layers`]), else none.
pub fn default_gpu_layers() -> u32 {
    match crate::engine::backend() {
        Ok(b) if b.supports_gpu_offload() => crate::engine::device::GPU_LAYERS_AUTO,
        _ => 0,
    }
}

/// Notes on a reference made by another model file or other CPU kernels: a
/// use, not an error (a quant A/B, a portable build's reference), but the
/// divergence then measures that too. The manifest records both models
/// (`reference.model_sha256`).
fn reference_notes(source: &crate::record::reference::Origin, model: &Model, env: &Env) {
    if source.model_sha256 != model.sha256 {
        env.notes.note(&format!(
            "note: the reference was made by another model file ({}, sha256 {}…): the divergence measures the two models as well as the KV cache",
            source.build,
            &source.model_sha256[..source.model_sha256.len().min(12)]
        ));
    }
    // So do other CPU kernels (a portable build's reference measured on
    // a native build): they round differently.
    let ours = crate::engine::device::cpu_features();
    if let Some(theirs) = source.cpu_features.as_ref().filter(|f| **f != ours) {
        env.notes.note(&format!(
            "note: the reference was computed by other CPU kernels ({}; these are {}): the divergence measures the kernels as well as the KV cache",
            theirs.join(" "),
            ours.join(" ")
        ));
    }
}

impl crate::settings::Explain for ReferenceMismatch {
    fn explain(&self, n: &dyn crate::settings::Names) -> String {
        format!("{}: {}", n.set(crate::settings::Setting::Reference, &self.path.display().to_string()), self.mismatch)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_offload_that_found_no_gpu_is_noted() {
        let auto = crate::engine::device::GPU_LAYERS_AUTO;
        let note = super::offload_note(99, 0).expect("a note");
        assert!(note.starts_with("99 layers were asked to go to a GPU"), "{note}");
        assert_eq!(super::offload_note(0, 0), None);
        assert_eq!(super::offload_note(auto, 0), None, "the default asks only for what a GPU holds");
        assert_eq!(super::offload_note(99, 25), None, "they went");
    }
}
