//! A whole sweep (`models.toml`): every model planned on one shared range,
//! then each model loaded once and run at each of its KV types, its
//! reference run first, each run's file written atomically as soon as it is
//! done, so that an interrupted sweep resumes from the runs it finished.
//!
//! [`super::file`] reads the file and gives each run its [`BenchOptions`];
//! every run is [`bench::run`]'s, as `bench`'s is.

use super::file::{ReferenceRole, Sweep, SweepRun};
use crate::bench::plan::{OfModel, plan_shared};
use crate::bench::{self, Env, Plan, PlanOptions, Planned, RunSpec, ValidOptions};
use crate::corpus::Source;
use crate::engine::model::{self, Model};
use crate::prompt::template::TemplateFile;
use crate::record::reference::Reference;
use crate::record::run::{Manifest, RunFile, TargetResult};
use crate::settings::Named;
use crate::support::progress::{Notes, Progress, Show, Unit};
use anyhow::{Context, Result, anyhow, bail};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// How a sweep runs, beyond its file.
pub struct SweepOptions {
    /// One run file per run, `MODEL__KVK-KVV.json`, and its reference files.
    pub out_dir: PathBuf,
    /// Keep runs whose file is a finished run of the same configuration.
    pub resume: bool,
}

/// The output folder cannot hold the run files; the message names no flag.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct OutDirError(pub String);

/// What a sweep leaves to say beside its run files.
#[derive(Debug, Default)]
pub struct Outcome {
    /// Runs of a list ([`Sweep::first_is_reference`]) not measured against
    /// the first, with why (another vocabulary, another prompt): their run
    /// files have no divergence, and the table says why.
    pub unmeasured: Vec<(String, String)>,
}

/// Where a sweep shows what it does: the face passes one in.
pub trait SweepSink {
    /// Every model is planned: `plan` is the first model's, on the kept range
    /// all of them share.
    fn planned(&mut self, _plan: &Plan) -> Result<()> {
        Ok(())
    }
    /// A run kept from before (resume).
    fn skipped(&mut self, _run: &SweepRun) -> Result<()> {
        Ok(())
    }
    /// A run is done and its file written.
    fn finished(&mut self, _run: &SweepRun, _file: &RunFile, _started: Instant) -> Result<()> {
        Ok(())
    }
    /// As [`bench::Sink::explain`].
    fn explain(&self, e: anyhow::Error) -> anyhow::Error {
        e
    }
}

/// One model of the sweep with its plan.
struct Model1 {
    /// The model's file (a hub reference resolved) and where it came from.
    path: std::path::PathBuf,
    origin: Option<crate::support::hub::Origin>,
    /// Loaded without GPU offload: planning needs only the tokenizer and the
    /// metadata. Reused for the runs when the runs offload nothing either.
    model: Option<Model>,
    planned: Planned,
    gpu_layers: u32,
    /// The model file's sha256, for the reference checks once the planning
    /// load is gone.
    sha256: String,
    /// Why this model's runs cannot be measured against the list's first
    /// run (another vocabulary): they run without it.
    unmeasured: Option<String>,
}

/// The sweep as it runs: the file, its options, this shard's runs.
struct Ctx<'a> {
    sweep: &'a Sweep,
    opts: &'a SweepOptions,
    mine: &'a [SweepRun],
    templates: Vec<Option<TemplateFile>>,
    notes: &'a dyn Notes,
    progress: &'a dyn Progress,
}

impl Ctx<'_> {
    /// A run's options, checked (the sweep's were checked when it was
    /// read; this is the one check running needs). An error is the
    /// library's, of the run's model: the face words it.
    fn options(&self, r: &SweepRun) -> Result<ValidOptions> {
        let o = self.sweep.options(r, self.templates[r.model].as_ref(), &self.opts.out_dir);
        o.validate().map_err(|e| anyhow::Error::from(e).context(OfModel(self.sweep.models[r.model].name.clone())))
    }
}

/// Runs shard `mine` of `sweep` (on the corpus `src`), writing each run's file
/// into the output folder; `templates` are [`Sweep::templates`].
pub fn run_sweep(
    sweep: &Sweep,
    templates: Vec<Option<TemplateFile>>,
    mine: &[SweepRun],
    src: &Source,
    opts: &SweepOptions,
    sink: &mut dyn SweepSink,
    show: &dyn Show,
) -> Result<Outcome> {
    let ctx = Ctx { sweep, opts, mine, templates, notes: show, progress: show };
    // The output folder first: a wrong one must not cost loading every model.
    prepare_out_dir(&ctx)?;
    let mut models = plan_every_model(&ctx, src, sink)?;
    check_owners(&ctx, &models)?;
    check_vocabularies(&ctx, &mut models)?;
    sink.planned(models[0].planned.run_plan())?;
    let pending = pending_runs(&ctx, &models, src, sink)?;
    run_pending(&ctx, &mut models, src, &pending, sink)
}

