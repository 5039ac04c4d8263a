//! What each line is made of (code, comment, docstring, blank), from the
//! parse tree: posrecall's classes equal an independent classification on
//! real corpus files, Python's `tokenize` and `ast`
//! (scripts/oracles/python-lines) and acorn's comment list
//! (scripts/oracles/js-lines).

use crate::common;

use posrecall::corpus::classify::LineClass;
use posrecall::corpus::{CorpusSpec, Source};
use std::path::{Path, PathBuf};

/// posrecall's class of every line of `path`, as the oracles name them.
fn ours(path: &Path) -> Vec<String> {
    let src = Source::open_spec(&CorpusSpec::file(path), None).unwrap();
    let classes = src.language.line_classes(&src.corpus.text).unwrap();
    assert_eq!(classes.len(), src.corpus.line_count(), "{}", path.display());
    classes.into_iter().map(|c| c.to_string()).collect()
}

/// The oracle's classes: `program scripts/oracles/SCRIPT path`.
fn theirs(program: &str, script: &str, path: &Path) -> Vec<String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/oracles").join(script);
    let o = std::process::Command::new(program).arg(&script).arg(path).output().unwrap();
    assert!(o.status.success(), "{}: {}", script.display(), String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Line by line, with the first line that differs named.
fn assert_same(path: &Path, ours: &[String], theirs: &[String]) {
    if let Some(i) = (0..ours.len().min(theirs.len())).find(|&i| ours[i] != theirs[i]) {
        panic!("{}: line {} is {} here, {} to the oracle", path.display(), i + 1, ours[i], theirs[i]);
    }
    assert_eq!(ours.len(), theirs.len(), "{}", path.display());
}

fn fetched(language: &str) -> PathBuf {
    let p = posrecall::support::fsutil::default_corpus_for(language).unwrap();
    assert!(p.exists(), "{} is missing: run scripts/env/fetch-corpus --language {language}", p.display());
    p
}

fn count(classes: &[String], class: LineClass) -> usize {
    classes.iter().filter(|c| **c == class.to_string()).count()
}

/// Python: docutils' states.py (the default Python corpus) and the Python
/// fixture, against `tokenize` and `ast`.
#[test]
fn python_line_classes_agree_with_tokenize() {
    for path in [fetched("python"), common::fixture("languages/sample.py")] {
        let mine = ours(&path);
        assert_same(&path, &mine, &theirs("python3", "python-lines", &path));
    }
    // The corpus holds every class: the comparison covers each.
    let mine = ours(&fetched("python"));
    for class in [LineClass::Code, LineClass::Comment, LineClass::Docstring, LineClass::Blank] {
        assert!(count(&mine, class) > 10, "{class}: {}", count(&mine, class));
    }
}

/// JavaScript: lodash (the default corpus), the jQuery-like fixture and the
/// extraction fixtures, against acorn's comments.
#[test]
fn javascript_line_classes_agree_with_acorn() {
    let mut files = vec![fetched("javascript"), common::fixture("anchor/jquery_like.js"), common::fixture("dense.js")];
    for f in ["allman.js", "async_gen.js", "nested.js", "skipped.js", "verbatim.js", "crlf.js", "blank.js"] {
        files.push(common::fixture(&format!("extract/{f}")));
    }
    for path in &files {
        assert_same(path, &ours(path), &theirs("node", "js-lines", path));
    }
    let lodash = ours(&files[0]);
    assert!(count(&lodash, LineClass::Comment) > 5000 && count(&lodash, LineClass::Code) > 5000);
}

// ---- What each score is made of: per target, through `targets` and `score` ----

use common::{ok, posrecall, read, s};
use serde_json::{Value, json};

/// The targets file of `corpus` for `args`.
fn targets_file(dir: &Path, corpus: &Path, args: &[&str]) -> (PathBuf, Value) {
    let path = dir.join("targets.json");
    let mut all = vec!["targets", s(corpus), "--json"];
    all.extend_from_slice(args);
    std::fs::write(&path, ok(&posrecall(&all))).unwrap();
    let v = read(&path);
    (path, v)
}

/// Scores `answers` (name → answer) against the targets file; the run file.
fn score(dir: &Path, targets: &Path, answers: &[(String, String)], args: &[&str]) -> Value {
    let (responses, out) = (dir.join("responses.jsonl"), dir.join("run.json"));
    let jsonl: String = answers.iter().map(|(n, r)| format!("{}\n", json!({"name": n, "response": r}))).collect();
    std::fs::write(&responses, jsonl).unwrap();
    let mut all = vec!["score", s(targets), s(&responses), "--out", s(&out), "--quiet"];
    all.extend_from_slice(args);
    ok(&posrecall(&all));
    read(&out)
}

/// The oracle's class of each expected line of target `t`: its lines
/// follow the header's last line, found here from the target's line and
/// its header, and must be the corpus's own lines.
fn oracle_classes(t: &Value, corpus_lines: &[&str], classes: &[String]) -> Vec<String> {
    let start = t["line"].as_u64().unwrap() as usize - 1 + t["header"].as_str().unwrap().split('\n').count();
    let expected: Vec<&str> = t["expected"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
    assert_eq!(&corpus_lines[start..start + expected.len()], &expected[..], "{}", t["name"]);
    classes[start..start + expected.len()].to_vec()
}

/// Per target, the expected lines of each class, and with an answer that
/// rewrites exactly the lines of `kept` classes (the others become lines
/// that match nothing; a last such line keeps trailing blank lines in the
/// answer), how many of each were credited: every line of a kept class,
/// none of another, the blank ones in place (posrecall) or not counted at
/// all (codeneedle).
fn check_composition(corpus: &Path, oracle_program: &str, oracle: &str, policy: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (tpath, tf) = targets_file(dir.path(), corpus, &["--count", "16", "--lines", "20", "--policy", policy]);
    let text = std::fs::read_to_string(corpus).unwrap();
    let corpus_lines: Vec<&str> = text.split('\n').collect();
    let classes = theirs(oracle_program, oracle, corpus);
    let targets = tf["targets"].as_array().unwrap();
    for kept in [&["code"][..], &["comment", "docstring"][..]] {
        let mut answers = Vec::new();
        let mut want = Vec::new();
        for t in targets {
            let theirs = oracle_classes(t, &corpus_lines, &classes);
            let expected = t["expected"].as_array().unwrap();
            let mut answer: Vec<String> = expected
                .iter()
                .zip(&theirs)
                .enumerate()
                .map(|(i, (l, c))| match kept.contains(&c.as_str()) || c == "blank" {
                    true => l.as_str().unwrap().to_string(),
                    false => format!("unmatched_{i}_zq();"),
                })
                .collect();
            answer.push("end_zq();".into());
            answers.push((t["name"].as_str().unwrap().to_string(), answer.join("\n")));
            let n = |class: &str| theirs.iter().filter(|c| *c == class).count();
            let tally = |class: &str| {
                let lines = n(class);
                json!({"lines": lines, "matched": if kept.contains(&class) { lines } else { 0 }})
            };
            let mut c = json!({"code": tally("code"), "comment": tally("comment"), "docstring": tally("docstring")});
            if policy == "posrecall" {
                c["blank"] = json!({"lines": n("blank"), "matched": n("blank")});
            }
            want.push(c);
        }
        let run = score(dir.path(), &tpath, &answers, &[]);
        for (t, w) in run["targets"].as_array().unwrap().iter().zip(&want) {
            // Blank lines before a first credited line that is not the
            // first line, or with nothing credited, earn nothing: compare
            // those targets' blank count, not their credit.
            let mut got = t["composition"].clone();
            if policy == "posrecall" && got["code"]["matched"] == 0 && got["comment"]["matched"] == 0 && got["docstring"]["matched"] == 0 {
                got["blank"]["matched"] = w["blank"]["matched"].clone();
            }
            assert_eq!(&got, w, "{} ({}), keeping {kept:?}", t["name"], corpus.display());
        }
        // The corpus's targets hold prose: the comparison covers it.
        let prose = |c: &Value| c["comment"]["lines"].as_u64().unwrap() + c["docstring"]["lines"].as_u64().unwrap();
        assert!(want.iter().map(prose).sum::<u64>() > 5, "{}", corpus.display());
        // The run's composition is the sum of its targets'.
        let sum = |class: &str, key: &str| -> u64 {
            run["targets"].as_array().unwrap().iter().map(|t| t["composition"][class][key].as_u64().unwrap()).sum()
        };
        for class in ["code", "comment", "docstring"] {
            assert_eq!(run["summary"]["composition"][class]["lines"].as_u64(), Some(sum(class, "lines")), "{class}");
            assert_eq!(run["summary"]["composition"][class]["matched"].as_u64(), Some(sum(class, "matched")), "{class}");
        }
    }
}

/// docutils' states.py (comments and docstrings in function bodies) against
/// Python's tokenize, under both policies.
#[test]
fn python_composition_per_target_equals_tokenize() {
    for policy in ["posrecall", "codeneedle"] {
        check_composition(&fetched("python"), "python3", "python-lines", policy);
    }
}

/// lodash against acorn's comment list, under both policies.
#[test]
fn javascript_composition_per_target_equals_acorn() {
    for policy in ["posrecall", "codeneedle"] {
        check_composition(&fetched("javascript"), "node", "js-lines", policy);
    }
}

/// A Python file of two functions: `alpha`'s first 8 body lines are a
/// docstring of three lines around a blank one, two comments and two code
/// lines (prose-dominated); `beta`'s are all code.
const TWO_FUNCTIONS: &str = r#"def alpha(x):
    """Return the thing.

    More words here.
    """
    # first comment
    y = x + 1
    # second comment
    z = y * 2
    return z


def beta(a):
    b = a + 1
    c = b + 2
    d = c + 3
    e = d + 4
    f = e + 5
    g = f + 6
    h = g + 7
    i = h + 8
    return i
"#;

/// `alpha`'s answers: only its prose (the docstring, its blank line and
/// the comments, in place), or only its code.
const PROSE_ONLY: &str = "    \"\"\"Return the thing.\n\n    More words here.\n    \"\"\"\n    # first comment\n    # second comment";
const CODE_ONLY: &str = "    y = x + 1\n    z = y * 2";

/// (matched, missing, truncated, scored, pass) of target `name`.
fn counts(run: &Value, name: &str) -> (u64, u64, u64, Option<u64>, bool) {
    let t = run["targets"].as_array().unwrap().iter().find(|t| t["name"] == name).unwrap();
    let u = |k: &str| t[k].as_u64().unwrap();
    (u("matched"), u("missing"), u("truncated"), t["scored"].as_u64(), t["pass"].as_bool().unwrap())
}

/// `--credit code` on constructed answers, counts worked by hand from the
/// rules (docs/METHOD.md §6): PASS is 4 of LINES 8 under posrecall, 40% of
/// the scored lines under codeneedle.
#[test]
fn credit_code_counts_code_lines_only() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("two.py");
    std::fs::write(&corpus, TWO_FUNCTIONS).unwrap();
    let answers = |alpha: &str| vec![("alpha".to_string(), alpha.to_string()), ("beta".to_string(), String::new())];

    let (posr, tf) = targets_file(dir.path(), &corpus, &["--count", "2", "--lines", "8"]);
    assert_eq!(tf["targets"][0]["classes"], json!(["docstring", "blank", "docstring", "docstring", "comment", "code", "comment", "code"]));
    // All lines: the prose answer matches the 3 docstring lines, the blank
    // line between them and the 2 comments (6 of 8, a pass; the last code
    // line after its last match is truncated); the code answer 2 of 8.
    let run = score(dir.path(), &posr, &answers(PROSE_ONLY), &[]);
    assert_eq!(counts(&run, "alpha"), (6, 2, 1, None, true));
    let t = &run["targets"][0];
    assert_eq!(
        t["composition"],
        json!({"code": {"lines": 2, "matched": 0}, "comment": {"lines": 2, "matched": 2},
               "docstring": {"lines": 3, "matched": 3}, "blank": {"lines": 1, "matched": 1}})
    );
    assert!(run["manifest"]["params"].get("credit").is_none(), "the default is not written");
    let run = score(dir.path(), &posr, &answers(CODE_ONLY), &[]);
    assert_eq!(counts(&run, "alpha"), (2, 6, 0, None, false));
    // Code alone: of 2 code lines, the prose answer has none (missing 2,
    // its truncated line among them), the code answer both: 2 × 8 ≥ 4 × 2.
    let run = score(dir.path(), &posr, &answers(PROSE_ONLY), &["--credit", "code"]);
    assert_eq!(counts(&run, "alpha"), (0, 2, 1, Some(2), false));
    assert_eq!(run["manifest"]["params"]["credit"], "code");
    assert_eq!(run["targets"][0]["composition"]["docstring"]["matched"], 3, "the composition still says what was recalled");
    let run = score(dir.path(), &posr, &answers(CODE_ONLY), &["--credit", "code"]);
    assert_eq!(counts(&run, "alpha"), (2, 0, 0, Some(2), true));
    let shown = ok(&posrecall(&["score", s(&posr), s(&dir.path().join("responses.jsonl")), "--credit", "code", "--quiet"]));
    assert!(shown.contains("1/2 passed, 2 matched of 10 code lines, 8 missing (8 truncated)"), "{shown}");
    // beta's empty answer: 8 code lines, none matched.
    assert_eq!(counts(&run, "beta"), (0, 8, 8, Some(8), false));

    // codeneedle: 7 scored lines (the blank one out), a pass at 40%.
    let (cn, _) = targets_file(dir.path(), &corpus, &["--count", "2", "--lines", "8", "--policy", "codeneedle"]);
    let run = score(dir.path(), &cn, &answers(PROSE_ONLY), &[]);
    assert_eq!(counts(&run, "alpha"), (5, 2, 0, Some(7), true));
    assert!(run["targets"][0]["composition"].get("blank").is_none(), "codeneedle counts no blank line");
    let run = score(dir.path(), &cn, &answers(CODE_ONLY), &[]);
    assert_eq!(counts(&run, "alpha"), (2, 5, 0, Some(7), false));
    let run = score(dir.path(), &cn, &answers(PROSE_ONLY), &["--credit", "code"]);
    assert_eq!(counts(&run, "alpha"), (0, 2, 0, Some(2), false));
    let run = score(dir.path(), &cn, &answers(CODE_ONLY), &["--credit", "code"]);
    assert_eq!(counts(&run, "alpha"), (2, 0, 0, Some(2), true));
}

/// The prose flag: `alpha` (5 prose lines, 2 code) is flagged in the
/// terminal's diff heading, the grid of two runs (table, markdown, JSON)
/// and the HTML page; `beta` (8 code lines) nowhere.
#[test]
fn a_prose_dominated_target_is_flagged_and_a_code_one_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("two.py");
    std::fs::write(&corpus, TWO_FUNCTIONS).unwrap();
    let (tpath, _) = targets_file(dir.path(), &corpus, &["--count", "2", "--lines", "8"]);
    let responses = dir.path().join("r.jsonl");
    std::fs::write(&responses, format!("{}\n", json!({"name": "alpha", "response": CODE_ONLY}))).unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let shown = ok(&posrecall(&["score", s(&tpath), s(&responses), "--out", s(&a)]));
    ok(&posrecall(&["score", s(&tpath), s(&responses), "--out", s(&b), "--quiet"]));
    let heading = |name: &str| shown.lines().find(|l| l.contains(&format!(" {name}  line"))).unwrap().to_string();
    assert!(heading("alpha").contains("code 2/2  prose 0/5  blank 0/1  prose-dominated"), "{}", heading("alpha"));
    assert!(heading("beta").contains("code 0/8  prose 0/0") && !heading("beta").contains("prose-dominated"), "{}", heading("beta"));
    assert!(shown.contains("made of: code 2 matched of 10, prose 0 of 5 (comments 0 of 2, docstrings 0 of 3), blank 0 of 1"), "{shown}");

    for format in ["table", "md"] {
        let text = ok(&posrecall(&["report", s(&a), s(&b), "--format", format]));
        let row = |name: &str| text.lines().find(|l| l.contains(name) && (l.contains('✓') || l.contains('✗'))).unwrap().to_string();
        assert!(row("alpha").contains("2/5 prose-dominated"), "{format}: {}", row("alpha"));
        assert!(row("beta").contains("8/0") && !row("beta").contains("prose-dominated"), "{format}: {}", row("beta"));
    }
    let report: Value = serde_json::from_str(&ok(&posrecall(&["report", s(&a), s(&b), "--format", "json"]))).unwrap();
    let rows = report["grid"]["rows"].as_array().unwrap();
    let flag = |name: &str| rows.iter().find(|r| r["name"] == name).unwrap()["prose_dominated"].clone();
    assert_eq!((flag("alpha"), flag("beta")), (json!(true), json!(false)));
    assert_eq!(report["runs"][0]["composition"]["code"], json!({"lines": 10, "matched": 2}));
    let html = ok(&posrecall(&["report", s(&a), s(&b), "--format", "html"]));
    assert!(html.matches("prose-dominated").count() >= 2, "the grid row and the diff heading");
    let csv = ok(&posrecall(&["report", s(&a), "--format", "csv"]));
    let (header, row) = (csv.lines().next().unwrap(), csv.lines().nth(1).unwrap());
    let at = |name: &str| header.split(',').position(|h| h == name).unwrap();
    let cells: Vec<&str> = row.split(',').collect();
    assert_eq!((cells[at("code_lines")], cells[at("code_matched")], cells[at("docstring_lines")]), ("10", "2", "3"));
}

