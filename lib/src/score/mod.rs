//! Response parsing and line-level scoring (docs/METHOD.md §5 Parsing
//! answers and §6 Scoring).
//!
//! [`parse_response`] turns a model's raw answer into the lines it claims
//! follow the opening brace; [`score`] aligns those lines, in order, with the
//! ground truth (the first LINES lines plus the "extra" window after them) and
//! sorts every line into one of four classes: matched, missing, hallucinated
//! and extra. Blank lines never anchor that alignment and are credited only
//! in place; a blank answer line that pairs with nothing is ignored.
//! [`score_raw`] does both in one call.
//!
//! Nothing here panics on any input: the model's answer is untrusted text.

pub mod codeneedle;
pub mod composition;
pub mod difflib;
pub mod forced;
pub mod kld;
pub mod stats;

use std::borrow::Cow;
use std::ops::Range;

crate::settings::named_choice! {
    /// How two lines are compared. The answer and the ground truth go through the
    /// same mode before they are compared; the diff view still shows raw text.
    #[derive(Default)]
    pub enum Normalize {
        /// Leading and trailing whitespace ignored (models often re-indent).
        #[default]
        Trim,
        /// Byte for byte.
        Exact,
        /// Trimmed, and every inner whitespace run counts as one space.
        Squash,
        /// Trailing whitespace ignored, indentation kept: the codeneedle
        /// policy's verbatim comparison (its default).
        TrimEnd,
    }
}

/// The share of the lines a pass takes, in percent: posrecall's default
/// PASS is this share of LINES, rounded up (8 of 20, 4 of 10), so that a
/// pass means the same at every LINES; the codeneedle policy passes at the
/// same share of its scored lines ([`codeneedle`]).
pub const PASS_PERCENT: usize = 40;

crate::settings::named_choice! {
    /// The rule that decides what a score is made of (docs/METHOD.md §6).
    #[derive(Default)]
    pub enum Policy {
        /// posrecall's own: every one of the LINES lines counts, blank lines
        /// are credited only in place, PASS lines pass.
        #[default]
        Posrecall,
        /// The corrected policy of codeneedle, the plan author's benchmark:
        /// blank lines neither credited nor counted, a pass at 40% of the
        /// scored lines, re-indented lines apart, difflib's alignment.
        Codeneedle,
    }
}

impl Policy {
    /// Whether this is the default policy (a run file leaves it out, so
    /// that runs scored as before stay byte for byte as before).
    #[must_use]
    pub fn is_default(&self) -> bool {
        *self == Policy::default()
    }

    /// The line comparison of this policy when none is given: posrecall
    /// trims (models often re-indent), codeneedle compares verbatim after
    /// dropping trailing whitespace.
    #[must_use]
    pub fn default_normalize(self) -> Normalize {
        match self {
            Policy::Posrecall => Normalize::Trim,
            Policy::Codeneedle => Normalize::TrimEnd,
        }
    }
}

impl Normalize {
    /// The line as this mode compares it. Borrows whenever the mode leaves the
    /// line unchanged, which is nearly always, so scoring allocates little.
    #[must_use]
    pub(crate) fn apply(self, line: &str) -> Cow<'_, str> {
        match self {
            Normalize::Exact => Cow::Borrowed(line),
            Normalize::Trim => Cow::Borrowed(line.trim()),
            Normalize::Squash => squash(line),
            Normalize::TrimEnd => Cow::Borrowed(line.trim_end()),
        }
    }
}

/// Trims `line` and turns every whitespace run into one ASCII space.
fn squash(line: &str) -> Cow<'_, str> {
    let trimmed = line.trim();
    // Already squashed when the only whitespace is single ASCII spaces.
    let mut prev_space = false;
    let clean = trimmed.chars().all(|c| {
        let ok = !c.is_whitespace() || (c == ' ' && !prev_space);
        prev_space = c.is_whitespace();
        ok
    });
    if clean { Cow::Borrowed(trimmed) } else { Cow::Owned(trimmed.split_whitespace().collect::<Vec<_>>().join(" ")) }
}

/// The class of one line in the diff view (the four colours of the report).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LineStatus {
    /// An answer line aligned with one of the first LINES expected lines (gray).
    Matched,
    /// One of the first LINES expected lines that no answer line aligned with (orange).
    Missing,
    /// A non-blank answer line aligned with nothing (yellow). (A blank one is
    /// ignored: counted in [`Score::ignored_blank`], not shown.)
    Hallucinated,
    /// An answer line aligned with a line of the extra window, past LINES (blue).
    Extra,
    /// Under the codeneedle policy, an answer line that matches an expected
    /// line nothing else matched only once leading whitespace is dropped:
    /// recalled, but indented otherwise; neither hallucinated nor missing.
    Reindented,
}

/// One entry of the diff view.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ScoredLine {
    /// The expected line for [`LineStatus::Missing`], else the raw answer line.
    pub text: String,
    pub status: LineStatus,
}

/// The scoring parameters of a run (the `manifest.params` that affect scoring).
#[derive(Debug, Clone, Copy)]
pub struct ScoreOptions {
    /// LINES: how many expected lines are scored.
    pub lines: usize,
    /// PASS: a target passes when `matched >= pass`.
    pub pass: usize,
    pub normalize: Normalize,
    /// Blank lines are not counted anywhere. [`parse_response`] applies it to
    /// answers; [`score`] takes its lines as given (the ground truth is built
    /// without blanks by the targets stage), so that every answer line it is
    /// handed is accounted for.
    pub skip_blank: bool,
    /// Which rule scores ([`score_raw`] hands codeneedle's to [`codeneedle`]).
    pub policy: Policy,
    /// Which lines count: all the policy counts, or code alone ([`composition`]).
    pub credit: Credit,
}

use crate::corpus::classify::LineClass;
pub use composition::{Composition, Credit};

/// What became of one of the LINES expected lines: what [`Composition`]
/// and `--credit code` count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    /// An answer line aligned with it (or, for a blank line, it was credited in place).
    Credited,
    /// Under codeneedle: recalled with other indentation, neither matched nor missing.
    Reindented,
    /// Neither.
    Missing,
}

/// The score of one answer.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Score {
    /// The diff view, in order (see [`score`]).
    pub lines: Vec<ScoredLine>,
    pub matched: usize,
    pub missing: usize,
    /// The missing lines that come after the point where the answer ended; a
    /// subset of `missing` (see [`score`] for the exact rule).
    pub truncated: usize,
    pub hallucinated: usize,
    pub extra: usize,
    /// Blank expected lines credited (as matched) because they close the
    /// LINES window right after the answer's last line: parsing dropped the
    /// answer's trailing whitespace, so it cannot show them (see [`score`]).
    /// They appear in `lines` with the expected text.
    #[serde(default)]
    pub implied_blank: usize,
    /// Blank answer lines paired with nothing: whitespace, not content, so
    /// they are neither matched nor hallucinated, and not in `lines`.
    #[serde(default)]
    pub ignored_blank: usize,
    pub pass: bool,
    /// Lines of the answer past [`answer_line_cap`] that were not read (an
    /// answer can be any size; what the scorer reads is bounded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unread_lines: Option<usize>,
    /// Under the codeneedle policy: the non-blank lines of the first LINES,
    /// the denominator its pass is a share of (absent under posrecall,
    /// where every one of the LINES lines is scored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scored: Option<usize>,
    /// Under the codeneedle policy: answer lines that match an expected line
    /// only once leading whitespace is dropped (absent under posrecall).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reindented: Option<usize>,
    /// Per class of the LINES expected lines (code, comment, docstring,
    /// blank), how many there are and how many were credited; absent where
    /// the lines' classes are not known (a targets file made before they
    /// were recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub composition: Option<Composition>,
}

/// The most lines of an answer the scorer reads for a window of
/// `window_lines` (expected plus extra): ten times the window, at least
/// 4,000. Past that no answer line can change whether the window is
/// recalled, and reading on would cost memory in proportion to the answer
/// (a 20 MB answer took 2.8 GB).
pub fn answer_line_cap(window_lines: usize) -> usize {
    window_lines.saturating_mul(10).max(4000)
}

/// The first `cap` lines of `raw`, and how many lines come after them.
fn first_lines(raw: &str, cap: usize) -> (&str, usize) {
    match raw.match_indices('\n').nth(cap.saturating_sub(1)) {
        Some((end, _)) if end + 1 < raw.len() => {
            let rest = &raw[end + 1..];
            (&raw[..end], rest.matches('\n').count() + usize::from(!rest.ends_with('\n')))
        }
        _ => (raw, 0),
    }
}

// ---------------------------------------------------------------------------
// Step 6: response parsing
// ---------------------------------------------------------------------------