/// A list's runs are measured against one reference: a reference file the
/// user named must have every model's vocabulary (refused before any run
/// otherwise), and a model whose vocabulary differs from the list's first
/// runs without the first's reference (noted once; the run goes on).
fn check_vocabularies(ctx: &Ctx, models: &mut [Model1]) -> Result<()> {
    let sweep = ctx.sweep;
    if !sweep.first_is_reference {
        return Ok(());
    }
    let vocab = |m: &Model1| m.model.as_ref().map(|x| x.vocab_fingerprint());
    if let Some(path) = sweep.base.reference.as_deref() {
        let reference = Reference::load(path)?;
        let theirs = (reference.header.identity.n_vocab, reference.header.identity.vocab_sha256.clone());
        for (m, e) in models.iter().zip(&sweep.models) {
            if vocab(m).is_some_and(|v| v != theirs) {
                bail!(
                    "reference {}: its vocabulary ({} tokens) is not the one of the model {} in the list: one reference measures models of one vocabulary; list them apart",
                    path.display(),
                    theirs.0,
                    e.path_as_written
                );
            }
        }
        return Ok(());
    }
    let Some(first) = models.first().and_then(vocab) else { return Ok(()) };
    if sweep.models[0].reference_kv.is_none() {
        return Ok(());
    }
    for (m, e) in models.iter_mut().zip(&sweep.models).skip(1) {
        if let Some(v) = vocab(m).filter(|v| *v != first) {
            let why = format!(
                "its vocabulary ({} tokens) is not the first model's ({} tokens), so there is no divergence to measure",
                v.0, first.0
            );
            ctx.notes.note(&format!("note: {}: not measured against the list's first run: {why}", e.name));
            m.unmeasured = Some(why);
        }
    }
    Ok(())
}

/// Plans every model, shard or not, so that every shard picks the same range.
fn plan_every_model(ctx: &Ctx, src: &Source, sink: &dyn SweepSink) -> Result<Vec<Model1>> {
    let sweep = ctx.sweep;
    let (mut models, mut located) = (Vec::with_capacity(sweep.models.len()), Vec::new());
    for e in &sweep.models {
        let (path, origin) = crate::support::hub::locate(&e.path, ctx.progress).with_context(|| OfModel(e.name.clone()))?;
        models.push(model::load(&path, 0).with_context(|| OfModel(e.name.clone()))?);
        located.push((path, origin));
    }
    // Planning reads no KV type: the first run of each model stands for all.
    let firsts: Vec<bench::BenchOptions> = (0..sweep.models.len())
        .map(|i| {
            let first = sweep.runs().into_iter().find(|r| r.model == i).expect("every model has a run");
            sweep.options(&first, ctx.templates[i].as_ref(), &ctx.opts.out_dir)
        })
        .collect();
    let options: Vec<PlanOptions> = firsts.iter().map(|o| o.planning()).collect();
    let names: Vec<&str> = sweep.models.iter().map(|e| e.name.as_str()).collect();
    let refs: Vec<&Model> = models.iter().collect();
    let plans = plan_shared(&refs, &names, src, &options, ctx.notes).map_err(|e| sink.explain(e))?;
    let mut out = Vec::with_capacity(models.len());
    let each = models.into_iter().zip(plans).zip(&sweep.models).zip(options).zip(firsts).zip(located);
    for (((((model, plan), e), mut o), first), (path, origin)) in each {
        // A ladder per model within the shared range: a window is a number
        // of the model's own tokens.
        let planned = match &sweep.base.lengths {
            Some(lengths) => {
                o.target.crop_lines = Some(crate::targets::crop::LineRange { first: plan.crop.first_line, last: plan.crop.last_line });
                let l = bench::ladder::plan_ladder(&model, src, &o, lengths, ctx.notes)
                    .map_err(|err| sink.explain(err).context(OfModel(e.name.clone())))?;
                if let Some(note) = &l.stopped {
                    ctx.notes.note(&format!("note: model `{}`: {note}", e.name));
                }
                Planned::Ladder(l)
            }
            None => Planned::Plain(plan),
        };
        // What a load offloads on this machine, so that the runs record it.
        let gpu_layers =
            model::resolve_gpu_layers(&path, first.context.gpu_layers).map_err(|err| sink.explain(err).context(OfModel(e.name.clone())))?;
        let sha256 = model.sha256.clone();
        out.push(Model1 { path, origin, model: Some(model), planned, gpu_layers, sha256, unmeasured: None });
    }
    Ok(out)
}