/// `--min-code-lines N` draws only among the functions whose LINES lines
/// hold N code lines or more, as the oracle classes them: with COUNT the
/// number the oracle finds, the targets are exactly those, and the manifest
/// records how many were left out; one more than that is refused, saying why.
#[test]
fn min_code_lines_leaves_out_exactly_the_functions_with_fewer_code_lines() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = fetched("python");
    let text = std::fs::read_to_string(&corpus).unwrap();
    let corpus_lines: Vec<&str> = text.split('\n').collect();
    let classes = theirs("python3", "python-lines", &corpus);
    // Every eligible function: more than there are, so all come back.
    let err = posrecall(&["targets", s(&corpus), "--count", "10000", "--lines", "20"]);
    let stderr = String::from_utf8_lossy(&err.stderr);
    let all: usize = stderr.split("only ").nth(1).and_then(|r| r.split(' ').next()).and_then(|n| n.parse().ok()).expect(&stderr);
    let (_, every) = targets_file(dir.path(), &corpus, &["--count", &all.to_string(), "--lines", "20"]);
    let code = |t: &Value| oracle_classes(t, &corpus_lines, &classes).iter().filter(|c| *c == "code").count();
    // The median count: some functions have exactly it, some fewer.
    let mut counts: Vec<usize> = every["targets"].as_array().unwrap().iter().map(code).collect();
    counts.sort_unstable();
    let min = counts[counts.len() / 2];
    assert!(counts[0] < min, "{counts:?}");
    let flag = min.to_string();
    let mut want: Vec<String> =
        every["targets"].as_array().unwrap().iter().filter(|t| code(t) >= min).map(|t| t["name"].as_str().unwrap().to_string()).collect();
    assert!(!want.is_empty() && want.len() < all, "{} of {all}", want.len());

    let n = want.len().to_string();
    let (_, got) = targets_file(dir.path(), &corpus, &["--count", &n, "--lines", "20", "--min-code-lines", &flag]);
    let mut names: Vec<String> = got["targets"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_string()).collect();
    names.sort();
    want.sort();
    assert_eq!(names, want);
    assert_eq!(got["corpus"]["few_code_lines"].as_u64(), Some((all - want.len()) as u64));
    assert_eq!(got["params"]["min_code_lines"], min);
    // A draw of fewer: each drawn one has enough code.
    let (_, some) = targets_file(dir.path(), &corpus, &["--count", "4", "--lines", "20", "--min-code-lines", &flag]);
    assert!(some["targets"].as_array().unwrap().iter().all(|t| code(t) >= min));
    // One more than qualify: refused, with the rule said.
    let o = posrecall(&["targets", s(&corpus), "--count", &(want.len() + 1).to_string(), "--lines", "20", "--min-code-lines", &flag]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success()
            && err.contains(&format!("only {} eligible", want.len()))
            && err.contains(&format!("at least {min} of them code")),
        "{err}"
    );
    // More than LINES can never be met: refused, naming both flags.
    let o = posrecall(&["targets", s(&corpus), "--lines", "20", "--min-code-lines", "21"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("--min-code-lines 21") && err.contains("--lines 20"), "{err}");
}
