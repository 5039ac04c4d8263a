//! Targets: which functions are asked about, and what the right answer is.
//!
//! docs/METHOD.md §2 (Targets). A function is eligible when it is a clean, classic named
//! declaration whose name is unique in the file and whose body holds at least
//! LINES counted lines after the line with the opening brace. Its ground truth
//! is those LINES lines verbatim; the following LINES lines of the file form the
//! "extra" window that earns bonus lines. COUNT targets are then drawn, one per
//! equal byte-offset bucket of the kept text, with a seeded RNG.

pub mod crop;

use crate::corpus::classify::LineClass;
use crate::corpus::{Corpus, FunctionDecl, Parsed};
use crate::score::{Credit, Normalize, Policy, ScoreOptions};
use crate::settings::Named;
use crate::settings::{Explain, Names, Setting};
use crate::targets::crop::LineRange;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

crate::settings::named_choice! {
    /// How a question points at its function (docs/METHOD.md §2 and §4).
    #[derive(Default, Hash)]
    pub enum Anchor {
        /// By name (`the function named `NAME``): named declarations whose name is unique.
        #[default]
        Name,
        /// By its header, quoted verbatim: property, assignment and object-literal
        /// definitions too, where the name or the header is unique.
        Header,
    }
}

impl Anchor {
    /// Whether runs made before the setting existed had it (it is then left
    /// out of run files, so that their keys hold).
    pub fn is_default(&self) -> bool {
        *self == Anchor::default()
    }
}

/// What picks the targets and how their answers are scored: the settings
/// every command shares, with the method's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct TargetSpec {
    /// COUNT: functions asked about, spread over the kept text by depth.
    pub count: usize,
    /// LINES: lines after the opening brace each answer should reproduce.
    pub lines: usize,
    /// The sampler's seed.
    pub seed: u64,
    /// Keep exactly these lines of the corpus.
    pub crop_lines: Option<LineRange>,
    /// Blank lines do not count anywhere.
    pub skip_blank: bool,
    /// Rename every declared function to a fresh name drawn with `seed`.
    pub rename: bool,
    /// PASS; `None`: [`crate::score::PASS_PERCENT`] of LINES, rounded up.
    pub pass: Option<usize>,
    /// How lines compare; `None`: the policy's own ([`Policy::default_normalize`]).
    pub normalize: Option<Normalize>,
    /// Which scoring rule decides matched, missing and pass.
    pub policy: Policy,
    /// How questions point at their function, and so which functions can be asked about.
    pub anchor: Anchor,
    /// Which lines a score counts: all, or code alone.
    pub credit: Credit,
    /// Functions whose LINES expected lines hold fewer code lines than
    /// this are not drawn (0: none left out).
    pub min_code_lines: usize,
}

impl Default for TargetSpec {
    fn default() -> Self {
        TargetSpec {
            count: 16,
            lines: 20,
            seed: 1,
            crop_lines: None,
            skip_blank: false,
            rename: false,
            pass: None,
            normalize: None,
            policy: Policy::Posrecall,
            anchor: Anchor::Name,
            credit: Credit::All,
            min_code_lines: 0,
        }
    }
}

/// Target settings that mean nothing together, or that would ask for more
/// memory or time than any run can give; each names the setting.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("must be at least 1")]
    Zero(Setting),
    #[error("{value} is more than the largest, {max}")]
    TooLarge { setting: Setting, value: usize, max: usize },
    #[error("{pass} is more than the {lines} lines per answer: nothing could pass")]
    PassAboveLines { pass: usize, lines: usize },
    #[error("{min} is more than the {lines} lines per answer: no function could be drawn")]
    MinCodeAboveLines { min: usize, lines: usize },
    /// A setting the codeneedle policy has no room for (its pass is a ratio
    /// of the scored lines, its LINES are raw lines, its comparison keeps or
    /// drops the indentation only).
    #[error("has no meaning under the codeneedle policy")]
    NotUnderCodeneedle(Setting),
}

impl SpecError {
    /// The setting at fault.
    pub fn setting(&self) -> Setting {
        match self {
            SpecError::Zero(s) | SpecError::TooLarge { setting: s, .. } | SpecError::NotUnderCodeneedle(s) => *s,
            SpecError::PassAboveLines { .. } => Setting::Pass,
            SpecError::MinCodeAboveLines { .. } => Setting::MinCodeLines,
        }
    }
}

