//! `posrecall bench`: run a model in-process and score its answers.
//!
//! [`plan`] decides everything before any decoding (probe, kept range,
//! targets, token counts, context size); [`execute`] prefills once,
//! snapshots, and answers every target from a restored snapshot.

use crate::cli::{BenchArgs, CtxSize, KvType, OnOff, OnOffAuto, ProbeKind as ProbeArg, TargetArgs};
use crate::commands::crop_record;
use crate::corpus::Source;
use crate::crop::{self, CropMode};
use crate::engine::model::{self, Model};
use crate::engine::prefix_cache::{CacheKey, Lookup, PrefixCache};
use crate::engine::session::{ContextConfig, Generation, Limit, Session};
use crate::prompt::{self, Frame, SpecialTokens};
use crate::run::{
    ClosedBook, ContextInfo, FORMAT_VERSION, Manifest, ModelInfo, RunFile, Runtime, SequentialCheck,
    Summary, TargetResult, Timings,
};
use crate::forced::{Forced, TokenReading};
use crate::score::{self, ScoreOptions};
use crate::targets::{self, Target};
use anyhow::{Result, bail};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use llama_cpp_2::token::LlamaToken;
use std::path::{Path, PathBuf};
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
    /// Cells one answering sequence needs beyond the prefix: the longest
    /// question plus the answer budget (or the forced text, when longer).
    pub per_sequence: usize,
    /// The context of a sequential run: prefix + [`Plan::per_sequence`].
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
    let (first, mut last, mode) = match o.target.crop_lines {
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
    let per_sequence = longest + max_new.max(longest_forced);
    let needed = prefix_tokens.len() + per_sequence;
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
        per_sequence,
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
///
/// The file is tokenized in blocks of whole lines: llama.cpp's SentencePiece
/// tokenizer takes superlinear time on one long text (7.2 s for lodash with
/// Gemma 3, against 0.3 s in 64-line blocks, for counts within 0.02%). The
/// counts are an estimate either way; the kept range is tokenized for real.
fn line_costs(model: &Model, corpus: &crate::corpus::Corpus) -> Vec<usize> {
    const BLOCK: usize = 64;
    let n = corpus.line_count();
    let mut cost = vec![0usize; n];
    let mut first = 0;
    while first < n {
        let last = (first + BLOCK).min(n) - 1;
        let base = corpus.line_start(first);
        let text = corpus.slice_lines(first, last);
        let tokens = model.tokenize_plain(text);
        for s in token_starts(model, &tokens) {
            let at = (base + s).min(corpus.line_end(last).saturating_sub(1));
            cost[corpus.line_of_byte(at)] += 1;
        }
        first = last + 1;
    }
    cost
}

/// The context parameters of a bench run.
pub fn context_config(args: &BenchArgs, n_ctx: u32) -> ContextConfig {
    context_config_with(
        args.threads,
        (args.kv_k.unwrap_or(args.kv), args.kv_v.unwrap_or(args.kv)),
        args.flash_attn,
        args.swa_full == OnOff::On,
        n_ctx,
    )
}

/// The context parameters of a run (`bench` and `matrix`): `threads` `None`
/// is all cores; `kv` is (K, V).
pub fn context_config_with(
    threads: Option<i32>,
    kv: (KvType, KvType),
    flash_attn: OnOffAuto,
    swa_full: bool,
    n_ctx: u32,
) -> ContextConfig {
    let threads = threads.unwrap_or_else(|| {
        std::thread::available_parallelism().map(|n| n.get() as i32).unwrap_or(4)
    });
    let n_batch = 512.min(n_ctx);
    ContextConfig {
        n_ctx,
        n_batch,
        n_ubatch: n_batch,
        threads,
        type_k: kv.0,
        type_v: kv.1,
        flash_attn,
        swa_full,
        n_seq: 1,
        kv_unified: false,
    }
}

impl crate::cli::DecodeArgs {
    /// Refuses combinations that mean nothing.
    pub fn validate(&self, forced_only: bool) -> Result<()> {
        if forced_only && (self.parallel > 1 || self.fixed_tokens.is_some() || self.check_sequential) {
            bail!("--forced-only generates nothing; drop --parallel, --fixed-tokens and --check-sequential");
        }
        if self.check_sequential && self.parallel < 2 {
            bail!("--check-sequential compares a --parallel run with sequential answers; add --parallel N (N >= 2)");
        }
        Ok(())
    }

    /// The run's [`Decoding`] for this model and plan (see [`decoding`]).
    /// For a run about to start (`to_run`), the memory is checked and a
    /// fallback or a changed cache is noted on stderr; otherwise (a sweep
    /// deciding whether a finished run may be kept) neither.
    #[allow(clippy::too_many_arguments)]
    pub fn decide(
        &self,
        model: &Model,
        plan: &Plan,
        cfg: &ContextConfig,
        gpu_layers: u32,
        forced_only: bool,
        no_forced: bool,
        to_run: bool,
    ) -> Result<Decoding> {
        let requested = if forced_only { 1 } else { self.parallel as usize };
        let memory = to_run.then(|| self.kv_memory.map(|b| b.as_u64()));
        let (slots, fallback) = decoding(model, plan, cfg, gpu_layers, requested, memory)?;
        if let Some(why) = fallback.as_ref().filter(|_| to_run) {
            eprintln!("note: --parallel {requested}: answering one question at a time ({why})");
        }
        let swa_full = slots > 1 && !cfg.swa_full && !window_cache_holds(model, plan, cfg, slots);
        if swa_full && to_run {
            eprintln!(
                "note: --parallel {slots}: keeping whole sequences in the sliding-window cache (as --swa-full on): \
                 the window-only cache cannot hold the shared prefix and {slots} answers"
            );
        }
        Ok(Decoding {
            forced_only,
            no_forced,
            slots,
            check_sequential: self.check_sequential && slots > 1,
            fallback,
            swa_full,
            fixed_tokens: self.fixed_tokens.map(|t| t as usize),
        })
    }
}

/// How a run decodes its answers, decided before decoding (see [`decoding`]).
#[derive(Debug, Clone, Default)]
pub struct Decoding {
    /// Skip generation; only the teacher-forced pass.
    pub forced_only: bool,
    /// Skip the teacher-forced pass.
    pub no_forced: bool,
    /// Sequences answered at once; 1 is sequential.
    pub slots: usize,
    /// Why a requested `--parallel` runs sequentially.
    pub fallback: Option<String>,
    /// Parallel slots need the whole sequence in a sliding-window model's
    /// cache (see [`window_cache_holds`]).
    pub swa_full: bool,
    /// Answer every question one at a time as well, and compare.
    pub check_sequential: bool,
    /// Generate exactly this many tokens per answer.
    pub fixed_tokens: Option<usize>,
}

impl Decoding {
    pub fn parallel(&self) -> bool {
        self.slots > 1
    }

    /// The run file's `decode_mode`.
    pub fn mode(&self) -> &'static str {
        if self.forced_only {
            "forced-only"
        } else if self.parallel() {
            "parallel"
        } else {
            "sequential"
        }
    }

    /// The context of this run: with N slots, one unified KV cache of
    /// prefix + N × (question + answer budget) cells and N + 1 sequences.
    pub fn context(&self, mut cfg: ContextConfig, plan: &Plan) -> ContextConfig {
        if self.parallel() {
            cfg.n_ctx = parallel_cells(plan, self.slots) as u32;
            cfg.n_seq = self.slots as u32 + 1;
            cfg.kv_unified = true;
            cfg.swa_full |= self.swa_full;
        }
        cfg
    }
}

