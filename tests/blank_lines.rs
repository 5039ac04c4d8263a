//! The blank-line rule of scoring (docs/METHOD.md, "Blank lines"), end to end:
//! constructed answers for real targets go through the built binary's
//! `posrecall score` (parsing, scoring and the run file), and the counts it
//! records are compared with counts worked out here from the expected lines
//! alone, independently of `lib/src/score/mod.rs`.
//!
//! Two corpora: the default corpus (lodash 4.17.21's `lodash.js`, fetched by
//! `scripts/env/fetch-corpus`; every eligible function at LINES 20 is tried) and
//! `tests/fixtures/blank/blank.js` (LINES 6), which adds a body that starts
//! with a blank line: no eligible lodash body does. A case that finds no
//! target with the blank lines it needs fails; nothing is skipped.

use crate::common;

use common::{lodash, s};
use posrecall::corpus::Source;
use posrecall::targets::{Anchor, Target, TargetOptions, eligible};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// What the run file records for one target (`shown`: entries of its diff view).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Counts {
    matched: usize,
    missing: usize,
    truncated: usize,
    hallucinated: usize,
    extra: usize,
    implied_blank: usize,
    /// Blank answer lines credited nowhere.
    ignored_blank: usize,
    shown: usize,
}

impl Counts {
    /// A perfect score: LINES matched, `implied` of them the closing blank run.
    fn perfect(lines: usize, implied: usize) -> Counts {
        Counts {
            matched: lines,
            missing: 0,
            truncated: 0,
            hallucinated: 0,
            extra: 0,
            implied_blank: implied,
            ignored_blank: 0,
            shown: lines,
        }
    }
}

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/blank/blank.js")
}

/// Runs the binary and returns its stdout, failing on an error.
fn posrecall(args: &[&str]) -> String {
    common::ok(&common::posrecall(args))
}

fn is_blank(line: &str) -> bool {
    line.trim().is_empty()
}

/// Every eligible function of the whole file at `lines` LINES, blank lines counted.
fn all_targets(corpus: &Path, lines: usize) -> Vec<Target> {
    let src = Source::open(corpus).unwrap();
    let opts =
        TargetOptions { count: 1, lines, seed: 1, skip_blank: false, anchor: Anchor::Name, policy: Default::default(), min_code_lines: 0 };
    let targets = eligible(&src.corpus, &src.parsed, 0, src.corpus.line_count() - 1, &opts);
    assert!(!targets.is_empty(), "no eligible target in {}", corpus.display());
    targets
}

/// Scores `answers` (one per target, distinct targets) with `posrecall score`
/// and returns the counts of its run file, in the same order.
fn score_cli(corpus: &Path, lines: usize, answers: &[(&Target, String)]) -> Vec<Counts> {
    let dir = tempfile::TempDir::new().unwrap();
    // A real targets file for its manifest, with these targets in it.
    let mut file: Value =
        serde_json::from_str(&posrecall(&["targets", s(corpus), "--json", "--count", "1", "--lines", &lines.to_string()])).unwrap();
    file["targets"] = serde_json::to_value(answers.iter().map(|(t, _)| *t).collect::<Vec<_>>()).unwrap();
    let tpath = dir.path().join("targets.json");
    std::fs::write(&tpath, file.to_string()).unwrap();
    let responses: String = answers.iter().map(|(t, r)| serde_json::json!({"name": t.name, "response": r}).to_string() + "\n").collect();
    let rpath = dir.path().join("responses.jsonl");
    std::fs::write(&rpath, responses).unwrap();
    let out = dir.path().join("run.json");
    posrecall(&["score", s(&tpath), s(&rpath), "--out", s(&out), "--quiet"]);

    let run: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let results = run["targets"].as_array().unwrap();
    assert_eq!(results.len(), answers.len());
    let n = |t: &Value, key: &str| -> usize {
        let count = t[key].as_u64().unwrap_or_else(|| panic!("{key}: {t}"));
        usize::try_from(count).unwrap()
    };
    results
        .iter()
        .map(|t| Counts {
            matched: n(t, "matched"),
            missing: n(t, "missing"),
            truncated: n(t, "truncated"),
            hallucinated: n(t, "hallucinated"),
            extra: n(t, "extra"),
            implied_blank: n(t, "implied_blank"),
            ignored_blank: n(t, "ignored_blank"),
            shown: t["lines"].as_array().unwrap().len(),
        })
        .collect()
}

