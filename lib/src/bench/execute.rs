//! Running a planned benchmark: evaluate the prefix once (or load it from the
//! prefix cache), snapshot it, answer every target from the restored
//! snapshot (or N at once), then the teacher-forced, check and closed-book
//! passes. docs/METHOD.md §4 (Inference) says why each step is exact.

use super::decoding::Decoding;
use super::plan::{Plan, token_starts};
use crate::decode::draft::{DraftMode, Drafter};
use crate::engine::Token;
use crate::engine::model::Model;
use crate::engine::prefix_cache::{Lookup, PrefixCache};
use crate::engine::session::{Generation, Limit, Session};
use crate::prompt;
use crate::prompt::reasoning;
use crate::record::reference::{Mismatch, RefTarget, Reference};
use crate::record::run::{ClosedBook, SequentialCheck, TargetResult, Timings};
use crate::score::forced::{ContextGain, Forced, TokenReading};
use crate::score::kld::{Kld, Reader, TopK};
use crate::score::{self, ScoreOptions};
use crate::settings::ContextConfig;
use crate::support::progress::{Bar, Progress, Unit, ms};
use crate::targets::Target;
use anyhow::{Context, Result, bail};
use std::time::Instant;

/// The measured parts of one run.
pub struct Executed {
    pub results: Vec<TargetResult>,
    pub timings: Timings,
    /// Per target, the forced text and its stored distributions
    /// ([`ExecOptions::save_top_k`]).
    pub saved: Option<Vec<(RefTarget, Vec<TopK>)>>,
}

/// How [`execute`] runs, beyond the plan.
pub struct ExecOptions<'a> {
    pub decoding: &'a Decoding,
    /// Load the prefix state from, and save it to, this cache under this key.
    pub prefix_cache: Option<(&'a PrefixCache, String)>,
    /// Also ask every question with no file in the context.
    pub closed_book: bool,
    /// Where the passes' bars go.
    pub progress: &'a dyn Progress,
    /// Keep the top K of every forced token's distribution, for a reference.
    pub save_top_k: Option<usize>,
    /// Measure the forced pass against this reference (checked with
    /// [`check_reference`] first).
    pub reference: Option<&'a Reference>,
    /// Where the passes' notes go (a prefix cache entry unusable or unsaved).
    pub notes: &'a dyn crate::support::progress::Notes,
}

/// What every pass shares.
pub(super) struct Run<'a> {
    pub model: &'a Model,
    pub plan: &'a Plan,
    pub opts: &'a ScoreOptions,
    pub exec: &'a ExecOptions<'a>,
}

impl Run<'_> {
    pub(super) fn bar(&self, len: usize, what: &str, unit: Unit) -> Box<dyn Bar> {
        self.exec.progress.bar(len as u64, what, unit)
    }

    /// Whether an answer so far holds enough lines to stop: twice LINES,
    /// after any reasoning (an answer still reasoning never has enough).
    fn enough(&self, target: &Target, text: &str) -> bool {
        let split = reasoning::split(text);
        !split.unclosed && score::parse_response(split.answer, &target.header, self.opts.skip_blank).len() >= 2 * self.opts.lines
    }

    /// The drafter of a sequential answer to `target`: its ground truth
    /// ([`crate::decode::draft::truth_texts`]) tokenized as the forced pass
    /// tokenizes text. `None` at a fixed length (whose answers are
    /// throughput work, not copies).
    fn drafter<'f>(&self, target: &Target, file: &'f [i32], question: &'f [i32]) -> Option<Drafter<'f>> {
        let decoding = self.exec.decoding;
        if decoding.fixed_tokens.is_some() {
            return None;
        }
        let truths = match decoding.draft {
            DraftMode::Truth => crate::decode::draft::truth_texts(&target.header, &target.expected, &target.extra_window)
                .iter()
                .map(|text| self.model.tokenize_plain(text).iter().map(|t| t.0).collect())
                .collect(),
            _ => Vec::new(),
        };
        Some(Drafter::new(decoding.draft, decoding.draft_max, truths, file, question))
    }

    fn limit(&self) -> Limit {
        Limit { max_new: self.plan.generation_limit(), fixed: self.exec.decoding.fixed_tokens.is_some() }
    }
}

