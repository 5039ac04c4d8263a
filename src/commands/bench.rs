//! `posrecall bench`: run a model in-process and score its answers.

use crate::bench::{self, BenchOptions, ContextSettings, ExecOptions, PlanOptions, RunSpec};
use crate::cli::{BenchArgs, OnOff};
use crate::commands::{check_output, corpus_spec, hint};
use crate::corpus::Source;
use crate::engine::model;
use crate::engine::prefix_cache::PrefixCache;
use crate::progress::ms;
use crate::report::terminal;
use crate::reference::Reference;
use anyhow::{Result, anyhow, bail};
use std::time::Instant;

/// The flags as the library's options, checked before any model work.
pub fn options(args: &BenchArgs) -> Result<BenchOptions> {
    if args.decode.fixed_tokens.is_some() && args.max_new_tokens.is_some() {
        bail!("--fixed-tokens sets the answer length; drop --max-new-tokens");
    }
    if args.max_new_tokens == Some(0) {
        bail!("--max-new-tokens must be at least 1");
    }
    if args.no_forced && (args.reference.is_some() || args.save_reference.is_some()) {
        bail!("--reference and --save-reference work on the teacher-forced pass; drop --no-forced");
    }
    if args.lengths.is_some() {
        let clash = [
            (args.closed_book, "--closed-book (recall without the file does not depend on its length)"),
            (args.decode.check_sequential, "--check-sequential"),
            (args.reference.is_some(), "--reference"),
            (args.save_reference.is_some(), "--save-reference"),
            (!args.only.is_empty(), "--only (each length samples its own targets)"),
        ];
        if let Some((_, flag)) = clash.iter().find(|(on, _)| *on) {
            bail!("--lengths runs a ladder of windows; it does not combine with {flag}");
        }
    }
    if args.only.iter().any(|n| n.trim().is_empty()) {
        bail!("--only takes function names separated by commas; one of them is empty");
    }
    let decode = args.decode.options(args.forced_only, args.no_forced);
    let (template, template_file) = args.template.options()?;
    let opts = BenchOptions {
        plan: PlanOptions {
            target: (&args.target).into(),
            probe: args.probe,
            crop: args.crop,
            ctx: args.ctx,
            max_prefix_tokens: args.max_prefix_tokens,
            max_new_tokens: decode.fixed_tokens.or(args.max_new_tokens),
            only: args.only.clone(),
            template,
            template_file,
            think_budget: args.template.think_budget,
        },
        context: ContextSettings {
            kv: (args.kv_k.unwrap_or(args.kv), args.kv_v.unwrap_or(args.kv)),
            flash_attn: args.flash_attn,
            swa_full: args.swa_full == OnOff::On,
            threads: args.threads,
            gpu_layers: args.gpu_layers.unwrap_or_else(bench::default_gpu_layers),
        },
        decode,
        build: args.build.clone(),
        closed_book: args.closed_book,
        prefix_cache: args.prefix_cache.clone(),
        lengths: args.lengths.clone(),
        effective_at: args.effective_at,
    };
    opts.validate().map_err(|e| hint(e, Some(args.crop)))?;
    Ok(opts)
}

pub fn run(args: &BenchArgs) -> Result<()> {
    let started = Instant::now();
    let mut opts = options(args)?;
    let spec = corpus_spec(args.corpus.as_deref(), &args.source)?;
    let corpus = spec.path.clone();
    // Output paths are checked before the model is loaded: a wrong folder
    // must not cost the run.
    if let Some(out) = &args.out {
        check_output("--out", out, &[&args.model, &corpus])?;
    }
    if let Some(html) = &args.html {
        let mut inputs = vec![args.model.as_path(), corpus.as_path()];
        inputs.extend(args.out.as_deref());
        check_output("--html", html, &inputs)?;
    }
    if let Some(save) = &args.save_reference {
        let mut inputs = vec![args.model.as_path(), corpus.as_path()];
        inputs.extend(args.out.as_deref());
        inputs.extend(args.html.as_deref());
        inputs.extend(args.reference.as_deref());
        check_output("--save-reference", save, &inputs)?;
    }
    // A reference is read and verified before the model is loaded.
    let reference = args.reference.as_deref().map(Reference::load).transpose()?;
    let src = Source::open_spec(&spec, opts.plan.target.rename_seed()).map_err(|e| hint(e, None))?;
    if let Some(note) = src.error_note() {
        eprintln!("{note}");
    }
    let model = model::load(&args.model, opts.context.gpu_layers).map_err(|e| hint(e, None))?;
    // What was offloaded, not what was asked: the run file records it.
    opts.context.gpu_layers = model.gpu_layers;
    if let Some(lengths) = &opts.lengths {
        return run_ladder(args, &opts, lengths, &model, &src, started);
    }
    let prepared = bench::prepare(&model, &src, &opts).map_err(|e| hint(e, Some(args.crop)))?;
    let spec = RunSpec {
        model: &model,
        src: &src,
        plan: &prepared.plan,
        cfg: &prepared.cfg,
        build: opts.build.as_deref(),
        target: &opts.plan.target,
        decoding: &prepared.decoding,
        reference: reference.as_ref(),
    };
    if let Some(r) = &reference {
        let shown = r.path.display();
        r.header.identity.check(&spec.reference_identity()).map_err(|e| anyhow!("--reference {shown}: {e}"))?;
        bench::check_reference(&model, &prepared.plan, r).map_err(|e| anyhow!("--reference {shown}: {e}"))?;
    }

    let color = terminal::stdout_wants_color();
    // A failed write to stdout does not lose the run: the diffs stop, the
    // run goes on, its files are written, and then the error is reported.
    let mut stdout: Result<()> = match args.quiet {
        true => Ok(()),
        false => outln!("{}\n", terminal::legend(color)),
    };
    let cache = opts.prefix_cache.as_deref().map(PrefixCache::new).transpose()?;
    let exec = ExecOptions {
        decoding: &prepared.decoding,
        prefix_cache: cache.as_ref().map(|c| (c, spec.prefix_cache_key())),
        closed_book: opts.closed_book,
        show_progress: !args.quiet,
        multi: None,
        save_top_k: args.save_reference.as_ref().map(|_| args.reference_top_k),
        reference: reference.as_ref(),
    };
    let score_opts = opts.plan.target.score_options();
    let executed = bench::execute(&model, &prepared.plan, &prepared.cfg, &score_opts, &exec, |r| {
        if !args.quiet && stdout.is_ok() {
            stdout = outln!("{}", terminal::target_diff(r, score_opts.lines, color));
        }
    })?;
    if let (Some(path), Some(saved)) = (&args.save_reference, &executed.saved) {
        spec.save_reference(path, args.reference_top_k, saved)?;
    }
    let run = spec.run_file(executed, ms(started));
    if let Some(out) = &args.out {
        run.save(out)?;
    }
    if let Some(html) = &args.html {
        crate::report::html::write_bench_page(&run, args.out.as_deref(), html)?;
    }
    stdout?;
    crate::commands::out(&terminal::summary(&run.summary))
}

