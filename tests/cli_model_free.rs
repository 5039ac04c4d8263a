//! The built binary, without a model: `posrecall targets` and `posrecall score`
//! on generated corpora, their output files, and their failures on bad input.

use crate::common;

use common::{ok, posrecall, s};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tempfile::TempDir;

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn posrecall_env(args: &[&str], no_color: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_posrecall"));
    cmd.args(args).env_remove("CLICOLOR_FORCE").env_remove("NO_COLOR");
    if let Some(v) = no_color {
        cmd.env("NO_COLOR", v);
    }
    cmd.output().expect("cannot run the posrecall binary")
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).expect("stdout is UTF-8")
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).expect("stderr is UTF-8")
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

/// Function `i` of a generated corpus: 21 distinct body lines. Every third
/// function's ground truth ends in a blank line, every fifth holds a tab.
fn function(i: usize) -> String {
    let mut s = format!("function fn{i:02}(x, y) {{\n");
    for k in 1..=19 {
        if i.is_multiple_of(5) && k == 7 {
            s.push_str(&format!("\tvar tab{i}_{k} = 'tab\there';\n"));
        } else {
            s.push_str(&format!("  var v{i}_{k} = x * {k} + y;\n"));
        }
    }
    if i.is_multiple_of(3) {
        s.push('\n');
    } else {
        s.push_str(&format!("  v{i}_19 += {i};\n"));
    }
    s.push_str(&format!("  return v{i}_19 + {i};\n}}\n\n"));
    s
}

/// A temporary folder holding `corpus.js` with `n` generated functions.
fn corpus(n: usize) -> (TempDir, PathBuf) {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("corpus.js");
    let text: String = (0..n).map(function).collect();
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

fn targets_json(corpus: &Path, extra: &[&str]) -> Value {
    let mut args = vec!["targets", s(corpus), "--json"];
    args.extend_from_slice(extra);
    serde_json::from_str(&ok(&posrecall(&args))).expect("targets --json prints JSON")
}

fn target_list(file: &Value) -> &Vec<Value> {
    file["targets"].as_array().expect("`targets` is an array")
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array().expect("an array of strings").iter().map(|l| l.as_str().expect("a string").to_string()).collect()
}

/// Writes `{"name", "response"}` lines.
fn write_responses(path: &Path, answers: &[(String, String)]) {
    let text: String =
        answers.iter().map(|(name, response)| serde_json::json!({"name": name, "response": response}).to_string() + "\n").collect();
    std::fs::write(path, text).unwrap();
}

/// Targets file and responses; scores them with `--out`; returns (stdout, run file).
fn score(dir: &Path, targets: &Value, answers: &[(String, String)], extra: &[&str]) -> (String, Value) {
    let tpath = dir.join("targets.json");
    let rpath = dir.join("responses.jsonl");
    let out = dir.join("run.json");
    std::fs::write(&tpath, serde_json::to_string(targets).unwrap()).unwrap();
    write_responses(&rpath, answers);
    let mut args = vec!["score", s(&tpath), s(&rpath), "--out", s(&out)];
    args.extend_from_slice(extra);
    let printed = ok(&posrecall(&args));
    let run = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).expect("the run file is JSON");
    (printed, run)
}

/// Each target's expected lines, as plain text.
fn perfect_answers(targets: &Value) -> Vec<(String, String)> {
    target_list(targets).iter().map(|t| (t["name"].as_str().unwrap().to_string(), strings(&t["expected"]).join("\n"))).collect()
}

fn assert_all_pass(run: &Value, count: usize, lines: usize) {
    let sum = &run["summary"];
    assert_eq!(sum["passes"], count, "{sum}");
    assert_eq!(sum["count"], count, "{sum}");
    assert_eq!(sum["matched"], count * lines, "{sum}");
    for key in ["missing", "truncated", "hallucinated", "extra"] {
        assert_eq!(sum[key], 0, "summary.{key}: {sum}");
    }
    for t in run["targets"].as_array().unwrap() {
        assert_eq!(t["pass"], true, "{}", t["name"]);
        assert_eq!(t["matched"], lines, "{}", t["name"]);
    }
}

