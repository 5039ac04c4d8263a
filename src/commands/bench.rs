//! `posrecall bench`: run a model in-process and score its answers.
//!
//! [`plan`] decides everything before any decoding (probe, kept range,
//! targets, token counts, context size); [`execute`] prefills once,
//! snapshots, and answers every target from a restored snapshot.

use crate::cli::{BenchArgs, CtxSize, OnOff, OnOffAuto, ProbeKind as ProbeArg};
use crate::commands::crop_record;
use crate::corpus::Source;
use crate::crop::{self, CropMode};
use crate::engine::model::{self, Model};
use crate::engine::prefix_cache::{CacheKey, Lookup, PrefixCache};
use crate::engine::session::{ContextConfig, Session};
use crate::prompt::{self, Frame, SpecialTokens};
use crate::run::{
    ContextInfo, CorpusInfo, FORMAT_VERSION, Manifest, ModelInfo, RunFile, Runtime, Summary,
    TargetResult, Timings,
};
use crate::forced::{Forced, TokenReading};
use crate::score::{self, ScoreOptions};
use crate::targets::{self, Target};
use anyhow::{Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use llama_cpp_2::token::LlamaToken;
use std::path::PathBuf;
use std::time::Instant;

/// What would fix too few targets in a bench run kept by `mode`.
fn hint(mode: CropMode) -> String {
    let crop = match mode {
        CropMode::Densest => "--crop-lines A:B around another region",
        _ => "--crop densest (the window with the most functions)",
    };
    format!("use a longer-context model (or a larger --ctx), {crop}, or a smaller --count or --lines")
}

/// Tokens kept free for a code-fence line the forced pass may open with.
const FORCED_SCAFFOLD_RESERVE: usize = 16;

/// Everything decided before decoding.
pub struct Plan {
    pub frame: Frame,
    pub crop: crop::Crop,
    pub prefix_text: String,
    pub prefix_tokens: Vec<LlamaToken>,
    pub targets: Vec<Target>,
    /// Per target, the tokens that follow the prefix.
    pub queries: Vec<Vec<LlamaToken>>,
    pub max_new_tokens: usize,
    pub n_ctx: u32,
    /// Whether prefix + question tokens equal the whole prompt's tokens exactly.
    pub boundary_exact: bool,
}

/// The knobs [`plan`] needs, independent of the command line.
pub struct PlanOptions {
    pub target: crate::cli::TargetArgs,
    pub probe: ProbeArg,
    pub crop: CropMode,
    pub ctx: CtxSize,
    pub max_tokens: Option<usize>,
    pub max_new_tokens: Option<usize>,
}

/// Chooses probe, kept range, targets and context size for `model` on `src`.
pub fn plan(model: &Model, src: &Source, o: &PlanOptions) -> Result<Plan> {
    let corpus = &src.corpus;
    let topts = o.target.options();
    let mut frame = frame_for(model, src, o.probe)?;
    let max_new = o.max_new_tokens.unwrap_or(20 * 2 * topts.lines);
    let cap = match o.ctx {
        CtxSize::Auto => model.n_ctx_train as usize,
        CtxSize::Fixed(n) => n as usize,
    };

    // The longest question among all functions eligible anywhere in the file
    // bounds what each question needs, whatever range is kept.
    let n_lines = corpus.line_count();
    let everywhere = targets::eligible(corpus, &src.parsed, 0, n_lines - 1, &topts);
    let query_reserve = everywhere
        .iter()
        .map(|t| model.tokenize_rest(&frame.suffix(t, topts.lines, topts.skip_blank)).len())
        .max()
        .unwrap_or(64);
    let frame_cost = model.tokenize_prefix(&frame.prefix("")).len();
    // The teacher-forced pass feeds the expected lines after the question; the
    // context must hold them as well as a generated answer.
    let forced_reserve = everywhere
        .iter()
        .map(|t| model.tokenize_plain(&prompt::forced_body(t)).len() + FORCED_SCAFFOLD_RESERVE)
        .max()
        .unwrap_or(0);
    let answer_room = max_new.max(forced_reserve);
    let mut budget = cap
        .checked_sub(answer_room + query_reserve + frame_cost)
        .filter(|b| *b > 0)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "a context of {cap} tokens leaves no room for the file after the answer budget \
                 ({max_new} tokens) and the question ({query_reserve}); use a larger --ctx or a smaller --max-new-tokens"
            )
        })?;
    if let Some(m) = o.max_tokens {
        budget = budget.min(m);
    }

    // Cost of each line in tokens, from one tokenization of the whole file.
    let (mut first, mut last, mode) = match o.target.crop_lines {
        Some(r) => {
            let (a, b) = r.to_zero_based(n_lines)?;
            (a, b, CropMode::Lines)
        }
        None => {
            let cost = line_costs(model, corpus);
            let spans: Vec<(usize, usize)> = everywhere
                .iter()
                .map(|t| (t.line - 1, t.last_expected_line - 1))
                .collect();
            let (a, b) = crop::choose_range(o.crop, &cost, budget, &spans)?;
            (a, b, o.crop)
        }
    };

    // The per-line costs are an estimate; the real tokenization decides.
    let mut boundary_exact = false;
    let (prefix_text, prefix_tokens) = loop {
        if let Some(sample) = everywhere.first() {
            let end = corpus.slice_lines(last.saturating_sub(1).max(first), last);
            boundary_exact = frame.fit_boundary(|f| {
                let (p, q) = (f.prefix(end), f.suffix(sample, topts.lines, topts.skip_blank));
                let whole = model.tokenize_prefix(&format!("{p}{q}"));
                let mut joined = model.tokenize_prefix(&p);
                joined.extend(model.tokenize_rest(&q));
                whole == joined
            });
        }
        let text = frame.prefix(corpus.slice_lines(first, last));
        let tokens = model.tokenize_prefix(&text);
        let kept_tokens = tokens.len().saturating_sub(frame_cost);
        if kept_tokens <= budget {
            break (text, tokens);
        }
        if matches!(mode, CropMode::None | CropMode::Lines) || last == first {
            bail!(
                "lines {}..{} of the corpus need {} tokens, but only {budget} fit \
                 (context {cap}, answer budget {max_new}); use --crop head or --crop densest, \
                 a shorter --crop-lines range, or a larger --ctx",
                first + 1,
                last + 1,
                kept_tokens
            );
        }
        // Drop lines at the end in proportion to the overshoot, at least one.
        let over = kept_tokens - budget;
        let per_line = (kept_tokens / (last - first + 1)).max(1);
        last -= (over / per_line + 1).min(last - first);
        let _ = &mut first;
    };

    let mut selected = targets::select(corpus, &src.parsed, first, last, &topts, &hint(mode))?;

    // Token offsets: how many prefix tokens come before each declaration.
    let starts = token_starts(model, &prefix_tokens);
    let kept_start = corpus.line_start(first);
    for t in &mut selected {
        let byte_in_prefix = frame.kept_offset() + (t.byte_offset - kept_start);
        t.token_offset = Some(starts.partition_point(|&s| s < byte_in_prefix));
    }
    let queries: Vec<Vec<LlamaToken>> = selected
        .iter()
        .map(|t| model.tokenize_rest(&frame.suffix(t, topts.lines, topts.skip_blank)))
        .collect();
    let longest = queries.iter().map(Vec::len).max().unwrap_or(0);
    let longest_forced = selected
        .iter()
        .map(|t| model.tokenize_plain(&prompt::forced_body(t)).len() + FORCED_SCAFFOLD_RESERVE)
        .max()
        .unwrap_or(0);
    let needed = prefix_tokens.len() + longest + max_new.max(longest_forced);
    let n_ctx = match o.ctx {
        CtxSize::Auto => needed.min(model.n_ctx_train as usize).max(64) as u32,
        CtxSize::Fixed(n) => n,
    };
    if needed > n_ctx as usize {
        bail!(
            "the prefix ({} tokens), the longest question ({longest}) and the answer budget ({max_new}) \
             need {needed} tokens, more than the context of {n_ctx}",
            prefix_tokens.len()
        );
    }
    Ok(Plan {
        crop: crop_record(corpus, mode, first, last),
        frame,
        prefix_text,
        prefix_tokens,
        targets: selected,
        queries,
        max_new_tokens: max_new,
        n_ctx,
        boundary_exact,
    })
}

