//! Target extraction through the library API, on small fixture files
//! (`tests/fixtures/extract/`): which declarations are eligible, and what
//! their ground truth and header are (SPEC step 2).

use posrecall::corpus::{JavaScript, Language, Source};
use posrecall::targets::{Anchor, Target, TargetOptions, eligible, select};
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/extract").join(name)
}

fn open(name: &str) -> Source {
    Source::open(&fixture(name)).unwrap_or_else(|e| panic!("cannot open fixture {name}: {e:#}"))
}

fn opts(lines: usize, skip_blank: bool) -> TargetOptions {
    TargetOptions { count: 1, lines, seed: 1, skip_blank, anchor: Anchor::Name, policy: Default::default(), min_code_lines: 0 }
}

/// Every eligible target of the whole file.
fn all_targets(src: &Source, lines: usize, skip_blank: bool) -> Vec<Target> {
    let last = src.corpus.line_count() - 1;
    eligible(&src.corpus, &src.parsed, 0, last, &opts(lines, skip_blank))
}

fn names(targets: &[Target]) -> Vec<&str> {
    targets.iter().map(|t| t.name.as_str()).collect()
}

fn target<'a>(targets: &'a [Target], name: &str) -> &'a Target {
    targets.iter().find(|t| t.name == name).unwrap_or_else(|| panic!("`{name}` is not among the targets {:?}", names(targets)))
}

/// The file's lines read independently of the library: split at `\n`, one
/// trailing `\r` dropped, no line after a final newline.
fn file_lines(src: &Source) -> Vec<String> {
    let text = &src.corpus.text;
    let text = text.strip_suffix('\n').unwrap_or(text);
    text.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l).to_string()).collect()
}

/// 0-based index of the line that holds the opening brace: the declaration
/// line (`line`, 1-based) plus the header's extra lines.
fn brace_line(t: &Target) -> usize {
    t.line - 1 + t.header.split('\n').count() - 1
}

/// The ground truth computed by hand: the LINES counted lines after the brace line.
fn lines_after_brace(src: &Source, t: &Target, lines: usize, skip_blank: bool) -> Vec<String> {
    file_lines(src).into_iter().skip(brace_line(t) + 1).filter(|l| !skip_blank || !l.trim().is_empty()).take(lines).collect()
}

fn assert_ground_truth(src: &Source, targets: &[Target], lines: usize, skip_blank: bool) {
    for t in targets {
        assert_eq!(t.expected.len(), lines, "{}: expected has the wrong length", t.name);
        assert_eq!(
            t.expected,
            lines_after_brace(src, t, lines, skip_blank),
            "{}: expected is not the {lines} lines after the brace line",
            t.name
        );
    }
}

#[test]
fn nested_declarations_are_found() {
    let src = open("nested.js");
    let targets = all_targets(&src, 20, false);
    assert_eq!(names(&targets), ["outer", "inner", "inBlock"]);
    let inner = target(&targets, "inner");
    assert_eq!(inner.line, 5);
    assert_eq!(inner.expected[0], "    var doubled = value * 2;");
    assert_eq!(target(&targets, "inBlock").header, "  function inBlock(a) {");
    assert_ground_truth(&src, &targets, 20, false);
}

#[test]
fn duplicates_arrows_methods_expressions_one_liners_and_short_bodies_are_skipped() {
    let src = open("skipped.js");
    // The parser does see both copies of `dup` and the one-liner...
    let declared: Vec<&str> = src.parsed.functions.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(declared.iter().filter(|n| **n == "dup").count(), 2, "{declared:?}");
    assert!(declared.contains(&"oneLiner") && declared.contains(&"short"), "{declared:?}");
    // ...but neither copy of a name declared twice, nor the arrow function, the
    // method, the function expression, the one-liner or the 19-line body is eligible.
    let targets = all_targets(&src, 20, false);
    assert_eq!(names(&targets), ["keeper", "wrapper"]);
    assert_ground_truth(&src, &targets, 20, false);
    // `keeper` has exactly 20 lines after its brace: one more LINES and it is out;
    // `short` has 19: one fewer LINES and it is in.
    assert_eq!(names(&all_targets(&src, 21, false)), ["wrapper"]);
    assert_eq!(names(&all_targets(&src, 19, false)), ["short", "keeper", "wrapper"]);
}