/// A constructed answer for a target's expected lines and the counts it must
/// get, or `None` when the expected lines lack the blank lines the case needs.
type Case = fn(&[String]) -> Option<(String, Counts)>;

/// Scores `case` on every target of `corpus` it applies to; returns them.
fn check(corpus: &Path, lines: usize, case: Case, what: &str) -> Vec<Target> {
    let targets = all_targets(corpus, lines);
    let built: Vec<(&Target, String, Counts)> =
        targets.iter().filter_map(|t| case(&t.expected).map(|(answer, want)| (t, answer, want))).collect();
    assert!(!built.is_empty(), "{what}: no target of {} has the blank lines this case needs", corpus.display());
    let answers: Vec<(&Target, String)> = built.iter().map(|(t, a, _)| (*t, a.clone())).collect();
    let got = score_cli(corpus, lines, &answers);
    for ((t, answer, want), got) in built.iter().zip(got) {
        assert_eq!(got, *want, "{what}: `{}` (expected {:?}) answered {answer:?}", t.name, t.expected);
    }
    built.into_iter().map(|(t, _, _)| t.clone()).collect()
}

/// How many blank lines end the LINES window.
fn closing_run(expected: &[String]) -> usize {
    expected.iter().rev().take_while(|l| is_blank(l)).count()
}

// ---- the constructed answers ----------------------------------------------------

/// Prose lines, a blank line between each two: it matches no line at all.
fn prose_with_blanks(expected: &[String]) -> Option<(String, Counts)> {
    const PROSE: usize = 12;
    expected.iter().any(|l| is_blank(l)).then_some(())?;
    let para = "This function checks its arguments and then returns the computed value.";
    let lines = expected.len();
    let want = Counts {
        matched: 0,
        missing: lines,
        // Each prose line stands in for one missing line; blank ones do not.
        truncated: lines.saturating_sub(PROSE),
        hallucinated: PROSE,
        extra: 0,
        implied_blank: 0,
        // The blank lines between the prose lines (parsing drops the last).
        ignored_blank: PROSE - 1,
        shown: lines + PROSE,
    };
    Some(([para; PROSE].join("\n\n") + "\n\n", want))
}

/// The expected lines verbatim; parsing drops the blank lines that end them.
fn perfect(expected: &[String]) -> Option<(String, Counts)> {
    expected.iter().any(|l| is_blank(l)).then_some(())?;
    Some((expected.join("\n") + "\n", Counts::perfect(expected.len(), closing_run(expected))))
}

/// The expected lines up to and including the first blank line `k` that does
/// not close the window; parsing drops it, so `k` lines are reproduced.
fn prefix_before_a_blank(expected: &[String]) -> Option<(String, Counts)> {
    let lines = expected.len();
    let k = (1..lines.saturating_sub(closing_run(expected))).find(|&k| is_blank(&expected[k]) && !is_blank(&expected[k - 1]))?;
    let want = Counts {
        matched: k,
        missing: lines - k,
        truncated: lines - k,
        hallucinated: 0,
        extra: 0,
        implied_blank: 0,
        ignored_blank: 0,
        shown: lines,
    };
    Some((expected[..=k].join("\n"), want))
}

/// The expected lines up to the blank run that closes the window.
fn prefix_before_the_closing_run(expected: &[String]) -> Option<(String, Counts)> {
    let run = closing_run(expected);
    (run > 0 && run < expected.len()).then_some(())?;
    let answer = expected[..expected.len() - run].join("\n") + "\n\n";
    Some((answer, Counts::perfect(expected.len(), run)))
}