/// The probe for this model: its chat template (minijinja, else llama.cpp's
/// renderer), or the completion probe.
fn frame_for(model: &Model, src: &Source, probe: ProbeArg) -> Result<Frame> {
    let comment = src.language.line_comment();
    let template = model.chat_template.as_deref();
    match (probe, template) {
        (ProbeArg::Completion, _) | (ProbeArg::Auto, None) => Ok(Frame::completion(comment)),
        (ProbeArg::Chat, None) => bail!(
            "{} has no chat template; use --probe completion (or auto)",
            model.path.display()
        ),
        (_, Some(t)) => {
            let special = SpecialTokens {
                bos: model.bos_text(),
                eos: model.eos_text(),
            };
            match prompt::chat_frame(t, &special, comment) {
                Ok(f) => Ok(f),
                Err(jinja_err) => {
                    let rendered = model.render_builtin(&prompt::marked_message()).map_err(|e| {
                        anyhow::anyhow!("chat template: {jinja_err:#}; llama.cpp's renderer: {e:#}")
                    })?;
                    eprintln!("note: rendering the chat template with llama.cpp's built-in renderer ({jinja_err:#})");
                    prompt::split_frame(&rendered, "llama.cpp", comment)
                }
            }
        }
    }
}

/// Byte offset at which each token's text starts, from summed piece lengths.
fn token_starts(model: &Model, tokens: &[LlamaToken]) -> Vec<usize> {
    let mut at = 0;
    model
        .piece_lengths(tokens)
        .into_iter()
        .map(|len| {
            let s = at;
            at += len;
            s
        })
        .collect()
}