impl Explain for SpecError {
    fn explain(&self, n: &dyn Names) -> String {
        match self {
            SpecError::Zero(s) | SpecError::TooLarge { setting: s, .. } => format!("{} {self}", n.name(*s)),
            SpecError::PassAboveLines { pass, lines } => format!(
                "{} is more than {}: nothing could pass",
                n.set(Setting::Pass, &pass.to_string()),
                n.set(Setting::Lines, &lines.to_string())
            ),
            SpecError::MinCodeAboveLines { min, lines } => format!(
                "{} is more than {}: no function could be drawn",
                n.set(Setting::MinCodeLines, &min.to_string()),
                n.set(Setting::Lines, &lines.to_string())
            ),
            SpecError::NotUnderCodeneedle(s) => format!(
                "{} {self} (its pass is 40% of the scored lines, its LINES are raw lines, and it compares with {} or {} only); \
                 leave it out, or score under {}",
                n.name(*s),
                n.set(Setting::Normalize, Normalize::TrimEnd.as_str()),
                n.set(Setting::Normalize, Normalize::Trim.as_str()),
                n.set(Setting::Policy, Policy::Posrecall.as_str()),
            ),
        }
    }
}

impl TargetSpec {
    /// The most functions one run asks about.
    pub(crate) const MAX_COUNT: usize = 10_000;
    /// The most lines one answer is asked for (a function body, not a file).
    pub(crate) const MAX_LINES: usize = 1_000;

    /// What eligibility and sampling read.
    pub fn options(&self) -> TargetOptions {
        TargetOptions {
            count: self.count,
            lines: self.lines,
            seed: self.seed,
            skip_blank: self.skip_blank,
            anchor: self.anchor,
            policy: self.policy,
            min_code_lines: self.min_code_lines,
        }
    }

    /// The renaming seed when renaming is on (the target seed).
    pub fn rename_seed(&self) -> Option<u64> {
        self.rename.then_some(self.seed)
    }

    /// The pass threshold: the one given, else [`crate::score::PASS_PERCENT`]
    /// of LINES rounded up ([`default_pass`]).
    pub fn pass(&self) -> usize {
        self.pass.unwrap_or(default_pass(self.lines))
    }

    /// The line comparison: the one given, else the policy's.
    pub fn normalize(&self) -> Normalize {
        self.normalize.unwrap_or(self.policy.default_normalize())
    }

    /// How answers are scored.
    pub(crate) fn score_options(&self) -> ScoreOptions {
        ScoreOptions {
            lines: self.lines,
            pass: self.pass(),
            normalize: self.normalize(),
            skip_blank: self.skip_blank,
            policy: self.policy,
            credit: self.credit,
        }
    }

    /// Checks the numbers make sense together.
    pub fn validate(&self) -> Result<(), SpecError> {
        for (setting, value, max) in [(Setting::Count, self.count, Self::MAX_COUNT), (Setting::Lines, self.lines, Self::MAX_LINES)] {
            if value == 0 {
                return Err(SpecError::Zero(setting));
            }
            if value > max {
                return Err(SpecError::TooLarge { setting, value, max });
            }
        }
        if self.min_code_lines > self.lines {
            return Err(SpecError::MinCodeAboveLines { min: self.min_code_lines, lines: self.lines });
        }
        if self.pass == Some(0) {
            return Err(SpecError::Zero(Setting::Pass));
        }
        if self.pass() > self.lines {
            return Err(SpecError::PassAboveLines { pass: self.pass(), lines: self.lines });
        }
        if self.policy == Policy::Codeneedle {
            let misplaced = [
                (Setting::Pass, self.pass.is_some()),
                (Setting::SkipBlank, self.skip_blank),
                (Setting::Normalize, !matches!(self.normalize(), Normalize::TrimEnd | Normalize::Trim)),
            ];
            if let Some((s, _)) = misplaced.into_iter().find(|(_, bad)| *bad) {
                return Err(SpecError::NotUnderCodeneedle(s));
            }
        }
        Ok(())
    }
}