/// The expected lines without their blank lines (some of them not closing
/// the window): those are missing, but none truncated.
fn blank_lines_dropped(expected: &[String]) -> Option<(String, Counts)> {
    let (lines, run) = (expected.len(), closing_run(expected));
    let inner = expected[..lines - run].iter().filter(|l| is_blank(l)).count();
    (inner > 0 && run < lines).then_some(())?;
    let solid: Vec<&str> = expected.iter().filter(|l| !is_blank(l)).map(String::as_str).collect();
    let want = Counts {
        matched: lines - inner,
        missing: inner,
        truncated: 0,
        hallucinated: 0,
        extra: 0,
        implied_blank: run,
        ignored_blank: 0,
        shown: lines,
    };
    Some((solid.join("\n"), want))
}

/// The expected lines with every blank line written twice: the second copy
/// is neither matched nor hallucinated, and not shown.
fn blank_lines_doubled(expected: &[String]) -> Option<(String, Counts)> {
    expected.iter().any(|l| is_blank(l)).then_some(())?;
    let doubled: Vec<&str> = expected.iter().flat_map(|l| if is_blank(l) { vec![l.as_str(); 2] } else { vec![l.as_str()] }).collect();
    // Each second copy of a blank line before the closing run is ignored
    // (parsing drops the closing run's copies with the trailing whitespace).
    let run = closing_run(expected);
    let inner = expected[..expected.len() - run].iter().filter(|l| is_blank(l)).count();
    let want = Counts { ignored_blank: inner, ..Counts::perfect(expected.len(), run) };
    Some((doubled.join("\n"), want))
}

// ---- lodash.js -------------------------------------------------------------------

#[test]
fn lodash_prose_with_blank_lines_scores_nothing() {
    check(&lodash(), 20, prose_with_blanks, "prose with blank lines");
}

#[test]
fn lodash_perfect_answers_score_every_line() {
    let done = check(&lodash(), 20, perfect, "perfect answer");
    let has = |at: &dyn Fn(&[String]) -> bool| done.iter().any(|t| at(&t.expected));
    assert!(has(&|e| is_blank(&e[19])), "no lodash target ends its window with a blank line");
    assert!(
        has(&|e| (1..19).any(|k| is_blank(&e[k]) && !is_blank(&e[k - 1]) && !is_blank(&e[k + 1]))),
        "no lodash target has a lone blank line inside its window"
    );
}

#[test]
fn lodash_prefix_stopped_before_a_blank_line_is_truncated() {
    check(&lodash(), 20, prefix_before_a_blank, "prefix stopped before a blank line");
}

#[test]
fn lodash_prefix_stopped_before_the_closing_run_is_credited() {
    check(&lodash(), 20, prefix_before_the_closing_run, "prefix stopped before the closing run");
}

#[test]
fn lodash_dropped_blank_lines_are_missing_not_truncated() {
    check(&lodash(), 20, blank_lines_dropped, "blank lines dropped");
}

#[test]
fn lodash_doubled_blank_lines_are_ignored() {
    check(&lodash(), 20, blank_lines_doubled, "blank lines doubled");
}

