//! `posrecall matrix models.toml`: every (model × KV) run of a sweep.
//!
//! Every model is planned first, and one kept line range is chosen that fits
//! them all ([`crate::bench::plan::plan_shared`]), so that every run is asked
//! about the same targets. Then each model is loaded once and run at each of
//! its KV types; each run's file is written atomically as soon as it is done,
//! so an interrupted sweep resumes (`--resume`) from the runs it finished.
//! `--shard` cuts the runs into slices for a job array; every shard writes
//! into the same folder.

use crate::bench::plan::{NoSharedRange, plan_shared};
use crate::bench::{self, ContextSettings, DecodeOptions, ExecOptions, Plan, PlanOptions, RunSpec};
use crate::cli::MatrixArgs;
use crate::commands::{corpus_spec, hint};
use crate::corpus::Source;
use crate::settings::ContextConfig;
use crate::engine::model::{self, Model};
use crate::engine::prefix_cache::PrefixCache;
use crate::progress::{self, ms};
use crate::report::aggregate::LoadedRun;
use crate::report::export::{self, Format, Options};
use crate::reference::Reference;
use crate::run::RunFile;
use crate::sweep::{ModelEntry, ReferenceRole, Shard, Sweep, SweepRun, is_finished};
use crate::template::TemplateFile;
use anyhow::{Context, Result, anyhow, bail};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget};
use std::time::Instant;

/// One model of the sweep with its plan.
struct Planned {
    /// Loaded without GPU offload: planning needs only the tokenizer and the
    /// metadata. Reused for the runs when the runs offload nothing either.
    model: Option<Model>,
    plan: Plan,
    /// The model's length ladder (`params.lengths`), its longest window
    /// within the shared range.
    ladder: Option<bench::ladder::Ladder>,
    gpu_layers: u32,
}

impl Planned {
    /// The plan the run's context and record follow: the longest window's
    /// for a ladder.
    fn run_plan(&self) -> &Plan {
        self.ladder.as_ref().map_or(&self.plan, |l| l.longest())
    }

    /// Every target the run asks, in order, as (name, line).
    fn targets(&self) -> Vec<(String, usize)> {
        let plans: Vec<&Plan> = match &self.ladder {
            Some(l) => l.rungs.iter().map(|r| &r.plan).collect(),
            None => vec![&self.plan],
        };
        plans.iter().flat_map(|p| p.targets.iter().map(|t| (t.name.clone(), t.line))).collect()
    }
}

/// The sweep as this command runs it: the file, its decoding, this shard.
struct Matrix<'a> {
    args: &'a MatrixArgs,
    sweep: Sweep,
    decode: DecodeOptions,
    /// This shard's runs.
    mine: Vec<SweepRun>,
    shard: Option<Shard>,
    /// "shard K/N: x of the y runs" or "y runs".
    shard_note: String,
    /// Per model, its `chat_template` file, read and checked.
    templates: Vec<Option<TemplateFile>>,
}

impl Matrix<'_> {
    fn plan_options(&self, i: usize, m: &ModelEntry) -> PlanOptions {
        PlanOptions {
            template: m.template.clone(),
            template_file: self.templates[i].clone(),
            think_budget: self.sweep.think_budget,
            target: self.sweep.target.clone(),
            probe: m.probe,
            crop: self.sweep.crop,
            ctx: m.ctx,
            max_prefix_tokens: self.sweep.max_prefix_tokens,
            max_new_tokens: self.sweep.max_new_tokens,
            only: Vec::new(),
        }
    }

    fn context(&self, r: &SweepRun, p: &Planned) -> ContextSettings {
        ContextSettings {
            kv: (r.kv_k, r.kv_v),
            flash_attn: self.sweep.flash_attn,
            swa_full: self.sweep.swa_full,
            threads: self.sweep.threads,
            gpu_layers: p.gpu_layers,
        }
    }

    /// A run's context and decoding: parallel decoding is decided per model
    /// and KV type. `to_run` false: deciding whether a finished run may be
    /// kept (no memory check, no notes).
    fn decide(&self, r: &SweepRun, p: &Planned, model: &Model, to_run: bool) -> Result<(ContextConfig, bench::Decoding)> {
        bench::decide(model, p.run_plan(), &self.context(r, p), &self.decode, to_run).map_err(|e| hint(e, Some(self.sweep.crop)))
    }

    fn spec<'s>(&'s self, r: &SweepRun, p: &'s Planned, model: &'s Model, src: &'s Source, run: &'s (ContextConfig, bench::Decoding)) -> RunSpec<'s> {
        RunSpec {
            model,
            src,
            plan: p.run_plan(),
            cfg: &run.0,
            build: self.sweep.models[r.model].build.as_deref(),
            target: &self.sweep.target,
            decoding: &run.1,
            reference: None,
        }
    }
}