/// Tokens per line (a token is charged to the line its text starts in).
fn line_costs(model: &Model, corpus: &crate::corpus::Corpus) -> Vec<usize> {
    let tokens = model.tokenize_plain(&corpus.text);
    let mut cost = vec![0usize; corpus.line_count()];
    for s in token_starts(model, &tokens) {
        let line = corpus.line_of_byte(s.min(corpus.text.len().saturating_sub(1)));
        cost[line] += 1;
    }
    cost
}

/// The context parameters of a bench run.
pub fn context_config(args: &BenchArgs, n_ctx: u32) -> ContextConfig {
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map(|n| n.get() as i32).unwrap_or(4)
    });
    let n_batch = 512.min(n_ctx);
    ContextConfig {
        n_ctx,
        n_batch,
        n_ubatch: n_batch,
        threads,
        type_k: args.kv_k.unwrap_or(args.kv),
        type_v: args.kv_v.unwrap_or(args.kv),
        flash_attn: args.flash_attn,
        swa_full: args.swa_full == OnOff::On,
    }
}

/// The measured parts of one run.
pub struct Executed {
    pub results: Vec<TargetResult>,
    pub timings: Timings,
}

/// Prefill once, snapshot, then restore-and-answer every target.
/// How [`execute`] runs, beyond the plan.
pub struct ExecOptions<'a> {
    /// Skip generation; only the teacher-forced pass.
    pub forced_only: bool,
    /// Load the prefix state from, and save it to, this cache under this key.
    pub prefix_cache: Option<(&'a PrefixCache, String)>,
    pub show_progress: bool,
}

pub fn execute(
    model: &Model,
    plan: &Plan,
    cfg: &ContextConfig,
    opts: &ScoreOptions,
    exec: &ExecOptions,
    mut on_result: impl FnMut(&TargetResult),
) -> Result<Executed> {
    let (forced_only, show_progress) = (exec.forced_only, exec.show_progress);
    let mut session = Session::new(model, cfg)?;
    let mut timings = Timings {
        prefix_source: "prefill".into(),
        ..Timings::default()
    };

    let mut from_cache = false;
    if let Some((cache, key)) = &exec.prefix_cache {
        let t = Instant::now();
        match cache.load(&mut session, key, &plan.prefix_tokens)? {
            Lookup::Loaded => {
                from_cache = true;
                timings.prefill_ms = ms(t);
                timings.prefix_source = "cache".into();
            }
            Lookup::Missing => {}
            Lookup::Corrupt(why) => eprintln!("note: {why}"),
        }
    }
    if !from_cache {
        let bar = progress_bar(show_progress, plan.prefix_tokens.len() as u64, "prefill", "tok");
        let t = Instant::now();
        session.prefill(&plan.prefix_tokens, |done| bar.set_position(done as u64))?;
        timings.prefill_ms = ms(t);
        timings.prefill_tokens = plan.prefix_tokens.len();
        bar.finish_and_clear();
        if let Some((cache, key)) = &exec.prefix_cache {
            let t = Instant::now();
            // A cache that cannot be written costs the next run time, not this run.
            match cache.save(&session, key, &plan.prefix_tokens) {
                Ok(()) => timings.cache_save_ms = Some(ms(t)),
                Err(e) => eprintln!("note: {e:#}"),
            }
        }
    }

    let t = Instant::now();
    timings.snapshot_bytes = session.snapshot()?;
    timings.snapshot_ms = ms(t);

    let bar = progress_bar(show_progress, plan.targets.len() as u64, "queries", "q");
    let mut results = Vec::with_capacity(plan.targets.len());
    for (target, query) in plan.targets.iter().zip(&plan.queries) {
        let mut answer = None;
        if !forced_only {
            let t = Instant::now();
            session.restore()?;
            timings.restore_ms.push(ms(t));
            let limit = 2 * opts.lines;
            let g = session.generate(query, plan.max_new_tokens, |text| {
                score::parse_response(text, &target.header, opts.skip_blank).len() >= limit
            })?;
            timings.query_ms.push(g.ms);
            timings.generated_tokens += g.tokens.len();
            answer = Some(g);
        }

        let t = Instant::now();
        session.restore()?;
        let greedy_text = answer.as_ref().map(|g| g.text.as_str());
        let forced = forced_pass(model, &mut session, plan, target, query, greedy_text)?;
        timings.forced_ms.push(ms(t));

        let text = answer.as_ref().map(|g| g.text.clone()).unwrap_or_default();
        let lines = score::parse_response(&text, &target.header, opts.skip_blank);
        let s = score::score(&target.expected, &target.extra_window, &lines, opts);
        let mut r = TargetResult::new(target, text, s);
        r.generated_tokens = answer.as_ref().map(|g| g.tokens.len());
        r.forced = Some(forced);
        bar.suspend(|| on_result(&r));
        bar.inc(1);
        results.push(r);
    }
    bar.finish_and_clear();
    Ok(Executed { results, timings })
}