/// Prefill once, snapshot, then answer every target from the prefix: one at a
/// time from a restored snapshot, or N sequences at once. `cfg` is the run's
/// context ([`Decoding::context`]); `on_result` sees each target's result as
/// it is done.
pub fn execute(
    model: &Model,
    plan: &Plan,
    cfg: &ContextConfig,
    opts: &ScoreOptions,
    exec: &ExecOptions,
    mut on_result: impl FnMut(&TargetResult),
) -> Result<Executed> {
    let run = Run { model, plan, opts, exec };
    let mut session = new_session(model, cfg, exec.decoding)?;
    let mut timings = Timings { prefix_source: "prefill".into(), ..Timings::default() };
    load_or_prefill(&run, &mut session, &mut timings)?;
    let mut saved = exec.save_top_k.map(|_| Vec::new());
    let (results, _) = answer(&run, session, cfg, &mut timings, &mut saved, &mut on_result)?;
    Ok(Executed { results, timings, saved })
}

/// A context for a run decoded as `decoding` says.
pub(super) fn new_session<'m>(model: &'m Model, cfg: &ContextConfig, decoding: &Decoding) -> Result<Session<'m>> {
    let mut session = Session::new(model, cfg).map_err(|e| match decoding.parallel() {
        true => e.context(format!("{} parallel sequences", decoding.slots)),
        false => e,
    })?;
    session.set_restore_mode(decoding.restore);
    Ok(session)
}

/// With the prefix evaluated: snapshot it, answer every target, then the
/// check and closed-book passes. Returns the results and the session the
/// last pass left (the check pass answers in a context of its own).
pub(super) fn answer<'m>(
    run: &Run<'m>,
    mut session: Session<'m>,
    cfg: &ContextConfig,
    timings: &mut Timings,
    saved: &mut Option<Vec<(RefTarget, Vec<TopK>)>>,
    on_result: &mut impl FnMut(&TargetResult),
) -> Result<(Vec<TargetResult>, Session<'m>)> {
    let decoding = run.exec.decoding;
    session.span_budget = span_budget(run.model, run.plan);
    session.marker_texts = run.plan.reasoning_markers.as_ref().map(|m| m.texts()).unwrap_or_default();
    let t = Instant::now();
    timings.snapshot_bytes = timings.snapshot_bytes.max(session.snapshot()?);
    timings.snapshot_ms += ms(t);
    timings.context_bytes = timings.context_bytes.max(session.state_bytes());

    let mut answers = match decoding.parallel() {
        true => answer_in_parallel(run, &mut session, timings)?,
        false => vec![None; run.plan.targets.len()],
    };
    let (mut results, answered_tokens) = per_target(run, &mut session, &mut answers, timings, saved, on_result)?;
    if decoding.parallel() && decoding.check_sequential {
        let t = Instant::now();
        session = check_sequential(run, session, cfg, &mut results, &answered_tokens)?;
        timings.check_ms = Some(ms(t));
    }
    if run.exec.closed_book {
        closed_book_pass(run, &mut session, &mut results)?;
    }
    Ok((results, session))
}

/// Checks, before any decoding, that `reference` measures this plan: every
/// target is in it, and its forced text (the reference's scaffold, then the
/// expected lines) tokenizes here to the reference's tokens.
pub fn check_reference(model: &Model, plan: &Plan, reference: &Reference) -> Result<(), Mismatch> {
    for target in &plan.targets {
        let (r, _) = reference.target(&target.name)?;
        let text = ForcedText::new(model, target, r.scaffold.clone());
        if text.tokens.iter().map(|t| t.0).ne(r.tokens.iter().copied()) {
            return Err(Mismatch::Tokens(target.name.clone()));
        }
        let ours = text.lines.iter().filter(|l| l.is_some()).count();
        if ours != r.scored {
            return Err(Mismatch::Scored { name: target.name.clone(), theirs: r.scored, ours });
        }
    }
    Ok(())
}

/// With thinking on, where the template shows its reasoning markers: close
/// the reasoning when its budget is spent, so the answer follows.
fn span_budget(model: &Model, plan: &Plan) -> Option<crate::engine::session::SpanBudget> {
    let (budget, m) = (plan.think_budget?, plan.reasoning_markers.as_ref()?);
    Some(crate::engine::session::SpanBudget {
        budget,
        open: m.open.to_string(),
        close_text: m.close.to_string(),
        close: model.tokenize_rest(&m.closing),
        opened_in_prompt: m.opened_in_prompt,
    })
}