#[test]
fn allman_braces_ground_truth_starts_after_the_brace_line() {
    let src = open("allman.js");
    let targets = all_targets(&src, 20, false);
    assert_eq!(names(&targets), ["allman", "multiline", "indented"]);

    let allman = target(&targets, "allman");
    assert_eq!(allman.line, 2);
    assert_eq!(allman.header, "function allman(a, b)\n{");
    assert_eq!(allman.expected[0], "  var r1 = a + b;");
    assert_eq!(allman.expected[19], "  return r19;");

    let multi = target(&targets, "multiline");
    assert_eq!(multi.header, "function multiline(\n  first,\n  second,\n  third\n) {");
    assert_eq!(multi.expected[0], "  var p1 = first;");

    // Code on the brace line itself is not part of the ground truth.
    let ind = target(&targets, "indented");
    assert_eq!(ind.header, "    function indented(v) {");
    assert_eq!(ind.expected[0], "      var i1 = v + 1;");
    assert_ground_truth(&src, &targets, 20, false);
}

#[test]
fn header_is_the_declaration_through_the_opening_brace() {
    for name in ["nested.js", "skipped.js", "allman.js", "async_gen.js", "verbatim.js", "blank.js"] {
        let src = open(name);
        let lines = file_lines(&src);
        for t in all_targets(&src, 20, false) {
            assert!(t.header.ends_with('{'), "{name}/{}: header {:?}", t.name, t.header);
            let from_file = lines[t.line - 1..=brace_line(&t)].join("\n");
            assert!(from_file.starts_with(&t.header), "{name}/{}: header {:?} is not the start of {:?}", t.name, t.header, from_file);
            // The header starts on the declaration's line, ends at the brace,
            // and the byte offset points at the declaration inside it.
            let start = src.corpus.line_start(t.line - 1);
            assert_eq!(&src.corpus.text[start..start + t.header.len()], t.header);
            assert!(t.byte_offset >= start && t.byte_offset < start + t.header.len());
            assert!(
                src.corpus.text[t.byte_offset..].starts_with("function") || src.corpus.text[t.byte_offset..].starts_with("async function"),
                "{name}/{}: byte_offset does not point at the declaration",
                t.name
            );
        }
    }
}

#[test]
fn crlf_file_ground_truth_has_no_carriage_returns() {
    let src = open("crlf.js");
    assert!(
        src.corpus.text.contains("\r\n") && !src.corpus.text.replace("\r\n", "").contains('\n'),
        "fixture crlf.js lost its CRLF line endings (check .gitattributes)"
    );
    let targets = all_targets(&src, 20, false);
    assert_eq!(names(&targets), ["crlfOne", "crlfAllman"]);
    for t in &targets {
        for l in t.expected.iter().chain(&t.extra_window).chain(std::iter::once(&t.header)) {
            assert!(!l.contains('\r'), "{}: a line keeps its \\r: {l:?}", t.name);
        }
    }
    // The ground truth equals the file's lines, split at CRLF.
    let by_crlf: Vec<&str> = src.corpus.text.split("\r\n").collect();
    let one = target(&targets, "crlfOne");
    assert_eq!(one.expected, by_crlf[2..22].to_vec());
    assert_eq!(one.expected[10], "", "the blank line in the body counts");
    let allman = target(&targets, "crlfAllman");
    assert_eq!(allman.header, "function crlfAllman(y)\n{");
    assert_eq!(allman.expected[0], "  var z1 = y * 1;");
    assert_ground_truth(&src, &targets, 20, false);
}