/// The default pass threshold at `lines`: [`crate::score::PASS_PERCENT`]
/// of them, rounded up, so at least 1.
pub fn default_pass(lines: usize) -> usize {
    (lines * crate::score::PASS_PERCENT).div_ceil(100).max(1)
}

/// What decides eligibility and sampling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TargetOptions {
    pub count: usize,
    pub lines: usize,
    pub seed: u64,
    pub skip_blank: bool,
    pub anchor: Anchor,
    /// Decides the extra window ([`Policy::Codeneedle`]: the function's own
    /// body only), not which functions are eligible.
    pub policy: Policy,
    /// Eligible functions with fewer code lines among their LINES expected
    /// lines are left out before the draw ([`select`]).
    pub min_code_lines: usize,
}

/// One function asked about, with everything the scorer needs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Target {
    pub name: String,
    /// 1-based line of the declaration's first line in the corpus file.
    pub line: usize,
    /// Byte offset of the declaration in the corpus file.
    pub byte_offset: usize,
    /// Prefix tokens before the declaration, once a model has tokenized the prefix.
    #[serde(default)]
    pub token_offset: Option<usize>,
    /// (byte_offset − kept start) / kept length, in [0, 1].
    pub depth: f64,
    /// The declaration from its line's start through the opening brace, verbatim
    /// (line endings normalised to `\n`).
    pub header: String,
    /// The ground truth: exactly LINES lines after the brace line.
    pub expected: Vec<String>,
    /// The class of each `expected` line, from the corpus's parse tree
    /// (code, comment, docstring, blank); empty in targets files made
    /// before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<LineClass>,
    /// The extra window: up to LINES further lines of the kept text; under
    /// the codeneedle policy up to [`crate::score::codeneedle::EXTRA_LINES`]
    /// further lines of the function's own body.
    pub extra_window: Vec<String>,
    /// 1-based line of the last ground-truth line (the span cropping must keep).
    #[serde(skip)]
    pub last_expected_line: usize,
    /// Only the header tells this function apart (`--anchor header`; no
    /// name is unique): its question quotes the header and names nothing,
    /// and `name` is `NAME@LINE`, so that answers, `--only` and resuming
    /// still find each target by a name of its own.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub header_only: bool,
}

/// Fewer eligible functions than COUNT; the command adds what would fix it.
#[derive(Debug, thiserror::Error)]
#[error("{}, but the count asked for is {wanted}", self.what_was_found())]
pub struct TooFewTargets {
    pub found: usize,
    pub wanted: usize,
    pub lines: usize,
    pub first: usize,
    pub last: usize,
    pub path: String,
    /// What an eligible function is in the corpus language.
    pub rule: &'static str,
    /// `--min-code-lines`: how many of those lines must be code (0: off).
    pub min_code_lines: usize,
    /// What the lines asked for follow: "its opening brace".
    pub after: &'static str,
}

impl TooFewTargets {
    /// How many eligible functions there are, where, and what eligible means.
    pub(crate) fn what_was_found(&self) -> String {
        let code = match self.min_code_lines {
            0 => String::new(),
            n => format!(", at least {n} of them code"),
        };
        format!(
            "only {} eligible function(s) in lines {}..{} of {} ({} with at least {} lines after {}{code})",
            self.found, self.first, self.last, self.path, self.rule, self.lines, self.after
        )
    }
}

fn is_blank(s: &str) -> bool {
    s.trim().is_empty()
}

/// A function left out because neither its name nor its header tells it
/// from another (`--anchor header`): recorded in the run file and told on
/// the terminal, so that a user sees what could not be asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ambiguous {
    pub name: String,
    /// 1-based line where it starts.
    pub line: usize,
    /// Its header, which another function in the kept lines has too.
    pub header: String,
}

/// Every eligible function whose declaration and ground truth lie in 0-based
/// lines `first..=last`, in file order. Depth is relative to that range.
pub fn eligible(corpus: &Corpus, parsed: &Parsed, first: usize, last: usize, opts: &TargetOptions) -> Vec<Target> {
    candidates(corpus, parsed, first, last, opts).0
}