// ---------------------------------------------------------------------------
// targets
// ---------------------------------------------------------------------------

#[test]
fn targets_json_holds_targets_corpus_and_params() {
    let (_dir, path) = corpus(40);
    let bytes = std::fs::read(&path).unwrap();
    let file = targets_json(&path, &["--count", "8", "--seed", "3"]);

    let targets = target_list(&file);
    assert_eq!(targets.len(), 8);
    for t in targets {
        for key in ["name", "line", "byte_offset", "depth", "header", "expected", "extra_window"] {
            assert!(!t[key].is_null(), "target lacks `{key}`: {t}");
        }
        assert_eq!(t["expected"].as_array().unwrap().len(), 20);
    }
    let sha = sha256_hex(&bytes);
    assert_eq!(file["corpus"]["sha256"], sha);
    let crop = &file["corpus"]["crop"];
    assert_eq!(crop["mode"], "none");
    assert_eq!(crop["first_line"], 1);
    assert_eq!(crop["last_line"], 40 * 24);
    assert_eq!(crop["sha256"], sha, "the whole file is kept");
    let params = &file["params"];
    assert_eq!(params["count"], 8);
    assert_eq!(params["lines"], 20);
    assert_eq!(params["pass"], 8);
    assert_eq!(params["seed"], 3);
    assert_eq!(params["normalize"], "trim");
    assert_eq!(params["skip_blank"], false);

    // Deterministic: the same command prints the same targets.
    assert_eq!(targets_json(&path, &["--count", "8", "--seed", "3"])["targets"], file["targets"]);
}

#[test]
fn targets_json_with_crop_lines_records_the_kept_range() {
    let (_dir, path) = corpus(40);
    let text = std::fs::read_to_string(&path).unwrap();
    let file = targets_json(&path, &["--count", "4", "--crop-lines", "101:600"]);
    let crop = &file["corpus"]["crop"];
    assert_eq!(crop["mode"], "lines");
    assert_eq!(crop["first_line"], 101);
    assert_eq!(crop["last_line"], 600);
    let kept: String = text.split_inclusive('\n').skip(100).take(500).collect();
    assert_eq!(crop["sha256"], sha256_hex(kept.as_bytes()));
    assert_eq!(file["corpus"]["sha256"], sha256_hex(text.as_bytes()), "corpus.sha256 is the whole file's");
    for t in target_list(&file) {
        let line = t["line"].as_u64().unwrap();
        assert!((101..=600 - 21).contains(&line), "{t}");
        let depth = t["depth"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&depth), "{t}");
    }
}

#[test]
fn emit_prompts_writes_one_prompt_per_target() {
    let (dir, path) = corpus(40);
    let text = std::fs::read_to_string(&path).unwrap();
    let prompts = dir.path().join("prompts.jsonl");
    let out = ok(&posrecall(&["targets", s(&path), "--json", "--count", "6", "--emit-prompts", s(&prompts)]));
    let file: Value = serde_json::from_str(&out).unwrap();
    let names: Vec<&str> = target_list(&file).iter().map(|t| t["name"].as_str().unwrap()).collect();

    let jsonl = std::fs::read_to_string(&prompts).unwrap();
    let rows: Vec<Value> = jsonl.lines().map(|l| serde_json::from_str(l).expect("a JSON line")).collect();
    assert_eq!(rows.len(), names.len());
    for (row, name) in rows.iter().zip(&names) {
        assert_eq!(row.as_object().unwrap().len(), 3, "{{name, prompt, chat_template_kwargs}} only: {row}");
        // Thinking off by default, in the variables of every template family.
        let kwargs = &row["chat_template_kwargs"];
        assert_eq!((&kwargs["enable_thinking"], &kwargs["reasoning_effort"]), (&Value::Bool(false), &Value::from("low")));
        assert_eq!(row["name"], *name);
        let prompt = row["prompt"].as_str().unwrap();
        assert!(prompt.starts_with(&text), "the prompt starts with the file");
        let query = format!(
            "Reproduce verbatim the first 20 lines following the opening brace of the function named `{name}`. Output only those lines, no commentary."
        );
        assert!(prompt.ends_with(&query), "the prompt ends with the query: {:?}", &prompt[text.len()..]);
        assert_eq!(prompt.len(), text.len() + 1 + query.len(), "file, blank line, query");
    }
}

