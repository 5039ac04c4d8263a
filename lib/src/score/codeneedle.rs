//! The codeneedle policy (docs/METHOD.md §6, "The codeneedle policy"): the
//! corrected scoring of codeneedle, the benchmark the plan's author
//! published, so that a posrecall run can be put beside its numbers.
//!
//! Its rules, as its scorer applies them:
//!
//! - The answer is cleaned its way: a leading `<think>…</think>` dropped;
//!   the text split into lines as Python's `str.splitlines` splits; with two
//!   or more lines opening with a fence (```` ``` ````, after any
//!   indentation) only what lies between the first and second, third and
//!   fourth … fences is kept (an odd last fence runs to the end), with fewer
//!   any lone fence line is dropped; blank lines at both ends are dropped.
//! - Lines compare verbatim after trailing whitespace is dropped
//!   ([`Normalize::TrimEnd`], the default), or by content with leading
//!   whitespace dropped too ([`Normalize::Trim`], its relax-indent option).
//!   Whitespace is Python's (`str.isspace`: Unicode's, and the four
//!   separators U+001C to U+001F).
//! - The answer is aligned with the window (the LINES lines, then the rest
//!   of the function's body, at most [`EXTRA_LINES`] lines) by Python
//!   difflib's matching blocks without autojunk ([`super::difflib`]), blank
//!   lines included: they keep the alignment in step, but earn nothing.
//! - **scored**: the non-blank lines of the first LINES; **matched**: those
//!   an answer line aligned with; **extra**: non-blank lines past LINES
//!   aligned with; **hallucinated**: non-blank answer lines aligned with
//!   nothing.
//! - Under the verbatim comparison, an answer line left unaligned that equals,
//!   once leading whitespace is dropped too, an expected line left unaligned
//!   is **re-indented** (each expected line pairs once, the earliest first,
//!   answer lines in order): recalled, but indented otherwise; neither
//!   hallucinated nor missing, and not matched. **missing**: scored lines
//!   neither matched nor re-indented.
//! - **pass**: at least [`super::PASS_PERCENT`] of the scored lines
//!   matched (codeneedle: `matched / scored >= 0.4` in floating point, which
//!   is exactly `100 · matched >= 40 · scored`, since a quotient equal to 2/5
//!   rounds to the same double as 0.4 and any other is further away than a
//!   rounding); no scored line, no pass.
//!
//! codeneedle counts no truncation: `truncated` is 0. Blank answer lines are
//! counted in `ignored_blank` and not shown.

use super::difflib;
use super::{Fate, LineStatus, Normalize, Score, ScoreOptions, ScoredLine};

/// How many lines of the function's body past LINES the window holds
/// (codeneedle's bonus window).
pub const EXTRA_LINES: usize = 40;

/// Python's `str.isspace` for one character.
fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

fn is_blank(line: &str) -> bool {
    line.chars().all(is_space)
}

/// Python's `str.splitlines()`: every line boundary it knows, `\r\n` as one,
/// no empty last line for a text that ends with one.
fn split_lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let ends = matches!(c, '\n' | '\r' | '\u{0b}' | '\u{0c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}' | '\u{2029}');
        if ends {
            out.push(&text[start..i]);
            let mut next = i + c.len_utf8();
            if c == '\r' && chars.peek().is_some_and(|&(_, n)| n == '\n') {
                chars.next();
                next += 1;
            }
            start = next;
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// A leading `<think>…</think>` (after leading whitespace) dropped, as
/// codeneedle drops one a server echoes back; left as is when unclosed.
fn strip_think(text: &str) -> &str {
    let t = text.trim_start_matches(is_space);
    match t.strip_prefix("<think>").and_then(|_| t.find("</think>")) {
        Some(end) => &t[end + "</think>".len()..],
        None => text,
    }
}

/// The answer's lines, cleaned as codeneedle cleans them (see the module).
fn clean(raw: &str) -> Vec<&str> {
    let lines = split_lines(strip_think(raw));
    let is_fence = |l: &&str| l.trim_start_matches(is_space).starts_with("```");
    let fences: Vec<usize> = lines.iter().enumerate().filter(|(_, l)| is_fence(l)).map(|(i, _)| i).collect();
    let mut kept: Vec<&str> = if fences.len() >= 2 {
        let mut kept = Vec::new();
        for pair in fences.chunks(2) {
            match *pair {
                [open, close] => kept.extend_from_slice(lines.get(open + 1..close).unwrap_or(&[])),
                [open] => kept.extend_from_slice(lines.get(open + 1..).unwrap_or(&[])),
                _ => {}
            }
        }
        kept
    } else {
        lines.into_iter().filter(|l| !is_fence(l)).collect()
    };
    let first = kept.iter().position(|l| !is_blank(l)).unwrap_or(kept.len());
    let last = kept.iter().rposition(|l| !is_blank(l)).map_or(first, |i| i + 1);
    kept.drain(last..);
    kept.drain(..first);
    kept
}

/// The line as this policy compares it: indentation kept unless relaxed.
fn norm(line: &str, relax: bool) -> &str {
    let end = line.trim_end_matches(is_space);
    if relax { end.trim_start_matches(is_space) } else { end }
}

/// What one answer line turned out to be.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// Aligned with a non-blank line of the first LINES.
    Matched,
    /// Aligned with a non-blank line past LINES.
    Extra,
    /// Aligned with a blank line: it keeps the alignment in step, no more.
    Blank,
    Reindented,
    Unaligned,
}