/// Loads the evaluated prefix from the prefix cache, else evaluates it (and
/// saves it there).
pub(super) fn load_or_prefill(run: &Run, session: &mut Session, timings: &mut Timings) -> Result<()> {
    let prefix = &run.plan.prefix_tokens;
    if let Some((cache, key)) = &run.exec.prefix_cache {
        let t = Instant::now();
        match cache.load(session, key, prefix)? {
            Lookup::Loaded => {
                timings.prefill_ms = ms(t);
                timings.prefix_source = "cache".into();
                return Ok(());
            }
            Lookup::Missing => {}
            Lookup::Corrupt(why) => run.exec.notes.note(&format!("note: {why}")),
        }
    }
    let bar = run.bar(prefix.len(), "prefill", Unit::Tokens);
    let t = Instant::now();
    session.prefill(prefix, |done| bar.set_position(done as u64))?;
    timings.prefill_ms = ms(t);
    timings.prefill_tokens = prefix.len();
    drop(bar);
    if let Some((cache, key)) = &run.exec.prefix_cache {
        let t = Instant::now();
        // A cache that cannot be written costs the next run time, not this run.
        match cache.save(session, key, prefix) {
            Ok(()) => timings.cache_save_ms = Some(ms(t)),
            Err(e) => run.exec.notes.note(&format!("note: {e:#}")),
        }
    }
    Ok(())
}

/// Every answer at once, as parallel sequences over the shared prefix.
fn answer_in_parallel(run: &Run, session: &mut Session, timings: &mut Timings) -> Result<Vec<Option<Generation>>> {
    let plan = run.plan;
    let bar = run.bar(plan.targets.len(), "answers", Unit::Questions);
    let t = Instant::now();
    let mut answered = vec![None; plan.targets.len()];
    let file: Vec<i32> = plan.prefix_tokens.iter().map(|t| t.0).collect();
    let questions: Vec<Vec<i32>> = plan.queries.iter().map(|q| q.iter().map(|t| t.0).collect()).collect();
    let stats = session.generate_parallel(
        &plan.queries,
        run.exec.decoding.slots,
        run.limit(),
        |i, text| run.enough(&plan.targets[i], text),
        |i| run.drafter(&plan.targets[i], &file, &questions[i]),
        |i, g| {
            bar.inc(1);
            answered[i] = Some(g);
            Ok(())
        },
    )?;
    *timings.generation_ms.get_or_insert(0.0) += ms(t);
    timings.decode_steps.get_or_insert_with(Default::default).merge(&stats);
    drop(bar);
    Ok(answered)
}

/// Per target: the answer (generated here when sequential), the forced pass
/// and the score. Returns the results and the answers' tokens.
fn per_target(
    run: &Run,
    session: &mut Session,
    answers: &mut [Option<Generation>],
    timings: &mut Timings,
    saved: &mut Option<Vec<(RefTarget, Vec<TopK>)>>,
    on_result: &mut impl FnMut(&TargetResult),
) -> Result<(Vec<TargetResult>, Vec<Vec<Token>>)> {
    let (plan, decoding) = (run.plan, run.exec.decoding);
    let sequential = !decoding.parallel() && !decoding.forced_only;
    let bar = run.bar(plan.targets.len(), "queries", Unit::Questions);
    let mut results = Vec::with_capacity(plan.targets.len());
    let mut answered_tokens = Vec::new();
    let mut sequential_ms = 0.0;
    let file: Vec<i32> = plan.prefix_tokens.iter().map(|t| t.0).collect();
    for ((target, query), answer) in plan.targets.iter().zip(&plan.queries).zip(answers.iter_mut()) {
        if sequential {
            let t = Instant::now();
            *answer = Some(answer_drafted(run, session, target, query, &file, timings)?);
            sequential_ms += ms(t);
        }
        let undrafted = match (&answer, decoding.check_draft) {
            (Some(g), true) => Some(check_undrafted(run, session, target, query, &g.tokens, timings)?),
            _ => None,
        };
        let answer = answer.take();
        if let Some(g) = &answer {
            timings.query_ms.push(g.ms);
            timings.generated_tokens += g.tokens.len();
        }
        let mut forced = None;
        if !decoding.no_forced {
            let t = Instant::now();
            match decoding.parallel() {
                true => session.fork_prefix(1)?,
                false => session.restore()?,
            }
            let greedy_text = answer.as_ref().map(|g| g.text.as_str());
            let (f, kept, reference_ms) = forced_pass(run, session, target, query, greedy_text)?;
            forced = Some(f);
            if run.exec.save_top_k.is_some() || run.exec.reference.is_some() {
                *timings.reference_ms.get_or_insert(0.0) += reference_ms;
            }
            if let (Some(all), Some(kept)) = (saved.as_mut(), kept) {
                all.push(kept);
            }
            timings.forced_ms.push(ms(t));
        }
        // No answer (`--forced-only`): nothing generated, nothing scored.
        let mut r = match &answer {
            Some(g) => score_answer(run, target, &g.text, &g.tokens),
            None => TargetResult::unanswered(target),
        };
        r.generated_tokens = answer.as_ref().map(|g| g.tokens.len());
        r.invalid_utf8 = answer.as_ref().is_some_and(|g| g.invalid_utf8);
        r.forced = forced;
        r.draft = answer.as_ref().and_then(|g| g.draft.clone());
        r.undrafted = undrafted;
        if let Some(g) = answer {
            answered_tokens.push(g.tokens);
        }
        on_result(&r);
        bar.inc(1);
        results.push(r);
    }
    drop(bar);
    if sequential {
        *timings.generation_ms.get_or_insert(0.0) += sequential_ms;
        timings.decode_steps.get_or_insert_with(Default::default).merge(&std::mem::take(&mut session.steps));
    }
    Ok((results, answered_tokens))
}