#[test]
fn emit_prompts_with_crop_lines_holds_only_the_kept_text() {
    let (dir, path) = corpus(40);
    let text = std::fs::read_to_string(&path).unwrap();
    let kept: String = text.split_inclusive('\n').skip(200).take(300).collect();
    let prompts = dir.path().join("prompts.jsonl");
    ok(&posrecall(&["targets", s(&path), "--count", "3", "--skip-blank", "--crop-lines", "201:500", "--emit-prompts", s(&prompts)]));
    let jsonl = std::fs::read_to_string(&prompts).unwrap();
    assert_eq!(jsonl.lines().count(), 3);
    for l in jsonl.lines() {
        let row: Value = serde_json::from_str(l).unwrap();
        let prompt = row["prompt"].as_str().unwrap();
        assert!(prompt.starts_with(&kept), "the prompt starts with the kept lines");
        assert!(prompt[kept.len()..].starts_with("\nReproduce verbatim the first 20 non-blank lines"), "{prompt}");
    }
}

// ---------------------------------------------------------------------------
// score
// ---------------------------------------------------------------------------

#[test]
fn score_of_the_expected_lines_passes_everything() {
    let (dir, path) = corpus(40);
    let targets = targets_json(&path, &[]);
    assert_eq!(target_list(&targets).len(), 16);
    let (printed, run) = score(dir.path(), &targets, &perfect_answers(&targets), &["--quiet"]);
    assert_all_pass(&run, 16, 20);
    assert!(printed.contains("16/16 passed, 320 matched, 0 missing"), "{printed}");
}

#[test]
fn run_file_has_the_documented_keys() {
    let (dir, path) = corpus(40);
    let targets = targets_json(&path, &["--count", "5", "--crop-lines", "1:700"]);
    let (_, run) = score(dir.path(), &targets, &perfect_answers(&targets), &["--quiet"]);

    let m = &run["manifest"];
    assert_eq!(m["corpus"]["crop"], targets["corpus"]["crop"], "the crop record is carried over");
    for key in ["mode", "first_line", "last_line", "sha256"] {
        assert!(!m["corpus"]["crop"][key].is_null(), "manifest.corpus.crop.{key}");
    }
    assert_eq!(m["corpus"]["sha256"], targets["corpus"]["sha256"]);
    assert!(m["corpus"]["path"].is_string());
    for key in ["count", "lines", "pass", "seed", "normalize", "skip_blank"] {
        assert_eq!(m["params"][key], targets["params"][key], "manifest.params.{key}");
    }
    assert_eq!(m["runtime"]["posrecall"], env!("CARGO_PKG_VERSION"));

    let list = run["targets"].as_array().unwrap();
    assert_eq!(list.len(), 5);
    for (t, want) in list.iter().zip(target_list(&targets)) {
        for key in [
            "name",
            "line",
            "byte_offset",
            "token_offset",
            "depth",
            "expected",
            "response",
            "lines",
            "matched",
            "missing",
            "truncated",
            "hallucinated",
            "extra",
            "pass",
        ] {
            assert!(t.get(key).is_some(), "targets[].{key} missing in {t}");
        }
        for key in ["name", "line", "byte_offset", "depth", "expected"] {
            assert_eq!(t[key], want[key], "targets[].{key}");
        }
        let lines = t["lines"].as_array().unwrap();
        assert_eq!(lines.len(), 20);
        for (l, e) in lines.iter().zip(strings(&t["expected"])) {
            assert_eq!(l["status"], "matched", "{l}");
            assert_eq!(l["text"], e.as_str());
        }
    }
    for key in ["passes", "count", "matched", "missing", "truncated", "hallucinated", "extra"] {
        assert!(run["summary"][key].is_u64(), "summary.{key}: {}", run["summary"]);
    }
}