/// Creates the output folder and removes the temporary files a killed run
/// of this shard may have left (`RunFile::save` writes `.<file>.tmp-<pid>-<random>`
/// and renames it); no other shard writes these.
fn prepare_out_dir(ctx: &Ctx) -> Result<()> {
    let dir = &ctx.opts.out_dir;
    // `create_dir_all` on a name that is something else says only "File
    // exists": say what is there, so the user knows what to move.
    if let Some(what) = not_a_folder(dir) {
        return Err(OutDirError(format!(
            "{} is {what}, not a folder: the output folder must be a folder (or not exist yet)",
            dir.display()
        ))
        .into());
    }
    std::fs::create_dir_all(dir).map_err(|e| OutDirError(format!("cannot create the output folder {}: {e}", dir.display())))?;
    crate::support::fsutil::check_output(&dir.join(".posrecall-out-dir-check"), &[]).map_err(|e| OutDirError(format!("{e:#}")))?;
    // Every file this shard writes, before any model work: none may be a
    // folder or one of the sweep's inputs (the file, the corpus, a model, a
    // chat template), and the corpus folder may not hold them.
    let sweep = ctx.sweep;
    let mut inputs: Vec<&Path> = vec![&sweep.file];
    inputs.extend(sweep.corpus.as_deref());
    for m in &sweep.models {
        inputs.push(&m.path);
        inputs.extend(m.chat_template.as_deref());
    }
    let folders: Vec<(&str, &Path)> = sweep.corpus_dir.iter().map(|d| ("corpus", d.as_path())).collect();
    for r in ctx.mine {
        for out in [r.file(dir), r.reference_file(dir), crate::record::reference::sidecar(&r.reference_file(dir))] {
            // Names the sweep makes itself stay in the folder: a link planted
            // there would send a run's results anywhere the link points.
            if std::fs::symlink_metadata(&out).is_ok_and(|m| m.file_type().is_symlink()) {
                return Err(OutDirError(format!(
                    "{} is a symbolic link: a sweep writes the files it names itself only inside its output folder, never \
                     through a link; remove it",
                    out.display()
                ))
                .into());
            }
            crate::support::fsutil::check_outputs(&[("", &out)], &inputs, &folders).map_err(|(_, e)| OutDirError(e.to_string()))?;
            // `--resume` reads what is there: a FIFO would block the read.
            // (Written outputs may be FIFOs or devices; read ones may not.)
            if ctx.opts.resume && std::fs::metadata(&out).is_ok_and(|m| !m.is_file()) {
                return Err(OutDirError(format!(
                    "{} exists and is not a regular file (a FIFO, socket or device): resuming would read it back; remove it",
                    out.display()
                ))
                .into());
            }
        }
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if ctx.mine.iter().any(|r| name.starts_with(&format!(".{}.json.tmp-", r.id))) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Ok(())
}

/// Refuses, before any run, to replace another model's results: a run file
/// or reference already at one of this shard's names that was made by
/// another model file (another sha256), as two models whose files share a
/// name would write into one folder. A file that does not read is left to
/// the run (resume replaces it with a note).
fn check_owners(ctx: &Ctx, models: &[Model1]) -> Result<()> {
    let dir = &ctx.opts.out_dir;
    for r in ctx.mine {
        let Some(model) = models[r.model].model.as_ref() else { continue };
        let (run, reference) = (r.file(dir), r.reference_file(dir));
        let theirs = [
            RunFile::load(&run).ok().and_then(|f| f.manifest.model.map(|m| (run.clone(), m.sha256, m.build))),
            Reference::load(&reference).ok().map(|f| (reference.clone(), f.header.source.model_sha256, f.header.source.build)),
        ];
        if let Some((path, sha, build)) = theirs.into_iter().flatten().find(|(_, sha, _)| !sha.is_empty() && *sha != model.sha256) {
            return Err(OutDirError(format!(
                "{} holds the results of another model file ({build}, sha256 {}…) than `{}` ({}): they are not replaced; \
                 give this model another name or write to another folder",
                path.display(),
                &sha[..sha.len().min(12)],
                ctx.sweep.models[r.model].name,
                ctx.sweep.models[r.model].path_as_written
            ))
            .into());
        }
    }
    Ok(())
}

/// This shard's runs still to do: on resume, those without a finished run
/// file of the same configuration.
fn pending_runs<'r>(ctx: &Ctx<'r>, models: &[Model1], src: &Source, sink: &mut dyn SweepSink) -> Result<Vec<Pending<'r>>> {
    let mut pending = Vec::new();
    for r in ctx.mine {
        let out = r.file(&ctx.opts.out_dir);
        if ctx.opts.resume && out.exists() {
            let m = &models[r.model];
            let model = m.model.as_ref().ok_or_else(|| anyhow!("model not loaded"))?;
            let o = ctx.options(r)?;
            let (cfg, decoding) =
                bench::decide(model, m.planned.run_plan(), &o.context, &o.decode, m.gpu_layers, false).map_err(|e| sink.explain(e))?;
            let spec = RunSpec {
                model,
                src,
                plan: m.planned.run_plan(),
                cfg: &cfg,
                build: o.build.as_deref(),
                origin: m.origin.as_ref(),
                target: &o.plan.target,
                decoding: &decoding,
                reference: None,
            };
            match RunFile::load(&out).map(|existing| keeps(ctx, r, model, &existing, &spec, &m.planned)) {
                Ok(Kept::Yes) => {
                    sink.skipped(r)?;
                    continue;
                }
                Ok(Kept::IfReferenceIs(sha)) => {
                    pending.push(Pending { run: r, kept_if_reference: Some(sha) });
                    continue;
                }
                Ok(Kept::No) => ctx
                    .notes
                    .note(&format!("note: {} is not a finished run of this sweep's configuration; it will be replaced", out.display())),
                Err(e) => ctx.notes.note(&format!("note: {e:#}; it will be replaced")),
            }
        }
        pending.push(Pending { run: r, kept_if_reference: None });
    }
    Ok(pending)
}

