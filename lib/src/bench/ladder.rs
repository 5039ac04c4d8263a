//! The length ladder (`bench --lengths`): recall at several context lengths
//! from one evaluation of the file.
//!
//! Every window starts at the same line, so each is a prefix of the next and
//! the file is evaluated once, from the shortest window to the longest. At
//! the point where a window's tokens and the next window's part (the end of
//! the kept text and the frame after it), the state is kept as a
//! [`Checkpoint`]; the window is finished, snapshot and asked its questions
//! (exactly as a plain run of that window asks them), then the state is cut
//! back to the checkpoint and the evaluation goes on into the next window.
//! Each window is planned as a plain run with that range of lines kept
//! (`crop_lines`), so its targets, questions and prefix tokens are the ones
//! such a run has. docs/METHOD.md §8 (Length ladder).

use super::decoding::Decoding;
use super::execute::{ExecOptions, Executed, Run, answer, new_session};
use super::plan::{self, Plan, PlanOptions, token_starts};
use crate::corpus::{Corpus, Source};
use crate::engine::model::Model;
use crate::engine::prefix_cache::{Lookup, PrefixCache};
use crate::engine::session::{Checkpoint, Session};
use crate::record::run::{RungRecord, TargetResult, Timings};
use crate::score::ScoreOptions;
use crate::settings::ContextConfig;
use crate::settings::{Explain, Names, Setting};
use crate::support::progress::Notes;
use crate::support::progress::ms;
use crate::targets::crop::{CropMode, LineRange};
use crate::targets::{self, TooFewTargets};
use anyhow::Result;
use std::time::Instant;

/// The shortest length a ladder may ask for, in tokens.
pub(crate) const MIN_LENGTH: usize = 64;
/// The longest, in tokens (far above any model's context).
pub(crate) const MAX_LENGTH: usize = 16 << 20;
/// The most lengths one ladder may have.
pub(crate) const MAX_RUNGS: usize = 64;
/// The shortest rung of an `auto` ladder, in tokens.
const AUTO_FIRST: usize = 1024;

/// The pass rate the effective length keeps at every length up to it, when
/// none is given.
pub const DEFAULT_EFFECTIVE_AT: f64 = 0.5;

/// The lengths asked for, as prefix tokens (the kept file with the frame
/// around it: everything before a question).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lengths {
    /// Powers of two from 1K up to what fits, and what fits.
    Auto,
    /// These lengths, ascending and distinct.
    List(Vec<usize>),
}

impl std::str::FromStr for Lengths {
    type Err = String;

    /// `auto`, or sizes separated by commas: `2k,4k,8192` (`k` = 1024).
    fn from_str(s: &str) -> Result<Lengths, String> {
        if s.trim().eq_ignore_ascii_case("auto") {
            return Ok(Lengths::Auto);
        }
        let mut out = Vec::new();
        for part in s.split(',') {
            let p = part.trim();
            if p.is_empty() {
                return Err("lengths are separated by commas; one of them is empty".into());
            }
            let (digits, scale) = match p.strip_suffix(['k', 'K']) {
                Some(d) => (d, 1024),
                None => (p, 1),
            };
            let n: usize = digits
                .parse()
                .ok()
                .and_then(|n: usize| n.checked_mul(scale))
                .ok_or_else(|| format!("`{p}` is not a length in tokens (e.g. 4096 or 4k)"))?;
            if !(MIN_LENGTH..=MAX_LENGTH).contains(&n) {
                return Err(format!("{p} is not between {MIN_LENGTH} and {MAX_LENGTH} tokens"));
            }
            if out.contains(&n) {
                return Err(format!("{p} is given twice"));
            }
            out.push(n);
        }
        if out.len() > MAX_RUNGS {
            return Err(format!("{} lengths; at most {MAX_RUNGS}", out.len()));
        }
        out.sort_unstable();
        Ok(Lengths::List(out))
    }
}

pub use crate::record::run::length_label as label;

/// A ladder that cannot be planned; the messages name no flag.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LadderError {
    #[error(
        "the {} window ({prefix} tokens) holds {found} eligible function(s), fewer than the {wanted} asked; \
         the shortest length that holds {wanted} is {shortest} tokens",
        label(*.length)
    )]
    TooShort { length: usize, prefix: usize, found: usize, wanted: usize, shortest: usize },
    #[error("the kept lines hold {found} eligible function(s), fewer than the {wanted} asked at any length")]
    TooFewAnywhere { found: usize, wanted: usize },
}