#[test]
fn a_fenced_answer_after_a_preamble_still_passes() {
    let (dir, path) = corpus(40);
    let targets = targets_json(&path, &["--count", "6"]);
    let answers: Vec<(String, String)> = target_list(&targets)
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut body = strings(&t["expected"]).join("\n");
            if i % 2 == 0 {
                // Half of them also echo the header first.
                body = format!("{}\n{body}", t["header"].as_str().unwrap());
            }
            let response = format!(
                "Sure! Here are the first 20 lines of `{}`:\n\n```js\n{body}\n```\n\nLet me know if you need more.",
                t["name"].as_str().unwrap()
            );
            (t["name"].as_str().unwrap().to_string(), response)
        })
        .collect();
    let (_, run) = score(dir.path(), &targets, &answers, &["--quiet"]);
    assert_all_pass(&run, 6, 20);
    assert_eq!(run["targets"][0]["response"], answers[0].1.as_str(), "the raw response is recorded");
}

/// One answer with a missing, a hallucinated and an extra line; the others empty.
fn mixed_answers(targets: &Value) -> Vec<(String, String)> {
    let t = &target_list(targets)[0];
    let expected = strings(&t["expected"]);
    let extra = strings(&t["extra_window"]);
    let mut lines: Vec<String> = expected[1..].to_vec();
    lines.push("var somethingElseEntirely = 42;".into());
    lines.push(extra[0].clone());
    vec![(t["name"].as_str().unwrap().to_string(), lines.join("\n"))]
}

#[test]
fn plain_output_uses_markers_and_no_ansi_escapes() {
    let (dir, path) = corpus(40);
    let targets = targets_json(&path, &["--count", "2"]);
    let answers = mixed_answers(&targets);
    for no_color in [Some("1"), None] {
        let tpath = dir.path().join("t.json");
        let rpath = dir.path().join("r.jsonl");
        std::fs::write(&tpath, serde_json::to_string(&targets).unwrap()).unwrap();
        write_responses(&rpath, &answers);
        let o = posrecall_env(&["score", s(&tpath), s(&rpath)], no_color);
        let out = ok(&o);
        assert!(!out.contains('\x1b') && !stderr(&o).contains('\x1b'), "ANSI escape with NO_COLOR={no_color:?}: {out}");
        for mark in ["= ", "- ", "? ", "+ "] {
            assert!(
                out.lines().any(|l| l.starts_with(&format!("  {mark}"))),
                "no diff line marked {mark:?} (NO_COLOR={no_color:?}):\n{out}"
            );
        }
        assert!(out.contains("= matched") && out.contains("- missing"), "legend: {out}");
        assert!(out.contains("+ extra") && out.contains("? hallucinated"), "legend: {out}");
        assert!(out.contains("1/2 passed, 19 matched, 21 missing"), "{out}");
        assert!(out.contains("1 hallucinated, 1 extra"), "{out}");
    }
}

#[test]
fn score_counts_missing_hallucinated_and_extra_in_the_run_file() {
    let (dir, path) = corpus(40);
    let targets = targets_json(&path, &["--count", "2"]);
    let (_, run) = score(dir.path(), &targets, &mixed_answers(&targets), &["--quiet"]);
    let t = &run["targets"][0];
    assert_eq!((t["matched"].as_u64(), t["missing"].as_u64()), (Some(19), Some(1)));
    assert_eq!((t["hallucinated"].as_u64(), t["extra"].as_u64()), (Some(1), Some(1)));
    let statuses: Vec<&str> = t["lines"].as_array().unwrap().iter().map(|l| l["status"].as_str().unwrap()).collect();
    assert_eq!(statuses[0], "missing");
    assert_eq!(&statuses[statuses.len() - 2..], ["hallucinated", "extra"]);
    // The unanswered target: everything missing, all of it truncated.
    let u = &run["targets"][1];
    assert_eq!((u["matched"].as_u64(), u["missing"].as_u64(), u["truncated"].as_u64()), (Some(0), Some(20), Some(20)));
    assert_eq!(run["summary"]["passes"], 1);
}