/// A run still to decide or do.
#[derive(Clone)]
struct Pending<'r> {
    run: &'r SweepRun,
    /// A finished run measured against a reference file with this sha256:
    /// kept if, when its turn comes (after its reference run, which may be
    /// redone first), the reference file is still that one.
    kept_if_reference: Option<String>,
}

/// What a finished run file is worth on resume.
enum Kept {
    Yes,
    No,
    IfReferenceIs(String),
}

/// Whether `reference` is what run `r` of this sweep writes: made by this
/// model file with `r`'s KV types, on the CPU kernels this process runs. A
/// reference file replaced by another run's (a q4_0 one in the place of the
/// f16 one), or made by another build (AVX2 kernels where these are
/// AVX-512), is not: its distributions would carry the other kernels'
/// rounding into every KLD measured against it.
fn made_by(reference: &Reference, model_sha256: &str, r: &SweepRun) -> std::result::Result<(), String> {
    let s = &reference.header.source;
    if s.model_sha256 != model_sha256 {
        return Err(format!(
            "it was made by another model file ({}, sha256 {}…)",
            s.build,
            &s.model_sha256[..s.model_sha256.len().min(12)]
        ));
    }
    let ours = crate::engine::device::cpu_features();
    if s.cpu_features.as_ref() != Some(&ours) {
        let theirs = s.cpu_features.as_ref().map_or_else(|| "unrecorded".to_string(), |f| f.join(" "));
        return Err(format!("it was made by other CPU kernels ({theirs}; these are {})", ours.join(" ")));
    }
    let rotation = s.context.kv_rotation.map(|x| x.mode).unwrap_or_default();
    if rotation != r.rotation {
        return Err(format!("it was made with KV rotation {rotation}, run {} uses {}", r.id, r.rotation));
    }
    if (s.context.type_k, s.context.type_v) != (r.kv_k, r.kv_v) {
        return Err(format!(
            "it was made with KV {}/{}, run {} uses {}/{}",
            s.context.type_k.as_str(),
            s.context.type_v.as_str(),
            r.id,
            r.kv_k.as_str(),
            r.kv_v.as_str()
        ));
    }
    Ok(())
}

