//! Everything decided before decoding: the probe, the kept range of lines,
//! the targets, the token counts and the context size.

use crate::corpus::{Corpus, Source};
use crate::engine::Token;
use crate::engine::model::Model;
use crate::prompt::template::{TemplateError, TemplateFile, TemplateRecord, TemplateVars, Think};
use crate::prompt::{self, Frame, Probe, SpecialTokens};
use crate::settings::CtxSize;
use crate::settings::{Explain, Names, Setting};
use crate::support::progress::Notes;
use crate::targets::crop::{self, Crop, CropMode, LineRange};
use crate::targets::{self, Target, TargetSpec};
use anyhow::{Context, Result};
use std::path::PathBuf;

/// Tokens kept free for a code-fence line the forced pass may open with.
const FORCED_SCAFFOLD_RESERVE: usize = 16;

/// Answer tokens per expected-window line when no cap is given (the window
/// is LINES + LINES extra lines: 800 tokens at the defaults).
const TOKENS_PER_WINDOW_LINE: usize = 20;

/// The answer budget when none is given, for questions of `lines` lines:
/// 20 tokens per line of the expected window (LINES and as many extra
/// lines), 800 at the defaults. `bench` and `ask` alike.
pub(crate) fn default_answer_budget(lines: usize) -> usize {
    TOKENS_PER_WINDOW_LINE * 2 * lines
}

/// Marks an error of fitting the file into a context whose cap is the
/// model's trained context (`--ctx auto` without a RoPE scaling): the face
/// adds that a scaling goes past it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the context is capped at the model's trained context of {0} tokens")]
pub(crate) struct TrainedCap(pub u32);

/// The knobs [`plan`] reads.
#[derive(Debug, Clone, Default)]
pub struct PlanOptions {
    pub target: TargetSpec,
    pub probe: Probe,
    pub crop: CropMode,
    pub ctx: CtxSize,
    /// The most tokens the kept file may take.
    pub max_prefix_tokens: Option<usize>,
    /// The answer budget; `None`: 20 tokens per line of the expected window.
    pub max_new_tokens: Option<usize>,
    /// Ask only these of the sampled targets (empty: all of them). The
    /// targets are sampled and the context sized as without it, so each
    /// answer is the one a full run gives.
    pub only: Vec<String>,
    /// The chat template's variables (thinking, kwargs) and its file, when
    /// it replaces the GGUF's.
    pub template: TemplateVars,
    pub template_file: Option<TemplateFile>,
    /// Reasoning tokens allowed before the answer when thinking is on;
    /// `None`: [`crate::prompt::template::DEFAULT_THINK_BUDGET`].
    pub think_budget: Option<usize>,
    /// The context extension: with a scaling, `--ctx auto` may go past the
    /// trained context (set from the run's context settings by
    /// `BenchOptions::planning`).
    pub rope: crate::settings::Rope,
}

/// A run that cannot be planned. The messages name no command-line flag;
/// the command adds what would fix it.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error(
        "a context of {cap} tokens leaves no room for the file after the answer budget \
         ({max_new} tokens) and the question ({question})"
    )]
    NoRoomForTheFile { cap: usize, max_new: usize, question: usize },
    #[error(
        "lines {first}..{last} of the corpus need {need} tokens, but only {budget} fit \
         (context {cap}, answer budget {max_new})"
    )]
    RangeDoesNotFit { first: usize, last: usize, need: usize, budget: usize, cap: usize, max_new: usize },
    #[error(
        "the prefix ({prefix} tokens), the longest question ({longest}) and the answer budget ({max_new}) \
         need {needed} tokens, more than the context of {n_ctx}"
    )]
    ContextTooSmall { prefix: usize, longest: usize, max_new: usize, needed: usize, n_ctx: u32 },
    #[error("{} has no chat template", .0.display())]
    NoChatTemplate(PathBuf),
    #[error("`{name}` is eligible but not among the {count} sampled targets")]
    NotSampled { name: String, count: usize },
    #[error("no eligible function in the kept lines is named `{name}` (sampled: {sampled})")]
    UnknownTarget { name: String, sampled: String },
}