// ---------------------------------------------------------------------------
// Bad input
// ---------------------------------------------------------------------------

/// A failed run: exit status `code` (docs/GUIDE.md: 1 for a bad file, 2 for a
/// malformed command line), one `posrecall: error:` line, no panic, and
/// nothing left in `out_dir` (neither the output nor a temporary file).
fn assert_clean_failure(o: &Output, out_dir: &Path, code: i32, what: &str) -> String {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "{what}: exit status {}: {err}", o.status);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{what}: stderr should be one line:\n{err}");
    assert!(lines[0].starts_with("posrecall: error: "), "{what}: {err}");
    assert!(!err.contains("panicked") && !stdout(o).contains("panicked"), "{what}: {err}");
    let left: Vec<_> = std::fs::read_dir(out_dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert!(left.is_empty(), "{what}: files left in the output folder: {left:?}");
    lines[0].to_string()
}

/// `targets FILE --json --emit-prompts OUT/prompts.jsonl ARGS`, expected to
/// fail with exit status 1 (a bad file).
fn targets_fails(corpus: &Path, args: &[&str], what: &str) -> String {
    targets_fails_with(corpus, args, 1, what)
}

/// [`targets_fails`] with exit status `code`.
fn targets_fails_with(corpus: &Path, args: &[&str], code: i32, what: &str) -> String {
    let out = TempDir::new().unwrap();
    let prompts = out.path().join("prompts.jsonl");
    let mut all = vec!["targets", s(corpus), "--json", "--emit-prompts", s(&prompts)];
    all.extend_from_slice(args);
    let o = posrecall(&all);
    assert!(stdout(&o).trim().is_empty(), "{what}: nothing on stdout: {}", stdout(&o));
    assert_clean_failure(&o, out.path(), code, what)
}

/// `score TARGETS RESPONSES --out OUT/run.json`, expected to fail (status 1).
fn score_fails(targets: &Path, responses: &Path, what: &str) -> String {
    let out = TempDir::new().unwrap();
    let run = out.path().join("run.json");
    let o = posrecall(&["score", s(targets), s(responses), "--out", s(&run)]);
    assert_clean_failure(&o, out.path(), 1, what)
}

#[test]
fn missing_corpus_fails_cleanly() {
    let dir = TempDir::new().unwrap();
    let msg = targets_fails(&dir.path().join("nope.js"), &[], "missing corpus");
    assert!(msg.contains("cannot read corpus") && msg.contains("nope.js"), "{msg}");
    assert!(msg.contains("No such file or directory"), "the reason: {msg}");
}

#[test]
fn binary_corpus_fails_cleanly() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("binary.js");
    std::fs::write(&path, b"function f() {\n\x00\x01\x02\xff\xfe\n}\n").unwrap();
    let msg = targets_fails(&path, &[], "binary corpus");
    assert!(msg.contains("binary.js is a binary file, not source code"), "{msg}");
}

#[test]
fn empty_corpus_fails_cleanly() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("empty.js");
    std::fs::write(&path, b"").unwrap();
    let msg = targets_fails(&path, &[], "empty corpus");
    assert!(msg.contains("corpus") && msg.contains("empty.js is empty"), "{msg}");
}

#[test]
fn corpus_without_eligible_function_fails_cleanly() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("small.js");
    std::fs::write(&path, "function a() {\n  return 1;\n}\nvar b = () => {\n  return 2;\n};\n").unwrap();
    let msg = targets_fails(&path, &[], "no eligible function");
    assert!(msg.contains("only 0 eligible") && msg.contains("but --count is 16"), "{msg}");
    // What eligible means, and the flags that fix it.
    assert!(msg.contains("at least 20 lines after its opening brace"), "{msg}");
    assert!(msg.contains("lower --count or --lines, or choose a --crop-lines range"), "{msg}");
}

#[test]
fn too_few_functions_says_how_many_there_are() {
    let (_dir, path) = corpus(5);
    let msg = targets_fails(&path, &["--count", "6"], "too few functions");
    assert!(msg.contains("only 5 eligible") && msg.contains("--count is 6"), "{msg}");
    assert!(msg.contains("lower --count or --lines"), "the hint: {msg}");
}