/// Whether a sliding-window model's window-only cache can hold the prefix and
/// `slots` answers at once. llama.cpp sizes that cache at n_swa × sequences +
/// n_ubatch cells (rounded up to 256) and reuses a cell that slid out of the
/// window only while one sequence holds it; the prefix's cells are shared by
/// every slot, so none of them can be reused and all must fit.
fn window_cache_holds(model: &Model, plan: &Plan, cfg: &ContextConfig, slots: usize) -> bool {
    if model.n_swa == 0 {
        return true;
    }
    let window = (model.n_swa as usize * (slots + 1) + cfg.n_ubatch as usize).div_ceil(256) * 256;
    parallel_cells(plan, slots) <= window
}

/// llama.cpp's limit on sequences in one context; one holds the prefix.
const MAX_SEQUENCES: usize = 256;

fn parallel_cells(plan: &Plan, slots: usize) -> usize {
    plan.prefix_tokens.len() + slots * plan.per_sequence
}

/// Decides how `requested` parallel sequences run for this model and plan:
/// at most one per target; sequential, with the reason, where the model's
/// memory cannot share one prefix between sequences; an error naming the
/// largest N that fits when the KV cache would not fit in free memory.
pub fn decoding(
    model: &Model,
    plan: &Plan,
    cfg: &ContextConfig,
    gpu_layers: u32,
    requested: usize,
    memory: Option<Option<u64>>,
) -> Result<(usize, Option<String>)> {
    if requested <= 1 {
        return Ok((1, None));
    }
    if requested > MAX_SEQUENCES - 1 {
        bail!(
            "--parallel {requested}: llama.cpp holds at most {MAX_SEQUENCES} sequences in one context and one of them holds the file; the largest N is {}",
            MAX_SEQUENCES - 1
        );
    }
    if model.recurrent_or_hybrid {
        return Ok((1, Some("the model's recurrent or hybrid memory cannot share one prefix between sequences".into())));
    }
    let slots = requested.min(plan.targets.len()).max(1);
    if slots == 1 {
        return Ok((1, Some("there is only one target".into())));
    }
    let per_cell = model.kv_bytes_per_cell(cfg.type_k, cfg.type_v).max(1);
    // llama.cpp rounds the cache up to a multiple of 256 cells.
    const PAD: u64 = 256;
    let cells = (parallel_cells(plan, slots) as u64).div_ceil(PAD) * PAD;
    let size = |b: u64| bytesize::ByteSize(b).display().iec().to_string();
    let allowed = match memory {
        // Not checked.
        None => None,
        Some(Some(b)) => Some((b, format!("{} --kv-memory allows", size(b)))),
        // Leave a tenth for llama.cpp's compute buffers and everything else.
        Some(None) => crate::engine::free_memory(gpu_layers > 0)
            .map(|(free, device)| (free / 10 * 9, format!("90% of the {} free in {device}", size(free)))),
    };
    if let Some((usable, what)) = allowed
        && cells * per_cell > usable
    {
        let fit = (usable / per_cell / PAD * PAD).saturating_sub(plan.prefix_tokens.len() as u64)
            / plan.per_sequence.max(1) as u64;
        let largest = if fit >= 2 {
            format!("the largest N that fits is {fit}")
        } else {
            "not even two sequences fit; run without --parallel".to_string()
        };
        bail!(
            "--parallel {slots} needs a KV cache of {cells} cells ({} at K {} / V {}), more than the {what}; {largest}",
            size(cells * per_cell),
            cfg.type_k.as_str(),
            cfg.type_v.as_str(),
        );
    }
    Ok((slots, None))
}

