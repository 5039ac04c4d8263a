//! Drafts for exact speculative decoding.
//!
//! Recall is copying: when a model recalls well, its next tokens are in the
//! file, and the ground truth says which. While an answer is generated, a
//! [`Drafter`] proposes up to K tokens that the engine evaluates in one batch
//! after the last sampled token; the longest run the model's own greedy
//! choices agree with is kept, plus the model's next token, and the cells of
//! the rest are removed. The answer is the one step-by-step greedy decoding
//! gives (up to the batch's arithmetic: docs/AGREEMENT.md).
//!
//! Sources, tried in order ([`Source`]):
//! 1. **truth**: the target's header, its expected lines and the extra
//!    window after them, in two versions: as in the file, and re-indented
//!    by the header's indentation (answers often start the function at
//!    column 0, and a whitespace token that differs would reject every
//!    line's draft). The answer's last tokens are looked up in each (the
//!    longest suffix of up to [`MAX_NGRAM`] tokens, from one token up,
//!    nearest after where that version's last match ended) and the draft is
//!    what follows in the version with the longest match.
//! 2. **file**: prompt lookup: the longest suffix of the question and answer
//!    (from [`MIN_FILE_NGRAM`] tokens up) found in the prompt (the file and
//!    the question), continued from its occurrence nearest after the last
//!    file match, else its last one.
//!
//! K adapts: it starts at [`START_K`] (at most the `--draft-max`), doubles
//! after a draft accepted whole, and after a rejection drops to the part
//! that was kept (at least 1). After [`MISSES`] drafts in a row of which
//! nothing was kept, only a strong match (a suffix of at least
//! [`STRONG_NGRAM`] tokens) is drafted from, until a draft is kept again: a
//! model that does not recall stops paying for drafts. Every rejected token
//! costs a position of the batch, which on a CPU costs about as much as
//! the position of a step (docs/PERFORMANCE.md); where no suffix is found,
//! the step has no draft at all.
//!
//! Nothing here touches llama.cpp: tokens are plain ids.

use serde::{Deserialize, Serialize};

/// The longest suffix looked up.
pub(crate) const MAX_NGRAM: usize = 8;
/// The shortest suffix looked up in the file: one token recurs too often
/// in a whole file to say where the answer is.
pub(crate) const MIN_FILE_NGRAM: usize = 2;
/// The draft length a generation starts with.
pub(crate) const START_K: usize = 8;
/// Drafts in a row with nothing kept, after which only strong matches draft.
pub(crate) const MISSES: usize = 2;
/// A suffix match this long is strong.
pub(crate) const STRONG_NGRAM: usize = 4;
/// The default and largest `--draft-max`.
pub const DEFAULT_MAX: usize = 16;
pub(crate) const LIMIT_MAX: usize = 128;

crate::settings::named_choice! {
    /// Where drafts come from.
    #[derive(Default)]
    pub enum DraftMode {
        /// Plain step-by-step greedy decoding: the reference for agreement.
        None,
        /// Prompt lookup only: n-grams of the answer found in the file.
        Lookup,
        /// The ground truth first, then prompt lookup.
        #[default]
        Truth,
    }
}

/// Which source a draft came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Truth,
    File,
}

/// Proposed and accepted tokens of one source.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceCount {
    pub proposed: usize,
    pub accepted: usize,
}

/// Drafting over one answer (run file: a target's `draft`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DraftStats {
    /// Draft tokens evaluated, and of them kept.
    pub proposed: usize,
    pub accepted: usize,
    /// Decode steps after the question (each evaluates the last sampled
    /// token and its draft, if any).
    pub steps: usize,
    pub by_source: BySource,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BySource {
    pub truth: SourceCount,
    pub file: SourceCount,
}

impl DraftStats {
    pub fn merge(&mut self, o: &DraftStats) {
        self.proposed += o.proposed;
        self.accepted += o.accepted;
        self.steps += o.steps;
        for (a, b) in [(&mut self.by_source.truth, &o.by_source.truth), (&mut self.by_source.file, &o.by_source.file)] {
            a.proposed += b.proposed;
            a.accepted += b.accepted;
        }
    }
}