/// One sequential answer from the restored prefix, with drafts as the run
/// decodes (their counts in [`Generation::draft`]); `file` is the prefix's
/// tokens as ids.
fn answer_drafted(
    run: &Run,
    session: &mut Session,
    target: &Target,
    query: &[Token],
    file: &[i32],
    timings: &mut Timings,
) -> Result<Generation> {
    let t = Instant::now();
    session.restore()?;
    timings.restore_ms.push(ms(t));
    let question: Vec<i32> = query.iter().map(|t| t.0).collect();
    let mut drafter = run.drafter(target, file, &question);
    let mut g = session.generate_drafted(query, run.limit(), |text| run.enough(target, text), drafter.as_mut())?;
    g.draft = drafter.map(|d| d.stats);
    Ok(g)
}

/// `--check-draft`: the answer again without drafts, compared with the
/// drafted `tokens`; its time is the run's check time, and its steps are
/// not the run's answers'.
fn check_undrafted(
    run: &Run,
    session: &mut Session,
    target: &Target,
    query: &[Token],
    tokens: &[Token],
    timings: &mut Timings,
) -> Result<SequentialCheck> {
    let t = Instant::now();
    let steps = std::mem::take(&mut session.steps);
    let check = answer_again(run, session, target, query, tokens);
    session.steps = steps;
    *timings.check_ms.get_or_insert(0.0) += ms(t);
    check
}

/// Scores a generated answer: its reasoning is split off, recorded with the
/// number of generated `tokens` that start before the answer, and not scored.
fn score_answer(run: &Run, target: &Target, text: &str, tokens: &[Token]) -> TargetResult {
    let split = reasoning::split(text);
    let s = score::score_raw(split.answer, &target.header, &target.expected, &target.extra_window, &target.classes, run.opts);
    let mut r = TargetResult::new(target, split.answer.to_string(), s);
    let answer_at = split.answer_offset(text);
    if let Some(reasoning) = split.reasoning {
        // Where each token's text starts in the answer, as generation wrote
        // it (a marker's control tokens count).
        let markers = run.plan.reasoning_markers.as_ref().map(|m| m.texts()).unwrap_or_default();
        let starts = run.model.answer_piece_lengths(tokens, &markers).into_iter().scan(0, |at, len| {
            let start = *at;
            *at += len;
            Some(start)
        });
        r.reasoning_tokens = Some(starts.take_while(|&s| s < answer_at).count());
        r.reasoning = Some(reasoning);
    }
    r
}