/// `bench --lengths`: one evaluation of the file, every window's questions.
fn run_ladder(
    args: &BenchArgs,
    opts: &BenchOptions,
    lengths: &bench::ladder::Lengths,
    model: &model::Model,
    src: &Source,
    started: Instant,
) -> Result<()> {
    use bench::ladder;
    let ladder = ladder::plan_ladder(model, src, &opts.plan, lengths).map_err(|e| hint(e, Some(args.crop)))?;
    if let Some(note) = &ladder.stopped {
        eprintln!("note: {note}");
    }
    let (cfg, decoding) = bench::decide(model, ladder.longest(), &opts.context, &opts.decode, true)
        .map_err(|e| hint(e, Some(args.crop)))?;
    let spec_of = |plan| RunSpec {
        model,
        src,
        plan,
        cfg: &cfg,
        build: opts.build.as_deref(),
        target: &opts.plan.target,
        decoding: &decoding,
        reference: None,
    };
    let cache = opts.prefix_cache.as_deref().map(PrefixCache::new).transpose()?;
    let keys: Vec<String> = ladder.rungs.iter().map(|r| spec_of(&r.plan).prefix_cache_key()).collect();
    let color = terminal::stdout_wants_color();
    let mut stdout: Result<()> = match args.quiet {
        true => Ok(()),
        false => outln!("{}\n", terminal::legend(color)),
    };
    let exec = ExecOptions {
        decoding: &decoding,
        prefix_cache: None,
        closed_book: false,
        show_progress: !args.quiet,
        multi: None,
        save_top_k: None,
        reference: None,
    };
    let score_opts = opts.plan.target.score_options();
    let on_rung = |r: &ladder::Rung, stdout: &mut Result<()>| {
        if !args.quiet && stdout.is_ok() {
            *stdout = outln!(
                "== length {}: lines {}..{}, {} tokens ==",
                ladder::label(r.length),
                r.plan.crop.first_line,
                r.plan.crop.last_line,
                r.plan.prefix_tokens.len()
            );
        }
    };
    let stdout_cell = std::cell::RefCell::new(&mut stdout);
    let lx = ladder::execute_ladder(
        model,
        &ladder,
        &cfg,
        &decoding,
        &score_opts,
        &exec,
        cache.as_ref().map(|c| (c, keys.as_slice())),
        |r| on_rung(r, &mut stdout_cell.borrow_mut()),
        |r| {
            let mut out = stdout_cell.borrow_mut();
            if !args.quiet && out.is_ok() {
                **out = outln!("{}", terminal::target_diff(r, score_opts.lines, color));
            }
        },
    )?;
    let run = spec_of(ladder.longest()).ladder_run_file(lx, ladder.stopped.clone(), opts.effective_at, ms(started));
    if let Some(out) = &args.out {
        run.save(out)?;
    }
    if let Some(html) = &args.html {
        crate::report::html::write_bench_page(&run, args.out.as_deref(), html)?;
    }
    stdout?;
    let mut text = terminal::summary(&run.summary);
    if let Some(l) = &run.ladder {
        text.push_str(&terminal::ladder_grid(l));
    }
    crate::commands::out(&text)
}