/// The functions `--anchor header` leaves out in lines `first..=last`
/// because another function there has the same header and none has only
/// its name; none with `--anchor name`, which asks about declarations whose
/// name is unique and has never listed the others.
pub fn ambiguous(corpus: &Corpus, parsed: &Parsed, first: usize, last: usize, opts: &TargetOptions) -> Vec<Ambiguous> {
    candidates(corpus, parsed, first, last, opts).1
}

/// What the terminal says of the functions left out as ambiguous (the first
/// few, each with its line), if any.
pub fn ambiguity_note(left_out: &[Ambiguous]) -> Option<String> {
    const SHOWN: usize = 8;
    left_out.first()?;
    let mut named: Vec<String> = left_out.iter().take(SHOWN).map(|a| format!("`{}` (line {})", a.name, a.line)).collect();
    if left_out.len() > SHOWN {
        named.push(format!("and {} more", left_out.len() - SHOWN));
    }
    Some(format!(
        "note: {} function(s) left out because both their name and their header repeat in the kept lines (listed in the \
         run file's manifest.corpus.ambiguous): {}",
        left_out.len(),
        named.join(", ")
    ))
}

/// The kept range's eligible functions, and the ones left out as ambiguous.
fn candidates(corpus: &Corpus, parsed: &Parsed, first: usize, last: usize, opts: &TargetOptions) -> (Vec<Target>, Vec<Ambiguous>) {
    // By name, only declarations are asked about; by header, definitions too.
    let mut all: Vec<&FunctionDecl> = parsed.functions.iter().collect();
    if opts.anchor == Anchor::Header {
        all.extend(&parsed.definitions);
        all.sort_by_key(|f| f.start_byte);
    }
    // A function is asked about by its bare name when no other function
    // shares it, else by its qualified name (`Class.method`) when that is
    // unique; otherwise its name is ambiguous.
    let mut bare: HashMap<&str, usize> = HashMap::new();
    let mut qualified: HashMap<&str, usize> = HashMap::new();
    for f in &all {
        *bare.entry(f.name.as_str()).or_default() += 1;
        if let Some(q) = &f.qualified {
            *qualified.entry(q.as_str()).or_default() += 1;
        }
    }
    let unique_name = |f: &FunctionDecl| -> Option<String> {
        if bare.get(f.name.as_str()) == Some(&1) {
            Some(f.name.clone())
        } else {
            f.qualified.clone().filter(|q| *q != f.name && qualified.get(q.as_str()) == Some(&1))
        }
    };
    // By header: how often each header occurs among the functions whose
    // header lies in the kept lines, clean or not.
    let mut headers: HashMap<String, usize> = HashMap::new();
    if opts.anchor == Anchor::Header {
        for f in &all {
            let (decl_line, brace_line) = (corpus.line_of_byte(f.start_byte), corpus.line_of_byte(f.open_brace_end.saturating_sub(1)));
            if decl_line >= first && brace_line <= last {
                *headers.entry(header_of(corpus, f)).or_default() += 1;
            }
        }
    }
    let kept_start = corpus.line_start(first);
    let kept_len = (corpus.line_end(last) - kept_start).max(1);
    let (mut out, mut left_out) = (Vec::new(), Vec::new());
    for f in all {
        let name = unique_name(f);
        if opts.anchor == Anchor::Name && name.is_none() {
            continue;
        }
        let Some(mut t) = ground_truth(corpus, &parsed.classes, f, first, last, opts) else { continue };
        t.depth = (f.start_byte - kept_start) as f64 / kept_len as f64;
        match (opts.anchor, name) {
            (Anchor::Name, Some(name)) => t.name = name,
            (Anchor::Header, Some(name)) => t.name = name,
            (Anchor::Header, None) if headers.get(&t.header) == Some(&1) => {
                t.name = format!("{}@{}", f.name, t.line);
                t.header_only = true;
            }
            _ => {
                left_out.push(Ambiguous { name: f.name.clone(), line: t.line, header: t.header });
                continue;
            }
        }
        out.push(t);
    }
    (out, left_out)
}

/// The header of `f` as a question quotes it: from the start of its first
/// line through the opening brace, verbatim (line endings as `\n`).
fn header_of(corpus: &Corpus, f: &FunctionDecl) -> String {
    let decl_line = corpus.line_of_byte(f.start_byte);
    corpus.text[corpus.line_start(decl_line)..f.open_brace_end].trim_start_matches('\u{feff}').replace("\r\n", "\n")
}