/// Everything decided before decoding.
#[derive(Clone)]
pub struct Plan {
    pub frame: Frame,
    pub crop: Crop,
    pub prefix_text: String,
    pub prefix_tokens: Vec<Token>,
    pub targets: Vec<Target>,
    /// Per target, the tokens that follow the prefix.
    pub queries: Vec<Vec<Token>>,
    pub max_new_tokens: usize,
    /// Cells one answering sequence needs beyond the prefix: the longest
    /// question plus the answer budget (or the forced text, when longer).
    pub per_sequence: usize,
    /// The context of a sequential run: prefix + [`Plan::per_sequence`].
    pub n_ctx: u32,
    /// Whether prefix + question tokens equal the whole prompt's tokens exactly.
    pub boundary_exact: bool,
    /// The names the targets were narrowed to ([`PlanOptions::only`]).
    pub only: Vec<String>,
    /// The functions of the kept lines left out because neither their name
    /// nor their header is unique (`--anchor header`).
    pub ambiguous: Vec<targets::Ambiguous>,
    /// `--min-code-lines`: the eligible functions of the kept lines left
    /// out of the draw for too few code lines; `None` when it is off.
    pub few_code_lines: Option<usize>,
    /// How the chat template was chosen and rendered (chat probe only).
    pub template: Option<TemplateRecord>,
    /// Reasoning tokens allowed before the answer budget (thinking on, chat probe).
    pub think_budget: Option<usize>,
    /// The template's reasoning markers, to close the reasoning when its
    /// budget is spent (thinking on, where the template shows them).
    pub reasoning_markers: Option<crate::prompt::reasoning::Markers>,
}

impl Plan {
    /// The most tokens one answer may take: the answer budget, and the
    /// reasoning budget before it when thinking is on.
    pub(crate) fn generation_limit(&self) -> usize {
        match self.think_budget {
            Some(reasoning) => self.max_new_tokens + reasoning,
            // Thinking off (or the completion probe): no reasoning comes first.
            None => self.max_new_tokens,
        }
    }
}

/// How many tokens the frame, the questions and the answers need, whatever
/// range of the file is kept.
struct Reserve {
    max_new: usize,
    /// The largest context allowed.
    cap: usize,
    /// Tokens left for the kept file.
    budget: usize,
    /// Tokens the frame adds around the kept file.
    frame_cost: usize,
}

/// Chooses probe, kept range, targets and context size for `model` on `src`.
pub fn plan(model: &Model, src: &Source, o: &PlanOptions, notes: &dyn Notes) -> Result<Plan> {
    let corpus = &src.corpus;
    let topts = o.target.options();
    let (mut frame, template) = frame_for(model, src, o, notes)?;
    frame.anchor = topts.anchor;
    let think_budget = (template.is_some() && o.template.think == Think::On)
        .then(|| o.think_budget.unwrap_or(crate::prompt::template::DEFAULT_THINK_BUDGET));
    // The functions eligible anywhere in the file bound what each question
    // and each forced pass needs, whatever range is kept.
    let everywhere = targets::eligible(corpus, &src.parsed, 0, corpus.line_count() - 1, &topts);
    // Where the trained context is the cap (`auto`, no context extension),
    // the errors of fitting the file into it say so.
    let capped = |e: anyhow::Error| match o.ctx == CtxSize::Auto && o.rope.extension() == 1.0 {
        true => e.context(TrainedCap(model.n_ctx_train)),
        false => e,
    };
    let reserve = reserve(model, &frame, &everywhere, o, think_budget.unwrap_or(0)).map_err(capped)?;
    let (first, last, mode) = initial_range(model, corpus, &everywhere, o, reserve.budget).map_err(capped)?;
    let (last, prefix_text, prefix_tokens, boundary_exact) =
        fit_prefix(model, corpus, &mut frame, &everywhere, o, &reserve, (first, last, mode)).map_err(capped)?;

    let ambiguous = targets::ambiguous(corpus, &src.parsed, first, last, &topts);
    if let Some(note) = targets::ambiguity_note(&ambiguous) {
        notes.note(&note);
    }
    let mut selected = targets::select(corpus, &src.parsed, first, last, &topts)?;
    set_token_offsets(model, corpus, &frame, &prefix_tokens, first, &mut selected);
    let queries: Vec<Vec<Token>> = selected.iter().map(|t| model.tokenize_rest(&frame.suffix(t, topts.lines, topts.skip_blank))).collect();
    let longest = queries.iter().map(Vec::len).max().unwrap_or(0);
    let max_new = reserve.max_new;
    // With thinking on, the forced pass feeds the answer's reasoning before
    // the expected lines.
    let per_sequence = match think_budget {
        Some(think) => longest + max_new + think + forced_room(model, &selected),
        None => longest + max_new.max(forced_room(model, &selected)),
    };
    let needed = prefix_tokens.len() + per_sequence;
    let n_ctx = match o.ctx {
        CtxSize::Auto => needed.min(o.rope.auto_cap(model.n_ctx_train) as usize).max(CtxSize::MIN as usize) as u32,
        CtxSize::Fixed(n) => n,
    };
    if needed > n_ctx as usize {
        return Err(PlanError::ContextTooSmall { prefix: prefix_tokens.len(), longest, max_new, needed, n_ctx }.into());
    }
    let (selected, queries) = keep_only(selected, queries, &o.only, || targets::eligible(corpus, &src.parsed, first, last, &topts))?;
    let reasoning_markers = think_budget.and_then(|_| {
        let text = o.template_file.as_ref().map(|f| f.text.as_str()).or(model.chat_template.as_deref())?;
        crate::prompt::reasoning::markers(&frame.tail, text)
    });
    Ok(Plan {
        crop: Crop::of(corpus, mode, first, last),
        frame,
        prefix_text,
        prefix_tokens,
        targets: selected,
        queries,
        max_new_tokens: max_new,
        per_sequence,
        n_ctx,
        boundary_exact,
        only: o.only.clone(),
        ambiguous,
        few_code_lines: targets::few_code_lines(corpus, &src.parsed, first, last, &topts),
        reasoning_markers,
        template,
        think_budget,
    })
}