/// Layers offloaded when none are asked for: all of them when the build has
/// a GPU backend, else none.
pub fn default_gpu_layers() -> u32 {
    match crate::engine::backend() {
        Ok(b) if b.supports_gpu_offload() => 999,
        _ => 0,
    }
}

/// The corpus file: the one given, else the default corpus, which must have
/// been fetched.
pub fn corpus_path(given: Option<&Path>) -> Result<PathBuf> {
    match given {
        Some(p) => Ok(p.to_path_buf()),
        None => {
            let p = crate::fsutil::default_corpus_path();
            if !p.exists() {
                bail!(
                    "no --corpus given and the default corpus is not at {}; run scripts/fetch-corpus first",
                    p.display()
                );
            }
            Ok(p)
        }
    }
}

/// The measured parts of one run.
pub struct Executed {
    pub results: Vec<TargetResult>,
    pub timings: Timings,
}

/// How [`execute`] runs, beyond the plan.
pub struct ExecOptions<'a> {
    pub decoding: &'a Decoding,
    /// Load the prefix state from, and save it to, this cache under this key.
    pub prefix_cache: Option<(&'a PrefixCache, String)>,
    /// Also ask every question with no file in the context.
    pub closed_book: bool,
    pub show_progress: bool,
    /// Draw the progress bars inside this display (a sweep's), not on their
    /// own; `on_result` then runs outside them and may update the display's
    /// bars, but must not print.
    pub multi: Option<&'a MultiProgress>,
}