pub fn run(args: &MatrixArgs) -> Result<()> {
    let m = open(args)?;
    if args.list {
        return list(&m);
    }
    if m.mine.is_empty() {
        return outln!("{}: {}: nothing to do", args.file.display(), m.shard_note);
    }
    let spec = corpus_spec(m.sweep.corpus.as_deref(), &m.sweep.corpus_args())?;
    let corpus = spec.path.clone();
    let src = Source::open_spec(&spec, m.sweep.target.rename_seed())?;
    if let Some(note) = src.error_note() {
        eprintln!("{note}");
    }
    // The output folder first: a wrong one must not cost loading every model.
    prepare_out_dir(&m)?;
    let cache = args.prefix_cache.as_deref().map(PrefixCache::new).transpose()?;
    let mut planned = plan_every_model(&m, &src)?;
    if !args.quiet {
        let (crop, n) = (&planned[0].plan.crop, planned[0].plan.targets.len());
        outln!(
            "{}: {}; every run keeps lines {}..{} of {} and is asked about the same {n} targets",
            args.file.display(),
            m.shard_note,
            crop.first_line,
            crop.last_line,
            corpus.display(),
        )?;
    }
    let pending = pending_runs(&m, &planned, &src)?;
    run_pending(&m, &mut planned, &src, cache.as_ref(), &pending)?;
    print_aggregate(&m)
}

/// Reads the sweep and picks this shard's runs.
fn open(args: &MatrixArgs) -> Result<Matrix<'_>> {
    let mut sweep = Sweep::load(&args.file)?;
    let decode = args.decode.options(false, false);
    decode.validate().map_err(|e| hint(e.into(), None))?;
    if let Some(t) = decode.fixed_tokens {
        if sweep.max_new_tokens.is_some() {
            bail!("{}: params.max_new_tokens is set; --fixed-tokens sets the answer length", args.file.display());
        }
        sweep.max_new_tokens = Some(t);
    }
    let all = sweep.runs();
    let shard = args.shard.map(|s| s.resolve(&|name: &str| std::env::var(name).ok())).transpose()?;
    let (mine, shard_note) = match shard {
        Some(s) => {
            let mine = s.select(&all);
            let note = format!("shard {s}: {} of the {} runs", mine.len(), all.len());
            (mine, note)
        }
        None => (all.clone(), format!("{} runs", all.len())),
    };
    let mut templates = Vec::with_capacity(sweep.models.len());
    for e in &sweep.models {
        let file = match &e.chat_template {
            Some(path) => Some(
                TemplateFile::load(path, &e.template)
                    .map_err(|err| anyhow!("{}: model `{}`: chat_template: {err}", args.file.display(), e.name))?,
            ),
            None => None,
        };
        templates.push(file);
    }
    Ok(Matrix { args, sweep, decode, mine, shard, shard_note, templates })
}

/// `--list`: this shard's runs and their files, without loading a model.
fn list(m: &Matrix) -> Result<()> {
    eprintln!("{}: {}", m.args.file.display(), m.shard_note);
    for r in &m.mine {
        let e = &m.sweep.models[r.model];
        outln!("{}\t{}\t{}\t{}", r.id, r.file(&m.args.out_dir).display(), e.name, e.path.display())?;
    }
    Ok(())
}