/// Answers every question again one at a time, in a context like a
/// sequential run's, from the same prefix state (moved over, not evaluated
/// again), and records per target whether and where the answers part.
/// Returns the sequential session, which the later passes use.
fn check_sequential<'m>(
    run: &Run<'m>,
    mut session: Session<'m>,
    cfg: &ContextConfig,
    results: &mut [TargetResult],
    parallel_tokens: &[Vec<Token>],
) -> Result<Session<'m>> {
    let plan = run.plan;
    let snapshot = session.take_snapshot().context("no prefix snapshot to check against")?;
    drop(session);
    let mut seq_cfg = cfg.clone();
    (seq_cfg.n_ctx, seq_cfg.n_seq, seq_cfg.kv_unified) = (plan.n_ctx, 1, false);
    if run.exec.decoding.swa_full {
        seq_cfg.swa_full = false;
    }
    let mut session = Session::new(run.model, &seq_cfg)?;
    session.set_restore_mode(run.exec.decoding.restore);
    session.set_snapshot(snapshot)?;
    let bar = run.bar(plan.targets.len(), "check", Unit::Questions);
    for (((target, query), r), parallel) in plan.targets.iter().zip(&plan.queries).zip(results.iter_mut()).zip(parallel_tokens) {
        r.sequential = Some(answer_again(run, &mut session, target, query, parallel)?);
        bar.inc(1);
    }
    drop(bar);
    Ok(session)
}

/// Answers `target` again one token per step, from the restored prefix,
/// and says whether and where that answer parts from `other` (a parallel
/// or a drafted answer), and how close the call was there: the gap between
/// the two best logits, from one batched pass over the answer that goes on
/// (one may be the other's start) up to that token.
fn answer_again(run: &Run, session: &mut Session, target: &Target, query: &[Token], other: &[Token]) -> Result<SequentialCheck> {
    session.restore()?;
    let g = session.generate_with(query, run.limit(), |text| run.enough(target, text))?;
    let s = score_whole(target, &g.text, run.opts);
    let common = g.tokens.iter().zip(other).take_while(|(a, b)| a == b).count();
    let identical = g.tokens == other;
    let mut parting_gap = None;
    if !identical {
        let longer = if common < g.tokens.len() { &g.tokens[..] } else { other };
        if common < longer.len() {
            session.restore()?;
            let readings = session.force(query, &longer[..=common])?;
            parting_gap = readings.get(common).map(|r| r.1);
        }
    }
    Ok(SequentialCheck {
        identical,
        common_tokens: common,
        sequential_tokens: g.tokens.len(),
        matched: s.matched,
        pass: s.pass,
        parting_gap,
        response: (!identical).then_some(g.text),
    })
}

/// Asks every question again with nothing before it in the context, and
/// records what the model recalls without the file.
/// An answer generated in full (its reasoning, if any, left out) scored
/// against `target`: a check's or a closed-book pass's answer.
fn score_whole(target: &Target, text: &str, opts: &score::ScoreOptions) -> score::Score {
    let answer = reasoning::split(text).answer;
    score::score_raw(answer, &target.header, &target.expected, &target.extra_window, &target.classes, opts)
}