/// Scores the raw answer `raw` under the codeneedle policy (see the module):
/// `expected` are the LINES lines, `extra` the rest of the body's window.
/// `opts.normalize` is [`Normalize::TrimEnd`] or, relaxed, [`Normalize::Trim`]
/// (the options are checked before any run: `TargetSpec::validate`).
/// Also gives the fate of each of the LINES expected lines.
pub(crate) fn score_with_fates(raw: &str, expected: &[String], extra: &[String], opts: &ScoreOptions) -> (Score, Vec<Fate>) {
    let relax = opts.normalize == Normalize::Trim;
    let answer = clean(raw);
    let mut pred: Vec<&str> = answer.iter().map(|l| norm(l, relax)).collect();
    while pred.last() == Some(&"") {
        pred.pop();
    }
    let window: Vec<&str> = expected.iter().chain(extra).map(|l| norm(l, relax)).collect();
    let lines = expected.len();
    let eligible: Vec<bool> = expected.iter().chain(extra).map(|l| !is_blank(l)).collect();

    let mut matched_exp = vec![false; window.len()];
    let mut kind = vec![Kind::Unaligned; pred.len()];
    // For the diff view: the window line each aligned answer line pairs with.
    let mut pair_of = vec![None; pred.len()];
    for b in difflib::matching_blocks(&window, &pred) {
        for k in 0..b.size {
            let (e, p) = (b.a + k, b.b + k);
            matched_exp[e] = true;
            pair_of[p] = Some(e);
            kind[p] = match (eligible[e], e < lines) {
                (false, _) => Kind::Blank,
                (true, true) => Kind::Matched,
                (true, false) => Kind::Extra,
            };
        }
    }

    let reindented_exp = if relax { vec![false; window.len()] } else { pair_reindented(&window, &matched_exp, &pred, &mut kind) };

    let scored = (0..lines).filter(|&e| eligible[e]).count();
    let matched = (0..lines).filter(|&e| eligible[e] && matched_exp[e]).count();
    let missing_at: Vec<usize> = (0..lines).filter(|&e| eligible[e] && !matched_exp[e] && !reindented_exp[e]).collect();

    let mut out = Score {
        lines: Vec::with_capacity(pred.len() + missing_at.len()),
        matched,
        missing: missing_at.len(),
        truncated: 0,
        hallucinated: 0,
        extra: kind.iter().filter(|k| **k == Kind::Extra).count(),
        implied_blank: 0,
        ignored_blank: 0,
        pass: passes(matched, scored),
        unread_lines: None,
        scored: Some(scored),
        reindented: Some(kind.iter().filter(|k| **k == Kind::Reindented).count()),
        composition: None,
    };
    diff_view(&mut out, &answer, &kind, &pair_of, expected, &missing_at);
    let fates = (0..lines)
        .map(|e| match (matched_exp[e], reindented_exp[e]) {
            (true, _) => Fate::Credited,
            (false, true) => Fate::Reindented,
            (false, false) => Fate::Missing,
        })
        .collect();
    (out, fates)
}

