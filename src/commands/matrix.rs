//! `posrecall matrix models.toml`: every (model × KV) run of a sweep.
//!
//! Every model is planned first, and one kept line range is chosen that fits
//! them all, so that every run is asked about the same targets. Then each
//! model is loaded once and run at each of its KV types; each run's file is
//! written atomically as soon as it is done, so an interrupted sweep resumes
//! (`--resume`) from the runs it finished. `--shard` cuts the runs into
//! slices for a job array; every shard writes into the same folder.

use crate::cli::MatrixArgs;
use crate::commands::bench::{self, ExecOptions, Plan, PlanOptions, RunSpec};
use crate::corpus::Source;
use crate::engine::model::{self, Model};
use crate::engine::prefix_cache::PrefixCache;
use crate::report::aggregate::LoadedRun;
use crate::report::export::{self, Format, Options};
use crate::run::RunFile;
use crate::sweep::{ModelEntry, Shard, Sweep, SweepRun, is_finished};
use anyhow::{Context, Result, anyhow, bail};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::Instant;

/// One model of the sweep, opened for planning, with its plan.
struct Planned {
    /// Loaded without GPU offload: planning needs only the tokenizer and the
    /// metadata. Reused for the runs when the runs offload nothing either.
    model: Option<Model>,
    plan: Plan,
    gpu_layers: u32,
}

fn plan_options(sweep: &Sweep, m: &ModelEntry, crop_lines: Option<crate::crop::LineRange>) -> PlanOptions {
    let mut target = sweep.target.clone();
    target.crop_lines = crop_lines;
    PlanOptions {
        target,
        probe: m.probe,
        crop: sweep.crop,
        ctx: m.ctx,
        max_tokens: sweep.max_tokens,
        max_new_tokens: sweep.max_new_tokens,
    }
}

/// Plans every model with the same kept range, so that every run is asked
/// about the same targets. Each model is planned with the sweep's crop; when
/// they keep different ranges, the candidates (each model's own range) are
/// tried from the fewest kept bytes up, and the first that fits every model is
/// used for all of them (recorded as crop mode `lines`).
fn plan_all(sweep: &Sweep, src: &Source, models: &[Model]) -> Result<Vec<Plan>> {
    let own: Vec<Plan> = sweep
        .models
        .iter()
        .zip(models)
        .map(|(m, model)| {
            bench::plan(model, src, &plan_options(sweep, m, sweep.target.crop_lines))
                .with_context(|| format!("model `{}`", m.name))
        })
        .collect::<Result<_>>()?;
    let range = |p: &Plan| (p.crop.first_line, p.crop.last_line);
    if own.iter().all(|p| range(p) == range(&own[0])) {
        return Ok(own);
    }
    let corpus = &src.corpus;
    let bytes = |(a, b): (usize, usize)| corpus.line_end(b - 1) - corpus.line_start(a - 1);
    let mut candidates: Vec<((usize, usize), usize)> = Vec::new();
    for (i, p) in own.iter().enumerate() {
        if !candidates.iter().any(|(r, _)| *r == range(p)) {
            candidates.push((range(p), i));
        }
    }
    candidates.sort_by_key(|&(r, _)| (bytes(r), r));
    let mut first_failure = None;
    for &((a, b), owner) in &candidates {
        let lines = Some(crate::crop::LineRange { first: a, last: b });
        let mut plans = Vec::with_capacity(models.len());
        for (m, model) in sweep.models.iter().zip(models) {
            match bench::plan(model, src, &plan_options(sweep, m, lines)) {
                Ok(p) => plans.push(p),
                Err(e) => {
                    first_failure.get_or_insert_with(|| {
                        format!(
                            "lines {a}..{b} (kept for `{}`, the fewest bytes) do not fit `{}`: {e:#}",
                            sweep.models[owner].name, m.name
                        )
                    });
                    break;
                }
            }
        }
        if plans.len() == models.len() {
            return Ok(plans);
        }
    }
    bail!(
        "no one range of lines fits every model of the sweep: {}; set [corpus] crop_lines or max_tokens, or give that model a larger ctx",
        first_failure.unwrap_or_default()
    )
}