/// Prefill once, snapshot, then answer every target from the prefix: one at a
/// time from a restored snapshot, or `--parallel` sequences at once. `cfg` is
/// the run's context ([`Decoding::context`]).
pub fn execute(
    model: &Model,
    plan: &Plan,
    cfg: &ContextConfig,
    opts: &ScoreOptions,
    exec: &ExecOptions,
    mut on_result: impl FnMut(&TargetResult),
) -> Result<Executed> {
    let decoding = exec.decoding;
    let (forced_only, show_progress) = (decoding.forced_only, exec.show_progress);
    // `decide` never gives a forced-only run more than one slot.
    let parallel = decoding.parallel();
    let mut session = Session::new(model, cfg).map_err(|e| {
        if parallel {
            e.context(format!("--parallel {}", decoding.slots))
        } else {
            e
        }
    })?;
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
        let bar = progress_bar(show_progress, exec.multi, plan.prefix_tokens.len() as u64, "prefill", "tok");
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

    let limit = Limit {
        max_new: plan.max_new_tokens,
        fixed: decoding.fixed_tokens.is_some(),
    };
    let line_limit = 2 * opts.lines;
    let enough = |target: &Target, text: &str| {
        score::parse_response(text, &target.header, opts.skip_blank).len() >= line_limit
    };
    // Parallel: every answer first, the rest per target below.
    let mut answered: Vec<Option<Generation>> = Vec::new();
    if parallel {
        let bar = progress_bar(show_progress, exec.multi, plan.targets.len() as u64, "answers", "q");
        let t = Instant::now();
        answered.resize(plan.targets.len(), None);
        let stats = session.generate_parallel(
            &plan.queries,
            decoding.slots,
            limit,
            |i, text| enough(&plan.targets[i], text),
            |i, g| {
                bar.inc(1);
                answered[i] = Some(g);
                Ok(())
            },
        )?;
        timings.generation_ms = Some(ms(t));
        timings.decode_steps = Some(stats);
        bar.finish_and_clear();
    }

    let bar = progress_bar(show_progress, exec.multi, plan.targets.len() as u64, "queries", "q");
    let mut results = Vec::with_capacity(plan.targets.len());
    let mut answered_tokens: Vec<Vec<LlamaToken>> = Vec::new();
    let mut sequential_ms = 0.0;
    for (i, (target, query)) in plan.targets.iter().zip(&plan.queries).enumerate() {
        let mut answer = None;
        if parallel {
            answer = answered[i].take();
        } else if !forced_only {
            let t = Instant::now();
            session.restore()?;
            timings.restore_ms.push(ms(t));
            let g = session.generate_with(query, limit, |text| enough(target, text))?;
            sequential_ms += ms(t);
            answer = Some(g);
        }
        if let Some(g) = &answer {
            timings.query_ms.push(g.ms);
            timings.generated_tokens += g.tokens.len();
        }

        let mut forced = None;
        if !decoding.no_forced {
            let t = Instant::now();
            if parallel {
                session.fork_prefix(1)?;
            } else {
                session.restore()?;
            }
            let greedy_text = answer.as_ref().map(|g| g.text.as_str());
            forced = Some(forced_pass(model, &mut session, plan, target, query, greedy_text)?);
            timings.forced_ms.push(ms(t));
        }

        let text = answer.as_ref().map(|g| g.text.clone()).unwrap_or_default();
        let lines = score::parse_response(&text, &target.header, opts.skip_blank);
        let s = score::score(&target.expected, &target.extra_window, &lines, opts);
        let mut r = TargetResult::new(target, text, s);
        r.generated_tokens = answer.as_ref().map(|g| g.tokens.len());
        r.forced = forced;
        if let Some(g) = answer {
            answered_tokens.push(g.tokens);
        }
        match exec.multi {
            // A shared display: the callback updates its bars, it does not
            // print (a suspended bar would hold the display's lock).
            Some(_) => on_result(&r),
            None => bar.suspend(|| on_result(&r)),
        }
        bar.inc(1);
        results.push(r);
    }
    bar.finish_and_clear();
    if !parallel && !forced_only {
        timings.generation_ms = Some(sequential_ms);
        timings.decode_steps = Some(std::mem::take(&mut session.steps));
    }
    if parallel && decoding.check_sequential {
        // One at a time, in a context like a sequential run's, from the same
        // prefix state (moved over, not evaluated again).
        let t = Instant::now();
        let snapshot = session
            .take_snapshot()
            .ok_or_else(|| anyhow::anyhow!("no prefix snapshot to check against"))?;
        drop(session);
        let mut seq_cfg = cfg.clone();
        (seq_cfg.n_ctx, seq_cfg.n_seq, seq_cfg.kv_unified) = (plan.n_ctx, 1, false);
        if decoding.swa_full {
            seq_cfg.swa_full = false;
        }
        session = Session::new(model, &seq_cfg)?;
        session.set_snapshot(snapshot)?;
        let bar = progress_bar(show_progress, exec.multi, plan.targets.len() as u64, "check", "q");
        for (((target, query), r), parallel_tokens) in
            plan.targets.iter().zip(&plan.queries).zip(results.iter_mut()).zip(&answered_tokens)
        {
            session.restore()?;
            let g = session.generate_with(query, limit, |text| enough(target, text))?;
            let lines = score::parse_response(&g.text, &target.header, opts.skip_blank);
            let s = score::score(&target.expected, &target.extra_window, &lines, opts);
            let common = g.tokens.iter().zip(parallel_tokens).take_while(|(a, b)| a == b).count();
            let identical = g.tokens == *parallel_tokens;
            // How close the call was where the answers part: the gap between
            // the two best logits there, from one batched pass over the
            // sequential answer up to that token.
            let mut parting_gap = None;
            if !identical {
                // One answer may be the other's start (one stopped there):
                // read the gap along the one that goes on.
                let longer = if common < g.tokens.len() { &g.tokens } else { parallel_tokens };
                if common < longer.len() {
                    session.restore()?;
                    let readings = session.force(query, &longer[..=common])?;
                    parting_gap = readings.get(common).map(|r| r.1);
                }
            }
            r.sequential = Some(SequentialCheck {
                identical,
                common_tokens: common,
                sequential_tokens: g.tokens.len(),
                matched: s.matched,
                pass: s.pass,
                parting_gap,
                response: (!identical).then_some(g.text),
            });
            bar.inc(1);
        }
        bar.finish_and_clear();
        timings.check_ms = Some(ms(t));
    }
    if exec.closed_book {
        closed_book_pass(model, &mut session, plan, opts, &mut results, show_progress, exec.multi)?;
    }
    Ok(Executed { results, timings })
}