/// Proposes drafts for one answer and keeps its [`DraftStats`].
/// The ground truth's texts a drafter looks answers up in (see the
/// module's notes): the header, the expected lines and the extra window,
/// as in the file, then without the header's indentation where it has one.
pub(crate) fn truth_texts(header: &str, expected: &[String], extra: &[String]) -> Vec<String> {
    let lines: Vec<&str> = header.lines().chain(expected.iter().chain(extra).map(String::as_str)).collect();
    let mut texts = vec![lines.iter().map(|l| format!("{l}\n")).collect::<String>()];
    let indent = &header[..header.len() - header.trim_start_matches([' ', '\t']).len()];
    if !indent.is_empty() {
        texts.push(lines.iter().map(|l| format!("{}\n", l.strip_prefix(indent).unwrap_or(l))).collect());
    }
    texts
}

pub(crate) struct Drafter<'a> {
    mode: DraftMode,
    max: usize,
    k: usize,
    /// The ground truth's versions (as in the file, and re-indented as
    /// answers often are), each with where its last match ended.
    truths: Vec<(Vec<i32>, usize)>,
    /// The version the last truth draft came from.
    truth_used: usize,
    /// The prompt: the file's tokens, then the question's.
    file: &'a [i32],
    question: &'a [i32],
    /// Where the last file match ended.
    file_at: usize,
    /// The last proposal's source, for [`Drafter::verified`].
    last: Option<Source>,
    /// Drafts in a row of which nothing was kept.
    misses: usize,
    pub stats: DraftStats,
}

impl<'a> Drafter<'a> {
    /// A drafter for an answer to `question` after `file`; `truths` are
    /// versions of the target's ground truth as tokens (unused in
    /// [`DraftMode::Lookup`]).
    pub fn new(mode: DraftMode, max: usize, truths: Vec<Vec<i32>>, file: &'a [i32], question: &'a [i32]) -> Drafter<'a> {
        let max = max.clamp(1, LIMIT_MAX);
        let truths = match mode {
            DraftMode::Truth => truths.into_iter().filter(|t| !t.is_empty()).map(|t| (t, 0)).collect(),
            _ => Vec::new(),
        };
        Drafter {
            mode,
            max,
            k: START_K.min(max),
            truths,
            truth_used: 0,
            file,
            question,
            file_at: 0,
            last: None,
            misses: 0,
            stats: DraftStats::default(),
        }
    }

    /// Up to `room` tokens (and at most the current K) to follow `answer`,
    /// the answer's tokens so far; empty when no source has a match.
    pub(crate) fn propose(&mut self, answer: &[i32], room: usize) -> Vec<i32> {
        self.last = None;
        let k = self.k.min(room);
        if k == 0 || self.mode == DraftMode::None {
            return Vec::new();
        }
        let min_n = |least: usize| if self.misses >= MISSES { least.max(STRONG_NGRAM) } else { least };
        // The version whose match is longest (the first of equals).
        let mut best: Option<(usize, usize, usize)> = None; // (n, version, end)
        for (v, (truth, at)) in self.truths.iter().enumerate() {
            if let Some((n, end)) = find_suffix(truth, answer, min_n(1), *at)
                && end < truth.len()
                && best.is_none_or(|(bn, _, _)| n > bn)
            {
                best = Some((n, v, end));
            }
        }
        if let Some((_, v, end)) = best {
            let (truth, at) = &mut self.truths[v];
            *at = end;
            self.truth_used = v;
            self.last = Some(Source::Truth);
            return truth[end..(end + k).min(truth.len())].to_vec();
        }
        // The history a file lookup sees: the question's tail, then the answer.
        let tail = self.question.len().saturating_sub(MAX_NGRAM);
        let history: Vec<i32> = self.question[tail..].iter().chain(answer).copied().collect();
        let prompt = Joined(self.file, self.question);
        if let Some((_, end)) = find_suffix(&prompt, &history, min_n(MIN_FILE_NGRAM), self.file_at)
            && end < prompt.len()
        {
            self.file_at = end;
            self.last = Some(Source::File);
            return (end..(end + k).min(prompt.len())).map(|i| prompt.at(i)).collect();
        }
        Vec::new()
    }

    /// Records a decode step whose draft of `proposed` tokens had its first
    /// `accepted` kept, and adapts K.
    pub fn verified(&mut self, proposed: usize, accepted: usize) {
        self.stats.steps += 1;
        if proposed == 0 {
            return;
        }
        self.stats.proposed += proposed;
        self.stats.accepted += accepted;
        let count = match self.last {
            Some(Source::Truth) => &mut self.stats.by_source.truth,
            _ => &mut self.stats.by_source.file,
        };
        count.proposed += proposed;
        count.accepted += accepted;
        match self.last {
            Some(Source::Truth) => self.truths[self.truth_used].1 += accepted,
            _ => self.file_at += accepted,
        }
        self.misses = if accepted == 0 { self.misses + 1 } else { 0 };
        self.k = if accepted == proposed && proposed == self.k {
            (self.k * 2).min(self.max)
        } else if accepted < proposed {
            accepted.max(1)
        } else {
            self.k
        };
    }

    /// The current K (for tests).
    #[cfg(test)]
    fn k(&self) -> usize {
        self.k
    }
}