/// Whether `matched` of `scored` lines pass: at least [`super::PASS_PERCENT`]
/// of them, and no pass without a scored line.
#[must_use]
pub fn passes(matched: usize, scored: usize) -> bool {
    scored > 0 && matched * 100 >= scored * super::PASS_PERCENT
}

/// Re-indented: each unaligned answer line, in order, against the earliest
/// still unpaired unaligned window line with the same content once leading
/// whitespace is dropped. Marks the answer lines in `kind`; returns the
/// window lines paired.
fn pair_reindented(window: &[&str], matched_exp: &[bool], pred: &[&str], kind: &mut [Kind]) -> Vec<bool> {
    use std::collections::{HashMap, VecDeque};
    let mut paired = vec![false; window.len()];
    let mut unmatched: HashMap<&str, VecDeque<usize>> = HashMap::new();
    for (e, w) in window.iter().enumerate() {
        let key = w.trim_start_matches(is_space);
        if !matched_exp[e] && !key.is_empty() {
            unmatched.entry(key).or_default().push_back(e);
        }
    }
    for (p, l) in pred.iter().enumerate() {
        if kind[p] != Kind::Unaligned {
            continue;
        }
        if let Some(e) = unmatched.get_mut(l.trim_start_matches(is_space)).and_then(VecDeque::pop_front) {
            paired[e] = true;
            kind[p] = Kind::Reindented;
        }
    }
    paired
}

/// The diff view into `out.lines`, with the hallucinated and ignored blank
/// lines counted: answer lines in order (blank ones not shown), each missing
/// window line before the first answer line aligned past it.
fn diff_view(out: &mut Score, answer: &[&str], kind: &[Kind], pair_of: &[Option<usize>], expected: &[String], missing_at: &[usize]) {
    let mut missing = missing_at.iter().peekable();
    for (p, k) in kind.iter().enumerate() {
        if let Some(e) = pair_of[p] {
            while let Some(&&m) = missing.peek().filter(|&&&m| m < e) {
                out.lines.push(ScoredLine { text: expected[m].clone(), status: LineStatus::Missing });
                missing.next();
            }
        }
        let text = answer.get(p).map_or("", |l| l.trim_end_matches(is_space));
        let status = match k {
            Kind::Matched => LineStatus::Matched,
            Kind::Extra => LineStatus::Extra,
            Kind::Reindented => LineStatus::Reindented,
            Kind::Blank => {
                out.ignored_blank += 1;
                continue;
            }
            Kind::Unaligned if is_blank(text) => {
                out.ignored_blank += 1;
                continue;
            }
            Kind::Unaligned => {
                out.hallucinated += 1;
                LineStatus::Hallucinated
            }
        };
        out.lines.push(ScoredLine { text: text.to_string(), status });
    }
    for &m in missing {
        out.lines.push(ScoredLine { text: expected[m].clone(), status: LineStatus::Missing });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::Policy;

    #[test]
    fn lines_split_and_clean_as_python_does() {
        assert_eq!(split_lines("a\r\nb\rc\u{2028}d\n"), ["a", "b", "c", "d"]);
        assert_eq!(split_lines(""), Vec::<&str>::new());
        assert_eq!(split_lines("a\n\n"), ["a", ""]);
        // Fences pair up; prose between two blocks is not kept.
        assert_eq!(clean("Sure:\n```js\nx;\n```\nand\n```\ny;\n```\n"), ["x;", "y;"]);
        // An odd last fence runs to the end; one fence alone is dropped.
        assert_eq!(clean("```\na\n```\nb\n```\nc"), ["a", "c"]);
        assert_eq!(clean("```js\n\n  a\n\n"), ["  a"]);
        assert_eq!(clean("<think>\nhm\n</think>\n\nx;"), ["x;"]);
        assert!(is_space('\u{1f}') && !'\u{1f}'.is_whitespace());
    }

    #[test]
    fn a_blank_only_window_scores_nothing_and_cannot_pass() {
        let opts = ScoreOptions {
            lines: 2,
            pass: 1,
            normalize: Normalize::TrimEnd,
            skip_blank: false,
            policy: Policy::Codeneedle,
            credit: crate::score::Credit::All,
        };
        let (s, _) = score_with_fates("\n\n", &[String::new(), "  ".into()], &[], &opts);
        assert_eq!((s.scored, s.matched, s.missing, s.pass), (Some(0), 0, 0, false));
    }
}