/// Feeds the target's expected lines after its question (behind the scaffold
/// a chat model's own answer opened with) and reads how the model rated them.
fn forced_pass(
    model: &Model,
    session: &mut Session,
    plan: &Plan,
    target: &Target,
    query: &[LlamaToken],
    greedy_answer: Option<&str>,
) -> Result<Forced> {
    let scaffold = prompt::forced_scaffold(plan.frame.kind, greedy_answer);
    let body = prompt::forced_body(target);
    let tokens = model.tokenize_plain(&format!("{scaffold}{body}"));
    let starts = token_starts(model, &tokens);
    let readings = session.force(query, &tokens)?;
    let body_bytes = body.as_bytes();
    let scored: Vec<TokenReading> = tokens
        .iter()
        .zip(&starts)
        .zip(readings)
        // Tokens that start inside the scaffold are not scored.
        .filter(|((_, start), _)| **start >= scaffold.len())
        .map(|((tok, start), (top1, gap, logprob))| {
            let at = (start - scaffold.len()).min(body_bytes.len());
            TokenReading {
                token: tok.0,
                top1: top1.0,
                logprob,
                top_gap: gap,
                line: body_bytes[..at].iter().filter(|&&b| b == b'\n').count(),
            }
        })
        .collect();
    Ok(Forced::from_readings(&scored, target.expected.len()))
}

fn flash_attn_name(f: OnOffAuto) -> &'static str {
    match f {
        OnOffAuto::Auto => "auto",
        OnOffAuto::On => "on",
        OnOffAuto::Off => "off",
    }
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn progress_bar(show: bool, len: u64, what: &str, unit: &str) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    let style = ProgressStyle::with_template(&format!(
        "{what:>8} [{{bar:30}}] {{pos}}/{{len}} {unit}  {{per_sec}}  ETA {{eta}}"
    ))
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    bar.set_style(style);
    bar
}