/// One length of the ladder, planned as a plain run of its window.
pub struct Rung {
    /// The length asked for.
    pub length: usize,
    pub plan: Plan,
}

/// The planned ladder: its rungs, shortest first, all sharing their first
/// line and the context of the longest.
pub struct Ladder {
    pub rungs: Vec<Rung>,
    /// Why the ladder stops before the lengths asked for (the corpus or the
    /// context ends), when it does.
    pub stopped: Option<String>,
}

impl Ladder {
    pub fn longest(&self) -> &Plan {
        &self.rungs.last().expect("a ladder has a rung").plan
    }
}

/// Plans a ladder of `lengths` for `model` on `src` with the options of a
/// plain run: the crop mode chooses the longest window (capped at the
/// longest length), and every shorter window keeps the longest run of whole
/// lines from its first line whose prefix fits its length.
pub fn plan_ladder(model: &Model, src: &Source, o: &PlanOptions, lengths: &Lengths, notes: &dyn Notes) -> Result<Ladder> {
    let mut longest_opts = o.clone();
    // The crop mode chooses the longest window under the longest length; a
    // range given by hand, or the whole file, is the longest window itself.
    if let Lengths::List(l) = lengths
        && o.target.crop_lines.is_none()
        && o.crop != CropMode::None
    {
        let top = *l.last().expect("parsed lengths are not empty");
        longest_opts.max_prefix_tokens = Some(o.max_prefix_tokens.map_or(top, |m| m.min(top)));
    }
    let longest = plan::plan(model, src, &longest_opts, notes)?;
    let corpus = &src.corpus;
    let first = longest.crop.first_line - 1;
    let last_max = longest.crop.last_line - 1;
    let est = Estimate::new(model, src, &longest);
    let topts = o.target.options();
    let shortest_that_works = || {
        let mut ends: Vec<usize> =
            targets::eligible(corpus, &src.parsed, first, last_max, &topts).iter().map(|t| t.last_expected_line - 1).collect();
        ends.sort_unstable();
        ends.get(topts.count.max(1) - 1).map(|&e| est.tokens(e))
    };
    let asked = asked_lengths(lengths, longest.prefix_tokens.len(), shortest_that_works);

    let mut rungs: Vec<Rung> = Vec::new();
    let mut dropped = Vec::new();
    let (mut seen_last, mut reached_top) = (None, false);
    for &length in &asked {
        if reached_top {
            dropped.push(length);
            continue;
        }
        let mut last = est.last_within(first, last_max, length);
        let plan = loop {
            let Some(l) = last else {
                let found = 0;
                return Err(too_short(length, est.tokens(first), found, &topts, shortest_that_works()));
            };
            let p = match rung_plan(model, src, o, &longest, first, l, notes) {
                Ok(p) => p,
                Err(e) => match e.downcast::<TooFewTargets>() {
                    Ok(few) if rungs.is_empty() => {
                        return Err(too_short(length, est.tokens(l), few.found, &topts, shortest_that_works()));
                    }
                    Ok(few) => return Err(few.into()),
                    Err(e) => return Err(e),
                },
            };
            // The estimate came from the longest window's tokens; a boundary
            // that tokenizes differently on its own can cost a token or two.
            if p.prefix_tokens.len() > length && l > first {
                last = Some(l - 1);
                continue;
            }
            break p;
        };
        let l = plan.crop.last_line - 1;
        if seen_last == Some(l) {
            dropped.push(length);
            continue;
        }
        seen_last = Some(l);
        reached_top = l == last_max;
        rungs.push(Rung { length, plan });
    }
    if rungs.is_empty() {
        let found = targets::eligible(corpus, &src.parsed, first, last_max, &topts).len();
        return Err(LadderError::TooFewAnywhere { found, wanted: topts.count }.into());
    }
    share_one_context(&mut rungs);
    let whole_corpus = last_max + 1 == corpus.line_count();
    let short = top_cut_short(model, corpus, rungs.last().expect("not empty"), last_max, whole_corpus);
    let bound = window_bound(o, &longest, whole_corpus);
    let stopped = stop_note(&rungs, &dropped, short, &bound);
    Ok(Ladder { rungs, stopped })
}