/// docs/METHOD.md §5: the answer lines of a raw model response.
///
/// 1. CRLF becomes LF (so that fences and headers are recognised on Windows
///    style output too).
/// 2. The first fenced code block is taken if there is one: an opening fence
///    line of three or more backticks or tildes, optionally indented and
///    followed by an info string (```` ```javascript ````), up to a closing
///    line of the same character at least as long; an unclosed fence runs to
///    the end (the model hit its token limit). Without a fence the whole text
///    is the answer. Chat models like to add a sentence before the code, so
///    the fence wins over the text around it.
/// 3. One leading line that only repeats the function's header is dropped:
///    the ground truth starts *after* the line with the opening brace, and
///    models often echo the header first. `header` is the verbatim header,
///    possibly several lines (`"function foo(a)\n{"`). The first non-blank
///    line is a header repeat when, whitespace-squashed, it equals the
///    squashed header, or the header's squashed first line, or it declares a
///    function of the same name and ends in `{` (so `async function foo(a,b){`
///    counts). When a multi-line header is echoed line for line, all of its
///    lines go (an Allman `{` on its own line is part of the header, not of
///    the body). Blank lines in front of an echoed header go with it.
/// 4. Trailing whitespace of the whole text is dropped (a final newline or
///    trailing blank lines are not answer lines). Leading blank lines stay:
///    when blank lines count, the body may really start with one.
/// 5. The text is split into lines; with `skip_blank` blank (whitespace-only)
///    lines are dropped. An empty or whitespace-only answer gives no lines.
#[must_use]
pub fn parse_response(raw: &str, header: &str, skip_blank: bool) -> Vec<String> {
    let text = raw.replace("\r\n", "\n");
    let all: Vec<&str> = text.split('\n').collect();
    let body = first_fenced_block(&all).unwrap_or(&all);
    let body = body.get(header_repeat_len(body, header)..).unwrap_or(&[]);

    let joined = body.join("\n");
    let joined = joined.trim_end();
    if joined.is_empty() {
        return Vec::new();
    }
    joined.split('\n').filter(|line| !(skip_blank && line.trim().is_empty())).map(str::to_owned).collect()
}

/// The lines inside the first fenced code block, or `None` without a fence.
fn first_fenced_block<'a>(lines: &'a [&'a str]) -> Option<&'a [&'a str]> {
    let (open, (ch, len)) = lines.iter().enumerate().find_map(|(i, line)| fence_open(line).map(|f| (i, f)))?;
    let rest = lines.get(open + 1..)?;
    let end = rest.iter().position(|line| is_fence_close(line, ch, len)).unwrap_or(rest.len());
    rest.get(..end)
}

/// `Some((fence char, fence length))` when `line` opens a fenced code block.
/// As in `CommonMark`, a backtick fence's info string holds no backtick (so a
/// line of inline code is not taken for a fence). Any indentation is accepted:
/// models indent fences inside list items.
fn fence_open(line: &str) -> Option<(char, usize)> {
    let t = line.trim_start();
    let ch = t.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let info = t.trim_start_matches(ch);
    let len = t.len() - info.len();
    (len >= 3 && !(ch == '`' && info.contains('`'))).then_some((ch, len))
}

/// Whether `line` closes a fence opened with `len` times `ch`.
fn is_fence_close(line: &str, ch: char, len: usize) -> bool {
    let t = line.trim();
    t.len() >= len && t.chars().all(|c| c == ch)
}

/// How many leading lines of `body` form a repeat of `header` (0 if none).
fn header_repeat_len(body: &[&str], header: &str) -> usize {
    let Some(first) = body.iter().position(|l| !l.trim().is_empty()) else {
        return 0;
    };
    let header_lines: Vec<Cow<'_, str>> = header.lines().map(squash).filter(|l| !l.is_empty()).collect();

    // A multi-line header echoed line for line.
    if header_lines.len() > 1 {
        let echoed =
            body.get(first..first + header_lines.len()).is_some_and(|got| got.iter().zip(&header_lines).all(|(g, h)| squash(g) == *h));
        if echoed {
            return first + header_lines.len();
        }
    }

    let line = body.get(first).map_or(Cow::Borrowed(""), |l| squash(l));
    let whole = squash(header);
    let same_decl = || {
        let name = declared_name(&whole);
        name.is_some() && declared_name(&line) == name && line.ends_with('{')
    };
    if line == whole || header_lines.first() == Some(&line) || same_decl() { first + 1 } else { 0 }
}

/// A character that may appear in a JavaScript identifier (close enough for
/// recognising a declaration; `$` and `_` included).
fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

/// The name declared by a `function NAME (` / `function* NAME (` on `line`,
/// if any (also behind `async`, `export` and the like).
fn declared_name(line: &str) -> Option<&str> {
    const KW: &str = "function";
    let mut from = 0;
    while let Some(found) = line.get(from..).and_then(|s| s.find(KW)) {
        let start = from + found;
        let (before, after_start) = line.split_at(start);
        let after = after_start.get(KW.len()..).unwrap_or("");
        from = start + KW.len();

        if before.chars().next_back().is_some_and(is_ident) {
            continue; // e.g. `myfunction`
        }
        if !after.starts_with(|c: char| c.is_whitespace() || c == '*') {
            continue; // e.g. `functional`, or an anonymous `function(`
        }
        let rest = after.trim_start();
        let rest = rest.strip_prefix('*').unwrap_or(rest).trim_start();
        let name_len = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        let (name, tail) = rest.split_at(name_len);
        if !name.is_empty() && tail.trim_start().starts_with('(') {
            return Some(name);
        }
    }
    None
}

// ---------------------------------------------------------------------------
// Step 7: scoring
// ---------------------------------------------------------------------------

/// The value of a partial alignment, compared lexicographically: first the
/// number of aligned pairs (the LCS length), then how many of them land in
/// the first LINES expected lines.
type Value = (usize, usize);

/// The aligned pairs `(response index, window index)`, both increasing.
///
/// An exact dynamic programme over suffixes maximising [`Value`]. The method
/// names the `similar` crate, but its diff algorithms (Myers, LCS, Patience,
/// ...) only promise *a* longest common subsequence: they give no control
/// over which of several equally long alignments comes back, and the method's
/// tie rule needs that control (a repeated `}` or `return;` must count as
/// matched, not as extra, when both alignments are equally long). `similar`
/// serves as the test oracle for the LCS length instead. Sizes are tiny
/// (LINES ≤ ~100, answers ≤ 2×LINES lines), so the O(n·m) table is cheap.
///
/// Among alignments of equal value the walk-back prefers, in this order, to
/// pair the current lines, to pass over a window line, to pass over an answer
/// line; so every answer line pairs as early in the answer as it can. A model
/// that loops on `}` thus gets its first copies paired and the rest shown as
/// hallucinations at the end (not thirty yellow lines before the first gray
/// one), and a reordered answer keeps its first block paired.
fn align<T: PartialEq>(response: &[T], window: &[T], lines: usize) -> Vec<(usize, usize)> {
    let (n, m) = (response.len(), window.len());
    let cols = m + 1;
    // table[i * cols + j] = best value for response[i..] against window[j..].
    let mut table: Vec<Value> = vec![(0, 0); (n + 1) * cols];
    let at = |t: &[Value], i: usize, j: usize| t.get(i * cols + j).copied().unwrap_or((0, 0));
    let pair = |t: &[Value], i: usize, j: usize| -> Option<Value> {
        (response.get(i)? == window.get(j)?).then(|| {
            let (len, matched) = at(t, i + 1, j + 1);
            (len + 1, matched + usize::from(j < lines))
        })
    };

    for i in (0..n).rev() {
        for j in (0..m).rev() {
            let best = at(&table, i + 1, j).max(at(&table, i, j + 1)).max(pair(&table, i, j).unwrap_or((0, 0)));
            if let Some(cell) = table.get_mut(i * cols + j) {
                *cell = best;
            }
        }
    }

    let mut pairs = Vec::new();
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        let here = at(&table, i, j);
        if here == (0, 0) {
            break;
        }
        if pair(&table, i, j) == Some(here) {
            pairs.push((i, j));
            i += 1;
            j += 1;
        } else if at(&table, i, j + 1) == here {
            j += 1;
        } else {
            i += 1;
        }
    }
    pairs
}