pub fn run(args: &BenchArgs) -> Result<()> {
    let started = Instant::now();
    args.target.validate()?;
    let corpus_path: PathBuf = match &args.corpus {
        Some(p) => p.clone(),
        None => {
            let p = crate::fsutil::default_corpus_path();
            if !p.exists() {
                bail!(
                    "no --corpus given and the default corpus is not at {}; run scripts/fetch-corpus first",
                    p.display()
                );
            }
            p
        }
    };
    // Refuse bad flag combinations before spending time on the model.
    let probe_cfg = context_config(args, 64);
    probe_cfg.validate()?;
    let src = Source::open(&corpus_path)?;
    if let Some(note) = src.error_note() {
        eprintln!("{note}");
    }

    let gpu_layers = args.gpu_layers.unwrap_or_else(|| {
        match crate::engine::backend() {
            Ok(b) if b.supports_gpu_offload() => 999,
            _ => 0,
        }
    });
    let model = model::load(&args.model, gpu_layers)?;
    let plan_opts = PlanOptions {
        target: args.target.clone(),
        probe: args.probe,
        crop: args.crop,
        ctx: args.ctx,
        max_tokens: args.max_tokens,
        max_new_tokens: args.max_new_tokens,
    };
    let plan = plan(&model, &src, &plan_opts)?;
    let cfg = context_config(args, plan.n_ctx);
    let opts = ScoreOptions {
        lines: args.target.lines,
        pass: args.target.pass(),
        normalize: args.target.normalize,
        skip_blank: args.target.skip_blank,
    };

    let color = crate::report::terminal::stdout_wants_color();
    if !args.quiet {
        println!("{}\n", crate::report::terminal::legend(color));
    }
    let crop_sha = plan.crop.sha256.clone();
    let prefix_sha = crate::fsutil::sha256_hex(plan.prefix_text.as_bytes());
    let cache = args.prefix_cache.as_deref().map(PrefixCache::new).transpose()?;
    let key = CacheKey {
        model_sha256: &model.sha256,
        corpus_sha256: &src.corpus.sha256,
        crop_first_line: plan.crop.first_line,
        crop_last_line: plan.crop.last_line,
        crop_sha256: &crop_sha,
        prefix_sha256: &prefix_sha,
        n_ctx: cfg.n_ctx,
        type_k: cfg.type_k.as_str(),
        type_v: cfg.type_v.as_str(),
        flash_attn: flash_attn_name(cfg.flash_attn),
        swa_full: cfg.swa_full,
        kv_unified: false,
        n_batch: cfg.n_batch,
        n_ubatch: cfg.n_ubatch,
        gpu_layers,
        llama_cpp_sys_2: env!("POSRECALL_LLAMA_CPP_SYS_2_VERSION"),
    }
    .digest();
    let exec = ExecOptions {
        forced_only: args.forced_only,
        prefix_cache: cache.as_ref().map(|c| (c, key)),
        show_progress: !args.quiet,
    };
    let executed = execute(&model, &plan, &cfg, &opts, &exec, |r| {
        if !args.quiet {
            println!("{}", crate::report::terminal::target_diff(r, opts.lines, color));
        }
    })?;
    let mut timings = executed.timings;
    timings.hash_ms = model.hash_ms;
    timings.load_ms_without_hash = model.load_ms;
    timings.load_ms = model.load_ms + model.hash_ms;

    let mut params = args.target.params();
    params.probe = Some(plan.frame.kind.as_str().to_string());
    params.max_new_tokens = Some(plan.max_new_tokens);
    params.decode_mode = Some(if args.forced_only { "forced-only" } else { "sequential" }.into());
    let mut runtime = Runtime::current();
    runtime.backend = Some(crate::engine::backend_name().to_string());
    runtime.chat_renderer = plan.frame.renderer.clone();
    runtime.prefix_sha256 = Some(prefix_sha);
    runtime.prompt_boundary_exact = Some(plan.boundary_exact);
    let flash_attn = flash_attn_name(cfg.flash_attn);
    let mut run = RunFile {
        format: FORMAT_VERSION,
        manifest: Manifest {
            command: "bench".into(),
            model: Some(ModelInfo {
                path: model.path.display().to_string(),
                sha256: model.sha256.clone(),
                size_bytes: model.size_bytes,
                architecture: model.architecture.clone(),
                name: model.name.clone(),
                file_type: model.file_type.clone(),
                build: args.build.clone().unwrap_or_else(|| {
                    model
                        .path
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned())
                        .unwrap_or_default()
                }),
                n_params: model.n_params,
                n_ctx_train: model.n_ctx_train,
                chat_template: model.chat_template.is_some(),
            }),
            context: Some(ContextInfo {
                n_ctx: cfg.n_ctx,
                type_k: cfg.type_k.as_str().into(),
                type_v: cfg.type_v.as_str().into(),
                flash_attn: flash_attn.into(),
                swa_full: cfg.swa_full,
                kv_unified: false,
                n_batch: cfg.n_batch,
                n_ubatch: cfg.n_ubatch,
                threads: cfg.threads,
                gpu_layers,
            }),
            corpus: CorpusInfo {
                path: src.corpus.path.display().to_string(),
                sha256: src.corpus.sha256.clone(),
                language: src.language.name().to_string(),
                crop: plan.crop.clone(),
                prefix_tokens: Some(plan.prefix_tokens.len()),
            },
            params,
            runtime,
        },
        summary: Summary::of(&executed.results),
        targets: executed.results,
        timings: None,
    };
    timings.total_ms = ms(started);
    run.timings = Some(timings);
    if let Some(out) = &args.out {
        run.save(out)?;
    }
    if let Some(html) = &args.html {
        crate::report::html::write_bench_page(&run, args.out.as_deref(), html)?;
    }
    print!("{}", crate::report::terminal::summary(&run.summary));
    Ok(())
}