/// The sampled targets (and their questions) named in `only`, in sampled
/// order; all of them when `only` is empty. A name that is not sampled is an
/// error that says whether it is eligible at all (`eligible` lists the kept
/// range's eligible functions).
fn keep_only(
    targets: Vec<Target>,
    queries: Vec<Vec<Token>>,
    only: &[String],
    eligible: impl FnOnce() -> Vec<Target>,
) -> Result<(Vec<Target>, Vec<Vec<Token>>), PlanError> {
    if only.is_empty() {
        return Ok((targets, queries));
    }
    if let Some(name) = only.iter().find(|n| !targets.iter().any(|t| &t.name == *n)) {
        let name = name.clone();
        if eligible().iter().any(|t| t.name == name) {
            return Err(PlanError::NotSampled { name, count: targets.len() });
        }
        const SHOWN: usize = 8;
        let mut sampled: Vec<&str> = targets.iter().take(SHOWN).map(|t| t.name.as_str()).collect();
        if targets.len() > SHOWN {
            sampled.push("…");
        }
        return Err(PlanError::UnknownTarget { name, sampled: sampled.join(", ") });
    }
    Ok(targets.into_iter().zip(queries).filter(|(t, _)| only.contains(&t.name)).unzip())
}

/// The answer budget, the context cap, and the tokens left for the file.
fn reserve(model: &Model, frame: &Frame, everywhere: &[Target], o: &PlanOptions, think_budget: usize) -> Result<Reserve> {
    let topts = o.target.options();
    let max_new = o.max_new_tokens.unwrap_or(default_answer_budget(topts.lines));
    let cap = match o.ctx {
        CtxSize::Auto => o.rope.auto_cap(model.n_ctx_train) as usize,
        CtxSize::Fixed(n) => n as usize,
    };
    let question =
        everywhere.iter().map(|t| model.tokenize_rest(&frame.suffix(t, topts.lines, topts.skip_blank)).len()).max().unwrap_or(64);
    let frame_cost = model.tokenize_prefix(&frame.prefix("")).len();
    // The teacher-forced pass feeds the expected lines after the question; the
    // context must hold them as well as a generated answer.
    let answer_room = match think_budget {
        0 => max_new.max(forced_room(model, everywhere)),
        think => max_new + think + forced_room(model, everywhere),
    };
    let budget = cap.checked_sub(answer_room + question + frame_cost).filter(|b| *b > 0).ok_or(PlanError::NoRoomForTheFile {
        cap,
        max_new,
        question,
    })?;
    let budget = o.max_prefix_tokens.map_or(budget, |m| budget.min(m));
    Ok(Reserve { max_new, cap, budget, frame_cost })
}

/// The most tokens a forced pass over one of `targets` feeds.
fn forced_room(model: &Model, targets: &[Target]) -> usize {
    targets.iter().map(|t| model.tokenize_plain(&prompt::forced_body(t)).len() + FORCED_SCAFFOLD_RESERVE).max().unwrap_or(0)
}