/// docs/METHOD.md §6: scores the answer lines `response` against the ground truth.
///
/// `expected` holds the first `opts.lines` lines after the opening brace;
/// `extra` the extra window after them (possibly shorter, or empty). A line
/// is *blank* when it is empty or whitespace only. Blank lines never anchor
/// the alignment and earn credit only in place (docs/METHOD.md, "Blank lines",
/// has worked examples):
///
/// 1. The non-blank answer lines are aligned in order with the non-blank
///    lines of `expected ++ extra` under `opts.normalize` by a longest common
///    subsequence; among alignments of that length the one with the most
///    pairs in the first `opts.lines` lines wins (see [`align`]). These pairs
///    are the *anchors*. Without an anchor nothing else is credited.
/// 2. In each gap between consecutive anchors, the blank answer lines are
///    aligned the same way with the blank window lines of the same gap. The
///    gap before the first anchor (the window's start edge) counts only when
///    that anchor is in the first `opts.lines` lines, and the gap after the
///    last anchor reaches only to `opts.lines` (the extra window's blank lines
///    are credited only between two anchors).
/// 3. When the answer has no non-blank line after its last anchor, and every
///    window line from there up to `opts.lines` is blank (a run that closes
///    the LINES window), the run's lines that step 2 left unpaired are
///    credited as written: parsing dropped the answer's trailing whitespace,
///    and a perfect answer must score LINES. That is `implied_blank`. A blank
///    run that ends before `opts.lines` is not credited this way.
///
/// Then:
///
/// - **matched**: window lines below `opts.lines` credited by steps 1-3;
///   **missing**: those lines not credited, so `matched + missing ==
///   opts.lines` always;
/// - **extra**: answer lines paired with a later window line;
///   **hallucinated**: non-blank answer lines paired with nothing;
///   **ignored_blank**: blank answer lines paired with nothing (whitespace,
///   not content: neither credited nor penalised). So
///   `matched + hallucinated + extra + ignored_blank == response.len() + implied_blank`;
/// - **truncated** (a subset of missing): with `j*` the last credited window
///   line and `i*` the last paired answer line, `m` = the missing lines after
///   `j*` and `t` = the *non-blank* answer lines after `i*`, truncated =
///   `m - t` (floored at 0). The answer stopped before it reached those `m`
///   lines, except that trailing lines it did write count as attempts at them,
///   one for one (a mangled last line is a hallucination, not a truncation);
///   blank lines are not attempts. With nothing paired, `j*` and `i*` are
///   "before the start": an empty answer has `truncated == opts.lines`;
/// - **pass**: `matched >= opts.pass`.
///
/// `lines` is the diff view in window order. Before each credited line come
/// the missing expected lines since the previous one (with the expected
/// text), then the unpaired non-blank answer lines (raw text); so a missing
/// line always sits before an answer line paired with a later expected line.
/// Credited lines show the raw answer text, or the expected text for the
/// lines of `implied_blank`. Ignored blank answer lines and extra-window lines
/// that nothing paired with do not appear.
///
/// Should `expected` hold more than `opts.lines` lines, the surplus is scored
/// as extra window; should it hold fewer, the shortfall counts as missing
/// (with empty text) so that the invariants above still hold.
#[must_use]
pub fn score(expected: &[String], extra: &[String], response: &[String], opts: &ScoreOptions) -> Score {
    score_with_fates(expected, extra, response, opts).0
}