#[test]
fn lodash_skip_blank_ignores_blank_lines_in_answers() {
    // With --skip-blank the ground truth has no blank line and parsing drops
    // the answer's: blank lines interleaved with a perfect answer change
    // nothing, and prose with blank lines still scores nothing.
    let dir = tempfile::TempDir::new().unwrap();
    let targets = posrecall(&["targets", s(&lodash()), "--json", "--skip-blank"]);
    let file: Value = serde_json::from_str(&targets).unwrap();
    let tpath = dir.path().join("targets.json");
    std::fs::write(&tpath, &targets).unwrap();
    for (answer_of, matched, hallucinated) in [
        (&(|e: &[String]| format!("\n{}\n", e.join("\n\n \n"))) as &dyn Fn(&[String]) -> String, 20, 0),
        (&(|_: &[String]| "Some prose.\n\nMore prose.\n".to_string()) as &dyn Fn(&[String]) -> String, 0, 2),
    ] {
        let responses: String = file["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let expected: Vec<String> = serde_json::from_value(t["expected"].clone()).unwrap();
                assert!(expected.iter().all(|l| !is_blank(l)), "{}", t["name"]);
                serde_json::json!({"name": t["name"], "response": answer_of(&expected)}).to_string() + "\n"
            })
            .collect();
        let rpath = dir.path().join("responses.jsonl");
        std::fs::write(&rpath, responses).unwrap();
        let out = dir.path().join("run.json");
        posrecall(&["score", s(&tpath), s(&rpath), "--out", s(&out), "--quiet"]);
        let run: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
        for t in run["targets"].as_array().unwrap() {
            assert_eq!((t["matched"].as_u64(), t["extra"].as_u64()), (Some(matched), Some(0)), "{}", t["name"]);
            assert_eq!(t["hallucinated"].as_u64(), Some(hallucinated), "{}", t["name"]);
            assert_eq!(t["implied_blank"].as_u64(), Some(0), "{}", t["name"]);
        }
    }
}

// ---- the fixture ---------------------------------------------------------------------

const FIXTURE_LINES: usize = 6;

#[test]
fn fixture_has_blank_lines_at_every_position() {
    let targets = all_targets(&fixture(), FIXTURE_LINES);
    let expected = |name: &str| {
        targets.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("`{name}` is not eligible in the fixture")).expected.clone()
    };
    assert!(is_blank(&expected("leading")[0]));
    assert!(is_blank(&expected("middle")[1]) && is_blank(&expected("middle")[4]));
    assert_eq!(closing_run(&expected("closing")), 2);
    assert!(is_blank(&expected("gapped")[3]) && closing_run(&expected("gapped")) == 0);
}

#[test]
fn fixture_cases() {
    let cases: [(Case, &str, &[&str]); 6] = [
        (prose_with_blanks, "prose with blank lines", &["leading", "middle", "closing", "gapped"]),
        (perfect, "perfect answer", &["leading", "middle", "closing", "gapped"]),
        (prefix_before_a_blank, "prefix stopped before a blank line", &["leading", "middle", "gapped"]),
        (prefix_before_the_closing_run, "prefix stopped before the closing run", &["closing"]),
        (blank_lines_dropped, "blank lines dropped", &["leading", "middle", "gapped"]),
        (blank_lines_doubled, "blank lines doubled", &["leading", "middle", "closing", "gapped"]),
    ];
    for (case, what, names) in cases {
        let done = check(&fixture(), FIXTURE_LINES, case, what);
        let done: Vec<&str> = done.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(done, names, "{what}: the targets it applies to");
    }
}

#[test]
fn fixture_leading_blank_line_needs_a_matched_neighbour() {
    // `leading` starts with a blank line. Written in place before its first
    // line, it is matched; before prose, or before a line that only the extra
    // window holds, the start edge is no neighbour and it earns nothing.
    let targets = all_targets(&fixture(), FIXTURE_LINES);
    let leading = targets.iter().find(|t| t.name == "leading").unwrap();
    let first_extra = leading
        .extra_window
        .iter()
        .find(|l| !is_blank(l) && !leading.expected.iter().any(|e| e.trim() == l.trim()))
        .expect("an extra-window line of its own");
    for (answer, matched, extra, hallucinated) in
        [(format!("\n{}", leading.expected[1]), 2, 0, 0), ("\nprose\n".to_string(), 0, 0, 1), (format!("\n{first_extra}"), 0, 1, 0)]
    {
        let got = score_cli(&fixture(), FIXTURE_LINES, &[(leading, answer.clone())]);
        let got = (got[0].matched, got[0].extra, got[0].hallucinated);
        assert_eq!(got, (matched, extra, hallucinated), "answer {answer:?}");
    }
}