/// What bounded the longest window, for the ladder's stop note: the corpus's
/// end, the lines kept by hand, the cap on the kept prefix, or else the context.
fn window_bound(o: &PlanOptions, longest: &Plan, whole_corpus: bool) -> String {
    if whole_corpus {
        "the end of the corpus".to_string()
    } else if let Some(r) = o.target.crop_lines {
        format!("the end of the kept lines {}..{}", r.first, r.last)
    } else if let Some(cap) = o.max_prefix_tokens.filter(|&cap| longest.prefix_tokens.len() + 64 >= cap) {
        // The cap keeps whole lines, so a window it bounded ends within a
        // line's tokens of it (64 is more than any line of the corpora here).
        format!("the cap of {cap} tokens on the kept prefix")
    } else {
        format!("what fits the context of {} tokens with the answer budget", longest.n_ctx)
    }
}

/// One context serves every window: the top window's plan (the one that
/// creates the context) is sized for the largest needs of any window, since a
/// shorter window's questions or forced text may be longer.
fn share_one_context(rungs: &mut [Rung]) {
    let n_ctx = rungs.iter().map(|r| r.plan.n_ctx).max().expect("not empty");
    let per_sequence = rungs.iter().map(|r| r.plan.per_sequence).max().expect("not empty");
    let top = &mut rungs.last_mut().expect("not empty").plan;
    (top.n_ctx, top.per_sequence) = (n_ctx.max(top.n_ctx), per_sequence);
}

/// Whether the top window stops short of its length: it holds the whole
/// longest window and the next line (if any) would still have fitted.
fn top_cut_short(model: &Model, corpus: &Corpus, top: &Rung, last_max: usize, whole_corpus: bool) -> bool {
    let top_tokens = top.plan.prefix_tokens.len();
    top.plan.crop.last_line == last_max + 1
        && match whole_corpus {
            true => top_tokens < top.length,
            false => top_tokens + model.tokenize_plain(corpus.line(last_max + 1)).len() <= top.length,
        }
}

/// The lengths of the ladder: those asked, or for `auto` the powers of two
/// from 1K (or from the shortest length that holds COUNT) below `fits`, and
/// `fits`.
fn asked_lengths(lengths: &Lengths, fits: usize, shortest_that_works: impl Fn() -> Option<usize>) -> Vec<usize> {
    match lengths {
        Lengths::List(l) => l.clone(),
        Lengths::Auto => {
            let start = shortest_that_works().unwrap_or(AUTO_FIRST).max(AUTO_FIRST);
            let mut l: Vec<usize> = (0..).map(|k| AUTO_FIRST << k).skip_while(|&n| n < start).take_while(|&n| n < fits).collect();
            l.push(fits);
            l
        }
    }
}

/// Why the ladder stops before the lengths asked for, when it does.
fn stop_note(rungs: &[Rung], dropped: &[usize], short: bool, why: &str) -> Option<String> {
    let top = rungs.last()?;
    if !short && dropped.is_empty() {
        return None;
    }
    let mut note = format!("the ladder stops at {} tokens ({why})", top.plan.prefix_tokens.len());
    if !dropped.is_empty() {
        let d: Vec<String> = dropped.iter().map(|&n| label(n)).collect();
        note.push_str(&format!("; {} dropped", d.join(", ")));
    }
    Some(note)
}

fn too_short(length: usize, prefix: usize, found: usize, topts: &targets::TargetOptions, shortest: Option<usize>) -> anyhow::Error {
    match shortest {
        Some(shortest) => LadderError::TooShort { length, prefix, found, wanted: topts.count, shortest }.into(),
        None => LadderError::TooFewAnywhere { found, wanted: topts.count }.into(),
    }
}

/// The plan of the window of 0-based lines `first..=last`: a plain run with
/// those lines kept.
fn rung_plan(model: &Model, src: &Source, o: &PlanOptions, longest: &Plan, first: usize, last: usize, notes: &dyn Notes) -> Result<Plan> {
    let mut ro = o.clone();
    ro.target.crop_lines = Some(LineRange { first: first + 1, last: last + 1 });
    ro.max_prefix_tokens = None;
    let mut p = plan::plan(model, src, &ro, notes)?;
    if last == longest.crop.last_line - 1 {
        // The longest window is the one the crop mode chose.
        p.crop.mode = longest.crop.mode;
    }
    Ok(p)
}