/// Whether a finished run file may stand for the run `spec` describes: a
/// reference run also needs the reference file it writes ([`made_by`]), a
/// measured run the reference file it was measured against (decided when
/// its turn comes: [`Kept::IfReferenceIs`]).
fn keeps(ctx: &Ctx, r: &SweepRun, model: &Model, existing: &RunFile, spec: &RunSpec, planned: &Planned) -> Kept {
    let finished = is_finished(existing, &spec.manifest(), &planned.targets())
        && existing.ladder.is_some() == planned.is_ladder()
        && (!ctx.sweep.base.closed_book || existing.summary.closed_book.is_some())
        && (!spec.decoding.check_sequential || existing.summary.sequential.is_some());
    if !finished {
        return Kept::No;
    }
    match (ctx.sweep.reference_role(r), &existing.manifest.reference) {
        (None, _) => Kept::Yes,
        (Some(ReferenceRole::Saves), _) => {
            let path = r.reference_file(&ctx.opts.out_dir);
            match Reference::load(&path).map_err(|e| format!("{e:#}")).and_then(|f| made_by(&f, &model.sha256, r)) {
                Ok(()) => Kept::Yes,
                Err(why) if path.exists() => {
                    ctx.notes.note(&format!("note: {} is not the reference run {} writes: {why}; the run is redone", path.display(), r.id));
                    Kept::No
                }
                Err(_) => Kept::No,
            }
        }
        (Some(ReferenceRole::MeasuredAgainst(_)), Some(info)) => Kept::IfReferenceIs(info.sha256.clone()),
        (Some(ReferenceRole::MeasuredAgainst(_)), None) => Kept::No,
    }
}

/// The reference a run is measured against: the file its model's reference
/// run wrote in the output folder.
fn reference_for(ctx: &Ctx, r: &SweepRun, models: &[Model1], path: Option<&Path>) -> Result<Option<Reference>> {
    let Some(path) = path else { return Ok(None) };
    if !path.exists() {
        let id = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
        bail!(
            "run {}: its reference run {id} has not written {} yet (with shards, run the shard that owns {id} first)",
            r.id,
            path.display()
        );
    }
    let reference = Reference::load(path).with_context(|| format!("run {}", r.id))?;
    // The file must be the one the model's reference run wrote, not another
    // run's put in its place.
    if let Some(maker) = ctx.sweep.reference_run_of(r) {
        made_by(&reference, &models[maker.model].sha256, &maker).map_err(|why| {
            anyhow!("run {}: {} is not the reference run {} writes: {why}; run {} again", r.id, path.display(), maker.id, maker.id)
        })?;
    }
    Ok(Some(reference))
}

/// Runs the pending runs, model by model: each model is loaded once for all
/// its KV types, its reference run first, the others in the order listed.
fn run_pending(ctx: &Ctx, models: &mut [Model1], src: &Source, pending: &[Pending], sink: &mut dyn SweepSink) -> Result<Outcome> {
    let total: usize = pending.iter().map(|p| models[p.run.model].planned.targets().len()).sum();
    let overall = ctx.progress.bar(total as u64, "sweep", Unit::Targets);
    let mut outcome = Outcome::default();
    for (i, e) in ctx.sweep.models.iter().enumerate() {
        let mut runs: Vec<Pending> = pending.iter().filter(|p| p.run.model == i).cloned().collect();
        // The model's reference run first: the others are measured against it.
        let items = e.items();
        runs.sort_by_key(|p| {
            (ctx.sweep.reference_role(p.run) != Some(ReferenceRole::Saves), items.iter().position(|&i| i == p.run.item()))
        });
        if runs.is_empty() {
            models[i].model = None;
            continue;
        }
        // The planning load when it offloads nothing, else a load with its GPU layers.
        let model = match models[i].model.take() {
            Some(loaded) if models[i].gpu_layers == 0 => loaded,
            other => {
                drop(other);
                overall.set_message(&format!("loading {}", e.name));
                model::load(&models[i].path, models[i].gpu_layers).map_err(|err| sink.explain(err).context(OfModel(e.name.clone())))?
            }
        };
        let model = Model { origin: models[i].origin.clone(), ..model };
        let m = &models[i];
        for Pending { run: r, kept_if_reference } in &runs {
            let mut o = ctx.options(r)?;
            if let Some(why) = &m.unmeasured {
                o = without_reference(o)?;
                outcome.unmeasured.push((r.id.clone(), why.clone()));
            }
            if let (Some(sha), Some(path)) = (kept_if_reference, o.reference.as_deref()) {
                if crate::support::fsutil::file_sha256(path).is_ok_and(|now| now == *sha) {
                    overall.inc(m.planned.targets().len() as u64);
                    sink.skipped(r)?;
                    continue;
                }
                ctx.notes.note(&format!(
                    "note: {}: its reference {} is not the one it was measured against; it runs again",
                    r.id,
                    path.display()
                ));
            }
            overall.set_message(&r.id);
            let started = Instant::now();
            let mut reference = reference_for(ctx, r, models, o.reference.as_deref())?;
            let file = r.file(&ctx.opts.out_dir);
            let out = bench::RunOut { path: &file, made: true, resumed: None };
            let env = Env { progress: ctx.progress, started, notes: ctx.notes, out: Some(out) };
            let mut counted = Counted { bar: overall.as_ref(), outer: sink };
            let mut result = bench::run(&model, src, &m.planned, &o, reference.as_ref(), &env, &mut counted);
            // A list's later run whose prompt is not the first's (another
            // probe, another template) runs without the first's reference:
            // noted, and the table says why. A reference the user named, or
            // a sweep's own, must measure its runs.
            if let Err(err) = &result
                && ctx.sweep.first_is_reference
                && ctx.sweep.base.reference.is_none()
                && let Some(mismatch) = err.downcast_ref::<bench::ReferenceMismatch>()
            {
                let why = format!("its prompt is not the first run's ({})", mismatch.mismatch);
                ctx.notes.note(&format!("note: {}: not measured against the list's first run: {why}", r.id));
                outcome.unmeasured.push((r.id.clone(), why));
                o = without_reference(o)?;
                reference = None;
                let mut counted = Counted { bar: overall.as_ref(), outer: sink };
                result = bench::run(&model, src, &m.planned, &o, reference.as_ref(), &env, &mut counted);
            }
            let run = result.with_context(|| format!("run {}", r.id))?;
            run.save_here(&file)?;
            sink.finished(r, &run, started)?;
        }
    }
    drop(overall);
    Ok(outcome)
}