#[test]
fn crop_lines_beyond_the_end_fails_cleanly() {
    let (_dir, path) = corpus(5);
    let msg = targets_fails(&path, &["--count", "1", "--crop-lines", "10:9999"], "--crop-lines beyond the end");
    assert!(msg.contains("--crop-lines 10:9999 goes past the end of the corpus (120 lines)"), "{msg}");
}

#[test]
fn count_zero_fails_cleanly() {
    let (_dir, path) = corpus(5);
    // A value out of range parses, and is refused by the targets' one
    // validation (the one a sweep file's count goes through): exit status 1.
    let msg = targets_fails_with(&path, &["--count", "0"], 1, "--count 0");
    assert!(msg.contains("--count must be at least 1"), "{msg}");
}

#[test]
fn malformed_targets_json_fails_cleanly() {
    let dir = TempDir::new().unwrap();
    let tpath = dir.path().join("targets.json");
    let rpath = dir.path().join("responses.jsonl");
    std::fs::write(&tpath, "{\"targets\": [").unwrap();
    std::fs::write(&rpath, "").unwrap();
    let msg = score_fails(&tpath, &rpath, "malformed targets JSON");
    assert!(msg.contains("targets.json is not a posrecall targets file"), "{msg}");
    assert!(msg.contains("EOF while parsing a list"), "the parser's reason: {msg}");
    // Valid JSON of the wrong shape too.
    std::fs::write(&tpath, "{\"targets\": 3}").unwrap();
    let msg = score_fails(&tpath, &rpath, "targets JSON of the wrong shape");
    assert!(msg.contains("targets.json is not a posrecall targets file"), "{msg}");
    assert!(msg.contains("invalid type: integer `3`, expected a sequence"), "the reason: {msg}");
}

/// A valid targets file (4 targets) in `dir`.
fn good_targets(dir: &Path) -> (PathBuf, Value) {
    let path = dir.join("corpus.js");
    std::fs::write(&path, (0..8).map(function).collect::<String>()).unwrap();
    let targets = targets_json(&path, &["--count", "4"]);
    let tpath = dir.join("targets.json");
    std::fs::write(&tpath, serde_json::to_string(&targets).unwrap()).unwrap();
    (tpath, targets)
}

#[test]
fn malformed_responses_line_fails_cleanly() {
    let dir = TempDir::new().unwrap();
    let (tpath, targets) = good_targets(dir.path());
    let name = target_list(&targets)[0]["name"].as_str().unwrap();
    let rpath = dir.path().join("responses.jsonl");
    let good = serde_json::json!({"name": name, "response": "x"}).to_string();
    std::fs::write(&rpath, format!("{good}\n{{\"name\": \"fn01\", \"response\": \n")).unwrap();
    let msg = score_fails(&tpath, &rpath, "malformed responses line");
    assert!(msg.contains("responses.jsonl line 2"), "the message names the bad line: {msg}");
    assert!(msg.contains("expected {\"name\": ..., \"response\": ...}"), "what a line holds: {msg}");
}

#[test]
fn response_naming_an_unknown_target_fails_cleanly() {
    let dir = TempDir::new().unwrap();
    let (tpath, _) = good_targets(dir.path());
    let rpath = dir.path().join("responses.jsonl");
    write_responses(&rpath, &[("noSuchFunction".into(), "return 1;".into())]);
    let msg = score_fails(&tpath, &rpath, "unknown target");
    assert!(msg.contains("answers `noSuchFunction`, which is not a target in"), "{msg}");
    assert!(msg.contains("targets.json"), "{msg}");
}

#[test]
fn missing_responses_file_fails_cleanly() {
    let dir = TempDir::new().unwrap();
    let (tpath, _) = good_targets(dir.path());
    let msg = score_fails(&tpath, &dir.path().join("absent.jsonl"), "missing responses file");
    assert!(msg.contains("cannot read responses") && msg.contains("absent.jsonl"), "{msg}");
    assert!(msg.contains("No such file or directory"), "the reason: {msg}");
}