/// The 0-based range to start from: the one given, else the crop mode's
/// choice from estimated per-line costs.
fn initial_range(
    model: &Model,
    corpus: &Corpus,
    everywhere: &[Target],
    o: &PlanOptions,
    budget: usize,
) -> Result<(usize, usize, CropMode)> {
    if let Some(r) = o.target.crop_lines {
        let (a, b) = r.to_zero_based(corpus.line_count())?;
        return Ok((a, b, CropMode::Lines));
    }
    let cost = line_costs(model, corpus);
    let spans: Vec<(usize, usize)> = everywhere.iter().map(|t| (t.line - 1, t.last_expected_line - 1)).collect();
    let (a, b) = crop::choose_range(o.crop, &cost, budget, &spans)?;
    Ok((a, b, o.crop))
}

/// Tokenizes the prefix for real (the per-line costs are an estimate) and
/// drops lines at the end until it fits; also fits the prompt boundary.
/// Returns the last kept line, the prefix text and tokens, and whether the
/// boundary is exact.
fn fit_prefix(
    model: &Model,
    corpus: &Corpus,
    frame: &mut Frame,
    everywhere: &[Target],
    o: &PlanOptions,
    reserve: &Reserve,
    (first, mut last, mode): (usize, usize, CropMode),
) -> Result<(usize, String, Vec<Token>, bool)> {
    let topts = o.target.options();
    let mut boundary_exact = false;
    loop {
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
        let kept_tokens = tokens.len().saturating_sub(reserve.frame_cost);
        if kept_tokens <= reserve.budget {
            return Ok((last, text, tokens, boundary_exact));
        }
        if matches!(mode, CropMode::None | CropMode::Lines) || last == first {
            return Err(PlanError::RangeDoesNotFit {
                first: first + 1,
                last: last + 1,
                need: kept_tokens,
                budget: reserve.budget,
                cap: reserve.cap,
                max_new: reserve.max_new,
            }
            .into());
        }
        // Drop lines at the end in proportion to the overshoot, at least one.
        let over = kept_tokens - reserve.budget;
        let per_line = (kept_tokens / (last - first + 1)).max(1);
        last -= (over / per_line + 1).min(last - first);
    }
}

/// Token offsets: how many prefix tokens come before each declaration.
fn set_token_offsets(model: &Model, corpus: &Corpus, frame: &Frame, prefix: &[Token], first: usize, targets: &mut [Target]) {
    let starts = token_starts(model, prefix);
    let kept_start = corpus.line_start(first);
    for t in targets {
        let byte_in_prefix = frame.kept_offset() + (t.byte_offset - kept_start);
        t.token_offset = Some(starts.partition_point(|&s| s < byte_in_prefix));
    }
}

/// The probe for this model: its chat template (or the one given as a file)
/// rendered by minijinja, else by llama.cpp's renderer, or the completion
/// probe; with the template's record. Says once on stderr when the template
/// has no thinking switch.
fn frame_for(model: &Model, src: &Source, o: &PlanOptions, notes: &dyn Notes) -> Result<(Frame, Option<TemplateRecord>)> {
    let comment = src.language.line_comment();
    let file = o.template_file.as_ref();
    let template = file.map(|f| f.text.as_str()).or(model.chat_template.as_deref());
    let t = match (o.probe, template) {
        (Probe::Completion, _) | (Probe::Auto, None) => return Ok((Frame::completion(comment), None)),
        (Probe::Chat, None) => return Err(PlanError::NoChatTemplate(model.path.clone()).into()),
        (_, Some(t)) => t,
    };
    let special = SpecialTokens { bos: model.bos_text(), eos: model.eos_text() };
    let mut record = o.template.record(t, file.map(|f| f.path.as_path()))?;
    if let Some(note) = record.no_switch_note(t) {
        notes.note(&note);
    }
    let frame = match prompt::chat_frame(t, &special, &record.variables, comment) {
        Ok(f) => {
            if let Err(why) = prompt::check_frame(&f, t, &special, &record.variables) {
                notes.note(&format!("note: the chat template does not split cleanly at the question: {why}"));
                record.split_mismatch = Some(why);
            }
            f
        }
        // A template given by hand, or one that raised, is used as it is or not at all.
        Err(e) if file.is_some() || e.downcast_ref::<TemplateError>().is_some_and(|t| matches!(t, TemplateError::Raised(_))) => {
            return Err(e);
        }
        Err(jinja_err) => {
            let rendered = model
                .render_builtin(&prompt::marked_message())
                .with_context(|| format!("chat template: {jinja_err:#}; llama.cpp's renderer"))?;
            notes.note(&format!("note: rendering the chat template with llama.cpp's built-in renderer ({jinja_err:#})"));
            prompt::split_frame(&rendered, "llama.cpp", comment)?
        }
    };
    Ok((frame, Some(record)))
}