fn bar_style() -> ProgressStyle {
    ProgressStyle::with_template("   sweep [{bar:30}] {pos}/{len} targets  ETA {eta}  {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ")
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

pub fn run(args: &MatrixArgs) -> Result<()> {
    let mut sweep = Sweep::load(&args.file)?;
    args.decode.validate(false)?;
    if let Some(t) = args.decode.fixed_tokens {
        if sweep.max_new_tokens.is_some() {
            bail!("{}: params.max_new_tokens is set; --fixed-tokens sets the answer length", args.file.display());
        }
        sweep.max_new_tokens = Some(t as usize);
    }
    let all = sweep.runs();
    let shard: Option<Shard> = args
        .shard
        .map(|s| s.resolve(&|name: &str| std::env::var(name).ok()))
        .transpose()?;
    let mine: Vec<SweepRun> = match shard {
        Some(s) => s.select(&all),
        None => all.clone(),
    };
    let shard_note = match shard {
        Some(s) => format!("shard {s}: {} of the {} runs", mine.len(), all.len()),
        None => format!("{} runs", all.len()),
    };
    if args.list {
        eprintln!("{}: {shard_note}", args.file.display());
        for r in &mine {
            let m = &sweep.models[r.model];
            println!(
                "{}\t{}\t{}\t{}",
                r.id,
                r.file(&args.out_dir).display(),
                m.name,
                m.path.display()
            );
        }
        return Ok(());
    }
    if mine.is_empty() {
        println!("{}: {shard_note}: nothing to do", args.file.display());
        return Ok(());
    }

    let corpus_path = bench::corpus_path(sweep.corpus.as_deref())?;
    let src = Source::open_with(&corpus_path, sweep.target.rename_seed())?;
    if let Some(note) = src.error_note() {
        eprintln!("{note}");
    }
    let cache = args.prefix_cache.as_deref().map(PrefixCache::new).transpose()?;

    // Plan every model, shard or not, so that every shard picks the same range.
    let mut models = Vec::with_capacity(sweep.models.len());
    for m in &sweep.models {
        models.push(model::load(&m.path, 0).with_context(|| format!("model `{}`", m.name))?);
    }
    let plans = plan_all(&sweep, &src, &models)?;
    let mut planned: Vec<Planned> = models
        .into_iter()
        .zip(plans)
        .zip(&sweep.models)
        .map(|((model, plan), m)| Planned {
            model: Some(model),
            plan,
            gpu_layers: m.gpu_layers.unwrap_or_else(bench::default_gpu_layers),
        })
        .collect();
    let crop = &planned[0].plan.crop;
    let targets: Vec<(String, usize)> = planned[0]
        .plan
        .targets
        .iter()
        .map(|t| (t.name.clone(), t.line))
        .collect();
    let opts = bench::score_options(&sweep.target);
    let cfg_of = |r: &SweepRun, plan: &Plan| {
        bench::context_config_with(sweep.threads, (r.kv_k, r.kv_v), sweep.flash_attn, sweep.swa_full, plan.n_ctx)
    };
    // A run's decoding and context: `--parallel` is decided per model and KV type.
    // `to_run` false: deciding whether a finished run may be kept (no memory check, no notes).
    let decide = |r: &SweepRun, p: &Planned, model: &Model, to_run: bool| -> Result<(crate::engine::session::ContextConfig, bench::Decoding)> {
        let seq = cfg_of(r, &p.plan);
        let d = args.decode.decide(model, &p.plan, &seq, p.gpu_layers, false, false, to_run)?;
        Ok((d.context(seq, &p.plan), d))
    };
    if !args.quiet {
        println!(
            "{}: {shard_note}; every run keeps lines {}..{} of {} and is asked about the same {} targets",
            args.file.display(),
            crop.first_line,
            crop.last_line,
            corpus_path.display(),
            targets.len()
        );
    }

    std::fs::create_dir_all(&args.out_dir)
        .with_context(|| format!("cannot create the output folder {}", args.out_dir.display()))?;
    // Temporary files a killed run of this shard may have left (RunFile::save
    // writes `.<file>.tmp-<pid>` and renames it); no other shard writes these.
    if let Ok(entries) = std::fs::read_dir(&args.out_dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if mine.iter().any(|r| name.starts_with(&format!(".{}.json.tmp-", r.id))) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }

    // What is left to do.
    let mut pending: Vec<&SweepRun> = Vec::new();
    for r in &mine {
        let p = &planned[r.model];
        let out = r.file(&args.out_dir);
        if args.resume && out.exists() {
            let model = p.model.as_ref().ok_or_else(|| anyhow!("model not loaded"))?;
            let (cfg, decoding) = decide(r, p, model, false)?;
            let spec = RunSpec {
                model,
                src: &src,
                plan: &p.plan,
                cfg: &cfg,
                gpu_layers: p.gpu_layers,
                build: sweep.models[r.model].build.as_deref(),
                target: &sweep.target,
                decoding: &decoding,
            };
            match RunFile::load(&out) {
                Ok(existing)
                    if is_finished(&existing, &spec.manifest(), &targets)
                        && (!sweep.closed_book || existing.summary.closed_book.is_some())
                        && (!decoding.check_sequential || existing.summary.sequential.is_some()) =>
                {
                    if !args.quiet {
                        println!("{}: finished before, skipped", r.id);
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

    let multi = if args.quiet {
        MultiProgress::with_draw_target(ProgressDrawTarget::hidden())
    } else {
        MultiProgress::new()
    };
    let overall = multi.add(ProgressBar::new((pending.len() * targets.len()) as u64));
    overall.set_style(bar_style());

    for (i, m) in sweep.models.iter().enumerate() {
        // This model's pending runs, in the order its KV types are listed.
        let mut runs: Vec<&SweepRun> = pending.iter().copied().filter(|r| r.model == i).collect();
        runs.sort_by_key(|r| m.kv.iter().position(|&kv| kv == (r.kv_k, r.kv_v)));
        let p = &mut planned[i];
        if runs.is_empty() {
            p.model = None;
            continue;
        }
        // Loaded once for all its KV types: the planning load when it offloads
        // nothing, else a load with its GPU layers.
        let model = match p.model.take() {
            Some(loaded) if p.gpu_layers == 0 => loaded,
            other => {
                drop(other);
                overall.set_message(format!("loading {}", m.name));
                model::load(&m.path, p.gpu_layers).with_context(|| format!("model `{}`", m.name))?
            }
        };
        for r in runs {
            let started = Instant::now();
            overall.set_message(r.id.clone());
            let (cfg, decoding) = multi.suspend(|| decide(r, p, &model, true)).with_context(|| format!("run {}", r.id))?;
            let spec = RunSpec {
                model: &model,
                src: &src,
                plan: &p.plan,
                cfg: &cfg,
                gpu_layers: p.gpu_layers,
                build: m.build.as_deref(),
                target: &sweep.target,
                decoding: &decoding,
            };
            let exec = ExecOptions {
                decoding: &decoding,
                prefix_cache: cache.as_ref().map(|c| (c, spec.prefix_cache_key())),
                closed_book: sweep.closed_book,
                show_progress: !args.quiet,
                multi: Some(&multi),
            };
            let executed = bench::execute(&model, &p.plan, &cfg, &opts, &exec, |_| overall.inc(1))
                .with_context(|| format!("run {}", r.id))?;
            let run = spec.run_file(executed, ms(started));
            run.save(&r.file(&args.out_dir))?;
            if !args.quiet {
                let t = &run.summary.total;
                multi.suspend(|| {
                    println!(
                        "{}: passed {}/{}, matched {}, missing {}, hallucinated {}, extra {} ({:.1} s)",
                        r.id,
                        t.passes,
                        t.count,
                        t.matched,
                        t.missing,
                        t.hallucinated,
                        t.extra,
                        started.elapsed().as_secs_f64()
                    )
                });
            }
        }
    }
    overall.finish_and_clear();

    // The aggregate over this shard's runs, as `posrecall report` shows it.
    let mut loaded = Vec::with_capacity(mine.len());
    for r in &mine {
        let path = r.file(&args.out_dir);
        let run = RunFile::load(&path)?;
        loaded.push(LoadedRun {
            path: Some(path),
            label: r.id.clone(),
            run,
        });
    }
    let exporter = export::exporter(
        Format::Table,
        Options {
            diff: false,
            color: crate::report::terminal::stdout_wants_color(),
        },
    )?;
    if !args.quiet {
        println!();
    }
    print!("{}", exporter.render(&loaded)?);
    if shard.is_some() && !args.quiet {
        println!("\n(this shard's runs; `posrecall report {}` merges every shard)", args.out_dir.display());
    }
    Ok(())
}