/// `f` as a target, unnamed and at depth 0, when it is clean and its
/// header and LINES counted body lines lie in lines `first..=last`.
fn ground_truth(
    corpus: &Corpus,
    classes: &[LineClass],
    f: &FunctionDecl,
    first: usize,
    last: usize,
    opts: &TargetOptions,
) -> Option<Target> {
    let counts = |line: &str| !opts.skip_blank || !is_blank(line);
    if !f.clean || f.body_end <= f.open_brace_end {
        return None;
    }
    let decl_line = corpus.line_of_byte(f.start_byte);
    let brace_line = corpus.line_of_byte(f.open_brace_end.saturating_sub(1));
    // The body's last line that can be asked for.
    let body_last_line = corpus.line_of_byte(f.body_end - 1);
    if decl_line < first || body_last_line <= brace_line || brace_line >= last {
        return None;
    }
    // Lines strictly inside the body, after the brace line, within the kept range.
    let body_last = body_last_line.min(last);
    let mut expected = Vec::with_capacity(opts.lines);
    let mut expected_classes = Vec::with_capacity(opts.lines);
    let mut i = brace_line + 1;
    while i <= body_last && expected.len() < opts.lines {
        let l = corpus.line(i);
        if counts(l) {
            expected.push(l.to_string());
            expected_classes.extend(classes.get(i).copied());
        }
        i += 1;
    }
    // All or nothing: a class list that does not cover every line is none.
    if expected_classes.len() != expected.len() {
        expected_classes.clear();
    }
    if expected.len() < opts.lines || opts.lines == 0 {
        return None;
    }
    let last_expected = i - 1;
    // posrecall's extra window runs on past the function's end (a model
    // that keeps going is credited for what really follows); codeneedle's
    // is the rest of the body, the line of the closing brace excluded.
    let (extra_last, extra_len) = match opts.policy {
        Policy::Posrecall => (last, opts.lines),
        Policy::Codeneedle => (body_last, crate::score::codeneedle::EXTRA_LINES),
    };
    let mut extra = Vec::with_capacity(extra_len);
    while i <= extra_last && extra.len() < extra_len {
        let l = corpus.line(i);
        if counts(l) {
            extra.push(l.to_string());
        }
        i += 1;
    }
    Some(Target {
        name: String::new(),
        line: decl_line + 1,
        byte_offset: f.start_byte,
        token_offset: None,
        depth: 0.0,
        header: header_of(corpus, f),
        expected,
        classes: expected_classes,
        extra_window: extra,
        last_expected_line: last_expected + 1,
        header_only: false,
    })
}