/// [`score`], and the fate of each of the first LINES expected lines.
fn score_with_fates(expected: &[String], extra: &[String], response: &[String], opts: &ScoreOptions) -> (Score, Vec<Fate>) {
    let window_raw: Vec<&str> = expected.iter().chain(extra).map(String::as_str).collect();
    let window: Vec<Cow<'_, str>> = window_raw.iter().map(|l| opts.normalize.apply(l)).collect();
    let answer: Vec<Cow<'_, str>> = response.iter().map(|l| opts.normalize.apply(l)).collect();

    let non_blank =
        |lines: &[Cow<'_, str>]| -> Vec<usize> { (0..lines.len()).filter(|&i| lines.get(i).is_some_and(|l| !is_blank(l))).collect() };
    let anchors = align_subset(&answer, &window, &non_blank(&answer), &non_blank(&window), opts.lines);
    let blanks = blank_pairs(&answer, &window, &anchors, opts.lines);

    // Both kinds of pair are increasing in both indices, every blank pair lies
    // strictly inside a gap between anchors, and the closing run follows the
    // last anchor: sorting by window index merges them all.
    let mut credits: Vec<Credited> = anchors.iter().chain(&blanks).map(|&(ri, wi)| (Some(ri), wi)).collect();
    // The closing run's lines that the answer's own trailing blank lines did
    // not already pair (parsed answers have none) are credited as implied.
    let mut implied = 0;
    if !opts.skip_blank {
        for wi in closing_run(&answer, &window, &anchors, opts.lines) {
            if !blanks.iter().any(|&(_, w)| w == wi) {
                credits.push((None, wi));
                implied += 1;
            }
        }
    }
    credits.sort_unstable_by_key(|&(_, wi)| wi);

    let mut out = tally(&credits, response, &window_raw, opts);
    out.implied_blank = implied;
    let mut fates = vec![Fate::Missing; opts.lines.min(expected.len())];
    for &(_, wi) in &credits {
        if let Some(f) = fates.get_mut(wi) {
            *f = Fate::Credited;
        }
    }
    (out, fates)
}

/// Whether a normalised or raw line is blank. Every mode maps a blank line to
/// a blank line and a non-blank one to a non-blank one, so either will do.
fn is_blank(line: &str) -> bool {
    line.trim().is_empty()
}

/// One credited window line: `(Some(answer index), window index)` for an
/// answer line paired with it, `(None, window index)` for a blank line of a
/// run that closes the LINES window.
type Credited = (Option<usize>, usize);

/// [`align`] restricted to the answer lines at `r_idx` and the window lines
/// at `w_idx` (both increasing); the pairs come back as indices into
/// `answer` and `window`.
fn align_subset(answer: &[Cow<'_, str>], window: &[Cow<'_, str>], r_idx: &[usize], w_idx: &[usize], lines: usize) -> Vec<(usize, usize)> {
    fn pick<'a>(all: &'a [Cow<'_, str>], idx: &[usize]) -> Vec<&'a str> {
        idx.iter().filter_map(|&i| all.get(i).map(AsRef::as_ref)).collect()
    }
    let (sub_answer, sub_window) = (pick(answer, r_idx), pick(window, w_idx));
    // `w_idx` is increasing, so "below LINES" is a prefix of it.
    let below = w_idx.iter().filter(|&&w| w < lines).count();
    align(&sub_answer, &sub_window, below).into_iter().filter_map(|(i, j)| Some((*r_idx.get(i)?, *w_idx.get(j)?))).collect()
}

/// Step 2 of [`score`]: the blank answer lines paired, gap by gap, with blank
/// window lines in the same gap of the `anchors`.
fn blank_pairs(answer: &[Cow<'_, str>], window: &[Cow<'_, str>], anchors: &[(usize, usize)], lines: usize) -> Vec<(usize, usize)> {
    // No anchor, no neighbour: blank lines alone earn nothing (principle 1).
    let (Some(&(r0, w0)), Some(&(rl, wl))) = (anchors.first(), anchors.last()) else {
        return Vec::new();
    };
    // The start edge is a neighbour only for a matched first anchor; the end
    // edge is that of the LINES window.
    let lead = if w0 < lines { 0..w0 } else { 0..0 };
    let tail = wl + 1..lines.min(window.len()).max(wl + 1);
    let mut gaps = vec![(0..r0, lead)];
    gaps.extend(anchors.windows(2).filter_map(|p| match *p {
        [(ra, wa), (rb, wb)] => Some((ra + 1..rb, wa + 1..wb)),
        _ => None,
    }));
    gaps.push((rl + 1..answer.len(), tail));

    let blank_in =
        |all: &[Cow<'_, str>], range: Range<usize>| -> Vec<usize> { range.filter(|&i| all.get(i).is_some_and(|l| is_blank(l))).collect() };
    gaps.into_iter().flat_map(|(r, w)| align_subset(answer, window, &blank_in(answer, r), &blank_in(window, w), lines)).collect()
}

/// Step 3 of [`score`]: the window lines of a blank run that closes the LINES
/// window right after the answer's last non-blank line, which must be the
/// last anchor; empty otherwise.
fn closing_run(answer: &[Cow<'_, str>], window: &[Cow<'_, str>], anchors: &[(usize, usize)], lines: usize) -> Range<usize> {
    let Some(&(ri, wi)) = anchors.last() else {
        return 0..0;
    };
    let run = wi + 1..lines.max(wi + 1);
    let answer_ends_here = answer.get(ri + 1..).is_some_and(|rest| rest.iter().all(|l| is_blank(l)));
    let run_closes = run.clone().all(|w| window.get(w).is_some_and(|l| is_blank(l)));
    if answer_ends_here && run_closes { run } else { 0..0 }
}

/// Counts the credits (sorted by window index) and builds the diff view.
fn tally(credits: &[Credited], response: &[String], window_raw: &[&str], opts: &ScoreOptions) -> Score {
    let mut out = Score {
        lines: Vec::with_capacity(response.len() + opts.lines),
        matched: 0,
        missing: 0,
        truncated: 0,
        hallucinated: 0,
        extra: 0,
        implied_blank: 0,
        ignored_blank: 0,
        pass: false,
        unread_lines: None,
        scored: None,
        reindented: None,
        composition: None,
    };
    let (mut r, mut w) = (0, 0);
    for &(ri, wi) in credits {
        out.gap(response.get(r..ri.unwrap_or(r)).unwrap_or(&[]), window_raw, w..wi, opts.lines);
        let text = match ri {
            Some(i) => response.get(i).map_or("", String::as_str),
            None => window_raw.get(wi).copied().unwrap_or(""),
        };
        let status = if wi < opts.lines { LineStatus::Matched } else { LineStatus::Extra };
        out.push(text, status);
        (r, w) = (ri.map_or(r, |i| i + 1), wi + 1);
    }
    // The tail: missing lines up to LINES (also any shortfall past the
    // window), then the answer's trailing unpaired lines.
    let rest = response.get(r..).unwrap_or(&[]);
    out.gap(rest, window_raw, w..opts.lines.max(w), opts.lines);

    // After the loop `w` is j* + 1 and `r` is i* + 1 (0 when nothing paired).
    let missing_after_end = opts.lines.saturating_sub(w);
    let attempts = rest.iter().filter(|l| !is_blank(l)).count();
    out.truncated = missing_after_end.saturating_sub(attempts);
    out.pass = out.matched >= opts.pass;
    out
}

impl Score {
    /// Appends one diff entry and counts it.
    fn push(&mut self, text: &str, status: LineStatus) {
        match status {
            LineStatus::Matched => self.matched += 1,
            LineStatus::Missing => self.missing += 1,
            LineStatus::Hallucinated => self.hallucinated += 1,
            LineStatus::Extra => self.extra += 1,
            LineStatus::Reindented => *self.reindented.get_or_insert(0) += 1,
        }
        self.lines.push(ScoredLine { text: text.to_owned(), status });
    }

    /// Emits one gap: the missing expected lines of window range `w` (those
    /// below `lines`), then the unpaired answer lines `answer`; its blank ones
    /// are only counted as ignored.
    fn gap(&mut self, answer: &[String], window_raw: &[&str], w: Range<usize>, lines: usize) {
        for wi in w.start..w.end.min(lines) {
            self.push(window_raw.get(wi).copied().unwrap_or(""), LineStatus::Missing);
        }
        for line in answer {
            if is_blank(line) {
                self.ignored_blank += 1;
            } else {
                self.push(line, LineStatus::Hallucinated);
            }
        }
    }
}

/// Parses a raw answer and scores it under `opts.policy`: posrecall's
/// [`parse_response`] (honouring `opts.skip_blank`) and [`score`], or
/// codeneedle's own cleaning and scoring ([`codeneedle`]).
///
/// `classes` are the classes of the `expected` lines, one each, or empty
/// where they are not known: then there is no composition, and the caller
/// has refused `--credit code` before scoring (it would have nothing to count).
#[must_use]
pub fn score_raw(raw: &str, header: &str, expected: &[String], extra: &[String], classes: &[LineClass], opts: &ScoreOptions) -> Score {
    let (read, unread) = first_lines(raw, answer_line_cap(expected.len() + extra.len()));
    let (mut out, fates) = match opts.policy {
        Policy::Posrecall => score_with_fates(expected, extra, &parse_response(read, header, opts.skip_blank), opts),
        Policy::Codeneedle => codeneedle::score_with_fates(read, expected, extra, opts),
    };
    out.unread_lines = (unread > 0).then_some(unread);
    if classes.len() == expected.len() {
        let classes = classes.get(..fates.len()).unwrap_or(classes);
        let credited: Vec<bool> = fates.iter().map(|f| *f == Fate::Credited).collect();
        // Under codeneedle blank lines are out of both counts.
        out.composition = Some(Composition::of(classes, &credited, opts.policy == Policy::Posrecall));
        if opts.credit == Credit::Code {
            credit_code_only(&mut out, classes, &fates, opts);
        }
    }
    out
}

/// `--credit code`: matched, missing and the scored lines count code lines
/// only, and the pass is the policy's share of them (posrecall: PASS of
/// LINES; codeneedle: [`PASS_PERCENT`]); no code line, no pass. Truncated
/// lines stay those the answer stopped before, at most the missing ones.
fn credit_code_only(out: &mut Score, classes: &[LineClass], fates: &[Fate], opts: &ScoreOptions) {
    let code = |fate: Fate| classes.iter().zip(fates).filter(|&(c, f)| *c == LineClass::Code && *f == fate).count();
    let scored = classes.iter().filter(|c| **c == LineClass::Code).count();
    out.matched = code(Fate::Credited);
    out.missing = code(Fate::Missing);
    out.truncated = out.truncated.min(out.missing);
    out.scored = Some(scored);
    out.pass = match opts.policy {
        Policy::Posrecall => scored > 0 && out.matched * opts.lines >= opts.pass * scored,
        Policy::Codeneedle => codeneedle::passes(out.matched, scored),
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::Named;
    use proptest::prelude::*;

    fn v(lines: &[&str]) -> Vec<String> {
        lines.iter().map(|s| (*s).to_owned()).collect()
    }

    fn opts(lines: usize, normalize: Normalize) -> ScoreOptions {
        ScoreOptions { lines, pass: 2, normalize, skip_blank: false, policy: Policy::Posrecall, credit: Credit::All }
    }

    fn statuses(s: &Score) -> Vec<LineStatus> {
        s.lines.iter().map(|l| l.status).collect()
    }

    /// Among alignments of one length, the one with the most matched lines
    /// wins: the answer `B, A` against expected `A` (LINES 1) and extra `B`
    /// pairs `A` (matched 1, `B` hallucinated), not `B` (extra 1, `A`
    /// hallucinated). The mutation pass had called align's `j < lines`
    /// harmless; `j <= lines` counts the extra line as matched and takes the
    /// other alignment.
    #[test]
    fn equal_length_alignments_prefer_the_matched_lines() {
        let s = score(&v(&["A"]), &v(&["B"]), &v(&["B", "A"]), &opts(1, Normalize::Trim));
        assert_eq!((s.matched, s.extra, s.hallucinated, s.missing), (1, 0, 1, 0));
    }

    use LineStatus::{Extra as E, Hallucinated as H, Matched as M, Missing as X};

    #[test]
    fn only_the_first_lines_of_an_answer_are_read() {
        assert_eq!(first_lines("a\nb\nc", 2), ("a\nb", 1));
        assert_eq!(first_lines("a\nb\nc\nd\n", 2), ("a\nb", 2));
        assert_eq!(first_lines("a\nb\n", 2), ("a\nb\n", 0));
        assert_eq!(first_lines("a\nb", 2), ("a\nb", 0));
        assert_eq!(first_lines("", 2), ("", 0));
        assert_eq!(answer_line_cap(20), 4000);
        assert_eq!(answer_line_cap(1000), 10_000);
        // Past the cap, nothing changes the score but the count of what was not read.
        let expected = v(&["x = 1;", "y = 2;"]);
        let long = format!("x = 1;\ny = 2;\n{}", "junk\n".repeat(5000));
        let cut = score_raw(&long, "function f() {", &expected, &[], &[], &opts(2, Normalize::Trim));
        assert_eq!((cut.matched, cut.unread_lines), (2, Some(5000 - 3998)));
        assert_eq!(cut.hallucinated, 3998);
        let short = score_raw("x = 1;\ny = 2;\njunk", "function f() {", &expected, &[], &[], &opts(2, Normalize::Trim));
        assert_eq!(short.unread_lines, None);
    }

    // ---- normalisation ----------------------------------------------------

    #[test]
    fn normalize_modes() {
        let line = "\t  var  x =\t1;  ";
        assert_eq!(Normalize::Exact.apply(line), line);
        assert_eq!(Normalize::Trim.apply(line), "var  x =\t1;");
        assert_eq!(Normalize::Squash.apply(line), "var x = 1;");
        assert!(matches!(Normalize::Squash.apply("  a b  "), Cow::Borrowed("a b")));
        assert_eq!(Normalize::Squash.apply(" \t "), "");
        assert_eq!(Normalize::default(), Normalize::Trim);
        assert_eq!(Normalize::Squash.as_str(), "squash");
        assert_eq!(serde_json::to_string(&Normalize::Exact).unwrap(), "\"exact\"");
        assert_eq!(serde_json::to_string(&LineStatus::Hallucinated).unwrap(), "\"hallucinated\"");
    }

    #[test]
    fn trim_ignores_indentation_exact_does_not() {
        let expected = v(&["    if (a) {", "      b();", "    }"]);
        let response = v(&["if (a) {", "  b();", "}"]);
        let trim = score(&expected, &[], &response, &opts(3, Normalize::Trim));
        assert_eq!((trim.matched, trim.hallucinated), (3, 0));
        let exact = score(&expected, &[], &response, &opts(3, Normalize::Exact));
        assert_eq!((exact.matched, exact.missing, exact.hallucinated), (0, 3, 3));
        let squash = score(&expected, &[], &response, &opts(3, Normalize::Squash));
        assert_eq!(squash.matched, 3);
    }

    #[test]
    fn squash_ignores_inner_whitespace_runs_trim_does_not() {
        let expected = v(&["var a = 1,", "    b = 2;"]);
        let response = v(&["var a  =  1,", "b =\t2;"]);
        let trim = score(&expected, &[], &response, &opts(2, Normalize::Trim));
        assert_eq!(trim.matched, 0);
        let squash = score(&expected, &[], &response, &opts(2, Normalize::Squash));
        assert_eq!(squash.matched, 2);
    }

    #[test]
    fn trailing_spaces() {
        let expected = v(&["a();", "b();"]);
        let response = v(&["a();   ", "b();"]);
        assert_eq!(score(&expected, &[], &response, &opts(2, Normalize::Trim)).matched, 2);
        assert_eq!(score(&expected, &[], &response, &opts(2, Normalize::Squash)).matched, 2);
        let exact = score(&expected, &[], &response, &opts(2, Normalize::Exact));
        assert_eq!((exact.matched, exact.hallucinated, exact.missing), (1, 1, 1));
    }

    // ---- the four classes and truncation ------------------------------------

    #[test]
    fn every_class() {
        let expected = v(&["a", "b", "c", "d"]);
        let extra = v(&["e", "f"]);
        let response = v(&["a", "junk", "c", "d", "e"]);
        let s = score(&expected, &extra, &response, &opts(4, Normalize::Trim));
        assert_eq!(statuses(&s), vec![M, X, H, M, M, E]);
        assert_eq!(s.lines[1].text, "b"); // missing carries the expected text
        assert_eq!(s.lines[2].text, "junk");
        assert_eq!((s.matched, s.missing, s.hallucinated, s.extra, s.truncated), (3, 1, 1, 1, 0));
        assert!(s.pass);
    }

    #[test]
    fn answer_stopping_early_is_truncated() {
        let expected = v(&["a", "b", "c", "d", "e"]);
        let s = score(&expected, &[], &v(&["a", "b"]), &opts(5, Normalize::Trim));
        assert_eq!((s.matched, s.missing, s.truncated), (2, 3, 3));
        assert_eq!(statuses(&s), vec![M, M, X, X, X]);
    }

    #[test]
    fn trailing_garbage_stands_in_for_missing_lines() {
        let expected = v(&["a", "b", "c", "d", "e"]);
        let s = score(&expected, &[], &v(&["a", "b", "zz"]), &opts(5, Normalize::Trim));
        assert_eq!((s.matched, s.missing, s.hallucinated, s.truncated), (2, 3, 1, 2));
        assert_eq!(statuses(&s), vec![M, M, X, X, X, H]);
        // More garbage than missing lines: nothing is truncated.
        let s = score(&expected, &[], &v(&["a", "b", "x", "y", "z", "w"]), &opts(5, Normalize::Trim));
        assert_eq!((s.missing, s.hallucinated, s.truncated), (3, 4, 0));
    }

    #[test]
    fn a_gap_in_the_middle_is_not_truncation() {
        let expected = v(&["a", "b", "c", "d"]);
        let s = score(&expected, &[], &v(&["a", "d"]), &opts(4, Normalize::Trim));
        assert_eq!((s.matched, s.missing, s.truncated), (2, 2, 0));
        assert_eq!(statuses(&s), vec![M, X, X, M]);
    }

    #[test]
    fn empty_answer() {
        assert!(parse_response("", "function f() {", false).is_empty());
        assert!(parse_response(" \n\t\r\n ", "function f() {", false).is_empty());
        let expected = v(&["a", "b", "c"]);
        let s = score(&expected, &v(&["d"]), &[], &opts(3, Normalize::Trim));
        assert_eq!((s.matched, s.missing, s.truncated, s.hallucinated, s.extra), (0, 3, 3, 0, 0));
        assert_eq!(statuses(&s), vec![X, X, X]);
        assert!(!s.pass);
    }

    #[test]
    fn reordered_answer() {
        let expected = v(&["a", "b", "c", "d"]);
        let s = score(&expected, &[], &v(&["c", "d", "a", "b"]), &opts(4, Normalize::Trim));
        // Only one in-order half can align; the other half is hallucinated.
        assert_eq!((s.matched, s.missing, s.hallucinated), (2, 2, 2));
        assert_eq!(s.truncated, 0);
        assert_eq!(statuses(&s), vec![X, X, M, M, H, H]);
    }

    #[test]
    fn a_looping_answer_pairs_its_first_copies() {
        let expected = v(&["a", "b", "}", "c", "}"]);
        let response = v(&["a", "}", "}", "}", "}"]);
        let s = score(&expected, &[], &response, &opts(5, Normalize::Trim));
        assert_eq!(statuses(&s), vec![M, X, M, X, M, H, H]);
        assert_eq!((s.matched, s.missing, s.hallucinated, s.truncated), (3, 2, 2, 0));
    }

    #[test]
    fn answer_longer_than_the_whole_window() {
        let expected = v(&["a", "b"]);
        let extra = v(&["c", "d"]);
        let response = v(&["a", "b", "c", "d", "e", "f", "g"]);
        let s = score(&expected, &extra, &response, &opts(2, Normalize::Trim));
        assert_eq!((s.matched, s.extra, s.hallucinated, s.missing, s.truncated), (2, 2, 3, 0, 0));
        assert_eq!(statuses(&s), vec![M, M, E, E, H, H, H]);
    }

    #[test]
    fn tie_rule_prefers_matched_over_extra() {
        // The answer skips `x();` and `}`; its `}` could align with the
        // expected `}` or the one in the extra window: equally long, but the
        // method wants it matched.
        let expected = v(&["if (a) {", "  x();", "}", "return;"]);
        let extra = v(&["}", "return;"]);
        let response = v(&["if (a) {", "}", "return;"]);
        let s = score(&expected, &extra, &response, &opts(4, Normalize::Trim));
        assert_eq!((s.matched, s.extra, s.missing, s.hallucinated), (3, 0, 1, 0));

        // A lone `return;` after a mangled line must not be scored as the
        // extra-window `return;`.
        let expected = v(&["a();", "return;"]);
        let extra = v(&["b();", "return;"]);
        let s = score(&expected, &extra, &v(&["zzz", "return;"]), &opts(2, Normalize::Trim));
        assert_eq!((s.matched, s.extra), (1, 0));
    }

    #[test]
    fn missing_line_comes_before_a_later_aligned_line() {
        let expected = v(&["a", "b", "c"]);
        let s = score(&expected, &[], &v(&["a", "q", "c"]), &opts(3, Normalize::Trim));
        assert_eq!(statuses(&s), vec![M, X, H, M]);
    }

    #[test]
    fn odd_inputs_do_not_panic() {
        // Fewer expected lines than LINES: the shortfall is missing.
        let s = score(&v(&["a"]), &[], &v(&["a", "b"]), &opts(3, Normalize::Trim));
        assert_eq!((s.matched, s.missing, s.hallucinated), (1, 2, 1));
        assert_eq!(s.lines.len(), 4);
        // More expected lines than LINES: the surplus is extra window.
        let s = score(&v(&["a", "b"]), &[], &v(&["a", "b"]), &opts(1, Normalize::Trim));
        assert_eq!((s.matched, s.extra), (1, 1));
        let s = score(&[], &[], &[], &opts(0, Normalize::Exact));
        assert!(s.lines.is_empty() && s.pass == (0 >= 2));
    }

    #[test]
    fn pass_threshold() {
        let expected = v(&["a", "b", "c"]);
        let mut o = opts(3, Normalize::Trim);
        o.pass = 2;
        assert!(score(&expected, &[], &v(&["a", "b"]), &o).pass);
        assert!(!score(&expected, &[], &v(&["a"]), &o).pass);
    }

    // ---- blank lines ------------------------------------------------------------

    /// (matched, missing, truncated, hallucinated, extra, implied, ignored).
    fn counts(s: &Score) -> (usize, usize, usize, usize, usize, usize, usize) {
        (s.matched, s.missing, s.truncated, s.hallucinated, s.extra, s.implied_blank, s.ignored_blank)
    }

    /// Scores `raw` as a model's answer (parsed, trailing whitespace dropped).
    fn raw_score(raw: &str, expected: &[String], extra: &[String]) -> Score {
        score_raw(raw, "function f() {", expected, extra, &[], &opts(expected.len(), Normalize::Trim))
    }

    #[test]
    fn prose_with_blank_lines_scores_nothing() {
        // The reported case: a paragraph repeated with blank lines between,
        // against a window (and extra window) with blank lines of its own.
        let expected = v(&["var a;", "", "if (a) {", "  b();", "", "}", "", "return a;"]);
        let extra = v(&["", "function g() {", "", "}"]);
        let para = "This function returns the value.";
        let raw = [para; 6].join("\n\n");
        let s = raw_score(&raw, &expected, &extra);
        // 6 prose lines hallucinated, 5 blank lines ignored; the 8 expected
        // lines are missing, 8 - 6 = 2 of them past what the answer attempted.
        assert_eq!(counts(&s), (0, 8, 2, 6, 0, 0, 5));
        assert!(s.lines.iter().all(|l| l.status != M && l.status != E));
        // Leading and doubled blank lines change nothing.
        let raw = format!("\n\n{}", [para; 6].join("\n\n\n"));
        assert_eq!(counts(&raw_score(&raw, &expected, &extra)), (0, 8, 2, 6, 0, 0, 12));
        // Nor does an answer of blank lines alone (passed unparsed).
        let s = score(&expected, &extra, &v(&["", " ", ""]), &opts(8, Normalize::Trim));
        assert_eq!(counts(&s), (0, 8, 8, 0, 0, 0, 3));
    }

    #[test]
    fn a_perfect_answer_scores_lines_whatever_its_blank_lines() {
        for expected in [
            v(&["a", "", "b", "", "", "c"]),  // in the middle
            v(&["", "", "a", "b", "c", "d"]), // at the start
            v(&["a", "b", "c", "d", "", ""]), // at the end: dropped by parsing
            v(&["", "a", "", "b", "", ""]),   // all three
        ] {
            let raw = expected.join("\n");
            let extra = v(&["", "x", ""]);
            let s = raw_score(&raw, &expected, &extra);
            let closing = expected.iter().rev().take_while(|l| l.is_empty()).count();
            assert_eq!(counts(&s), (6, 0, 0, 0, 0, closing, 0), "{expected:?}");
            assert_eq!(statuses(&s), vec![M; 6]);
            // Unparsed, with its trailing blank lines, it scores the same
            // (the lines are written, not implied).
            let s = score(&expected, &extra, &expected, &opts(6, Normalize::Trim));
            assert_eq!(counts(&s), (6, 0, 0, 0, 0, 0, 0), "{expected:?}");
        }
    }

    #[test]
    fn a_prefix_stopped_before_a_blank_line_is_truncated_there() {
        // The reported case: the first 12 of 20 lines, the 12th blank (and
        // dropped with the trailing whitespace): 11 lines reproduced.
        let mut expected: Vec<String> = (1..=20).map(|k| format!("line{k};")).collect();
        expected[11] = String::new();
        let raw = expected[..12].join("\n") + "\n";
        let s = raw_score(&raw, &expected, &[]);
        assert_eq!(counts(&s), (11, 9, 9, 0, 0, 0, 0));
        // Stopping after line 11 gives exactly the same score: the two are
        // indistinguishable, and neither wrote line 12.
        assert_eq!(s, raw_score(&expected[..11].join("\n"), &expected, &[]));
        // A blank run that does not reach the LINES edge is not credited either.
        let expected = v(&["a", "b", "", "", "c"]);
        let s = raw_score("a\nb\n\n", &expected, &[]);
        assert_eq!(counts(&s), (2, 3, 3, 0, 0, 0, 0));
    }

    #[test]
    fn a_prefix_stopped_before_the_closing_blank_run_is_credited() {
        let expected = v(&["a", "b", "c", "", ""]);
        // The extra window's blank lines earn nothing.
        let extra = v(&["", "", "x"]);
        let s = raw_score("a\nb\nc\n\n\n\n", &expected, &extra);
        assert_eq!(counts(&s), (5, 0, 0, 0, 0, 2, 0));
        assert_eq!(statuses(&s), vec![M; 5]);
        assert_eq!(s.lines[4].text, "", "implied lines show the expected text");
        // But only right after a matched last line.
        let s = raw_score("a\nb\nzz", &expected, &extra);
        assert_eq!(counts(&s), (2, 3, 2, 1, 0, 0, 0));
        let s = raw_score("a\nb", &expected, &extra);
        assert_eq!(counts(&s), (2, 3, 3, 0, 0, 0, 0));
        // An answer that wrote part of the run itself (unparsed): the rest is implied.
        let s = score(&expected, &extra, &v(&["a", "b", "c", ""]), &opts(5, Normalize::Trim));
        assert_eq!(counts(&s), (5, 0, 0, 0, 0, 1, 0));
        // Writing more blank lines than the run: the surplus is ignored.
        let s = score(&expected, &extra, &v(&["a", "b", "c", "", "", ""]), &opts(5, Normalize::Trim));
        assert_eq!(counts(&s), (5, 0, 0, 0, 0, 0, 1));
    }

    #[test]
    fn dropped_blank_lines_are_missing_not_truncated() {
        let expected = v(&["", "a", "", "b", "", "", "c", "d"]);
        let s = raw_score("a\nb\nc\nd", &expected, &[]);
        assert_eq!(counts(&s), (4, 4, 0, 0, 0, 0, 0));
        assert_eq!(statuses(&s), vec![X, M, X, M, X, X, M, M]);
    }

    #[test]
    fn doubled_blank_lines_are_neither_matched_nor_hallucinated() {
        let expected = v(&["a", "", "b", "c"]);
        let s = raw_score("\n\na\n\n\n\nb\n\nc", &expected, &[]);
        // One blank pairs in place; the other five are ignored and not shown.
        assert_eq!(counts(&s), (4, 0, 0, 0, 0, 0, 5));
        assert_eq!(statuses(&s), vec![M; 4]);
    }

    #[test]
    fn a_blank_line_is_credited_only_in_its_own_gap() {
        // The answer's blank is between `a` and `b`; the expected one between
        // `b` and `c`.
        let expected = v(&["a", "b", "", "c"]);
        let s = raw_score("a\n\nb\nc", &expected, &[]);
        assert_eq!(counts(&s), (3, 1, 0, 0, 0, 0, 1));
        // Hallucinated lines in the gap do not move it: still between the
        // anchors `b` and `c`.
        let s = raw_score("a\nb\nzz\n\nc", &expected, &[]);
        assert_eq!(counts(&s), (4, 0, 0, 1, 0, 0, 0));
        assert_eq!(statuses(&s), vec![M, M, H, M, M]);
        // The start edge is a neighbour of a leading blank only when the
        // first anchor is matched.
        let expected = v(&["", "a", "b"]);
        let extra = v(&["", "}"]);
        assert_eq!(counts(&raw_score("\na\nb", &expected, &extra)), (3, 0, 0, 0, 0, 0, 0));
        let s = raw_score("\nprose\n\n}", &expected, &extra);
        assert_eq!(counts(&s), (0, 3, 0, 1, 1, 0, 2));
    }

    #[test]
    fn extra_window_blank_lines_count_only_between_anchors() {
        let expected = v(&["a", "b"]);
        let extra = v(&["", "c", "", "d"]);
        let s = raw_score("a\nb\n\nc\n\nd", &expected, &extra);
        assert_eq!(counts(&s), (2, 0, 0, 0, 4, 0, 0));
        // After the last anchor, the edge is that of the LINES window.
        let s = score(&expected, &extra, &v(&["a", "b", "", "zz"]), &opts(2, Normalize::Trim));
        assert_eq!(counts(&s), (2, 0, 0, 1, 0, 0, 1));
        let s = score(&expected, &extra, &v(&["a", "b", "c", ""]), &opts(2, Normalize::Trim));
        assert_eq!(counts(&s), (2, 0, 0, 0, 1, 0, 1));
    }

    #[test]
    fn blank_lines_follow_the_normalisation_mode() {
        // Under `exact` a blank line pairs only with the same whitespace;
        // unpaired, it is still ignored rather than hallucinated.
        let expected = v(&["a", "  ", "b"]);
        let response = v(&["a", "", "b"]);
        let s = score(&expected, &[], &response, &opts(3, Normalize::Exact));
        assert_eq!(counts(&s), (2, 1, 0, 0, 0, 0, 1));
        let s = score(&expected, &[], &response, &opts(3, Normalize::Trim));
        assert_eq!(counts(&s), (3, 0, 0, 0, 0, 0, 0));
    }

    #[test]
    fn the_worked_examples_of_method_md() {
        // docs/METHOD.md, "Blank lines": one row of its table each, LINES 5.
        // (expected, extra, raw answer, counts as in `counts`)
        let plain = ["a();", "", "b();", "c();", "d();"];
        let closing = ["a();", "b();", "c();", "", ""];
        let leading = ["", "a();", "b();", "c();", "d();"];
        // Expected lines, earlier lines, the answer, and the counts it must score.
        type Row<'a> = (&'a [&'a str], &'a [&'a str], &'a str, (usize, usize, usize, usize, usize, usize, usize));
        let rows: [Row; 12] = [
            (&plain, &[], "a();\n\nb();\nc();\nd();", (5, 0, 0, 0, 0, 0, 0)),
            (&plain, &[], "Computes a.\n\nComputes a.\n\nComputes a.", (0, 5, 2, 3, 0, 0, 2)),
            (&plain, &[], "a();\n\n\nb();\nc();\nd();", (5, 0, 0, 0, 0, 0, 1)),
            (&plain, &[], "a();\nb();\nc();\nd();", (4, 1, 0, 0, 0, 0, 0)),
            (&plain, &[], "a();\nb();\n\nc();\nd();", (4, 1, 0, 0, 0, 0, 1)),
            (&["a();", "b();", "", "c();", "d();"], &[], "a();\nb();\n\n", (2, 3, 3, 0, 0, 0, 0)),
            (&closing, &["", "}"], "a();\nb();\nc();\n\n\n\n", (5, 0, 0, 0, 0, 2, 0)),
            (&closing, &["", "}"], "a();\nb();", (2, 3, 3, 0, 0, 0, 0)),
            (&closing, &["", "}"], "a();\nb();\nzz", (2, 3, 2, 1, 0, 0, 0)),
            (&leading, &["", "}"], "\na();", (2, 3, 3, 0, 0, 0, 0)),
            (&leading, &["", "}"], "\nprose\n\n}", (0, 5, 0, 1, 1, 0, 2)),
            (
                &["a();", "b();", "c();", "d();", "e();"],
                &["", "f();", "", "g();"],
                "a();\nb();\nc();\nd();\ne();\n\nf();\n\ng();",
                (5, 0, 0, 0, 4, 0, 0),
            ),
        ];
        for (expected, extra, raw, want) in rows {
            let s = raw_score(raw, &v(expected), &v(extra));
            assert_eq!(counts(&s), want, "{raw:?}");
        }
    }

    #[test]
    fn skip_blank_scores_are_unchanged() {
        // With --skip-blank neither side has blank lines, so the rule has
        // nothing to act on: these are the counts of the plain alignment.
        let o = ScoreOptions { skip_blank: true, ..opts(4, Normalize::Trim) };
        let expected = v(&["a", "b", "c", "d"]);
        let s = score_raw("\na\n\n  \nb\n\nzz\n\n", "", &expected, &v(&["e"]), &[], &o);
        assert_eq!(counts(&s), (2, 2, 1, 1, 0, 0, 0));
        assert_eq!(s, score(&expected, &v(&["e"]), &v(&["a", "b", "zz"]), &o));
    }

    // ---- parsing --------------------------------------------------------------

    #[test]
    fn fenced_answer_with_preamble() {
        let raw = "Sure! Here are the lines:\n\n```javascript\n  var a = 1;\n  return a;\n```\nHope this helps.\n";
        assert_eq!(parse_response(raw, "function f() {", false), v(&["  var a = 1;", "  return a;"]));
        // Tilde fences and CRLF.
        let raw = "Here:\r\n~~~\r\nx();\r\n~~~\r\n";
        assert_eq!(parse_response(raw, "function f() {", false), v(&["x();"]));
    }

    #[test]
    fn unclosed_fence_runs_to_the_end() {
        let raw = "```js\na();\nb();\n";
        assert_eq!(parse_response(raw, "function f() {", false), v(&["a();", "b();"]));
    }

    #[test]
    fn a_fence_is_three_or_more_and_a_backtick_fence_has_no_backtick_after_it() {
        // Lines that begin with one `~` or backtick are code, not fences.
        let raw = "  const a = 1;\n  ~b;\n  `multi\n  line`;\n";
        assert_eq!(parse_response(raw, "", false), v(&["  const a = 1;", "  ~b;", "  `multi", "  line`;"]));
        // Inline code in prose (backticks after the backtick run) opens nothing;
        // the fence after it does.
        let raw = "Use ``` `x` ``` like this:\n```\na();\n```";
        assert_eq!(parse_response(raw, "", false), v(&["a();"]));
        // A tilde fence's info string may hold backticks.
        let raw = "~~~ `js`\nx();\n~~~";
        assert_eq!(parse_response(raw, "", false), v(&["x();"]));
    }

    #[test]
    fn only_the_first_fenced_block() {
        let raw = "```\na();\n```\ntext\n```\nb();\n```";
        assert_eq!(parse_response(raw, "", false), v(&["a();"]));
    }

    #[test]
    fn unfenced_answer_keeps_inner_whitespace_drops_trailing() {
        let raw = "  a();  \n\n  b();   \n\n\n";
        assert_eq!(parse_response(raw, "function f() {", false), v(&["  a();  ", "", "  b();"]));
    }

    #[test]
    fn header_echo_single_line() {
        let header = "  function foo(a, b) {";
        let raw = "```js\nfunction foo(a, b) {\n  return a;\n```";
        assert_eq!(parse_response(raw, header, false), v(&["  return a;"]));
        // Same name, different spacing and an `async` in front.
        let raw = "async function foo(a,b){\n  return a;";
        assert_eq!(parse_response(raw, header, false), v(&["  return a;"]));
        // Only one header line is dropped.
        let raw = "function foo(a, b) {\nfunction foo(a, b) {\nx";
        assert_eq!(parse_response(raw, header, false), v(&["function foo(a, b) {", "x"]));
        // A declaration of another function is kept.
        let raw = "function bar(a, b) {\nx";
        assert_eq!(parse_response(raw, header, false), v(&["function bar(a, b) {", "x"]));
        // Blank lines before an echoed header go with it.
        let raw = "\n\nfunction foo(a, b) {\nx";
        assert_eq!(parse_response(raw, header, false), v(&["x"]));
    }

    #[test]
    fn header_echo_allman() {
        let header = "function foo()\n{";
        // Echoed on two lines: both go.
        assert_eq!(parse_response("function foo()\n{\n  x();", header, false), v(&["  x();"]));
        // Echoed on one line.
        assert_eq!(parse_response("function foo() {\n  x();", header, false), v(&["  x();"]));
        // Only its first line.
        assert_eq!(parse_response("function foo()\n  x();", header, false), v(&["  x();"]));
    }

    #[test]
    fn skip_blank() {
        let raw = "a();\n\n   \nb();\n";
        assert_eq!(parse_response(raw, "", true), v(&["a();", "b();"]));
        assert_eq!(parse_response(raw, "", false), v(&["a();", "", "   ", "b();"]));
        let o = ScoreOptions { skip_blank: true, ..opts(2, Normalize::Trim) };
        let s = score_raw(raw, "", &v(&["a();", "b();"]), &[], &[], &o);
        assert_eq!((s.matched, s.hallucinated), (2, 0));
    }

    #[test]
    fn declared_names() {
        assert_eq!(declared_name("function foo(a) {"), Some("foo"));
        assert_eq!(declared_name("export async function* $g_1 (x) {"), Some("$g_1"));
        assert_eq!(declared_name("var f = function (x) {"), None);
        assert_eq!(declared_name("myfunction foo() {"), None);
        assert_eq!(declared_name("functional(x)"), None);
    }

    // ---- properties --------------------------------------------------------------

    /// Lines from a tiny alphabet so that repeats, normalisation collisions
    /// and blank lines are common.
    fn line() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["a", " a", "a ", "b", "}", "  }", "return;", "", " ", "x  y", "x y"]).prop_map(str::to_owned)
    }

    fn mode() -> impl Strategy<Value = Normalize> {
        prop::sample::select(vec![Normalize::Trim, Normalize::Exact, Normalize::Squash])
    }

    fn case() -> impl Strategy<Value = (Vec<String>, Vec<String>, Vec<String>, Normalize, usize)> {
        (
            prop::collection::vec(line(), 0..10),
            prop::collection::vec(line(), 0..8),
            prop::collection::vec(line(), 0..16),
            mode(),
            0usize..12,
        )
    }

    /// Non-blank lines from the same tiny alphabet as [`line`].
    fn solid_line() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["a", " a", "a ", "b", "}", "  }", "return;", "x  y", "x y"]).prop_map(str::to_owned)
    }

    /// Lines that never equal a [`line`] in any mode: blank ones and prose.
    fn garbage_line() -> impl Strategy<Value = String> {
        prop::sample::select(vec!["", " ", "\t", "The function returns.", "zz"]).prop_map(str::to_owned)
    }

    fn blank_free_case() -> impl Strategy<Value = (Vec<String>, Vec<String>, Vec<String>, Normalize, usize)> {
        (
            prop::collection::vec(solid_line(), 0..10),
            prop::collection::vec(solid_line(), 0..8),
            prop::collection::vec(solid_line(), 0..16),
            mode(),
            0usize..12,
        )
    }

    /// What parsing leaves of an answer: no trailing blank lines.
    fn trim_trailing_blanks(lines: &[String]) -> Vec<String> {
        let keep = lines.iter().rposition(|l| !l.trim().is_empty()).map_or(0, |i| i + 1);
        lines[..keep].to_vec()
    }

    fn is_blank_line(l: &str) -> bool {
        l.trim().is_empty()
    }

    proptest! {
        #[test]
        fn invariants((expected, extra, response, normalize, pass) in case()) {
            let o = ScoreOptions { lines: expected.len(), pass, normalize, skip_blank: false, policy: Policy::Posrecall, credit: Credit::All };
            let s = score(&expected, &extra, &response, &o);
            prop_assert_eq!(s.matched + s.missing, o.lines);
            prop_assert!(s.truncated <= s.missing);
            prop_assert_eq!(
                s.matched + s.hallucinated + s.extra + s.ignored_blank,
                response.len() + s.implied_blank
            );
            prop_assert!(s.ignored_blank <= response.iter().filter(|l| is_blank_line(l)).count());
            prop_assert_eq!(s.pass, s.matched >= pass);
            let count = |st| s.lines.iter().filter(|l| l.status == st).count();
            prop_assert_eq!(count(M), s.matched);
            prop_assert_eq!(count(X), s.missing);
            prop_assert_eq!(count(H), s.hallucinated);
            prop_assert_eq!(count(E), s.extra);
            // The view holds the answer's lines in order, raw, less the
            // ignored blank ones, plus the implied blank ones.
            let shown: Vec<&String> = s.lines.iter().filter(|l| l.status != X).map(|l| &l.text).collect();
            prop_assert_eq!(shown.len(), response.len() - s.ignored_blank + s.implied_blank);
            let shown_solid: Vec<&String> = shown.into_iter().filter(|l| !is_blank_line(l)).collect();
            let response_solid: Vec<&String> = response.iter().filter(|l| !is_blank_line(l)).collect();
            prop_assert_eq!(shown_solid, response_solid);
            prop_assert!(s.lines.iter().all(|l| l.status != H || !is_blank_line(&l.text)));
        }

        #[test]
        fn matched_plus_missing_is_lines_for_any_lines((expected, extra, response, normalize, pass) in case(), lines in 0usize..14) {
            let o = ScoreOptions { lines, pass, normalize, skip_blank: false, policy: Policy::Posrecall, credit: Credit::All };
            let s = score(&expected, &extra, &response, &o);
            prop_assert_eq!(s.matched + s.missing, lines);
            prop_assert_eq!(s.matched + s.hallucinated + s.extra + s.ignored_blank, response.len() + s.implied_blank);
        }

        #[test]
        fn the_truth_scores_perfectly((expected, extra, _r, normalize, _p) in case()) {
            let o = ScoreOptions { lines: expected.len(), pass: 0, normalize, skip_blank: false, policy: Policy::Posrecall, credit: Credit::All };
            let n = expected.len();
            let closing = n - trim_trailing_blanks(&expected).len();
            let s = score(&expected, &extra, &expected, &o);
            let parsed = score(&expected, &extra, &trim_trailing_blanks(&expected), &o);
            let c = |s: &Score| (s.matched, s.missing, s.hallucinated, s.extra, s.truncated, s.implied_blank, s.ignored_blank);
            if expected.iter().all(|l| is_blank_line(l)) {
                // Nothing but blank lines: no anchor, so no credit (principle 1).
                prop_assert_eq!(c(&s), (0, n, 0, 0, n, 0, n));
                prop_assert_eq!(c(&parsed), (0, n, 0, 0, n, 0, 0));
            } else {
                prop_assert_eq!(c(&s), (n, 0, 0, 0, 0, 0, 0));
                prop_assert_eq!(c(&parsed), (n, 0, 0, 0, 0, closing, 0));
            }
        }

        #[test]
        fn a_parsed_prefix_scores_what_it_reproduced((expected, extra, _r, normalize, _p) in case(), cut in 0usize..=10) {
            let n = expected.len();
            let response = trim_trailing_blanks(&expected[..cut.min(n)]);
            let p = response.len();
            // Computed from the expected lines alone: the lines written, or
            // all of them when only a blank run that closes the window follows.
            let want = if p == 0 { 0 } else if expected[p..].iter().all(|l| is_blank_line(l)) { n } else { p };
            let o = ScoreOptions { lines: n, pass: 0, normalize, skip_blank: false, policy: Policy::Posrecall, credit: Credit::All };
            let s = score(&expected, &extra, &response, &o);
            prop_assert_eq!(
                (s.matched, s.missing, s.truncated, s.hallucinated, s.extra, s.ignored_blank),
                (want, n - want, n - want, 0, 0, 0)
            );
            prop_assert_eq!(s.implied_blank, if p > 0 { want - p } else { 0 });
        }

        #[test]
        fn an_answer_without_blank_lines_loses_only_them((expected, extra, _r, normalize, _p) in case()) {
            let n = expected.len();
            let solid: Vec<String> = expected.iter().filter(|l| !is_blank_line(l)).cloned().collect();
            let closing = n - trim_trailing_blanks(&expected).len();
            let want = if solid.is_empty() { 0 } else { solid.len() + closing };
            let o = ScoreOptions { lines: n, pass: 0, normalize, skip_blank: false, policy: Policy::Posrecall, credit: Credit::All };
            let s = score(&expected, &extra, &solid, &o);
            // The dropped blank lines are missing, and none of them truncated.
            prop_assert_eq!((s.matched, s.missing, s.hallucinated, s.extra), (want, n - want, 0, 0));
            prop_assert_eq!(s.truncated, if solid.is_empty() { n } else { 0 });
        }

        #[test]
        fn blanks_never_rescue_garbage(
            (expected, extra, _r, normalize, _p) in case(),
            response in prop::collection::vec(garbage_line(), 0..24),
        ) {
            let o = ScoreOptions { lines: expected.len(), pass: 0, normalize, skip_blank: false, policy: Policy::Posrecall, credit: Credit::All };
            let solid: Vec<String> = response.iter().filter(|l| !is_blank_line(l)).cloned().collect();
            let blank = response.len() - solid.len();
            for (answer, ignored) in [(&response, blank), (&solid, 0)] {
                let s = score(&expected, &extra, answer, &o);
                prop_assert_eq!(
                    (s.matched, s.extra, s.implied_blank, s.hallucinated, s.ignored_blank),
                    (0, 0, 0, solid.len(), ignored)
                );
                prop_assert_eq!(s.truncated, expected.len().saturating_sub(solid.len()));
            }
        }

        #[test]
        fn adding_blank_lines_never_lowers_the_credit(
            (expected, extra, response, normalize, _p) in case(),
            inserts in prop::collection::vec((0usize..17, prop::sample::select(vec!["", " ", "\t"])), 1..4),
        ) {
            let o = ScoreOptions { lines: expected.len(), pass: 0, normalize, skip_blank: false, policy: Policy::Posrecall, credit: Credit::All };
            let before = score(&expected, &extra, &response, &o);
            let mut more = response.clone();
            for (at, blank) in inserts {
                more.insert(at.min(more.len()), blank.to_owned());
            }
            let after = score(&expected, &extra, &more, &o);
            prop_assert_eq!(after.hallucinated, before.hallucinated);
            prop_assert!(after.matched + after.extra >= before.matched + before.extra);
            if normalize != Normalize::Exact {
                // All blank lines compare equal: in-place pairing only grows.
                prop_assert!(after.matched >= before.matched);
            }
        }

        #[test]
        fn without_blank_lines_the_rule_changes_nothing((expected, extra, response, normalize, pass) in blank_free_case(), skip_blank in any::<bool>()) {
            // The plain alignment of all lines, scored as before blank lines
            // had a rule of their own.
            let lines = expected.len();
            let norm = |v: &[String]| v.iter().map(|l| normalize.apply(l).into_owned()).collect::<Vec<_>>();
            let window = norm(&expected.iter().chain(&extra).cloned().collect::<Vec<_>>());
            let pairs = align(&norm(&response), &window, lines);
            let matched = pairs.iter().filter(|&&(_, j)| j < lines).count();
            let (r, w) = pairs.last().map_or((0, 0), |&(i, j)| (i + 1, j + 1));
            let truncated = lines.saturating_sub(w).saturating_sub(response.len() - r);
            let o = ScoreOptions { lines, pass, normalize, skip_blank, policy: Policy::Posrecall, credit: Credit::All };
            let s = score(&expected, &extra, &response, &o);
            prop_assert_eq!(
                (s.matched, s.missing, s.truncated, s.hallucinated, s.extra, s.implied_blank, s.ignored_blank),
                (matched, lines - matched, truncated, response.len() - pairs.len(), pairs.len() - matched, 0, 0)
            );
        }

        #[test]
        fn alignment_length_matches_similar((expected, extra, response, normalize, _p) in case()) {
            let window: Vec<Cow<'_, str>> =
                expected.iter().chain(&extra).map(|l| normalize.apply(l)).collect();
            let answer: Vec<Cow<'_, str>> = response.iter().map(|l| normalize.apply(l)).collect();
            let ours = align(&answer, &window, expected.len());
            // Strictly increasing, and every pair really is equal.
            prop_assert!(ours.windows(2).all(|p| p[0].0 < p[1].0 && p[0].1 < p[1].1));
            prop_assert!(ours.iter().all(|&(i, j)| answer[i] == window[j]));
            for alg in [similar::Algorithm::Lcs, similar::Algorithm::RawMyers, similar::Algorithm::Myers] {
                let equal: usize = similar::capture_diff_slices(alg, &answer, &window)
                    .iter()
                    .map(|op| match *op {
                        similar::DiffOp::Equal { len, .. } => len,
                        _ => 0,
                    })
                    .sum();
                prop_assert_eq!(ours.len(), equal, "{:?}", alg);
            }
        }

        #[test]
        fn parse_never_panics(raw in "(\\PC|\n|\r|```|~~~|function f\\(\\) \\{| ){0,60}", skip in any::<bool>()) {
            let lines = parse_response(&raw, "function f() {", skip);
            prop_assert!(lines.iter().all(|l| !l.contains('\n')));
            if let Some(last) = lines.last() {
                prop_assert_eq!(last.trim_end(), last.as_str());
                prop_assert!(!last.is_empty());
            }
            if skip {
                prop_assert!(lines.iter().all(|l| !l.trim().is_empty()));
            }
        }

        #[test]
        fn squash_is_idempotent(s in "[ \ta-c\u{a0}]{0,12}") {
            let once = Normalize::Squash.apply(&s).into_owned();
            prop_assert!(!once.contains("  "));
            prop_assert_eq!(Normalize::Squash.apply(&once), once.as_str());
        }
    }

    /// A blank answer line before the first anchor pairs with a blank window
    /// line before it only when that anchor is a matched (LINES) line: an
    /// answer that starts at the extra window earns no blank line of LINES.
    #[test]
    fn a_blank_line_before_an_extra_anchor_earns_nothing() {
        let expected = v(&["x = 1;", ""]);
        let extra = v(&["y = 2;"]);
        let s = score(&expected, &extra, &v(&["", "y = 2;"]), &opts(2, Normalize::Trim));
        assert_eq!((s.matched, s.extra), (0, 1), "{:?}", statuses(&s));
    }

    /// The answer lines read are ten per window line (expected and extra
    /// together), at least 4000: here 10 · (300 + 200) = 5000 of 5001.
    #[test]
    fn the_lines_read_scale_with_the_whole_window() {
        let expected: Vec<String> = (0..300).map(|i| format!("a{i};")).collect();
        let extra: Vec<String> = (0..200).map(|i| format!("b{i};")).collect();
        let raw = vec!["z;"; 5001].join("\n");
        assert_eq!(raw_score(&raw, &expected, &extra).unread_lines, Some(1));
    }
}