/// Tokens looked up in: one slice or two joined.
trait Haystack {
    fn len(&self) -> usize;
    fn at(&self, i: usize) -> i32;
}

impl Haystack for Vec<i32> {
    fn len(&self) -> usize {
        <[i32]>::len(self)
    }
    fn at(&self, i: usize) -> i32 {
        self[i]
    }
}

struct Joined<'a>(&'a [i32], &'a [i32]);

impl Haystack for Joined<'_> {
    fn len(&self) -> usize {
        self.0.len() + self.1.len()
    }
    fn at(&self, i: usize) -> i32 {
        match i < self.0.len() {
            true => self.0[i],
            false => self.1[i - self.0.len()],
        }
    }
}

/// The longest suffix of `history` (from `min` to [`MAX_NGRAM`] tokens)
/// found in `hay`, as (its length, where it ends): the first end at or
/// after `near`, else the last one before it. `None` when no suffix of `min`
/// tokens occurs.
fn find_suffix(hay: &impl Haystack, history: &[i32], min: usize, near: usize) -> Option<(usize, usize)> {
    let longest = history.len().min(MAX_NGRAM);
    if longest < min || hay.len() < min {
        return None;
    }
    // Every end where the last `min` tokens match, with the length of the
    // match there (up to `longest`).
    let last = history[history.len() - 1];
    let mut best: Option<(usize, usize)> = None; // (n, end)
    for end in min..=hay.len() {
        if hay.at(end - 1) != last {
            continue;
        }
        let mut n = 1;
        while n < longest && n < end && hay.at(end - 1 - n) == history[history.len() - 1 - n] {
            n += 1;
        }
        if n < min {
            continue;
        }
        let better = match best {
            None => true,
            Some((bn, bend)) => n > bn || (n == bn && prefer(end, bend, near)),
        };
        if better {
            best = Some((n, end));
        }
    }
    best
}