/// Plans every model, shard or not, so that every shard picks the same range.
fn plan_every_model(m: &Matrix, src: &Source) -> Result<Vec<Planned>> {
    let sweep = &m.sweep;
    let mut models = Vec::with_capacity(sweep.models.len());
    for e in &sweep.models {
        models.push(model::load(&e.path, 0).with_context(|| format!("model `{}`", e.name))?);
    }
    let options: Vec<PlanOptions> = sweep.models.iter().enumerate().map(|(i, e)| m.plan_options(i, e)).collect();
    let names: Vec<&str> = sweep.models.iter().map(|e| e.name.as_str()).collect();
    let refs: Vec<&Model> = models.iter().collect();
    let plans = plan_shared(&refs, &names, src, &options).map_err(|e| match e.downcast_ref::<NoSharedRange>() {
        Some(n) => anyhow!("{n}; set [corpus] crop_lines or max_tokens, or give that model a larger ctx"),
        None => hint(e, Some(sweep.crop)),
    })?;
    let mut planned = Vec::with_capacity(models.len());
    for (((model, plan), e), mut o) in models.into_iter().zip(plans).zip(&sweep.models).zip(options) {
        // A ladder per model within the shared range: a window is a number
        // of the model's own tokens.
        let ladder = match &sweep.lengths {
            Some(lengths) => {
                o.target.crop_lines = Some(crate::crop::LineRange { first: plan.crop.first_line, last: plan.crop.last_line });
                let l = bench::ladder::plan_ladder(&model, src, &o, lengths)
                    .map_err(|err| hint(err, Some(sweep.crop)).context(format!("model `{}`", e.name)))?;
                if let Some(note) = &l.stopped {
                    eprintln!("note: model `{}`: {note}", e.name);
                }
                Some(l)
            }
            None => None,
        };
        planned.push(Planned {
            model: Some(model),
            plan,
            ladder,
            // What a load offloads on this machine, so that the runs record it.
            gpu_layers: model::resolve_gpu_layers(&e.path, e.gpu_layers.unwrap_or_else(bench::default_gpu_layers))
                .map_err(|err| hint(err, None).context(format!("model `{}`", e.name)))?,
        });
    }
    Ok(planned)
}

/// Creates the output folder and removes the temporary files a killed run
/// of this shard may have left (`RunFile::save` writes `.<file>.tmp-<pid>`
/// and renames it); no other shard writes these.
fn prepare_out_dir(m: &Matrix) -> Result<()> {
    let dir = &m.args.out_dir;
    std::fs::create_dir_all(dir).with_context(|| format!("--out-dir: cannot create the output folder {}", dir.display()))?;
    crate::commands::check_output("--out-dir", &dir.join(".posrecall-out-dir-check"), &[])?;
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if m.mine.iter().any(|r| name.starts_with(&format!(".{}.json.tmp-", r.id))) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Ok(())
}

/// This shard's runs still to do: with `--resume`, those without a finished
/// run file of the same configuration.
fn pending_runs<'r>(m: &'r Matrix, planned: &[Planned], src: &Source) -> Result<Vec<&'r SweepRun>> {
    let mut pending = Vec::new();
    for r in &m.mine {
        let targets = planned[r.model].targets();
        let out = r.file(&m.args.out_dir);
        if m.args.resume && out.exists() {
            let p = &planned[r.model];
            let model = p.model.as_ref().ok_or_else(|| anyhow!("model not loaded"))?;
            let decided = m.decide(r, p, model, false)?;
            match RunFile::load(&out) {
                Ok(existing) if keeps(m, r, &existing, &m.spec(r, p, model, src, &decided), &targets) && existing.ladder.is_some() == p.ladder.is_some() => {
                    if !m.args.quiet {
                        outln!("{}: finished before, skipped", r.id)?;
                    }
                    continue;
                }
                Ok(_) => eprintln!(
                    "note: {} is not a finished run of this sweep's configuration; it will be replaced",
                    out.display()
                ),
                Err(e) => eprintln!("note: {e:#}; it will be replaced"),
            }
        }
        pending.push(r);
    }
    Ok(pending)
}