/// Prefix tokens of a window, estimated from the longest window's tokens:
/// the tokens that start before the window's last line ends, plus the
/// frame after the kept text.
struct Estimate<'a> {
    src: &'a Source,
    /// Byte offset in the longest prefix where each of its tokens starts.
    starts: Vec<usize>,
    /// Where the kept text starts in the prefix, and its first line's offset.
    kept_offset: usize,
    kept_start: usize,
    /// Tokens after the kept text (the frame's tail).
    tail: usize,
}

impl<'a> Estimate<'a> {
    fn new(model: &Model, src: &'a Source, longest: &Plan) -> Estimate<'a> {
        let starts = token_starts(model, &longest.prefix_tokens);
        let kept_start = src.corpus.line_start(longest.crop.first_line - 1);
        let kept_offset = longest.frame.kept_offset();
        let kept_end = kept_offset + src.corpus.line_end(longest.crop.last_line - 1) - kept_start;
        let tail = starts.len() - starts.partition_point(|&s| s < kept_end);
        Estimate { src, starts, kept_offset, kept_start, tail }
    }

    /// Estimated prefix tokens of the window that ends with 0-based line `last`.
    fn tokens(&self, last: usize) -> usize {
        let end = self.kept_offset + self.src.corpus.line_end(last) - self.kept_start;
        self.starts.partition_point(|&s| s < end) + self.tail
    }

    /// The last line of the longest window from `first` whose estimate fits
    /// `length`; `None` when not even the first line does.
    fn last_within(&self, first: usize, last_max: usize, length: usize) -> Option<usize> {
        let n = (first..=last_max).collect::<Vec<_>>().partition_point(|&l| self.tokens(l) <= length);
        (n > 0).then(|| first + n - 1)
    }
}

/// What a ladder run measured: the results of every window (each tagged
/// with its length), the run's timings, and per window its prefill.
pub struct LadderExecuted {
    pub executed: Executed,
    pub rungs: Vec<RungRecord>,
}

/// Evaluates the ladder's windows as one growing prefix and answers each
/// window's questions at its end (see the module's notes). `cfg` is the
/// longest window's context. With a prefix cache, each window's state is
/// saved under `keys`; when every window is there, each is loaded instead.
/// `on_rung` runs before a window's answers, `on_result` after each.
#[allow(clippy::too_many_arguments)]
pub fn execute_ladder(
    model: &Model,
    ladder: &Ladder,
    cfg: &ContextConfig,
    decoding: &Decoding,
    opts: &ScoreOptions,
    exec: &ExecOptions,
    cache: Option<(&PrefixCache, &[String])>,
    mut on_rung: impl FnMut(&Rung),
    mut on_result: impl FnMut(&TargetResult),
) -> Result<LadderExecuted> {
    let mut session = new_session(model, cfg, decoding)?;
    let mut timings = Timings { prefix_source: "prefill".into(), ..Timings::default() };
    let all_cached = cache.is_some_and(|(c, keys)| keys.iter().all(|k| c.contains(k)));
    let mut results = Vec::new();
    let mut records = Vec::new();
    let mut checkpoint: Option<Checkpoint> = None;
    for (i, rung) in ladder.rungs.iter().enumerate() {
        let run = Run { model, plan: &rung.plan, opts, exec };
        let tokens = &rung.plan.prefix_tokens;
        let next = ladder.rungs.get(i + 1).map(|n| common_prefix(tokens, &n.plan.prefix_tokens));
        let key = cache.map(|(c, keys)| (c, keys[i].as_str()));
        let t = Instant::now();
        let (resumed_at, source) = match all_cached {
            true => (0, load_window(&run, &mut session, key.expect("cached"))?),
            false => (extend_window(&run, &mut session, &mut checkpoint, next)?, "prefill"),
        };
        let prefill_ms = ms(t);
        let prefill_tokens = if source == "prefill" { tokens.len() - resumed_at } else { 0 };
        timings.prefill_ms += prefill_ms;
        timings.prefill_tokens += prefill_tokens;
        if source == "cache" {
            timings.prefix_source = "cache".into();
        } else if let (Some((c, k)), false) = (key, all_cached) {
            let t = Instant::now();
            match c.save(&session, k, tokens) {
                Ok(()) => *timings.cache_save_ms.get_or_insert(0.0) += ms(t),
                Err(e) => run.exec.notes.note(&format!("note: {e:#}")),
            }
        }
        on_rung(rung);
        let (mut rung_results, s) = answer(&run, session, cfg, &mut timings, &mut None, &mut on_result)?;
        session = s;
        for r in &mut rung_results {
            r.length = Some(rung.length);
        }
        records.push(RungRecord {
            length: rung.length,
            prefix_tokens: tokens.len(),
            crop: rung.plan.crop.clone(),
            resumed_at,
            prefill_tokens,
            prefill_ms,
            prefix_source: source.into(),
            ..RungRecord::scored(&rung_results)
        });
        results.extend(rung_results);
    }
    Ok(LadderExecuted { executed: Executed { results, timings, saved: None }, rungs: records })
}

/// Loads a window's state from the prefix cache (each window was saved
/// whole), or evaluates it from the start when its file is unusable.
fn load_window(run: &Run, session: &mut Session, (cache, key): (&PrefixCache, &str)) -> Result<&'static str> {
    let tokens = &run.plan.prefix_tokens;
    match cache.load(session, key, tokens)? {
        Lookup::Loaded => return Ok("cache"),
        Lookup::Missing => {}
        Lookup::Corrupt(why) => run.exec.notes.note(&format!("note: {why}")),
    }
    let bar = run.bar(tokens.len(), "prefill", crate::support::progress::Unit::Tokens);
    session.prefill(tokens, |done| bar.set_position(done as u64))?;
    drop(bar);
    Ok("prefill")
}