/// Asks every question again with nothing before it in the context, and
/// records what the model recalls without the file.
fn closed_book_pass(
    model: &Model,
    session: &mut Session,
    plan: &Plan,
    opts: &ScoreOptions,
    results: &mut [TargetResult],
    show_progress: bool,
    multi: Option<&MultiProgress>,
) -> Result<()> {
    let bar = progress_bar(show_progress, multi, plan.targets.len() as u64, "closed", "q");
    for (target, r) in plan.targets.iter().zip(results.iter_mut()) {
        let prompt = plan.frame.closed_book_prompt(target, opts.lines, opts.skip_blank);
        let tokens = model.tokenize_prefix(&prompt);
        session.start_empty();
        let limit = 2 * opts.lines;
        let g = session.generate(&tokens, plan.max_new_tokens, |text| {
            score::parse_response(text, &target.header, opts.skip_blank).len() >= limit
        })?;
        let lines = score::parse_response(&g.text, &target.header, opts.skip_blank);
        let s = score::score(&target.expected, &target.extra_window, &lines, opts);
        r.context_matched = Some(r.matched as i64 - s.matched as i64);
        r.closed_book = Some(ClosedBook {
            response: g.text,
            prompt_tokens: tokens.len(),
            generated_tokens: g.tokens.len(),
            matched: s.matched,
            missing: s.missing,
            hallucinated: s.hallucinated,
            extra: s.extra,
            pass: s.pass,
        });
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(())
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

fn progress_bar(show: bool, multi: Option<&MultiProgress>, len: u64, what: &str, unit: &str) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = match multi {
        Some(m) => m.add(ProgressBar::new(len)),
        None => ProgressBar::new(len),
    };
    let style = ProgressStyle::with_template(&format!(
        "{what:>8} [{{bar:30}}] {{pos}}/{{len}} {unit}  {{per_sec}}  ETA {{eta}}"
    ))
    .unwrap_or_else(|_| ProgressStyle::default_bar())
    .progress_chars("=> ");
    bar.set_style(style);
    bar
}

/// Everything a run file records besides the measurements: `bench` and
/// `matrix` build their manifests and run files from it, the same way.
pub struct RunSpec<'a> {
    pub model: &'a Model,
    pub src: &'a Source,
    pub plan: &'a Plan,
    pub cfg: &'a ContextConfig,
    pub gpu_layers: u32,
    /// The build label; `None`: the model file's name.
    pub build: Option<&'a str>,
    pub target: &'a TargetArgs,
    pub decoding: &'a Decoding,
}