/// Whether a finished run file may stand for the run `spec` describes: a
/// reference run also needs its reference file, a measured run a record of
/// its reference.
fn keeps(m: &Matrix, r: &SweepRun, existing: &RunFile, spec: &RunSpec, targets: &[(String, usize)]) -> bool {
    let reference_kept = match m.sweep.reference_role(r) {
        None => true,
        Some(ReferenceRole::Saves) => Reference::load(&r.reference_file(&m.args.out_dir)).is_ok(),
        Some(ReferenceRole::MeasuredAgainst(_)) => existing.manifest.reference.is_some(),
    };
    is_finished(existing, &spec.manifest(), targets)
        && reference_kept
        && (!m.sweep.closed_book || existing.summary.closed_book.is_some())
        && (!spec.decoding.check_sequential || existing.summary.sequential.is_some())
}

/// The reference a run is measured against: the file its model's reference
/// run wrote in the output folder, checked against this run.
fn reference_for(m: &Matrix, r: &SweepRun, spec: &RunSpec, model: &Model, plan: &Plan) -> Result<Option<Reference>> {
    let Some(ReferenceRole::MeasuredAgainst(id)) = m.sweep.reference_role(r) else {
        return Ok(None);
    };
    let path = m.args.out_dir.join(format!("{id}.ref"));
    if !path.exists() {
        bail!(
            "run {}: its reference run {id} has not written {} yet (with --shard, run the shard that owns {id} first)",
            r.id,
            path.display()
        );
    }
    let reference = Reference::load(&path).with_context(|| format!("run {}", r.id))?;
    let mismatch = |e: crate::reference::Mismatch| anyhow!("run {}: reference {}: {e}", r.id, path.display());
    reference.header.identity.check(&spec.reference_identity()).map_err(mismatch)?;
    bench::check_reference(model, plan, &reference).map_err(mismatch)?;
    Ok(Some(reference))
}

/// Runs the pending runs, model by model: each model is loaded once for all
/// its KV types, in the order they are listed.
fn run_pending(m: &Matrix, planned: &mut [Planned], src: &Source, cache: Option<&PrefixCache>, pending: &[&SweepRun]) -> Result<()> {
    let multi = match m.args.quiet {
        true => MultiProgress::with_draw_target(ProgressDrawTarget::hidden()),
        false => MultiProgress::new(),
    };
    let total: usize = pending.iter().map(|r| planned[r.model].targets().len()).sum();
    let overall = multi.add(ProgressBar::new(total as u64));
    overall.set_style(progress::style("   sweep [{bar:30}] {pos}/{len} targets  ETA {eta}  {msg}"));
    for (i, e) in m.sweep.models.iter().enumerate() {
        let mut runs: Vec<&SweepRun> = pending.iter().copied().filter(|r| r.model == i).collect();
        // The model's reference run first: the others are measured against it.
        runs.sort_by_key(|r| (m.sweep.reference_role(r) != Some(ReferenceRole::Saves), e.kv.iter().position(|&kv| kv == (r.kv_k, r.kv_v))));
        let p = &mut planned[i];
        if runs.is_empty() {
            p.model = None;
            continue;
        }
        // The planning load when it offloads nothing, else a load with its GPU layers.
        let model = match p.model.take() {
            Some(loaded) if p.gpu_layers == 0 => loaded,
            other => {
                drop(other);
                overall.set_message(format!("loading {}", e.name));
                model::load(&e.path, p.gpu_layers).map_err(|err| hint(err, None).context(format!("model `{}`", e.name)))?
            }
        };
        for r in runs {
            overall.set_message(r.id.clone());
            run_one(m, r, p, &model, src, cache, &multi, &overall)?;
        }
    }
    overall.finish_and_clear();
    Ok(())
}