/// Draws `opts.count` targets stratified by depth, returned in file order.
///
/// The kept text is cut into COUNT equal byte buckets; each non-empty bucket
/// gives one target drawn with a ChaCha8 RNG seeded from `opts.seed`. Each empty
/// bucket then borrows from the nearest bucket that still has candidates left
/// (the lower one when two are equally near). The same candidates and seed
/// always give the same targets.
pub fn sample(candidates: Vec<Target>, opts: &TargetOptions) -> Vec<Target> {
    let count = opts.count.max(1);
    if candidates.len() <= count {
        return candidates;
    }
    let mut buckets: Vec<Vec<Target>> = (0..count).map(|_| Vec::new()).collect();
    for t in candidates {
        let b = ((t.depth * count as f64) as usize).min(count - 1);
        buckets[b].push(t);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(opts.seed);
    let mut chosen = Vec::with_capacity(count);
    let mut empty = Vec::new();
    for (b, bucket) in buckets.iter_mut().enumerate() {
        if bucket.is_empty() {
            empty.push(b);
        } else {
            let i = rng.random_range(0..bucket.len());
            chosen.push(bucket.remove(i));
        }
    }
    for b in empty {
        let donor =
            (1..count).find_map(|d| [b.checked_sub(d), Some(b + d)].into_iter().flatten().find(|&n| n < count && !buckets[n].is_empty()));
        if let Some(n) = donor {
            let i = rng.random_range(0..buckets[n].len());
            chosen.push(buckets[n].remove(i));
        }
    }
    chosen.sort_by_key(|t| t.byte_offset);
    chosen
}

/// The candidates with at least `opts.min_code_lines` code lines among
/// their expected lines, and how many were left out. It runs before the
/// seeded draw, so that the draw is among the functions that qualify.
pub fn enough_code(candidates: Vec<Target>, opts: &TargetOptions) -> (Vec<Target>, usize) {
    if opts.min_code_lines == 0 {
        return (candidates, 0);
    }
    let before = candidates.len();
    let kept: Vec<Target> =
        candidates.into_iter().filter(|t| crate::score::composition::code_lines(&t.classes) >= opts.min_code_lines).collect();
    let left_out = before - kept.len();
    (kept, left_out)
}

/// How many eligible functions of lines `first..=last` `--min-code-lines`
/// leaves out (recorded in the manifest); `None` when it is off.
pub fn few_code_lines(corpus: &Corpus, parsed: &Parsed, first: usize, last: usize, opts: &TargetOptions) -> Option<usize> {
    (opts.min_code_lines > 0).then(|| enough_code(eligible(corpus, parsed, first, last, opts), opts).1)
}

/// Eligible targets of lines `first..=last` with enough code
/// ([`enough_code`]), sampled; fewer than COUNT is an error.
pub fn select(corpus: &Corpus, parsed: &Parsed, first: usize, last: usize, opts: &TargetOptions) -> Result<Vec<Target>, TooFewTargets> {
    let (candidates, _) = enough_code(eligible(corpus, parsed, first, last, opts), opts);
    if candidates.len() < opts.count || opts.count == 0 {
        return Err(TooFewTargets {
            found: candidates.len(),
            wanted: opts.count,
            lines: opts.lines,
            first: first + 1,
            last: last + 1,
            path: corpus.path.display().to_string(),
            rule: match opts.anchor {
                Anchor::Name => parsed.rule,
                Anchor::Header => "a function whose name or header is unique",
            },
            min_code_lines: opts.min_code_lines,
            after: parsed.after,
        });
    }
    Ok(sample(candidates, opts))
}

impl TooFewTargets {
    /// The error and what would fix it, by how the kept range was chosen
    /// (`crop`; `None` where the range is the whole file or one given by
    /// hand, as for `targets` and `score`).
    pub(crate) fn explain_with(&self, n: &dyn Names, crop: Option<crate::targets::crop::CropMode>) -> String {
        use crate::targets::crop::CropMode;
        let name = |s| n.name(s);
        let (count, lines) = (name(Setting::Count), name(Setting::Lines));
        let fix = match crop {
            None => format!("lower {count} or {lines}, or choose a {} range that holds more functions", name(Setting::CropLines)),
            Some(CropMode::Densest) => format!(
                "use a longer-context model (or a larger {}), {} around another region, or a smaller {count} or {lines}",
                name(Setting::Ctx),
                n.set(Setting::CropLines, "A:B")
            ),
            Some(_) => format!(
                "use a longer-context model (or a larger {}), {} (the window with the most functions), or a smaller {count} or {lines}",
                name(Setting::Ctx),
                n.set(Setting::Crop, "densest")
            ),
        };
        format!("{}, but {} is {}; {fix}", self.what_was_found(), count, self.wanted)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(count: usize, lines: usize, pass: Option<usize>) -> TargetSpec {
        TargetSpec { count, lines, pass, ..TargetSpec::default() }
    }

    /// Each rule of `validate` at its edges, and the setting each error names
    /// (the command turns it into the flag or key).
    #[test]
    fn validate_refuses_each_setting_at_its_edge() {
        let cases: [(TargetSpec, Result<(), SpecError>, Option<Setting>); 11] = [
            (spec(1, 1, None), Ok(()), None),
            (spec(10_000, 1_000, Some(1_000)), Ok(()), None),
            (spec(0, 20, None), Err(SpecError::Zero(Setting::Count)), Some(Setting::Count)),
            (
                spec(10_001, 20, None),
                Err(SpecError::TooLarge { setting: Setting::Count, value: 10_001, max: 10_000 }),
                Some(Setting::Count),
            ),
            (spec(16, 0, None), Err(SpecError::Zero(Setting::Lines)), Some(Setting::Lines)),
            (spec(16, 1_001, None), Err(SpecError::TooLarge { setting: Setting::Lines, value: 1_001, max: 1_000 }), Some(Setting::Lines)),
            (spec(16, 20, Some(0)), Err(SpecError::Zero(Setting::Pass)), Some(Setting::Pass)),
            (spec(16, 20, Some(21)), Err(SpecError::PassAboveLines { pass: 21, lines: 20 }), Some(Setting::Pass)),
            (spec(16, 20, Some(20)), Ok(()), None),
            // No pass given: 40% of the lines, so never above them.
            (spec(16, 5, None), Ok(()), None),
            (spec(0, 0, Some(0)), Err(SpecError::Zero(Setting::Count)), Some(Setting::Count)),
        ];
        for (s, want, setting) in cases {
            let got = s.validate();
            assert_eq!(got, want, "{s:?}");
            assert_eq!(got.err().map(|e| e.setting()), setting, "{s:?}");
        }
    }

    /// Under codeneedle a pass threshold, blank-line skipping or a comparison
    /// other than its verbatim one and its relax-indent one is refused.
    #[test]
    fn codeneedle_refuses_what_it_has_no_room_for() {
        let cn = |f: fn(&mut TargetSpec)| {
            let mut s = TargetSpec { policy: Policy::Codeneedle, ..TargetSpec::default() };
            f(&mut s);
            s.validate().err().map(|e| e.setting())
        };
        assert_eq!(cn(|_| {}), None);
        assert_eq!(cn(|s| s.normalize = Some(Normalize::Trim)), None);
        assert_eq!(cn(|s| s.pass = Some(8)), Some(Setting::Pass));
        assert_eq!(cn(|s| s.skip_blank = true), Some(Setting::SkipBlank));
        assert_eq!(cn(|s| s.normalize = Some(Normalize::Exact)), Some(Setting::Normalize));
        assert_eq!(TargetSpec { policy: Policy::Codeneedle, ..TargetSpec::default() }.normalize(), Normalize::TrimEnd);
        assert_eq!(TargetSpec::default().normalize(), Normalize::Trim);
    }

    /// 40% of LINES rounded up: 8 of 20 as before, 4 of 10, 2 of 5 (2.0),
    /// 2 of 3 (1.2 up), and never 0.
    #[test]
    fn pass_defaults_to_forty_percent_of_the_lines_rounded_up_and_renaming_uses_the_seed() {
        assert_eq!(spec(16, 20, None).pass(), 8);
        assert_eq!(spec(16, 10, None).pass(), 4);
        assert_eq!(spec(16, 5, None).pass(), 2);
        assert_eq!(spec(16, 3, None).pass(), 2);
        assert_eq!(spec(16, 1, None).pass(), 1);
        assert_eq!(spec(16, 21, None).pass(), 9);
        assert_eq!(spec(16, 20, Some(3)).pass(), 3);
        assert_eq!(spec(16, 20, Some(3)).score_options().pass, 3);
        let seeded = TargetSpec { seed: 7, ..TargetSpec::default() };
        assert_eq!(seeded.rename_seed(), None);
        assert_eq!(TargetSpec { rename: true, ..seeded }.rename_seed(), Some(7));
    }

    #[test]
    fn too_few_targets_says_what_was_found_where() {
        let e = TooFewTargets {
            found: 2,
            wanted: 16,
            lines: 20,
            first: 1,
            last: 300,
            path: "a.js".into(),
            rule: "a unique named `function` declaration",
            min_code_lines: 0,
            after: "its opening brace",
        };
        assert_eq!(
            e.to_string(),
            "only 2 eligible function(s) in lines 1..300 of a.js (a unique named `function` declaration with at least 20 lines \
             after its opening brace), but the count asked for is 16"
        );
    }

    /// A candidate at `depth` (its byte offset orders the file).
    fn at(depth: f64) -> Target {
        Target {
            name: format!("f{depth}"),
            line: 1,
            byte_offset: (depth * 1000.0) as usize,
            token_offset: None,
            depth,
            header: String::new(),
            expected: Vec::new(),
            classes: Vec::new(),
            extra_window: Vec::new(),
            last_expected_line: 1,
            header_only: false,
        }
    }

    fn depths(targets: &[Target]) -> Vec<f64> {
        targets.iter().map(|t| t.depth).collect()
    }

    fn draw(count: usize, seed: u64, candidates: &[f64]) -> Vec<f64> {
        let opts = TargetOptions {
            count,
            lines: 20,
            seed,
            skip_blank: false,
            anchor: Anchor::Name,
            policy: Default::default(),
            min_code_lines: 0,
        };
        depths(&sample(candidates.iter().map(|&d| at(d)).collect(), &opts))
    }

    /// One target from each of COUNT equal depth buckets; an empty bucket
    /// borrows from the nearest that has candidates left, the lower one on a
    /// tie; file order; the same seed the same draw.
    #[test]
    fn sample_takes_one_per_depth_bucket_and_borrows_from_the_nearest() {
        // Fewer or as many candidates as COUNT: all of them.
        assert_eq!(draw(3, 1, &[0.1, 0.9]), [0.1, 0.9]);
        // Buckets [0, ¼) [¼, ½) [½, ¾) [¾, 1): the three lone ones are certain.
        for seed in 0..8 {
            let d = draw(4, seed, &[0.1, 0.12, 0.3, 0.6, 0.9]);
            assert!(d.len() == 4 && (d[0] == 0.1 || d[0] == 0.12) && d[1..] == [0.3, 0.6, 0.9], "seed {seed}: {d:?}");
        }
        // Bucket 1 of 3 is empty; buckets 0 and 2 are as near, and bucket 2's
        // only candidate is taken, so bucket 0 gives two.
        for seed in 0..8 {
            let d = draw(3, seed, &[0.05, 0.1, 0.15, 0.9]);
            assert!(d.len() == 3 && d[2] == 0.9 && d[..2].iter().all(|x| *x < 0.2), "seed {seed}: {d:?}");
        }
        // Bucket 0 empty: it borrows upward, from bucket 1.
        for seed in 0..8 {
            let d = draw(3, seed, &[0.5, 0.55, 0.6, 0.9]);
            assert!(d.len() == 3 && d[2] == 0.9 && d[..2].iter().all(|x| (0.5..0.65).contains(x)), "seed {seed}: {d:?}");
        }
        // Only the top bucket has candidates: both empty ones borrow from it,
        // past an empty neighbour.
        let d = draw(3, 5, &[0.7, 0.75, 0.8, 0.9]);
        assert_eq!(d.len(), 3, "{d:?}");
        // Only the bottom one: the search past the last bucket stops there.
        let d = draw(3, 5, &[0.1, 0.12, 0.15, 0.2]);
        assert_eq!(d.len(), 3, "{d:?}");
        // The same seed draws the same; the seed decides which of a bucket's.
        let many: Vec<f64> = (0..40).map(|i| i as f64 / 40.0).collect();
        assert_eq!(draw(4, 9, &many), draw(4, 9, &many));
        assert!((0..8).any(|seed| draw(4, seed, &many) != draw(4, 9, &many)));
    }

    /// `select` refuses fewer eligible functions than COUNT, saying how many
    /// it found in which 1-based lines, and draws COUNT of them otherwise.
    #[test]
    fn select_refuses_too_few_and_draws_count() {
        let text: String = (0..5).map(|i| format!("function f{i}(x) {{\n  let a = x;\n  let b = a + {i};\n  return b;\n}}\n")).collect();
        let corpus = Corpus::from_bytes(std::path::Path::new("five.js"), text.into_bytes()).unwrap();
        let parsed = crate::corpus::language_named("javascript").unwrap().functions(&corpus.text).unwrap();
        let last = corpus.line_count() - 1;
        let opts = |count| TargetOptions {
            count,
            lines: 2,
            seed: 3,
            skip_blank: false,
            anchor: Anchor::Name,
            policy: Default::default(),
            min_code_lines: 0,
        };
        let got = select(&corpus, &parsed, 0, last, &opts(4)).unwrap();
        assert_eq!(got.len(), 4);
        assert_eq!(select(&corpus, &parsed, 0, last, &opts(5)).unwrap().len(), 5);
        let e = select(&corpus, &parsed, 5, last, &opts(5)).unwrap_err();
        assert_eq!((e.found, e.wanted, e.first, e.last), (4, 5, 6, 25));
        assert!(select(&corpus, &parsed, 0, last, &opts(0)).is_err());
    }
}