/// Brings the session from the previous window's checkpoint (or nothing) to
/// this window's whole prefix, keeping a new checkpoint where this window
/// and the next part (`next`: their common tokens). Returns how many of
/// this window's tokens were already evaluated.
fn extend_window(run: &Run, session: &mut Session, checkpoint: &mut Option<Checkpoint>, next: Option<usize>) -> Result<usize> {
    let tokens = &run.plan.prefix_tokens;
    let resumed_at = match checkpoint.take() {
        Some(c) => {
            session.rewind(&c)?;
            c.len()
        }
        None => 0,
    };
    let bar = run.bar(tokens.len(), "prefill", crate::support::progress::Unit::Tokens);
    bar.set_position(resumed_at as u64);
    let feed = |session: &mut Session, from: usize, to: usize| -> Result<()> {
        let progress = |done: usize| bar.set_position((from + done) as u64);
        match from {
            0 => session.prefill(&tokens[..to], progress),
            _ => session.extend(&tokens[from..to], progress),
        }
    };
    // The next window shares this one's tokens up to `common`; the state is
    // kept at the last multiple of n_batch at or before it, so that the next
    // window evaluates every token after the shared chunks in the batch a
    // plain prefill of that window puts it in (on a CPU, batch shape can
    // change an f16 cache's rounding and so an answer at a near tie). That
    // costs fewer than n_batch tokens evaluated again per window. A next
    // window that shares less than one chunk (or parts before this one
    // resumed, which whole-line windows never do) starts from nothing.
    let keep = next.map(|common| common - common % session.n_batch());
    match keep {
        Some(keep) if keep >= resumed_at && keep > 0 => {
            if keep > resumed_at {
                feed(session, resumed_at, keep)?;
            }
            *checkpoint = Some(session.checkpoint()?);
            if tokens.len() > keep {
                feed(session, keep, tokens.len())?;
            }
        }
        _ => feed(session, resumed_at, tokens.len())?,
    }
    drop(bar);
    Ok(resumed_at)
}

/// How many tokens two prefixes share from the start.
fn common_prefix(a: &[crate::engine::Token], b: &[crate::engine::Token]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

impl Explain for LadderError {
    fn explain(&self, n: &dyn Names) -> String {
        match self {
            LadderError::TooShort { shortest, .. } => {
                format!("{self}; start {} at {shortest} or more, or lower {}", n.name(Setting::Lengths), n.name(Setting::Count))
            }
            LadderError::TooFewAnywhere { .. } => format!(
                "{self}; lower {}, or keep more of the corpus ({}, {})",
                n.name(Setting::Count),
                n.set(Setting::Crop, "densest"),
                n.name(Setting::CropLines)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_lengths() {
        assert_eq!("auto".parse::<Lengths>().unwrap(), Lengths::Auto);
        assert_eq!("4k,2k,8192".parse::<Lengths>().unwrap(), Lengths::List(vec![2048, 4096, 8192]));
        assert_eq!("1500".parse::<Lengths>().unwrap(), Lengths::List(vec![1500]));
        for bad in ["", "2k,,4k", "2k,2048", "x", "4m", "-1", "1", "99999999999", "2.5k"] {
            assert!(bad.parse::<Lengths>().is_err(), "{bad}");
        }
    }
}