/// Byte offset at which each token's text starts, from summed piece lengths.
pub(crate) fn token_starts(model: &Model, tokens: &[Token]) -> Vec<usize> {
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
fn line_costs(model: &Model, corpus: &Corpus) -> Vec<usize> {
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

/// Plans several models on one corpus with the same kept range, so that every
/// run is asked about the same targets (a sweep). Each model is planned with
/// its own options first; when they keep different ranges, the candidates
/// (each model's own range) are tried from the fewest kept bytes up, and the
/// first that fits every model is used for all of them (crop mode `lines`).
/// `names` name the models in errors.
pub fn plan_shared(models: &[&Model], names: &[&str], src: &Source, options: &[PlanOptions], notes: &dyn Notes) -> Result<Vec<Plan>> {
    let own: Vec<Plan> = models
        .iter()
        .zip(options)
        .zip(names)
        .map(|((model, o), name)| plan(model, src, o, notes).with_context(|| OfModel(name.to_string())))
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
        let mut plans = Vec::with_capacity(models.len());
        for ((model, o), name) in models.iter().zip(options).zip(names) {
            let mut o = o.clone();
            o.target.crop_lines = Some(LineRange { first: a, last: b });
            match plan(model, src, &o, notes) {
                Ok(p) => plans.push(p),
                Err(e) => {
                    first_failure.get_or_insert_with(|| {
                        format!("lines {a}..{b} (kept for `{}`, the fewest bytes) do not fit `{name}`: {e:#}", names[owner])
                    });
                    break;
                }
            }
        }
        if plans.len() == models.len() {
            return Ok(plans);
        }
    }
    Err(NoSharedRange(first_failure.unwrap_or_default()).into())
}

/// No one kept range fits every model of a sweep; says which failed first.
#[derive(Debug, thiserror::Error)]
#[error("no one range of lines fits every model of the sweep: {0}")]
pub struct NoSharedRange(pub String);

impl Explain for NoSharedRange {
    /// What sets the range, and the failing model's room, in the face's words.
    fn explain(&self, n: &dyn Names) -> String {
        format!(
            "{self}; set {} or {}, or give that model a larger {}",
            n.name(Setting::CropLines),
            n.name(Setting::MaxPrefixTokens),
            n.name(Setting::Ctx)
        )
    }
}

/// The model (a sweep's entry, a list's instance) an error is about: the
/// context [`crate::explain`] puts before the error in a face's words.
#[derive(Debug, Clone)]
pub struct OfModel(pub String);

impl std::fmt::Display for OfModel {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "model `{}`", self.0)
    }
}

impl Explain for TrainedCap {
    /// What goes past the cap: a RoPE scaling.
    fn explain(&self, n: &dyn Names) -> String {
        format!(
            "past the model's trained context ({} tokens), set a RoPE scaling, e.g. {} {}",
            self.0,
            n.set(Setting::RopeScaling, "yarn"),
            n.set(Setting::RopeScale, "4")
        )
    }
}

impl Explain for PlanError {
    fn explain(&self, n: &dyn Names) -> String {
        let (ctx, max_new) = (n.name(Setting::Ctx), n.name(Setting::MaxNewTokens));
        let fix = match self {
            PlanError::NoRoomForTheFile { .. } | PlanError::ContextTooSmall { .. } => format!("use a larger {ctx} or a smaller {max_new}"),
            PlanError::RangeDoesNotFit { .. } => format!(
                "use {} or {}, a shorter {} range, or a larger {ctx}",
                n.set(Setting::Crop, "head"),
                n.set(Setting::Crop, "densest"),
                n.name(Setting::CropLines)
            ),
            PlanError::NoChatTemplate(_) => format!("use {} (or auto)", n.set(Setting::Probe, "completion")),
            PlanError::NotSampled { .. } => {
                format!(
                    "{} names sampled targets; raise {} or change {}",
                    n.name(Setting::Only),
                    n.name(Setting::Count),
                    n.name(Setting::Seed)
                )
            }
            PlanError::UnknownTarget { .. } => format!("{} names sampled targets (`posrecall targets` lists them)", n.name(Setting::Only)),
        };
        format!("{self}; {fix}")
    }
}