/// One run of the sweep, written to its run file when done.
#[allow(clippy::too_many_arguments)]
fn run_one(
    m: &Matrix,
    r: &SweepRun,
    p: &Planned,
    model: &Model,
    src: &Source,
    cache: Option<&PrefixCache>,
    multi: &MultiProgress,
    overall: &ProgressBar,
) -> Result<()> {
    let started = Instant::now();
    let decided = multi.suspend(|| m.decide(r, p, model, true)).with_context(|| format!("run {}", r.id))?;
    let mut spec = m.spec(r, p, model, src, &decided);
    let reference = reference_for(m, r, &spec, model, &p.plan)?;
    spec.reference = reference.as_ref();
    let saves = m.sweep.reference_role(r) == Some(ReferenceRole::Saves);
    let exec = ExecOptions {
        decoding: &decided.1,
        prefix_cache: cache.map(|c| (c, spec.prefix_cache_key())),
        closed_book: m.sweep.closed_book,
        show_progress: !m.args.quiet,
        multi: Some(multi),
        save_top_k: saves.then_some(crate::reference::DEFAULT_TOP_K),
        reference: reference.as_ref(),
    };
    let opts = m.sweep.target.score_options();
    if let Some(ladder) = &p.ladder {
        let keys: Vec<String> = ladder.rungs.iter().map(|g| RunSpec { plan: &g.plan, ..m.spec(r, p, model, src, &decided) }.prefix_cache_key()).collect();
        let exec = ExecOptions { prefix_cache: None, ..exec };
        let lx = bench::ladder::execute_ladder(model, ladder, &decided.0, &decided.1, &opts, &exec, cache.map(|c| (c, keys.as_slice())), |_| {}, |_| overall.inc(1))
            .with_context(|| format!("run {}", r.id))?;
        let run = spec.ladder_run_file(lx, ladder.stopped.clone(), m.sweep.effective_at, ms(started));
        run.save(&r.file(&m.args.out_dir))?;
        return finished(m, r, &run, multi, started);
    }
    let executed = bench::execute(model, &p.plan, &decided.0, &opts, &exec, |_| overall.inc(1))
        .with_context(|| format!("run {}", r.id))?;
    // The reference file before the run file: a finished reference run always has it.
    if let Some(saved) = &executed.saved {
        spec.save_reference(&r.reference_file(&m.args.out_dir), crate::reference::DEFAULT_TOP_K, saved)?;
    }
    let run = spec.run_file(executed, ms(started));
    run.save(&r.file(&m.args.out_dir))?;
    finished(m, r, &run, multi, started)
}

/// Says a run is done, with its totals (and its effective length).
fn finished(m: &Matrix, r: &SweepRun, run: &RunFile, multi: &MultiProgress, started: Instant) -> Result<()> {
    if !m.args.quiet {
        let t = &run.summary.total;
        multi.suspend(|| {
            outln!(
                "{}: passed {}/{}, matched {}, missing {}, hallucinated {}, extra {} ({:.1} s)",
                r.id,
                t.passes,
                t.count,
                t.matched,
                t.missing,
                t.hallucinated,
                t.extra,
                started.elapsed().as_secs_f64()
            )?;
            match &run.ladder {
                Some(l) => outln!("{}", crate::report::terminal::ladder_grid(l)),
                None => Ok(()),
            }
        })?;
    }
    Ok(())
}

/// The aggregate over this shard's runs, as `posrecall report` shows it.
fn print_aggregate(m: &Matrix) -> Result<()> {
    let mut loaded = Vec::with_capacity(m.mine.len());
    for r in &m.mine {
        let path = r.file(&m.args.out_dir);
        let run = RunFile::load(&path)?;
        loaded.push(LoadedRun { path: Some(path), label: r.id.clone(), run });
    }
    let color = crate::report::terminal::stdout_wants_color();
    let exporter = export::exporter(Format::Table, Options { diff: false, color })?;
    if !m.args.quiet {
        outln!()?;
    }
    crate::commands::out(&exporter.render(&loaded)?)?;
    if m.shard.is_some() && !m.args.quiet {
        outln!("\n(this shard's runs; `posrecall report {}` merges every shard)", m.args.out_dir.display())?;
    }
    Ok(())
}