impl RunSpec<'_> {
    /// The run's manifest, complete before anything is decoded.
    pub fn manifest(&self) -> Manifest {
        let (model, plan, cfg) = (self.model, self.plan, self.cfg);
        let mut params = self.target.params();
        params.probe = Some(plan.frame.kind.as_str().to_string());
        params.max_new_tokens = Some(plan.max_new_tokens);
        let decoding = self.decoding;
        params.decode_mode = Some(decoding.mode().into());
        params.parallel = decoding.parallel().then_some(decoding.slots);
        params.fixed_tokens = decoding.fixed_tokens;
        params.no_forced = decoding.no_forced;
        let mut runtime = Runtime::current();
        runtime.backend = Some(crate::engine::backend_name().to_string());
        runtime.chat_renderer = plan.frame.renderer.clone();
        runtime.prefix_sha256 = Some(crate::fsutil::sha256_hex(plan.prefix_text.as_bytes()));
        runtime.prompt_boundary_exact = Some(plan.boundary_exact);
        runtime.parallel_fallback = decoding.fallback.clone();
        Manifest {
            command: "bench".into(),
            model: Some(ModelInfo {
                path: model.path.display().to_string(),
                sha256: model.sha256.clone(),
                size_bytes: model.size_bytes,
                architecture: model.architecture.clone(),
                name: model.name.clone(),
                file_type: model.file_type.clone(),
                build: self.build.map(str::to_string).unwrap_or_else(|| {
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
                flash_attn: flash_attn_name(cfg.flash_attn).into(),
                swa_full: cfg.swa_full,
                kv_unified: cfg.kv_unified,
                n_batch: cfg.n_batch,
                n_ubatch: cfg.n_ubatch,
                threads: cfg.threads,
                gpu_layers: self.gpu_layers,
            }),
            corpus: crate::commands::corpus_info(self.src, plan.crop.clone(), Some(plan.prefix_tokens.len())),
            params,
            runtime,
            external: None,
        }
    }

    /// The name of this run's evaluated prefix in a prefix cache.
    pub fn prefix_cache_key(&self) -> String {
        let (plan, cfg) = (self.plan, self.cfg);
        let prefix_sha = crate::fsutil::sha256_hex(plan.prefix_text.as_bytes());
        CacheKey {
            model_sha256: &self.model.sha256,
            corpus_sha256: &self.src.corpus.sha256,
            crop_first_line: plan.crop.first_line,
            crop_last_line: plan.crop.last_line,
            crop_sha256: &plan.crop.sha256,
            prefix_sha256: &prefix_sha,
            n_ctx: cfg.n_ctx,
            type_k: cfg.type_k.as_str(),
            type_v: cfg.type_v.as_str(),
            flash_attn: flash_attn_name(cfg.flash_attn),
            swa_full: cfg.swa_full,
            kv_unified: cfg.kv_unified,
            n_batch: cfg.n_batch,
            n_ubatch: cfg.n_ubatch,
            gpu_layers: self.gpu_layers,
            llama_cpp_sys_2: env!("POSRECALL_LLAMA_CPP_SYS_2_VERSION"),
        }
        .digest()
    }

    /// The run file: the manifest, the results and their summary, and the
    /// timings, with the model's load and hash times; `total_ms` is the run
    /// as its command measured it.
    pub fn run_file(&self, executed: Executed, total_ms: f64) -> RunFile {
        let mut timings = executed.timings;
        timings.hash_ms = self.model.hash_ms;
        timings.load_ms_without_hash = self.model.load_ms;
        timings.load_ms = self.model.load_ms + self.model.hash_ms;
        timings.total_ms = total_ms;
        RunFile {
            format: FORMAT_VERSION,
            manifest: self.manifest(),
            summary: Summary::of(&executed.results),
            targets: executed.results,
            timings: Some(timings),
        }
    }
}

/// How answers are scored, from the target options.
pub fn score_options(target: &TargetArgs) -> ScoreOptions {
    ScoreOptions {
        lines: target.lines,
        pass: target.pass(),
        normalize: target.normalize,
        skip_blank: target.skip_blank,
    }
}

pub fn run(args: &BenchArgs) -> Result<()> {
    let started = Instant::now();
    args.target.validate()?;
    let corpus_path = corpus_path(args.corpus.as_deref())?;
    // Refuse bad flag combinations before spending time on the model.
    let probe_cfg = context_config(args, 64);
    probe_cfg.validate()?;
    args.decode.validate(args.forced_only)?;
    if args.decode.fixed_tokens.is_some() && args.max_new_tokens.is_some() {
        bail!("--fixed-tokens sets the answer length; drop --max-new-tokens");
    }
    if args.max_new_tokens == Some(0) {
        bail!("--max-new-tokens must be at least 1");
    }
    let src = Source::open_with(&corpus_path, args.target.rename_seed())?;
    if let Some(note) = src.error_note() {
        eprintln!("{note}");
    }

    let gpu_layers = args.gpu_layers.unwrap_or_else(default_gpu_layers);
    let model = model::load(&args.model, gpu_layers)?;
    let plan_opts = PlanOptions {
        target: args.target.clone(),
        probe: args.probe,
        crop: args.crop,
        ctx: args.ctx,
        max_tokens: args.max_tokens,
        max_new_tokens: args.decode.fixed_tokens.map(|t| t as usize).or(args.max_new_tokens),
    };
    let plan = plan(&model, &src, &plan_opts)?;
    let sequential_cfg = context_config(args, plan.n_ctx);
    let decoding = args.decode.decide(&model, &plan, &sequential_cfg, gpu_layers, args.forced_only, args.no_forced, true)?;
    let cfg = decoding.context(sequential_cfg, &plan);
    let opts = score_options(&args.target);
    let spec = RunSpec {
        model: &model,
        src: &src,
        plan: &plan,
        cfg: &cfg,
        gpu_layers,
        build: args.build.as_deref(),
        target: &args.target,
        decoding: &decoding,
    };

    let color = crate::report::terminal::stdout_wants_color();
    if !args.quiet {
        println!("{}\n", crate::report::terminal::legend(color));
    }
    let cache = args.prefix_cache.as_deref().map(PrefixCache::new).transpose()?;
    let exec = ExecOptions {
        decoding: &decoding,
        prefix_cache: cache.as_ref().map(|c| (c, spec.prefix_cache_key())),
        closed_book: args.closed_book,
        show_progress: !args.quiet,
        multi: None,
    };
    let executed = execute(&model, &plan, &cfg, &opts, &exec, |r| {
        if !args.quiet {
            println!("{}", crate::report::terminal::target_diff(r, opts.lines, color));
        }
    })?;
    let run = spec.run_file(executed, ms(started));
    if let Some(out) = &args.out {
        run.save(out)?;
    }
    if let Some(html) = &args.html {
        crate::report::html::write_bench_page(&run, args.out.as_deref(), html)?;
    }
    print!("{}", crate::report::terminal::summary(&run.summary));
    Ok(())
}