fn closed_book_pass(run: &Run, session: &mut Session, results: &mut [TargetResult]) -> Result<()> {
    let (plan, opts) = (run.plan, run.opts);
    let bar = run.bar(plan.targets.len(), "closed", Unit::Questions);
    for (target, r) in plan.targets.iter().zip(results.iter_mut()) {
        let prompt = plan.frame.closed_book_prompt(target, opts.lines, opts.skip_blank);
        let tokens = run.model.tokenize_prefix(&prompt);
        if let Some(with_file) = r.forced.as_mut() {
            // The same forced text with no file before it: what the context adds.
            let text = ForcedText::new(run.model, target, with_file.scaffold.clone());
            session.start_empty()?;
            let readings = session.force(&tokens, &text.tokens)?;
            let without = Forced::from_readings(&text.readings(readings), target.expected.len());
            with_file.context_gain = Some(ContextGain::between(with_file, &without));
        }
        // A forced-only run generates no answer, with the file or without.
        let Some(with_file) = &r.score else {
            bar.inc(1);
            continue;
        };
        session.start_empty()?;
        let g = session.generate(&tokens, plan.generation_limit(), |text| run.enough(target, text))?;
        let s = score_whole(target, &g.text, opts);
        r.context_matched = Some(with_file.matched as i64 - s.matched as i64);
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
    drop(bar);
    Ok(())
}

/// The text a forced pass feeds after a question: the scaffold (a code-fence
/// line, or nothing), then the expected lines; only tokens that start after
/// the scaffold are scored.
struct ForcedText {
    scaffold: String,
    tokens: Vec<Token>,
    /// Per token: the 0-based expected line it starts on, `None` in the scaffold.
    lines: Vec<Option<usize>>,
}

impl ForcedText {
    fn new(model: &Model, target: &Target, scaffold: String) -> ForcedText {
        let body = prompt::forced_body(target);
        let tokens = model.tokenize_plain(&format!("{scaffold}{body}"));
        let body_bytes = body.as_bytes();
        let lines = token_starts(model, &tokens)
            .into_iter()
            .map(|start| {
                let at = start.checked_sub(scaffold.len())?.min(body_bytes.len());
                Some(body_bytes[..at].iter().filter(|&&b| b == b'\n').count())
            })
            .collect();
        ForcedText { scaffold, tokens, lines }
    }

    /// The scored readings of a forced pass over [`ForcedText::tokens`].
    fn readings(&self, readings: Vec<(Token, f32, f32)>) -> Vec<TokenReading> {
        self.tokens
            .iter()
            .zip(&self.lines)
            .zip(readings)
            .filter_map(|((tok, line), (top1, gap, logprob))| {
                Some(TokenReading { token: tok.0, top1: top1.0, logprob, top_gap: gap, line: (*line)? })
            })
            .collect()
    }
}

/// Feeds the target's expected lines after its question (behind the scaffold
/// a chat model's own answer opened with, or the reference's) and reads how
/// the model rated them; with a reference, also how far its distributions
/// are from the reference's, and when saving one, its own top K per token.
/// A forced pass's metrics, the stored reference target with this run's
/// top tokens at each forced position (when a reference is read or saved),
/// and its milliseconds.
type ForcedPass = (Forced, Option<(RefTarget, Vec<TopK>)>, f64);

fn forced_pass(run: &Run, session: &mut Session, target: &Target, query: &[Token], greedy_answer: Option<&str>) -> Result<ForcedPass> {
    let stored = match run.exec.reference {
        Some(r) => Some(r.target(&target.name)?),
        None => None,
    };
    let scaffold = match stored {
        Some((r, _)) => r.scaffold.clone(),
        None => prompt::forced_scaffold(run.plan.frame.kind, greedy_answer),
    };
    let text = ForcedText::new(run.model, target, scaffold);
    let mut reader = Reader::default();
    let (mut kept, mut compared) = (Vec::new(), Vec::new());
    let mut scored_index = 0usize;
    let mut reference_ms = 0.0;
    let mut unusable = None;
    let readings = session.force_with(query, &text.tokens, |i, logits| {
        if text.lines[i].is_none() {
            return;
        }
        if unusable.is_none() {
            unusable = crate::decode::logits::first_unusable(logits).map(|(id, v)| (scored_index, id, v));
        }
        let t = Instant::now();
        // The logits at forced position i predict the forced token i.
        let forced = text.tokens[i].0 as u32;
        if let Some(k) = run.exec.save_top_k {
            kept.push(reader.top_k(logits, k, forced));
        }
        if let Some(entry) = stored.and_then(|(_, e)| e.get(scored_index)) {
            compared.push(reader.compare(entry, logits, forced));
        }
        scored_index += 1;
        reference_ms += ms(t);
    })?;
    if let Some((at, id, v)) = unusable {
        bail!(
            "target `{}`: the model's logits at forced token {at} are not finite (token {id}: {v}), so no \
             log-probability or KL divergence can be computed; the model file, the build or the backend is broken",
            target.name
        );
    }
    let scored = text.readings(readings);
    let mut forced = Forced::from_readings(&scored, target.expected.len());
    forced.scaffold = text.scaffold.clone();
    if stored.is_some() {
        let lines: Vec<usize> = scored.iter().map(|r| r.line).collect();
        forced.kld = Some(Kld::of(&compared, &lines, target.expected.len()));
    }
    let kept = run.exec.save_top_k.map(|_| {
        let r = RefTarget {
            name: target.name.clone(),
            scaffold: text.scaffold,
            tokens: text.tokens.iter().map(|t| t.0).collect(),
            scored: kept.len(),
        };
        (r, kept)
    });
    Ok((forced, kept, reference_ms))
}