/// Whether `a` is a better end than `b` for a match that should continue
/// at `near`: the first at or after it, else the last before it.
fn prefer(a: usize, b: usize, near: usize) -> bool {
    match (a >= near, b >= near) {
        (true, true) => a < b,
        (true, false) => true,
        (false, true) => false,
        (false, false) => a > b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_suffix_wins_and_ties_go_to_the_nearest_after() {
        let hay = vec![1, 2, 3, 9, 2, 3, 4, 1, 2, 3, 5];
        // [2, 3] ends at 3, 6 and 10; [1, 2, 3] at 3 and 10.
        assert_eq!(find_suffix(&hay, &[1, 2, 3], 1, 0), Some((3, 3)));
        assert_eq!(find_suffix(&hay, &[1, 2, 3], 1, 4), Some((3, 10)));
        assert_eq!(find_suffix(&hay, &[7, 2, 3], 1, 4), Some((2, 6)));
        // Past every end: the last one.
        assert_eq!(find_suffix(&hay, &[7, 2, 3], 1, 11), Some((2, 10)));
        assert_eq!(find_suffix(&hay, &[8], 1, 0), None);
        assert_eq!(find_suffix(&hay, &[3], 2, 0), None);
    }

    #[test]
    fn truth_drafts_continue_and_k_adapts() {
        let truth: Vec<i32> = (10..60).collect();
        let mut d = Drafter::new(DraftMode::Truth, 16, vec![truth], &[], &[]);
        assert_eq!(d.propose(&[5, 10, 11], 100), (12..20).collect::<Vec<_>>());
        d.verified(8, 8);
        assert_eq!(d.k(), 16);
        let answer: Vec<i32> = [5].into_iter().chain(10..21).collect();
        assert_eq!(d.propose(&answer, 100), (21..37).collect::<Vec<_>>());
        d.verified(16, 3);
        assert_eq!(d.k(), 3);
        d.verified(3, 0);
        assert_eq!(d.k(), 1);
        assert_eq!(d.stats.proposed, 27);
        assert_eq!(d.stats.steps, 3);
        assert_eq!(d.stats.accepted, 11);
        assert_eq!(d.stats.by_source.truth.accepted, 11);
        assert_eq!(d.stats.steps, 3);
        d.verified(1, 1);
        d.verified(2, 2);
        assert_eq!(d.k(), 4);
        // A draft cut short by the room or the truth's end leaves K as it is.
        d.verified(3, 3);
        assert_eq!(d.k(), 4);
        // The room left caps a draft.
        assert_eq!(d.propose(&answer, 2).len(), 2);
    }

    #[test]
    fn after_two_misses_only_a_strong_match_drafts() {
        let truth: Vec<i32> = (10..60).collect();
        let mut d = Drafter::new(DraftMode::Truth, 16, vec![truth], &[], &[]);
        assert!(!d.propose(&[1, 12], 100).is_empty());
        d.verified(8, 0);
        assert!(!d.propose(&[1, 12], 100).is_empty());
        d.verified(1, 0);
        // A one-token match no longer drafts; four tokens do, and a kept
        // draft ends the misses.
        assert!(d.propose(&[1, 12], 100).is_empty());
        assert_eq!(d.propose(&[1, 12, 13, 14, 15], 100), vec![16]);
        d.verified(1, 1);
        assert!(!d.propose(&[1, 12], 100).is_empty());
    }

    #[test]
    fn file_lookup_needs_two_tokens_and_none_proposes_nothing() {
        let file = [1, 2, 3, 4, 5, 6];
        let q = [7, 8];
        let mut d = Drafter::new(DraftMode::Lookup, 4, vec![vec![2, 3, 4]], &file, &q);
        assert_eq!(d.propose(&[9, 3], 10), Vec::<i32>::new());
        assert_eq!(d.propose(&[2, 3], 10), vec![4, 5, 6, 7]);
        let mut none = Drafter::new(DraftMode::None, 4, vec![vec![2, 3, 4]], &file, &q);
        assert!(none.propose(&[2, 3], 10).is_empty());
    }

    #[test]
    fn the_truth_is_also_drafted_without_the_headers_indentation() {
        let expected = vec!["    var a = 1;".to_string(), "".to_string(), "    return a;".to_string()];
        let texts = truth_texts("  function f() {", &expected, &["  }".to_string()]);
        assert_eq!(texts[0], "  function f() {\n    var a = 1;\n\n    return a;\n  }\n");
        assert_eq!(texts[1], "function f() {\n  var a = 1;\n\n  return a;\n}\n");
        assert_eq!(truth_texts("f() {", &expected, &[]).len(), 1);
    }

    #[test]
    fn the_truth_version_with_the_longest_match_drafts() {
        // As in the file, and re-indented: the answer follows the second.
        let verbatim = vec![1, 5, 5, 2, 5, 5, 3];
        let dedented = vec![1, 5, 2, 5, 3, 9];
        let mut d = Drafter::new(DraftMode::Truth, 16, vec![verbatim, dedented], &[], &[]);
        assert_eq!(d.propose(&[1, 5, 2], 100), vec![5, 3, 9]);
        d.verified(3, 3);
        assert_eq!(d.stats.by_source.truth.accepted, 3);
    }
}