/// A lone CR inside a line is part of it (lines end at `\n`), kept verbatim
/// in the expected lines as the model reads it; a file whose lines end in
/// lone CRs is refused in one line, not read as one long line.
#[test]
fn a_lone_cr_stays_in_its_line_and_cr_line_endings_are_refused() {
    let dir = tempfile::TempDir::new().unwrap();
    let body: String = (0..6).map(|i| format!("  var a{i} = {i};\n")).collect();
    let text = format!("function stray(x) {{\n  var cr = 1;\r// after a lone CR\n{body}  return x;\n}}\n");
    let path = dir.path().join("stray.js");
    std::fs::write(&path, &text).unwrap();
    let src = Source::open(&path).unwrap();
    let targets = all_targets(&src, 4, false);
    assert_eq!(names(&targets), ["stray"]);
    assert_eq!(targets[0].expected[0], "  var cr = 1;\r// after a lone CR");
    assert_ground_truth(&src, &targets, 4, false);

    let mac = dir.path().join("mac.js");
    std::fs::write(&mac, text.replace('\n', "\r")).unwrap();
    let o = crate::common::posrecall(&["targets", mac.to_str().unwrap(), "--lines", "4", "--count", "1"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!((o.status.code(), err.lines().count()), (Some(1), 1), "{err}");
    assert!(err.contains("mac.js ends its lines with a lone CR"), "{err}");
}

#[test]
fn tabs_non_ascii_and_trailing_spaces_are_kept_verbatim() {
    let src = open("verbatim.js");
    let targets = all_targets(&src, 20, false);
    let t = target(&targets, "verbatim");
    assert_eq!(t.expected[0], "\tvar café = 'crème brûlée';");
    assert_eq!(t.expected[1], "\tvar 名前 = '東京';");
    assert_eq!(t.expected[2], "\tvar emoji = '🦀 + 🐪';");
    assert_eq!(t.expected[3], "\t\tvar tabbed = '\\t';  ", "trailing spaces are part of the line");
    assert_eq!(t.expected[4], "\tvar mixed = 'a\tb';");
    assert_eq!(t.expected[5], "  \tvar spaceTab = 'Ωμέγα';");
    assert_eq!(t.expected[19], "\treturn [café, 名前, emoji, tabbed, mixed, spaceTab];");
    assert_eq!(t.extra_window, ["}"]);
    assert_ground_truth(&src, &targets, 20, false);
}

#[test]
fn blank_lines_count_by_default() {
    let src = open("blank.js");
    let targets = all_targets(&src, 20, false);
    // `sparse` has 22 lines after its brace, 16 of them non-blank.
    assert_eq!(names(&targets), ["sparse", "dense"]);
    let dense = target(&targets, "dense");
    assert_eq!(dense.expected[0], "", "a body starting with a blank line");
    assert!(dense.expected.iter().any(|l| l == "  "), "whitespace-only lines are kept as they are");
    assert_ground_truth(&src, &targets, 20, false);
}

#[test]
fn skip_blank_does_not_count_blank_lines() {
    let src = open("blank.js");
    let targets = all_targets(&src, 20, true);
    assert_eq!(names(&targets), ["dense"], "`sparse` has only 16 non-blank lines");
    let dense = target(&targets, "dense");
    assert_eq!(dense.expected.len(), 20);
    assert!(dense.expected.iter().all(|l| !l.trim().is_empty()), "{:?}", dense.expected);
    let want: Vec<String> = (1..=20).map(|i| format!("  var d{i} = n * {i};")).collect();
    assert_eq!(dense.expected, want);
    assert!(dense.extra_window.iter().all(|l| !l.trim().is_empty()), "{:?}", dense.extra_window);
    assert_eq!(dense.extra_window, ["  var d21 = n * 21;", "  return d21;", "}"]);
    assert_ground_truth(&src, &targets, 20, true);
    // With 16 lines both are eligible again, still without blank lines.
    let t16 = all_targets(&src, 16, true);
    assert_eq!(names(&t16), ["sparse", "dense"]);
    assert_ground_truth(&src, &t16, 16, true);
}

#[test]
fn async_and_generator_declarations_are_eligible() {
    let src = open("async_gen.js");
    let targets = all_targets(&src, 20, false);
    assert_eq!(names(&targets), ["loadAll", "counter", "stream", "exported"]);
    assert_eq!(target(&targets, "loadAll").header, "async function loadAll(urls) {");
    assert_eq!(target(&targets, "counter").header, "function* counter(limit) {");
    assert_eq!(target(&targets, "stream").header, "async function* stream(source) {");
    assert_eq!(target(&targets, "counter").expected[0], "  yield 1;");
    let text = &src.corpus.text;
    let load_all = target(&targets, "loadAll");
    assert!(text[load_all.byte_offset..].starts_with("async function loadAll"));
    assert_ground_truth(&src, &targets, 20, false);
}

#[test]
fn syntax_error_keeps_the_clean_functions_and_reports_the_region() {
    let src = open("syntax_error.js");
    assert!(src.parsed.error_regions >= 1, "error_regions = {}", src.parsed.error_regions);
    let note = src.error_note().expect("a note about the syntax error");
    assert!(note.contains("syntax error"), "{note}");
    let targets = all_targets(&src, 20, false);
    assert_eq!(names(&targets), ["before", "after"], "`broken` holds the error and is skipped");
    assert_ground_truth(&src, &targets, 20, false);
    // The same through the language layer directly, on the text alone.
    let parsed = JavaScript.functions(&src.corpus.text).unwrap();
    assert_eq!(parsed.error_regions, src.parsed.error_regions);
    assert!(parsed.functions.iter().any(|f| f.name == "before" && f.clean));
}

#[test]
fn extra_window_follows_the_ground_truth() {
    let src = open("nested.js");
    let targets = all_targets(&src, 20, false);
    let lines = file_lines(&src);
    for t in &targets {
        let start = brace_line(t) + 1 + 20;
        let want: Vec<String> = lines.iter().skip(start).take(20).cloned().collect();
        assert_eq!(t.extra_window, want, "{}", t.name);
        assert_eq!(t.last_expected_line, brace_line(t) + 1 + 20, "{}", t.name);
    }
    // The last function's window stops at the end of the file.
    assert!(target(&targets, "inBlock").extra_window.len() < 20);
}

#[test]
fn select_uses_the_same_eligibility() {
    let src = open("skipped.js");
    let last = src.corpus.line_count() - 1;
    let o = TargetOptions { count: 2, ..opts(20, false) };
    let picked = select(&src.corpus, &src.parsed, 0, last, &o).unwrap();
    assert_eq!(names(&picked), ["keeper", "wrapper"]);
}

/// A kept range (`--crop-lines`) keeps a function only when its declaration
/// starts inside it, and measures depth within the range, from the text's
/// own byte offsets.
#[test]
fn a_kept_range_keeps_declarations_inside_it_and_measures_depth_within_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("range.js");
    let mut text = String::new();
    for name in ["before", "inside", "after"] {
        text.push_str(&format!("function {name}() {{\n  {name}1();\n  {name}2();\n  {name}3();\n}}\n"));
    }
    std::fs::write(&path, &text).unwrap();
    let src = Source::open(&path).unwrap();
    let lines: Vec<&str> = text.split('\n').collect();
    let start_of = |line: usize| lines[..line].iter().map(|l| l.len() + 1).sum::<usize>();
    // Lines 2..=12 (0-based): `before` is declared at line 0, outside, though
    // its last lines are inside; `inside` at line 5; `after` at line 10.
    let got = eligible(&src.corpus, &src.parsed, 2, 12, &opts(2, false));
    assert_eq!(names(&got), ["inside", "after"]);
    let inside = target(&got, "inside");
    assert_eq!(inside.expected, ["  inside1();", "  inside2();"]);
    // The kept text runs from line 2's first byte through line 12's newline.
    let (kept_start, kept_end) = (start_of(2), start_of(13));
    let depth = (start_of(5) - kept_start) as f64 / (kept_end - kept_start) as f64;
    assert!((inside.depth - depth).abs() < 1e-12, "{} against {depth}", inside.depth);
    // A declaration on the range's first line is inside it.
    assert_eq!(names(&eligible(&src.corpus, &src.parsed, 5, 14, &opts(2, false))), ["inside", "after"]);
}