/// `o` measured against nothing.
fn without_reference(o: ValidOptions) -> Result<ValidOptions> {
    let mut o = o.into_inner();
    o.reference = None;
    Ok(o.validate()?)
}

/// A sweep run's sink: each result moves the sweep's bar.
struct Counted<'a> {
    bar: &'a dyn crate::support::progress::Bar,
    outer: &'a dyn SweepSink,
}

impl bench::Sink for Counted<'_> {
    fn result(&mut self, _r: &TargetResult) {
        self.bar.inc(1);
    }

    fn explain(&self, e: anyhow::Error) -> anyhow::Error {
        self.outer.explain(e)
    }
}

/// Whether `existing` is a finished run of exactly `manifest` whose targets
/// are `targets` (name and line, in order), so `--resume` may keep it.
pub fn is_finished(existing: &crate::record::run::RunFile, manifest: &Manifest, targets: &[(String, usize)]) -> bool {
    existing.format == crate::record::run::FORMAT_VERSION
        && crate::record::keys::resume_key(&existing.manifest) == crate::record::keys::resume_key(manifest)
        && existing.targets.len() == targets.len()
        && existing.targets.iter().zip(targets).all(|(t, (name, line))| &t.name == name && t.line == *line)
        && existing.summary.total.count == targets.len()
        && existing.timings.is_some()
        && existing.unfinished.is_none()
}

/// What stands at `path` when it is not a folder (nor a link to one), in
/// words; `None` when it is a folder or nothing is there.
fn not_a_folder(path: &Path) -> Option<String> {
    let here = std::fs::symlink_metadata(path).ok()?;
    if here.file_type().is_symlink() {
        let to = std::fs::read_link(path).map(|t| t.display().to_string()).unwrap_or_default();
        return match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => None,
            Ok(m) => Some(format!("a symbolic link to {to}, which is {}", kind(&m.file_type()))),
            Err(_) => Some(format!("a symbolic link to {to}, which does not exist")),
        };
    }
    (!here.is_dir()).then(|| kind(&here.file_type()).to_string())
}

/// A file type in words.
fn kind(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if t.is_fifo() {
            return "a FIFO";
        } else if t.is_socket() {
            return "a socket";
        } else if t.is_block_device() || t.is_char_device() {
            return "a device";
        }
    }
    if t.is_file() { "a regular file" } else { "something other than a folder" }
}

impl crate::settings::Explain for OutDirError {
    fn explain(&self, n: &dyn crate::settings::Names) -> String {
        format!("{}: {}", n.name(crate::settings::Setting::OutDir), self.0)
    }
}
