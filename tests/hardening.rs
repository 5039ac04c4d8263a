//! Hostile input, as a careless or hostile user would give it: every case
//! ends with one line on stderr, exit 1 or 2, no panic, and no input or
//! earlier output changed. The first tests reproduce defects found by hand;
//! `every_subcommand_refuses_hostile_arguments` is the table that keeps the
//! class of defect fixed, and the property tests feed the readers noise.

use crate::common;

use common::{ok, posrecall, posrecall_with, s, smollm2};
use posrecall::corpus::{JavaScript, Language};
use proptest::prelude::*;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use tempfile::TempDir;

fn lodash() -> PathBuf {
    let p = posrecall::support::fsutil::default_corpus_path();
    assert!(p.is_file(), "{} is missing: run scripts/env/fetch-corpus", p.display());
    p
}

fn fixture(name: &str) -> PathBuf {
    common::fixture(name)
}

/// One line on stderr, naming `needle`; exit 1 or 2; nothing on stdout; no panic.
fn refused(o: &Output, needle: &str) -> String {
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    let code = o.status.code();
    assert!(matches!(code, Some(1) | Some(2)), "exit {code:?} (expected 1 or 2): {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "one stderr line expected, got: {err}");
    assert!(lines[0].starts_with("posrecall: error:"), "{err}");
    assert!(lines[0].contains(needle), "`{needle}` not in: {err}");
    assert!(o.stdout.is_empty(), "stdout: {}", String::from_utf8_lossy(&o.stdout));
    err
}

/// A small corpus of functions with 2-letter names and 21-line bodies.
fn short_names(dir: &Path) -> PathBuf {
    let mut text = String::new();
    for a in b'a'..=b'h' {
        for b in b'a'..=b'e' {
            let name = format!("{}{}", a as char, b as char);
            text.push_str(&format!("function {name}(x) {{\n"));
            for i in 0..21 {
                text.push_str(&format!("  x = x + {i}; // {name}\n"));
            }
            text.push_str("  return x;\n}\n\n");
        }
    }
    let path = dir.join("short.js");
    std::fs::write(&path, text).unwrap();
    path
}

fn targets_json(dir: &Path) -> PathBuf {
    let out = ok(&posrecall(&["targets", s(&fixture("dense.js")), "--json", "--count", "4", "--lines", "8"]));
    let path = dir.join("t.json");
    std::fs::write(&path, out).unwrap();
    path
}

fn responses(dir: &Path, targets: &Path) -> PathBuf {
    let t: serde_json::Value = common::read(targets);
    let lines: String = t["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| serde_json::json!({"name": t["name"], "response": "  return 1;"}).to_string() + "\n")
        .collect();
    let path = dir.join("r.jsonl");
    std::fs::write(&path, lines).unwrap();
    path
}

#[test]
fn huge_numbers_are_refused_while_parsing() {
    // Each row: the command line, its exit code (2: clap's parser refuses
    // it), and the words of that refusal (the flag's name alone would also
    // be met by another check).
    for (args, code, needle) in [
        (
            vec!["bench", "m.gguf", "--ctx", "99999999999"],
            2,
            "invalid value '99999999999' for '--ctx <N,...>': expected `auto` or a token count from 64 to 16777216, got `99999999999`",
        ),
        (
            vec!["bench", "m.gguf", "--fixed-tokens", "999999999"],
            2,
            "invalid value '999999999' for '--fixed-tokens <T>': 999999999 is not in 1..=131072",
        ),
        (
            vec!["ask", "t.json", "--url", "http://h:1", "--concurrency", "100000"],
            2,
            "invalid value '100000' for '--concurrency <CONCURRENCY>': 100000 is not in 1..=256",
        ),
        (
            vec!["ask", "t.json", "--url", "http://h:1", "--retries", "1000"],
            2,
            "invalid value '1000' for '--retries <RETRIES>': 1000 is not in 0..=20",
        ),
        (
            vec!["ask", "t.json", "--url", "http://h:1", "--timeout", "1e20"],
            2,
            "invalid value '1e20' for '--timeout <S>': 1e20 is not between 0 and 86400 seconds (a day)",
        ),
    ] {
        let o = posrecall(&args);
        assert_eq!(o.status.code(), Some(code), "{args:?}");
        refused(&o, needle);
    }
}

/// A run's numbers out of range are refused by the run's one validation
/// (the one a sweep file's values get too), with the flag and the value
/// named, before the model is looked at (m.gguf does not exist).
#[test]
fn out_of_range_run_settings_are_refused_before_the_model() {
    let c = lodash();
    // Each row with its exit code: 1, the run's validation (not clap's 2).
    for (args, code, needle) in [
        (vec!["targets", s(&c), "--lines", "100000000000", "--count", "1"], 1, "--lines 100000000000 is more than the largest, 1000"),
        (vec!["targets", s(&c), "--count", "99999999"], 1, "--count 99999999 is more than the largest, 10000"),
        (vec!["targets", s(&c), "--count", "0"], 1, "--count must be at least 1"),
        (
            vec!["targets", s(&c), "--lines", "18446744073709551615", "--count", "1"],
            1,
            "--lines 18446744073709551615 is more than the largest",
        ),
        (vec!["targets", s(&c), "--pass", "0"], 1, "--pass must be at least 1"),
        (vec!["bench", "m.gguf", "--lines", "100000000000"], 1, "--lines 100000000000 is more than the largest, 1000"),
        (vec!["bench", "m.gguf", "--threads", "0"], 1, "--threads 0: must be between 1 and 1024"),
        (vec!["bench", "m.gguf", "--parallel", "0"], 1, "--parallel 0: must be at least 1"),
        (vec!["bench", "m.gguf", "--lengths", "auto", "--effective-at", "-0.1"], 1, "--effective-at -0.1: must be between 0 and 1"),
        (vec!["bench", "m.gguf", "--threads=-7"], 1, "--threads -7: must be between 1 and 1024"),
        (vec!["bench", "m.gguf", "--threads", "1025"], 1, "--threads 1025: must be between 1 and 1024"),
        (vec!["bench", "m.gguf", "--max-new-tokens", "999999999"], 1, "--max-new-tokens 999999999: must be between 1 and 131072"),
        (vec!["bench", "m.gguf", "--max-new-tokens", "0"], 1, "--max-new-tokens 0: must be between 1 and 131072"),
        (vec!["prompt", "m.gguf", "--target", "x", "--max-new-tokens", "0"], 1, "--max-new-tokens 0: must be between 1 and 131072"),
        (
            vec!["bench", "m.gguf", "--max-prefix-tokens", "99999999999"],
            1,
            "--max-prefix-tokens 99999999999: must be between 1 and 16777216",
        ),
        (vec!["prompt", "m.gguf", "--target", "x", "--max-tokens", "0"], 1, "--max-prefix-tokens 0: must be between 1"),
        (vec!["bench", "m.gguf", "--think", "on", "--think-budget", "0"], 1, "--think-budget 0: must be between 1 and 131072"),
        (vec!["prompt", "m.gguf", "--target", "x", "--think-budget", "131073"], 1, "--think-budget 131073: must be between 1"),
        (vec!["bench", "m.gguf", "--save-reference", "r.ref", "--reference-top-k", "0"], 1, "--reference-top-k 0: must be between 1"),
        (vec!["bench", "m.gguf", "--rope-scale", "2000"], 1, "--rope-scale: 2000 is not from 1/1024 to 1024"),
    ] {
        let o = posrecall(&args);
        assert_eq!(o.status.code(), Some(code), "{args:?}");
        let err = refused(&o, needle);
        assert!(!err.contains("m.gguf"), "the model was looked at: {err}");
    }
}

#[test]
fn a_sweep_with_huge_numbers_is_refused() {
    let dir = TempDir::new().unwrap();
    let model = smollm2();
    for (params, key) in [
        ("lines = 18446744073709551615", "lines"),
        ("count = 0", "count"),
        ("threads = 0", "params.threads"),
        ("max_new_tokens = 999999999", "params.max_new_tokens"),
    ] {
        let toml = format!("[params]\n{params}\n[[model]]\nname = \"m\"\npath = {:?}\nkv = [\"f16\"]\n", s(&model));
        let path = dir.path().join("m.toml");
        std::fs::write(&path, toml).unwrap();
        refused(&posrecall(&["matrix", s(&path), "--list"]), key);
    }
}

#[test]
fn a_full_stdout_is_an_error_not_a_panic() {
    let dir = TempDir::new().unwrap();
    let t = targets_json(dir.path());
    let r = responses(dir.path(), &t);
    let run = dir.path().join("run.json");
    ok(&posrecall(&["score", s(&t), s(&r), "--out", s(&run)]));
    let model = smollm2();
    let sweep = dir.path().join("m.toml");
    std::fs::write(&sweep, format!("[[model]]\nname = \"m\"\npath = {:?}\nkv = [\"f16\"]\n", s(&model))).unwrap();
    let full = std::fs::File::create("/dev/full").expect("/dev/full");
    for args in [
        vec!["targets", s(&fixture("dense.js")), "--json", "--count", "4", "--lines", "8"],
        vec!["score", s(&t), s(&r)],
        vec!["matrix", s(&sweep), "--list"],
        vec!["report", s(&run)],
        vec!["compare", s(&run), s(&run)],
    ] {
        let o = Command::new(common::bin()).args(&args).env("NO_COLOR", "1").stdout(full.try_clone().unwrap()).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(err.contains("cannot write to standard output"), "{args:?}: {err}");
        assert_eq!(err.lines().filter(|l| l.starts_with("posrecall: error:")).count(), 1, "{err}");
    }
}

#[test]
fn a_closed_pipe_ends_quietly_with_success() {
    // The targets file of lodash is far larger than a pipe's buffer, so the
    // writer meets the closed pipe.
    let mut child = Command::new(common::bin())
        .args(["targets", s(&lodash()), "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 16];
    child.stdout.as_mut().unwrap().read_exact(&mut first).unwrap();
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "status {:?}: {}", o.status, String::from_utf8_lossy(&o.stderr));
    assert!(o.stderr.is_empty(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn an_output_that_is_an_input_is_refused_and_the_input_kept() {
    let dir = TempDir::new().unwrap();
    let t = targets_json(dir.path());
    let r = responses(dir.path(), &t);
    let run = dir.path().join("run.json");
    ok(&posrecall(&["score", s(&t), s(&r), "--out", s(&run)]));
    let corpus = dir.path().join("u.js");
    std::fs::copy(fixture("dense.js"), &corpus).unwrap();
    let before: Vec<Vec<u8>> = [&t, &r, &run, &corpus].iter().map(|p| std::fs::read(p).unwrap()).collect();
    // `./x` and `x` are one file.
    let dotted = dir.path().join(".").join("run.json");
    // Each row's refusal in its own words, naming the output and the input
    // it would destroy (a flag name alone is in other refusals too).
    let also = |flag: &str, out: &Path, input: &Path| {
        format!("posrecall: error: {flag}: {} is also an input ({}); writing it would destroy that input", out.display(), input.display())
    };
    for (args, expected) in [
        (vec!["report", s(&run), "--format", "json", "-o", s(&dotted)], also("--out", &dotted, &run)),
        (vec!["report", s(dir.path()), "-o", s(&run)], also("--out", &run, &run)),
        (vec!["score", s(&t), s(&r), "--out", s(&t)], also("--out", &t, &t)),
        (vec!["score", s(&t), s(&r), "--out", s(&r)], also("--out", &r, &r)),
        (vec!["targets", s(&corpus), "--count", "2", "--emit-prompts", s(&corpus)], also("--emit-prompts", &corpus, &corpus)),
        (vec!["ask", s(&t), "--url", "http://127.0.0.1:9", "--out", s(&t)], also("--out", &t, &t)),
    ] {
        let o = posrecall(&args);
        let err = refused(&o, &expected);
        assert_eq!((o.status.code(), err.trim_end()), (Some(1), expected.as_str()), "{args:?}");
    }
    let after: Vec<Vec<u8>> = [&t, &r, &run, &corpus].iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert!(before == after, "an input changed");
}

#[test]
fn output_paths_are_checked_before_the_model_is_loaded() {
    let dir = TempDir::new().unwrap();
    let nowhere = dir.path().join("no/such/folder/run.json");
    // The model does not exist either: the output is what is reported,
    // because it is checked first.
    let missing_model = dir.path().join("absent.gguf");
    let err = refused(&posrecall(&["bench", s(&missing_model), "--out", s(&nowhere)]), "--out");
    assert!(err.contains("does not exist"), "{err}");
    let err = refused(&posrecall(&["bench", s(&missing_model), "--html", s(dir.path())]), "--html");
    assert!(err.contains("is a folder"), "{err}");
    // matrix makes its output folder before loading any model.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let sweep = dir.path().join("m.toml");
    // The model is one llama.cpp cannot load: refused for the folder, not
    // for the model, so the folder was checked first.
    let cut = common::unloadable_model(dir.path());
    std::fs::write(&sweep, format!("[[model]]\nname = \"m\"\npath = {:?}\nkv = [\"f16\"]\n", s(&cut))).unwrap();
    refused(&posrecall(&["matrix", s(&sweep), "--out-dir", s(&file.join("runs"))]), "--out-dir");
}

#[test]
fn renaming_never_chooses_a_reserved_word() {
    // Two-letter names: `do`, `if`, `in` are among the fresh names a seed can
    // draw; 6 of 40 seeds used to give code that does not parse.
    let dir = TempDir::new().unwrap();
    let path = short_names(dir.path());
    let text = std::fs::read_to_string(&path).unwrap();
    for seed in 0..40u64 {
        let renamed = posrecall::corpus::rename::rename(&text, &JavaScript, seed).unwrap_or_else(|e| panic!("seed {seed}: {e:#}"));
        for new in renamed.mapping.values() {
            assert!(!JavaScript.reserved_words().contains(&new.as_str()), "seed {seed}: {new}");
        }
        let seed = seed.to_string();
        ok(&posrecall(&["targets", s(&path), "--rename", "--seed", &seed, "--count", "2"]));
    }
}

#[test]
fn smaller_cases() {
    let dir = TempDir::new().unwrap();
    // A Slurm array of no tasks.
    let sweep = dir.path().join("ok.toml");
    std::fs::write(&sweep, format!("[[model]]\nname = \"m\"\npath = {:?}\nkv = [\"f16\"]\n", s(&smollm2()))).unwrap();
    let o = posrecall_with(
        &["matrix", s(&sweep), "--list", "--shard", "auto"],
        &[("SLURM_ARRAY_TASK_ID", "0"), ("SLURM_ARRAY_TASK_COUNT", "0")],
    );
    let err = refused(&o, "at least one task");
    assert!(!err.contains("--array=0--1"), "{err}");
    // A model path that is a folder.
    refused(&posrecall(&["bench", s(dir.path())]), "is not a file");
    let sweep = dir.path().join("m.toml");
    std::fs::write(&sweep, format!("[[model]]\nname = \"m\"\npath = {:?}\nkv = [\"f16\"]\n", s(dir.path()))).unwrap();
    refused(&posrecall(&["matrix", s(&sweep), "--list"]), "is a folder");
    // A byte-order mark in a JSON input is read past.
    let t = targets_json(dir.path());
    let r = responses(dir.path(), &t);
    let mut bom = b"\xef\xbb\xbf".to_vec();
    bom.extend(std::fs::read(&t).unwrap());
    std::fs::write(&t, bom).unwrap();
    ok(&posrecall(&["score", s(&t), s(&r), "--quiet"]));
    // --pass 0 would make every target pass.
    refused(&posrecall(&["score", s(&t), s(&r), "--pass", "0"]), "--pass");
}

#[test]
fn atomic_write_errors_name_the_path_given() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("missing-folder").join("out.json");
    let e = posrecall::support::fsutil::write_atomic(&path, b"x").unwrap_err();
    let msg = format!("{e:#}");
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(!msg.contains(".tmp-"), "{msg}");
}

/// A server that answers every request as a chat or completion server
/// would, so that an `ask` command line that got past its checks would
/// finish (and the table would see it succeed), not stop at a refused
/// connection. Returns its URL.
fn answering_server() -> String {
    use std::io::Write;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 65536];
            let _ = stream.read(&mut buf);
            let body = r#"{"choices":[{"message":{"content":"  return 1;"},"text":"  return 1;","finish_reason":"stop"}]}"#;
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    url
}

/// Command lines no command should take, each with the exit code and the
/// words of the one refusal it must meet. The words are that refusal's own
/// (the flag's name alone would not do: another refusal of the same line can
/// name it too), and the exit code is written in the row, not read from the
/// message, as docs/GUIDE.md's "Exit codes and errors" says: 2 for a command
/// line that does not parse (clap's own words), 1 for one that parses and is
/// refused. Each is set up so that the refusal under test is
/// the only one possible: `bench` and `prompt` get a real model and a real
/// small corpus, `ask` a server that answers, so that with the check
/// deleted the command would run (and write a file, or exit 0) instead.
fn hostile_arguments(dir: &Path) -> Vec<(Vec<String>, i32, String)> {
    let t = targets_json(dir);
    let r = responses(dir, &t);
    let text = dir.join("text.txt");
    std::fs::write(&text, "not json").unwrap();
    let binary = dir.join("bin.js");
    std::fs::write(&binary, [0u8, 159, 146, 150, 0, 1]).unwrap();
    let missing = dir.join("absent");
    let model = smollm2();
    let url = answering_server();
    let (t, r, text, binary, missing, folder, model, url) =
        (s(&t), s(&r), s(&text), s(&binary), s(&missing), s(dir), s(&model), url.as_str());
    let dense = fixture("dense.js");
    let dense = s(&dense);
    // bench on the real model and the small corpus, unless the row names
    // its own corpus.
    let bench = |rest: &[&str]| -> Vec<String> {
        let mut v = vec!["bench".to_string(), model.to_string()];
        v.extend(rest.iter().map(|a| a.to_string()));
        if !rest.iter().any(|a| a.starts_with("--corpus") || *a == "--language") {
            v.extend(["--corpus".to_string(), dense.to_string()]);
        }
        // One short question: a row whose check is gone runs in seconds.
        v.extend(["--count", "1", "--lines", "2"].map(String::from));
        v
    };
    let mut cases: Vec<(Vec<String>, i32, &'static str)> = Vec::new();
    let mut push = |code: i32, args: Vec<&str>, needle: &'static str| {
        cases.push((args.into_iter().map(String::from).collect::<Vec<String>>(), code, needle))
    };
    push(2, vec!["frobnicate"], "unrecognized subcommand 'frobnicate'");
    push(2, vec!["targets"], "the following required arguments were not provided: <CORPUS>");
    push(1, vec!["targets", missing], "absent from its extension (known: .js, .mjs, .cjs, .jsx, .ts, .mts, .cts, .tsx, .py,");
    push(1, vec!["targets", binary], "bin.js is a binary file, not source code");
    push(1, vec!["targets", text], "text.txt from its extension (known: .js, .mjs, .cjs, .jsx, .ts, .mts, .cts, .tsx, .py,");
    push(
        2,
        vec!["targets", dense, "--crop-lines", "0:0"],
        "invalid value '0:0' for '--crop-lines <A:B>': line range 0:0 must satisfy 1 <= A <= B",
    );
    push(
        2,
        vec!["targets", dense, "--crop-lines", "9:3"],
        "invalid value '9:3' for '--crop-lines <A:B>': line range 9:3 must satisfy 1 <= A <= B",
    );
    push(1, vec!["targets", dense, "--crop-lines", "1:99999999"], "--crop-lines 1:99999999 goes past the end of the corpus (306 lines)");
    push(
        2,
        vec!["targets", dense, "--normalize", "loose"],
        "invalid value 'loose' for '--normalize <NORMALIZE>' [possible values: trim, exact, squash, trim_end]",
    );
    push(1, vec!["targets", dense, "--count", "999"], "but --count is 999; lower --count or --lines");
    push(
        2,
        vec!["targets", text, "--language", "cobol"],
        "invalid value 'cobol' for '--language <NAME>': unknown language (known: javascript,",
    );
    push(2, vec!["targets", text, "--language", ""], "invalid value '' for '--language <NAME>': unknown language (known: javascript,");
    push(
        1,
        vec!["targets", text, "--language", "rust"],
        "text.txt does not parse as rust: 1 syntax error region(s) cover 100% of it (first at",
    );
    push(1, vec!["targets", binary, "--language", "python"], "bin.js is a binary file, not source code");
    push(1, vec!["targets", "--corpus-dir", missing], "absent does not exist");
    push(1, vec!["targets", "--corpus-dir", dense], "dense.js is not a folder");
    push(
        1,
        vec!["targets", "--corpus-dir", folder],
        "holds no file to use (no file with a known extension: .js, .mjs, .cjs, .jsx, .ts, .mts,",
    );
    push(
        1,
        vec!["targets", "--corpus-dir", folder, "--language", "go"],
        "holds no file to use (no go file: .go); check --corpus-dir, --include, --exclude and",
    );
    push(
        1,
        vec!["targets", "--corpus-dir", folder, "--include", "*.txt"],
        "holds no file to use that the include and exclude globs select; skipped text.txt: its",
    );
    push(
        1,
        vec!["targets", "--corpus-dir", folder, "--include", "a/[b"],
        "a/[b` is not a glob: unclosed character class; missing ']'; fix --include or --exclude",
    );
    push(
        1,
        vec!["targets", "--corpus-dir", folder, "--exclude", "{a,"],
        "{a,` is not a glob: unclosed alternate group; missing '}' (maybe escape '{' with '[{]'?);",
    );
    push(
        1,
        vec!["targets", "--corpus-dir", folder, "--exclude", "**"],
        "holds no file to use that the include and exclude globs select (the exclude globs left",
    );
    push(2, vec!["targets", dense, "--corpus-dir", folder], "the argument '[CORPUS]' cannot be used with '--corpus-dir <DIR>'");
    push(1, vec!["targets", dense, "--include", "*.js"], "dense.js is one file; give the folder with --corpus-dir DIR");
    push(1, vec!["targets", dense, "--exclude", "*.js"], "dense.js is one file; give the folder with --corpus-dir DIR");
    push(
        2,
        vec!["bench", model, "--language", "klingon"],
        "invalid value 'klingon' for '--language <NAME>': unknown language (known: javascript,",
    );
    push(1, vec!["bench", model, "--corpus-dir", missing], "absent does not exist");
    push(
        2,
        vec!["bench", model, "--corpus-dir", folder, "--corpus", dense],
        "the argument '--corpus-dir <DIR>' cannot be used with '--corpus <CORPUS>'",
    );
    push(1, vec!["prompt", model, "--target", "x", "--corpus-dir", missing], "absent does not exist");
    push(
        2,
        vec!["prompt", model, "--target", "x", "--language", "c--"],
        "invalid value 'c--' for '--language <NAME>': unknown language (known: javascript,",
    );
    push(2, vec!["score", t], "the following required arguments were not provided: <RESPONSES>");
    push(1, vec!["score", t, missing], "cannot read responses");
    push(1, vec!["score", text, r], "text.txt is not a posrecall targets file (the JSON `posrecall targets` prints): expected");
    push(1, vec!["score", t, text], "text.txt line 1: expected {\"name\": ..., \"response\": ...}: expected ident at line 1 column");
    push(1, vec!["score", r, t], "r.jsonl is not a posrecall targets file (the JSON `posrecall targets` prints): missing");
    push(
        1,
        vec!["score", t, r, "--crop-lines", "1:2"],
        "t.json was made for lines 1..306, not 1..2; rerun `posrecall targets --crop-lines 1:2",
    );
    push(1, vec!["score", t, r, "--pass", "9"], "--pass 9 is more than the targets' 8 lines: nothing could pass");
    push(2, vec!["report"], "the following required arguments were not provided: <RUN.json|DIR>...");
    push(1, vec!["report", missing], "cannot read run file");
    push(1, vec!["report", text], "text.txt is not a posrecall run file: expected ident at line 1 column 2");
    push(
        2,
        vec!["report", t, "--format", "xml"],
        "invalid value 'xml' for '--format <FORMAT>' [possible values: table, md, csv, json, jsonl, html]",
    );
    push(
        1,
        vec!["report", t, "--format", "csv", "--diff"],
        "--diff works with --format table, md or html (the HTML page always has the diffs), not csv",
    );
    push(2, vec!["compare", t], "the following required arguments were not provided: <B.json>");
    // (181: the targets file holds each expected line's class, one per line.)
    push(1, vec!["compare", t, r], "t.json is not a posrecall run file: missing field `manifest` at line 181 column 1");
    push(1, vec!["compare", text, text], "text.txt is not a posrecall run file: expected ident at line 1 column 2");
    push(2, vec!["ask", t], "the following required arguments were not provided: --url <URL>");
    push(1, vec!["ask", t, "--url", "nope"], "--url `nope`: expected http://HOST:PORT or https://HOST");
    push(1, vec!["ask", t, "--url", "http://"], "--url `http://`: expected http://HOST:PORT or https://HOST");
    push(1, vec!["ask", missing, "--url", url], "cannot read targets file");
    push(1, vec!["ask", t, "--url", url, "--extra", "[1]"], "--extra must be a JSON object, e.g. '{\"cache_prompt\": false}'");
    push(1, vec!["ask", t, "--url", url, "--extra", "{"], "--extra is not JSON: EOF while parsing an object at line 1 column 1");
    push(
        2,
        vec!["ask", t, "--url", url, "--api", "embeddings"],
        "invalid value 'embeddings' for '--api <API>' [possible values: chat, completion]",
    );
    push(
        1,
        vec!["ask", t, "--url", url, "--api-key-env", "POSRECALL_NO_SUCH_VARIABLE"],
        "--api-key-env POSRECALL_NO_SUCH_VARIABLE: the environment variable",
    );
    push(2, vec!["bench"], "the following required arguments were not provided: <MODEL>");
    push(1, vec!["bench", missing], "absent does not exist");
    push(1, vec!["bench", text], "text.txt is not a GGUF model file");
    push(1, vec!["bench", binary], "bin.js is not a GGUF model file");
    push(1, vec!["bench", dense], "dense.js is not a GGUF model file");
    let benches: Vec<(Vec<&str>, i32, &str)> = vec![
        (vec!["--kv", "q7"], 2, "invalid value 'q7' for '--kv <KV,...>': unknown variant `q7`, expected one of `f32`,"),
        (
            vec!["--flash-attn", "off", "--kv-v", "q8_0"],
            1,
            "a quantised V cache (--kv-v q8_0) needs flash attention; drop --flash-attn off or use",
        ),
        (
            vec!["--kv", "f16", "--kv-k", "q8_0"],
            1,
            "--kv with --kv-k: it names K and V itself (K/V, e.g. f16/q8_0); give the types there, or K and V lists without it",
        ),
        (
            vec!["--kv", "q8_0", "--kv-v", "f16"],
            1,
            "--kv with --kv-v: it names K and V itself (K/V, e.g. f16/q8_0); give the types there, or K and V lists without it",
        ),
        (vec!["--crop", "middle"], 2, "invalid value 'middle' for '--crop <CROP>' [possible values: head, densest, none]"),
        (
            vec!["--probe", "shout"],
            2,
            "invalid value 'shout' for '--probe <PROBE,...>': unknown variant `shout`, expected one of `auto`, `chat`, `completion`",
        ),
        (vec!["--swa-full", "maybe"], 2, "invalid value 'maybe' for '--swa-full <SWA_FULL>' [possible values: on, off]"),
        (vec!["--forced-only", "--no-forced"], 2, "the argument '--forced-only' cannot be used with '--no-forced'"),
        (
            vec!["--forced-only", "--parallel", "2"],
            1,
            "--forced-only generates nothing; drop --parallel, --fixed-tokens, --check-sequential,",
        ),
        (vec!["--check-sequential"], 1, "--check-sequential compares a --parallel run with sequential answers; add --parallel N (N"),
        (vec!["--parallel", "300"], 1, "--parallel 300: llama.cpp holds at most 256 sequences in one context and one of them"),
        (vec!["--fixed-tokens", "5", "--max-new-tokens", "5"], 1, "--fixed-tokens sets the answer length; drop --max-new-tokens"),
        (vec!["--kv-memory", "lots"], 2, "invalid value 'lots' for '--kv-memory <SIZE>': couldn't parse \"lots\" into a ByteSize,"),
        (vec!["--snapshot-memory", "lots"], 2, "invalid value 'lots' for '--snapshot-memory <SIZE>': couldn't parse \"lots\" into a"),
        (vec!["--snapshot-memory", "-1GiB"], 2, "unexpected argument '-1' found"),
        (vec!["--restore", "partial"], 2, "invalid value 'partial' for '--restore <HOW>' [possible values: lean, full]"),
        (vec!["--corpus", missing], 1, "absent from its extension (known: .js, .mjs, .cjs, .jsx, .ts, .mts, .cts, .tsx, .py,"),
        (vec!["--reference", missing], 1, "cannot read reference"),
        (vec!["--reference", text], 1, "text.txt: no checksum file"),
        (vec!["--reference", binary], 1, "bin.js: no checksum file"),
        (vec!["--reference", text, "--no-forced"], 1, "--reference and --save-reference work on the teacher-forced pass; drop --no-forced"),
        (vec!["--save-reference", folder], 1, "is a folder; give a file name"),
        (vec!["--save-reference", text, "--reference", text], 1, "text.txt); writing it would destroy that input"),
        (vec!["--only", ""], 1, "--only takes function names separated by commas; one of them is empty"),
        (vec!["--only", "a,,b"], 1, "--only takes function names separated by commas; one of them is empty"),
        (vec!["--think", "maybe"], 2, "invalid value 'maybe' for '--think <THINK>' [possible values: off, on]"),
        (vec!["--lengths", ""], 2, "invalid value '' for '--lengths <L,...|auto>': lengths are separated by commas; one of"),
        (vec!["--lengths", "2k,,4k"], 2, "invalid value '2k,,4k' for '--lengths <L,...|auto>': lengths are separated by commas; one"),
        (vec!["--lengths", "2k,2048"], 2, "invalid value '2k,2048' for '--lengths <L,...|auto>': 2048 is given twice"),
        (vec!["--lengths", "10"], 2, "invalid value '10' for '--lengths <L,...|auto>': 10 is not between 64 and 16777216 tokens"),
        (vec!["--lengths", "4m"], 2, "invalid value '4m' for '--lengths <L,...|auto>': `4m` is not a length in tokens (e.g."),
        (vec!["--lengths", "-2k"], 2, "unexpected argument '-2' found"),
        (
            vec!["--lengths", "99999999999999999999"],
            2,
            "invalid value '99999999999999999999' for '--lengths <L,...|auto>': `99999999999999999999`",
        ),
        (
            vec!["--lengths", "2k,4k", "--closed-book"],
            1,
            "--lengths runs a ladder of windows; it does not combine with --closed-book (recall",
        ),
        (
            vec!["--lengths", "2k,4k", "--only", "a"],
            1,
            "--lengths runs a ladder of windows; it does not combine with --only (each length samples",
        ),
        (
            vec!["--lengths", "2k,4k", "--forced-only"],
            1,
            "--lengths runs a ladder of windows; it does not combine with --forced-only (a window's",
        ),
        (vec!["--lengths", "auto", "--reference", missing], 1, "--lengths runs a ladder of windows; it does not combine with --reference"),
        (vec!["--effective-at", "0.5"], 2, "the following required arguments were not provided: --lengths <L,...|auto>"),
        (vec!["--lengths", "auto", "--effective-at", "1.5"], 1, "--effective-at 1.5: must be between 0 and 1"),
        (vec!["--lengths", "auto", "--effective-at", "nan"], 1, "--effective-at NaN: must be between 0 and 1"),
        (vec!["--template-kwargs", "[1]"], 1, "--template-kwargs not a JSON object: it is an array, e.g. '{\"enable_thinking\": false}'"),
        (vec!["--template-kwargs", "{"], 1, "--template-kwargs not a JSON object: EOF while parsing an object at line 1 column 1, e.g."),
        (vec!["--template-kwargs", "null"], 1, "--template-kwargs not a JSON object: it is null, e.g. '{\"enable_thinking\": false}'"),
        (vec!["--chat-template", missing], 1, "absent: cannot read it: No such file or directory (os error 2)"),
        (vec!["--chat-template", binary], 1, "bin.js: cannot read it: not UTF-8 text (invalid byte at offset 1)"),
        (vec!["--chat-template", dense], 1, "the chat template dropped the user message"),
        (vec!["--draft", "oracle"], 2, "invalid value 'oracle' for '--draft <MODE>' [possible values: none, lookup, truth]"),
        (vec!["--draft", ""], 2, "a value is required for '--draft <MODE>' but none was supplied [possible values: none,"),
        (
            vec!["--draft", "none", "--check-draft"],
            1,
            "--check-draft compares drafted answers with undrafted ones; it needs --draft truth or",
        ),
        (
            vec!["--draft", "none", "--draft-max", "4"],
            1,
            "--draft-max with --draft none: a draft length sets how many draft tokens a step verifies,",
        ),
        (
            vec!["--forced-only", "--draft", "truth"],
            1,
            "--forced-only generates nothing; drop --parallel, --fixed-tokens, --check-sequential,",
        ),
        (
            vec!["--forced-only", "--draft-max", "3"],
            1,
            "--forced-only generates nothing; drop --parallel, --fixed-tokens, --check-sequential,",
        ),
        (
            vec!["--fixed-tokens", "5", "--draft", "lookup"],
            1,
            "--draft with --fixed-tokens: answers of a fixed length are not drafted; drop --draft and",
        ),
        (vec!["--rope-scaling", "ntk"], 2, "invalid value 'ntk' for '--rope-scaling <ROPE_SCALING>' [possible values: none, linear,"),
        (
            vec!["--rope-scaling", "yarn", "--rope-scale", "0.5"],
            1,
            "--rope-scale: 0.5 would shrink the context, which YaRN does not do: a scale is 1 or more,",
        ),
    ];
    let mut rows: Vec<(Vec<String>, i32, &str)> = Vec::new();
    for (rest, code, needle) in benches {
        rows.push((bench(&rest), code, needle));
    }
    push(2, vec!["targets", dense, "--think", "on"], "the following required arguments were not provided: --emit-prompts <FILE>");
    push(
        1,
        vec!["targets", dense, "--emit-prompts", "p.jsonl", "--template-kwargs", "\"x\""],
        "--template-kwargs not a JSON object: it is a string, e.g. '{\"enable_thinking\": false}'",
    );
    push(
        1,
        vec!["ask", t, "--url", url, "--template-kwargs", "[]"],
        "--template-kwargs not a JSON object: it is an array, e.g. '{\"enable_thinking\": false}'",
    );
    push(2, vec!["ask", t, "--url", url, "--think", "yes"], "invalid value 'yes' for '--think <THINK>' [possible values: off, on]");
    push(2, vec!["prompt"], "the following required arguments were not provided: --target <NAME> <MODEL>");
    push(2, vec!["prompt", missing], "the following required arguments were not provided: --target <NAME>");
    push(1, vec!["prompt", missing, "--target", "x"], "absent does not exist");
    push(1, vec!["prompt", text, "--target", "x", "--corpus", dense], "text.txt is not a GGUF model file");
    push(
        1,
        vec!["prompt", model, "--target", "x", "--corpus", dense, "--template-kwargs", "1"],
        "--template-kwargs not a JSON object: it is a number, e.g. '{\"enable_thinking\": false}'",
    );
    push(
        2,
        vec!["prompt", model, "--target", "x", "--corpus", dense, "--think", "perhaps"],
        "invalid value 'perhaps' for '--think <THINK>' [possible values: off, on]",
    );
    push(
        2,
        vec!["prompt", model, "--target", "x", "--corpus", dense, "--rope-scaling", "?"],
        "invalid value '?' for '--rope-scaling <ROPE_SCALING>' [possible values: none, linear,",
    );
    push(2, vec!["template"], "the following required arguments were not provided: <FILE.jinja>");
    push(1, vec!["template", missing], "absent: cannot read it: No such file or directory (os error 2)");
    push(1, vec!["template", binary], "bin.js: cannot read it: not UTF-8 text (invalid byte at offset 1)");
    push(2, vec!["template", text, "--think", "maybe"], "invalid value 'maybe' for '--think <THINK>' [possible values: off, on]");
    push(
        1,
        vec!["template", dense, "--template-kwargs", "[]"],
        "--template-kwargs not a JSON object: it is an array, e.g. '{\"enable_thinking\": false}'",
    );
    push(2, vec!["matrix"], "the following required arguments were not provided: <models.toml>");
    push(1, vec!["matrix", missing], "cannot read sweep file");
    push(1, vec!["matrix", text], "text.txt:1:5: key with no value, expected `=");
    push(
        2,
        vec!["matrix", dense, "--shard", "3/2"],
        "invalid value '3/2' for '--shard <K/N|N|auto>': shard 3/2: K must be between 1 and N",
    );
    push(2, vec!["matrix", dense, "--shard", "0"], "invalid value '0' for '--shard <K/N|N|auto>': expected K/N, N or auto: `0` is not a");
    push(1, vec!["bench", "org/", "--corpus", dense], "model file org/ does not exist");
    push(1, vec!["bench", "org/repo:", "--corpus", dense], "model file org/repo: does not exist");
    push(1, vec!["bench", "org/repo@", "--corpus", dense], "model file org/repo@ does not exist");
    push(1, vec!["bench", "org/repo/file.txt", "--corpus", dense], "model file org/repo/file.txt does not exist");
    push(1, vec!["ask", t, "--url", "ftp://127.0.0.1:9"], "--url `ftp://127.0.0.1:9`: expected http://HOST:PORT or https://HOST");
    push(1, vec!["ask", t, "--url", "http://127.0.0.1:0"], "--url `http://127.0.0.1:0`: expected http://HOST:PORT or https://HOST");
    push(
        1,
        vec!["ask", t, "--url", "http://user:secret@exa mple:9"],
        "--url `http://exa mple:9`: expected http://HOST:PORT or https://HOST",
    );
    // Numbers out of range or not numbers, each with the words and the exit
    // code of the one refusal it must meet: 2 where clap's parser refuses it
    // (a value that does not parse, or `-1` taken for a flag), 1 where
    // posrecall's own range check does. A base frequency of 10^9 is in range
    // (some models use 10^6), so it is not among them.
    for (flag, n, code, needle) in [
        ("--draft-max", "-1", 2, "unexpected argument '-1' found"),
        ("--draft-max", "0", 1, "--draft-max 0: the draft length must be 1 to 128, not 0"),
        ("--draft-max", "1e9", 2, "invalid value '1e9' for '--draft-max <K>': invalid digit found in string"),
        ("--draft-max", "NaN", 2, "invalid value 'NaN' for '--draft-max <K>': invalid digit found in string"),
        ("--draft-max", "", 2, "invalid value '' for '--draft-max <K>': cannot parse integer from empty string"),
        (
            "--draft-max",
            "18446744073709551616",
            2,
            "invalid value '18446744073709551616' for '--draft-max <K>': number too large to fit in",
        ),
        ("--draft-max", "٣", 2, "invalid value '٣' for '--draft-max <K>': invalid digit found in string"),
        ("--rope-scale", "-1", 2, "unexpected argument '-1' found"),
        ("--rope-scale", "0", 1, "--rope-scale: 0 is not from 1/1024 to 1024"),
        ("--rope-scale", "1e9", 1, "--rope-scale: 1000000000 is not from 1/1024 to 1024"),
        ("--rope-scale", "NaN", 1, "--rope-scale: NaN is not from 1/1024 to 1024"),
        ("--rope-scale", "", 2, "invalid value '' for '--rope-scale <N>': cannot parse float from empty string"),
        ("--rope-scale", "18446744073709551616", 1, "--rope-scale: 18446744000000000000 is not from 1/1024 to 1024"),
        ("--rope-scale", "٣", 2, "invalid value '٣' for '--rope-scale <N>': invalid float literal"),
        ("--rope-freq-base", "-1", 2, "unexpected argument '-1' found"),
        ("--rope-freq-base", "0", 1, "--rope-freq-base: 0 is not from 1 to 1000000000000"),
        ("--rope-freq-base", "NaN", 1, "--rope-freq-base: NaN is not from 1 to 1000000000000"),
        ("--rope-freq-base", "", 2, "invalid value '' for '--rope-freq-base <F>': cannot parse float from empty string"),
        ("--rope-freq-base", "18446744073709551616", 1, "--rope-freq-base: 18446744000000000000 is not from 1 to 1000000000000"),
        ("--rope-freq-base", "٣", 2, "invalid value '٣' for '--rope-freq-base <F>': invalid float literal"),
        ("--rope-freq-scale", "-1", 2, "unexpected argument '-1' found"),
        ("--rope-freq-scale", "0", 1, "--rope-freq-scale: 0 is not from 1/1024 to 1024"),
        ("--rope-freq-scale", "1e9", 1, "--rope-freq-scale: 1000000000 is not from 1/1024 to 1024"),
        ("--rope-freq-scale", "NaN", 1, "--rope-freq-scale: NaN is not from 1/1024 to 1024"),
        ("--rope-freq-scale", "", 2, "invalid value '' for '--rope-freq-scale <S>': cannot parse float from empty string"),
        ("--rope-freq-scale", "18446744073709551616", 1, "--rope-freq-scale: 18446744000000000000 is not from 1/1024 to 1024"),
        ("--rope-freq-scale", "٣", 2, "invalid value '٣' for '--rope-freq-scale <S>': invalid float literal"),
        ("--yarn-orig-ctx", "-1", 2, "unexpected argument '-1' found"),
        ("--yarn-orig-ctx", "0", 1, "--yarn-orig-ctx: 0 is not a token count from 1 to 16777216"),
        ("--yarn-orig-ctx", "1e9", 2, "invalid value '1e9' for '--yarn-orig-ctx <N>': invalid digit found in string"),
        ("--yarn-orig-ctx", "NaN", 2, "invalid value 'NaN' for '--yarn-orig-ctx <N>': invalid digit found in string"),
        ("--yarn-orig-ctx", "", 2, "invalid value '' for '--yarn-orig-ctx <N>': cannot parse integer from empty string"),
        (
            "--yarn-orig-ctx",
            "18446744073709551616",
            2,
            "invalid value '18446744073709551616' for '--yarn-orig-ctx <N>': number too large to fit",
        ),
        ("--yarn-orig-ctx", "٣", 2, "invalid value '٣' for '--yarn-orig-ctx <N>': invalid digit found in string"),
    ] {
        let args = bench(&[]).into_iter().chain([flag.to_string(), n.to_string()]).collect();
        rows.push((args, code, needle));
    }
    for (flag, n, code, needle) in [
        ("--count", "-1", 2, "unexpected argument '-1' found"),
        ("--count", "0", 1, "--count must be at least 1"),
        ("--count", "1e9", 2, "invalid value '1e9' for '--count <COUNT>': invalid digit found in string"),
        ("--count", "NaN", 2, "invalid value 'NaN' for '--count <COUNT>': invalid digit found in string"),
        ("--count", "", 2, "invalid value '' for '--count <COUNT>': cannot parse integer from empty string"),
        ("--count", "18446744073709551616", 2, "invalid value '18446744073709551616' for '--count <COUNT>': number too large to fit in"),
        ("--count", "٣", 2, "invalid value '٣' for '--count <COUNT>': invalid digit found in string"),
        ("--lines", "-1", 2, "unexpected argument '-1' found"),
        ("--lines", "0", 1, "--lines must be at least 1"),
        ("--lines", "1e9", 2, "invalid value '1e9' for '--lines <LINES>': invalid digit found in string"),
        ("--lines", "NaN", 2, "invalid value 'NaN' for '--lines <LINES>': invalid digit found in string"),
        ("--lines", "", 2, "invalid value '' for '--lines <LINES>': cannot parse integer from empty string"),
        ("--lines", "18446744073709551616", 2, "invalid value '18446744073709551616' for '--lines <LINES>': number too large to fit in"),
        ("--lines", "٣", 2, "invalid value '٣' for '--lines <LINES>': invalid digit found in string"),
        ("--pass", "-1", 2, "unexpected argument '-1' found"),
        ("--pass", "0", 1, "--pass must be at least 1"),
        ("--pass", "1e9", 2, "invalid value '1e9' for '--pass <PASS>': invalid digit found in string"),
        ("--pass", "NaN", 2, "invalid value 'NaN' for '--pass <PASS>': invalid digit found in string"),
        ("--pass", "", 2, "invalid value '' for '--pass <PASS>': cannot parse integer from empty string"),
        ("--pass", "18446744073709551616", 2, "invalid value '18446744073709551616' for '--pass <PASS>': number too large to fit in"),
        ("--pass", "٣", 2, "invalid value '٣' for '--pass <PASS>': invalid digit found in string"),
    ] {
        push(code, vec!["targets", dense, flag, n], needle);
    }
    // No layer on a GPU is a valid choice, so --gpu-layers 0 is not here.
    for (flag, n, code, needle) in [
        ("--threads", "-1", 1, "--threads -1: must be between 1 and 1024"),
        ("--threads", "0", 1, "--threads 0: must be between 1 and 1024"),
        ("--threads", "1e9", 2, "invalid value '1e9' for '--threads <THREADS>': invalid digit found in string"),
        ("--threads", "NaN", 2, "invalid value 'NaN' for '--threads <THREADS>': invalid digit found in string"),
        ("--threads", "", 2, "invalid value '' for '--threads <THREADS>': cannot parse integer from empty string"),
        ("--threads", "18446744073709551616", 2, "invalid value '18446744073709551616' for '--threads <THREADS>': number too large to fit"),
        ("--threads", "٣", 2, "invalid value '٣' for '--threads <THREADS>': invalid digit found in string"),
        ("--ctx", "-1", 2, "unexpected argument '-1' found"),
        ("--ctx", "0", 2, "invalid value '0' for '--ctx <N,...>': expected `auto` or a token count from 64 to"),
        ("--ctx", "1e9", 2, "invalid value '1e9' for '--ctx <N,...>': expected `auto` or a token count from 64 to"),
        ("--ctx", "NaN", 2, "invalid value 'NaN' for '--ctx <N,...>': expected `auto` or a token count from 64 to"),
        ("--ctx", "", 2, "invalid value '' for '--ctx <N,...>': an empty item (two commas in a row, or one at an end)"),
        ("--ctx", "18446744073709551616", 2, "invalid value '18446744073709551616' for '--ctx <N,...>': expected `auto` or a token count"),
        ("--ctx", "٣", 2, "invalid value '٣' for '--ctx <N,...>': expected `auto` or a token count from 64 to"),
        ("--max-new-tokens", "-1", 2, "unexpected argument '-1' found"),
        ("--max-new-tokens", "0", 1, "--max-new-tokens 0: must be between 1 and 131072"),
        ("--max-new-tokens", "1e9", 2, "invalid value '1e9' for '--max-new-tokens <N>': invalid digit found in string"),
        ("--max-new-tokens", "NaN", 2, "invalid value 'NaN' for '--max-new-tokens <N>': invalid digit found in string"),
        ("--max-new-tokens", "", 2, "invalid value '' for '--max-new-tokens <N>': cannot parse integer from empty string"),
        (
            "--max-new-tokens",
            "18446744073709551616",
            2,
            "invalid value '18446744073709551616' for '--max-new-tokens <N>': number too large to fit",
        ),
        ("--max-new-tokens", "٣", 2, "invalid value '٣' for '--max-new-tokens <N>': invalid digit found in string"),
        ("--max-prefix-tokens", "-1", 2, "unexpected argument '-1' found"),
        ("--max-prefix-tokens", "0", 1, "--max-prefix-tokens 0: must be between 1 and 16777216"),
        ("--max-prefix-tokens", "1e9", 2, "invalid value '1e9' for '--max-prefix-tokens <N>': invalid digit found in string"),
        ("--max-prefix-tokens", "NaN", 2, "invalid value 'NaN' for '--max-prefix-tokens <N>': invalid digit found in string"),
        ("--max-prefix-tokens", "", 2, "invalid value '' for '--max-prefix-tokens <N>': cannot parse integer from empty string"),
        (
            "--max-prefix-tokens",
            "18446744073709551616",
            2,
            "invalid value '18446744073709551616' for '--max-prefix-tokens <N>': number too large to",
        ),
        ("--max-prefix-tokens", "٣", 2, "invalid value '٣' for '--max-prefix-tokens <N>': invalid digit found in string"),
        ("--parallel", "-1", 2, "unexpected argument '-1' found"),
        ("--parallel", "0", 1, "--parallel 0: must be at least 1"),
        ("--parallel", "1e9", 2, "invalid value '1e9' for '--parallel <N>': invalid digit found in string"),
        ("--parallel", "NaN", 2, "invalid value 'NaN' for '--parallel <N>': invalid digit found in string"),
        ("--parallel", "", 2, "invalid value '' for '--parallel <N>': cannot parse integer from empty string"),
        ("--parallel", "18446744073709551616", 2, "invalid value '18446744073709551616' for '--parallel <N>': number too large to fit in"),
        ("--parallel", "٣", 2, "invalid value '٣' for '--parallel <N>': invalid digit found in string"),
        ("--fixed-tokens", "-1", 2, "unexpected argument '-1' found"),
        ("--fixed-tokens", "0", 2, "invalid value '0' for '--fixed-tokens <T>': 0 is not in 1..=131072"),
        ("--fixed-tokens", "1e9", 2, "invalid value '1e9' for '--fixed-tokens <T>': invalid digit found in string"),
        ("--fixed-tokens", "NaN", 2, "invalid value 'NaN' for '--fixed-tokens <T>': invalid digit found in string"),
        ("--fixed-tokens", "", 2, "invalid value '' for '--fixed-tokens <T>': cannot parse integer from empty string"),
        (
            "--fixed-tokens",
            "18446744073709551616",
            2,
            "invalid value '18446744073709551616' for '--fixed-tokens <T>': number too large to fit in",
        ),
        ("--fixed-tokens", "٣", 2, "invalid value '٣' for '--fixed-tokens <T>': invalid digit found in string"),
        ("--gpu-layers", "-1", 2, "unexpected argument '-1' found"),
        ("--gpu-layers", "1e9", 2, "invalid value '1e9' for '--gpu-layers <GPU_LAYERS>': invalid digit found in string"),
        ("--gpu-layers", "NaN", 2, "invalid value 'NaN' for '--gpu-layers <GPU_LAYERS>': invalid digit found in string"),
        ("--gpu-layers", "", 2, "invalid value '' for '--gpu-layers <GPU_LAYERS>': cannot parse integer from empty string"),
        (
            "--gpu-layers",
            "18446744073709551616",
            2,
            "invalid value '18446744073709551616' for '--gpu-layers <GPU_LAYERS>': number too large to",
        ),
        ("--gpu-layers", "٣", 2, "invalid value '٣' for '--gpu-layers <GPU_LAYERS>': invalid digit found in string"),
        ("--reference-top-k", "-1", 2, "unexpected argument '-1' found"),
        ("--reference-top-k", "0", 1, "--reference-top-k 0: must be between 1 and 1048576"),
        ("--reference-top-k", "1e9", 2, "invalid value '1e9' for '--reference-top-k <K>': invalid digit found in string"),
        ("--reference-top-k", "NaN", 2, "invalid value 'NaN' for '--reference-top-k <K>': invalid digit found in string"),
        ("--reference-top-k", "", 2, "invalid value '' for '--reference-top-k <K>': cannot parse integer from empty string"),
        (
            "--reference-top-k",
            "18446744073709551616",
            2,
            "invalid value '18446744073709551616' for '--reference-top-k <K>': number too large to fit",
        ),
        ("--reference-top-k", "٣", 2, "invalid value '٣' for '--reference-top-k <K>': invalid digit found in string"),
        ("--think-budget", "-1", 2, "unexpected argument '-1' found"),
        ("--think-budget", "0", 1, "--think-budget 0: must be between 1 and 131072"),
        ("--think-budget", "1e9", 2, "invalid value '1e9' for '--think-budget <N>': invalid digit found in string"),
        ("--think-budget", "NaN", 2, "invalid value 'NaN' for '--think-budget <N>': invalid digit found in string"),
        ("--think-budget", "", 2, "invalid value '' for '--think-budget <N>': cannot parse integer from empty string"),
        (
            "--think-budget",
            "18446744073709551616",
            2,
            "invalid value '18446744073709551616' for '--think-budget <N>': number too large to fit in",
        ),
        ("--think-budget", "٣", 2, "invalid value '٣' for '--think-budget <N>': invalid digit found in string"),
    ] {
        // A thinking budget is refused without --think on, and a top-k without
        // --save-reference, whatever the number: given here, so that the range
        // check is the only one that can refuse 0.
        let needs: &[&str] = match flag {
            "--think-budget" => &["--think", "on"],
            "--reference-top-k" => &["--save-reference", "r.ref"],
            _ => &[],
        };
        let args = bench(needs).into_iter().chain([flag.to_string(), n.to_string()]).collect();
        rows.push((args, code, needle));
    }
    // No retries is a valid choice, so --retries 0 is not here.
    for (flag, n, code, needle) in [
        ("--concurrency", "-1", 2, "unexpected argument '-1' found"),
        ("--concurrency", "0", 2, "invalid value '0' for '--concurrency <CONCURRENCY>': 0 is not in 1..=256"),
        ("--concurrency", "1e9", 2, "invalid value '1e9' for '--concurrency <CONCURRENCY>': invalid digit found in string"),
        ("--concurrency", "NaN", 2, "invalid value 'NaN' for '--concurrency <CONCURRENCY>': invalid digit found in string"),
        ("--concurrency", "", 2, "invalid value '' for '--concurrency <CONCURRENCY>': cannot parse integer from empty string"),
        (
            "--concurrency",
            "18446744073709551616",
            2,
            "invalid value '18446744073709551616' for '--concurrency <CONCURRENCY>': number too large",
        ),
        ("--concurrency", "٣", 2, "invalid value '٣' for '--concurrency <CONCURRENCY>': invalid digit found in string"),
        ("--timeout", "-1", 2, "unexpected argument '-1' found"),
        ("--timeout", "0", 2, "invalid value '0' for '--timeout <S>': 0 is not between 0 and 86400 seconds (a day)"),
        ("--timeout", "1e9", 2, "invalid value '1e9' for '--timeout <S>': 1e9 is not between 0 and 86400 seconds (a day)"),
        ("--timeout", "NaN", 2, "invalid value 'NaN' for '--timeout <S>': NaN is not between 0 and 86400 seconds (a day)"),
        ("--timeout", "", 2, "invalid value '' for '--timeout <S>': `` is not a number of seconds"),
        ("--timeout", "18446744073709551616", 2, "invalid value '18446744073709551616' for '--timeout <S>': 18446744073709551616 is not"),
        ("--timeout", "٣", 2, "invalid value '٣' for '--timeout <S>': `٣` is not a number of seconds"),
        ("--retries", "-1", 2, "unexpected argument '-1' found"),
        ("--retries", "1e9", 2, "invalid value '1e9' for '--retries <RETRIES>': invalid digit found in string"),
        ("--retries", "NaN", 2, "invalid value 'NaN' for '--retries <RETRIES>': invalid digit found in string"),
        ("--retries", "", 2, "invalid value '' for '--retries <RETRIES>': cannot parse integer from empty string"),
        ("--retries", "18446744073709551616", 2, "invalid value '18446744073709551616' for '--retries <RETRIES>': number too large to fit"),
        ("--retries", "٣", 2, "invalid value '٣' for '--retries <RETRIES>': invalid digit found in string"),
        ("--max-new-tokens", "-1", 2, "unexpected argument '-1' found"),
        ("--max-new-tokens", "0", 2, "invalid value '0' for '--max-new-tokens <N>': 0 is not in 1..=131072"),
        ("--max-new-tokens", "1e9", 2, "invalid value '1e9' for '--max-new-tokens <N>': invalid digit found in string"),
        ("--max-new-tokens", "NaN", 2, "invalid value 'NaN' for '--max-new-tokens <N>': invalid digit found in string"),
        ("--max-new-tokens", "", 2, "invalid value '' for '--max-new-tokens <N>': cannot parse integer from empty string"),
        (
            "--max-new-tokens",
            "18446744073709551616",
            2,
            "invalid value '18446744073709551616' for '--max-new-tokens <N>': number too large to fit",
        ),
        ("--max-new-tokens", "٣", 2, "invalid value '٣' for '--max-new-tokens <N>': invalid digit found in string"),
    ] {
        push(code, vec!["ask", t, "--url", url, flag, n], needle);
    }
    cases.into_iter().chain(rows).map(|(args, code, needle)| (args, code, needle.to_string())).collect()
}

/// A chat template that does not parse or raises, and kwargs that are not a
/// JSON object, are one-line errors naming the flag, before any model work
/// (the model file given does not exist: it is never reached).
#[test]
fn bad_templates_and_kwargs_are_refused_before_model_work() {
    let dir = TempDir::new().unwrap();
    let model = dir.path().join("never-loaded.gguf");
    let broken = dir.path().join("broken.jinja");
    std::fs::write(&broken, "{% for message in messages %}{{ message.content ").unwrap();
    let raising = dir.path().join("raising.jinja");
    std::fs::write(&raising, "{{ raise_exception('Conversation roles must alternate') }}").unwrap();
    let (model, broken, raising) = (s(&model), s(&broken), s(&raising));
    for (args, needle) in [
        (vec!["bench", model, "--chat-template", broken], "not a Jinja template"),
        (vec!["bench", model, "--chat-template", raising], "Conversation roles must alternate"),
        (vec!["bench", model, "--template-kwargs", "[1]"], "--template-kwargs not a JSON object: it is an array"),
        (vec!["bench", model, "--template-kwargs", "{\"a\":"], "--template-kwargs not a JSON object"),
        // With --think on, so that only the range check can refuse it.
        (vec!["bench", model, "--think", "on", "--think-budget", "0"], "--think-budget 0: must be between 1 and 131072"),
    ] {
        let err = refused(&posrecall(&args), needle);
        assert!(!err.contains("never-loaded"), "the model was reached: {err}");
    }
    // The same in a sweep file: named by file and key, before any model loads.
    let sweep = dir.path().join("models.toml");
    for (extra, needle) in [
        ("think = \"sometimes\"", "think"),
        ("chat_template = \"broken.jinja\"", "chat_template"),
        ("chat_template = \"raising.jinja\"", "Conversation roles must alternate"),
    ] {
        std::fs::write(&sweep, format!("[[model]]\nname = \"m\"\npath = \"{model}\"\nkv = [\"f16\"]\n{extra}\n")).unwrap();
        std::fs::write(dir.path().join("never-loaded.gguf"), b"GGUF").unwrap();
        refused(&posrecall(&["matrix", s(&sweep), "--out-dir", s(&dir.path().join("runs"))]), needle);
    }
}

/// A chat template that loops for ever in practice, or writes without end,
/// and a FIFO given as a template, stop with one line instead of hanging or
/// aborting, wherever a template is rendered.
#[test]
fn runaway_templates_and_fifos_stop_with_one_line() {
    let dir = TempDir::new().unwrap();
    let model = dir.path().join("never-loaded.gguf");
    let endless = dir.path().join("endless.jinja");
    std::fs::write(&endless, "{% for a in range(100000) %}{% for b in range(100000) %}{{ '' }}{% endfor %}{% endfor %}").unwrap();
    let huge = dir.path().join("huge.jinja");
    std::fs::write(&huge, "{% for a in range(100000) %}{{ 'x' * 100000 }}{% endfor %}{{ messages[0].content }}").unwrap();
    let fifo = dir.path().join("fifo.jinja");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let (m, e, h, f) = (s(&model), s(&endless), s(&huge), s(&fifo));
    for (args, needle) in [
        (vec!["template", e], "ran more than 2000000 steps"),
        (vec!["template", h], "wrote more than"),
        (vec!["template", f], "not a regular file"),
        (vec!["bench", m, "--chat-template", e], "ran more than 2000000 steps"),
        (vec!["bench", m, "--chat-template", f], "not a regular file"),
        (vec!["prompt", m, "--target", "x", "--chat-template", h], "wrote more than"),
    ] {
        let started = std::time::Instant::now();
        let err = refused(&posrecall(&args), needle);
        assert!(started.elapsed().as_secs() < 20, "{args:?} took {:?}", started.elapsed());
        assert!(!err.contains("never-loaded"), "the model was reached: {err}");
    }
    let sweep = dir.path().join("models.toml");
    std::fs::write(dir.path().join("never-loaded.gguf"), b"GGUF").unwrap();
    std::fs::write(&sweep, format!("[[model]]\nname = \"m\"\npath = \"{m}\"\nkv = [\"f16\"]\nchat_template = \"endless.jinja\"\n"))
        .unwrap();
    refused(&posrecall(&["matrix", s(&sweep), "--list"]), "ran more than 2000000 steps");
    // A FIFO where a run file goes: `--resume` would block reading it.
    std::fs::write(&sweep, format!("[[model]]\nname = \"m\"\npath = \"{m}\"\nkv = [\"f16\"]\n")).unwrap();
    let runs = dir.path().join("runs");
    std::fs::create_dir(&runs).unwrap();
    assert!(Command::new("mkfifo").arg(runs.join("m__f16-f16.json")).status().unwrap().success());
    let started = std::time::Instant::now();
    let err = refused(&posrecall(&["matrix", s(&sweep), "--out-dir", s(&runs), "--resume"]), "is not a regular file");
    assert!(started.elapsed().as_secs() < 20 && !err.contains("never-loaded"), "{err}");
    // A model name too long for its run files' names is refused before any run.
    let long = "m".repeat(300);
    std::fs::write(&sweep, format!("[[model]]\nname = \"{long}\"\npath = \"{m}\"\nkv = [\"f16\"]\n")).unwrap();
    refused(&posrecall(&["matrix", s(&sweep), "--list"]), "at most 128 characters");
}

/// Every file posrecall reads goes through one bounded reader
/// (`fsutil::read_input`): a device that never ends (`/dev/zero`,
/// `/dev/urandom`) or a FIFO (which nobody may write, or which may be fed
/// without end) is refused in one line before a byte is read, by every
/// command and every file of each; a regular file over its limit is refused
/// by its size, with the exact byte count.
#[test]
fn endless_and_special_inputs_are_refused_by_every_reader() {
    let dir = TempDir::new().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let smol = smollm2();
    let targets = targets_json(dir.path());
    let answers = responses(dir.path(), &targets);
    let toml = dir.path().join("models.toml");
    std::fs::write(
        &toml,
        format!("[corpus]\npath = \"/dev/zero\"\n[[model]]\nname = \"m\"\npath = \"{}\"\nkv = [\"f16\"]\n", smol.display()),
    )
    .unwrap();
    let (m, f, t, r) = (s(&smol), s(&fifo), s(&targets), s(&answers));
    let special = "not a regular file";
    let cases: Vec<Vec<&str>> = vec![
        vec!["targets", "/dev/zero", "--language", "javascript"],
        vec!["targets", f, "--language", "javascript"],
        vec!["bench", m, "--corpus", "/dev/urandom", "--language", "javascript"],
        vec!["bench", m, "--corpus", f, "--language", "javascript"],
        vec!["bench", m, "--reference", "/dev/zero"],
        vec!["score", "/dev/zero", r],
        vec!["score", t, "/dev/zero"],
        vec!["score", t, f],
        vec!["report", "/dev/zero"],
        vec!["report", f],
        vec!["compare", "/dev/zero", f],
        vec!["ask", "/dev/zero", "--url", "http://127.0.0.1:9"],
        vec!["ask", t, "--url", "http://127.0.0.1:9", "--corpus", "/dev/zero"],
        vec!["matrix", "/dev/zero", "--list"],
        vec!["matrix", s(&toml), "--out-dir", "runs"],
    ];
    for args in &cases {
        let started = std::time::Instant::now();
        let o = Command::new(common::bin()).args(args).current_dir(dir.path()).env("NO_COLOR", "1").output().unwrap();
        refused(&o, special);
        assert!(started.elapsed().as_secs() < 20, "{args:?} took {:?}", started.elapsed());
    }
    // Regular files over their limits, refused by the size alone (sparse
    // files: nothing is written to disk).
    let corpus = dir.path().join("big.js");
    std::fs::File::create(&corpus).unwrap().set_len((64 << 20) + 1).unwrap();
    refused(&posrecall(&["targets", s(&corpus)]), "is 67108865 bytes; posrecall reads corpora of up to 67108864 bytes (64 MiB");
    let run = dir.path().join("big.json");
    std::fs::File::create(&run).unwrap().set_len((256 << 20) + 1).unwrap();
    refused(&posrecall(&["report", s(&run)]), "268435457 bytes, over the limit of 268435456 bytes (256.0 MiB)");
}

#[test]
fn every_subcommand_refuses_hostile_arguments() {
    let dir = TempDir::new().unwrap();
    let cases = hostile_arguments(dir.path());
    let out = TempDir::new().unwrap();
    // Every row is tried and every failing row reported, so that a broken
    // check shows all the rows it breaks.
    let mut failures = Vec::new();
    for (args, want, needle) in &cases {
        let o = Command::new(common::bin()).args(args).current_dir(out.path()).env("NO_COLOR", "1").output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        let code = o.status.code();
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty() && !l.starts_with("note:")).collect();
        let left: Vec<_> = std::fs::read_dir(out.path()).unwrap().flatten().map(|e| e.path()).collect();
        let wrong = match () {
            _ if err.contains("panicked") => "a panic".to_string(),
            _ if lines.len() != 1 || !lines[0].starts_with("posrecall: error:") => "not one error line".to_string(),
            _ if code != Some(*want) => format!("exit {code:?}, expected {want}"),
            _ if !lines[0].contains(needle.as_str()) => format!("the refusal does not name `{needle}`"),
            _ if !left.is_empty() => format!("it left {left:?}"),
            _ => continue,
        };
        failures.push(format!("{args:?}: {wrong}: {}", err.trim()));
        for p in left {
            let _ = std::fs::remove_dir_all(&p).or_else(|_| std::fs::remove_file(&p));
        }
    }
    assert!(failures.is_empty(), "{} of {} hostile command lines:\n{}", failures.len(), cases.len(), failures.join("\n"));
    // How many hostile command lines CI tries, as docs/DEVELOPMENT.md says ("Hardening").
    let stated = common::doc_numbers("docs/DEVELOPMENT.md", "`tests/hardening.rs` keeps it so: a table of");
    assert_eq!(Some(cases.len() as f64), stated.first().copied(), "docs/DEVELOPMENT.md's count of hostile command lines");
    eprintln!("{} hostile command lines refused cleanly", cases.len());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// The JSON readers take any bytes without panicking.
    #[test]
    fn the_json_readers_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("x.json");
        std::fs::write(&path, &bytes).unwrap();
        let _ = posrecall::record::run::RunFile::load(&path);
        let _ = posrecall::record::run::TargetsFile::load(&path);
    }

    /// A run file with one byte changed is read or refused, never a panic.
    #[test]
    fn a_damaged_run_file_never_panics(at in 0usize..20_000, byte in any::<u8>()) {
        let text = std::fs::read(fixture("compare/a.json")).unwrap();
        let mut damaged = text.clone();
        let i = at % damaged.len();
        damaged[i] = byte;
        let dir = TempDir::new().unwrap();
        let path = dir.path().join("a.json");
        std::fs::write(&path, &damaged).unwrap();
        let _ = posrecall::record::run::RunFile::load(&path);
    }

    /// Target extraction takes any text: functions are found or not, and
    /// nothing panics.
    #[test]
    fn extraction_never_panics(text in "(function [a-z]{1,3}\\([a-z, ]{0,5}\\) ?\\{\n|  [a-z =;()]{0,12}\n|\\}\n|[{}();\n ]|\u{e9}){0,60}") {
        if let Ok(parsed) = JavaScript.functions(&text) {
            for f in &parsed.functions {
                prop_assert!(!f.name.is_empty());
            }
        }
    }

    /// A chat template made of any mix of loops, repetition, conditions and
    /// text renders or is refused quickly (the step and output bounds), never
    /// a panic or a hang; what renders holds the message at most twice over
    /// plus the frame bound.
    #[test]
    fn the_template_renderer_is_bounded(parts in prop::collection::vec(prop_oneof![
        Just("{% for a in range(1000) %}".to_string()),
        Just("{% for b in range(100000) %}".to_string()),
        Just("{% endfor %}".to_string()),
        Just("{% if messages %}".to_string()),
        Just("{% endif %}".to_string()),
        Just("{{ messages[0].content }}".to_string()),
        Just("{{ messages[0].content * 3 }}".to_string()),
        Just("{{ 'y' * 50000 }}".to_string()),
        Just("{{ raise_exception('no') }}".to_string()),
        Just("{%- set ns = namespace(s='') %}{% set ns.s = ns.s ~ messages[0].content %}".to_string()),
        "[a-z<>|{}%# ]{0,6}",
    ], 0..12)) {
        let template = parts.concat();
        let content = "m".repeat(1000);
        // What bounds the work is an event, not a clock: minijinja's fuel
        // (template::FUEL steps) ends any loop, and the output bound ends any
        // growth. The clock only tells a hang (a bound gone) from a render:
        // the slowest case here takes well under a second, and 60 s is far
        // beyond what a machine loaded by the model tests adds.
        let started = std::time::Instant::now();
        let r = posrecall::prompt::template::render(&template, &content, &Default::default(), &Default::default());
        prop_assert!(started.elapsed().as_secs() < 60, "{template} took {:?}", started.elapsed());
        if let Ok(out) = r {
            prop_assert!(out.len() <= 2 * content.len() + (1 << 20), "{template}: {} bytes", out.len());
        }
    }

    /// An OpenAI answer body of any shape is read or refused, never a panic.
    #[test]
    fn server_answers_never_panic(body in "\\{\"choices\":\\[(\\{\"message\":\\{\"content\":(\"[a-z\\\\\"]{0,8}\"|1|null)\\}\\})?\\]\\}|.{0,40}") {
        let _ = posrecall::ask::client::parse_answer(&body, posrecall::ask::ApiKind::Chat);
        let _ = posrecall::ask::client::parse_answer(&body, posrecall::ask::ApiKind::Completion);
    }
}

/// Every file in `dir` (recursively), with its bytes.
fn snapshot(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| (e.path().to_path_buf(), std::fs::read(e.path()).unwrap()))
        .collect()
}

/// `bench` checks each output against every input (the reference and its
/// sidecar, the chat template, files in the corpus folder) and against every
/// other output, before any model work: each clash is one line naming the
/// flag, and no file is written or changed.
#[test]
fn bench_outputs_never_overwrite_inputs_or_each_other() {
    let dir = TempDir::new().unwrap();
    let p = |n: &str| dir.path().join(n);
    let corpus = p("corpus.js");
    std::fs::copy(fixture("dense.js"), &corpus).unwrap();
    std::fs::write(p("ref"), "not a reference, but an input all the same").unwrap();
    std::fs::write(p("ref.sha256"), "0\n").unwrap();
    std::fs::write(p("t.jinja"), "{{ messages[0]['content'] }}").unwrap();
    std::fs::create_dir(p("src")).unwrap();
    std::fs::copy(fixture("dense.js"), p("src/a.js")).unwrap();
    // No model: every case must be refused before one would be loaded.
    let model = p("absent.gguf");
    let (m, c) = (s(&model).to_string(), s(&corpus).to_string());
    let path = |n: &str| s(&p(n)).to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--out".into(), path("x.json"), "--html".into(), path("x.json")], "--html: "),
        (vec!["--out".into(), path("ref"), "--reference".into(), path("ref")], "--out: "),
        (vec!["--html".into(), path("ref.sha256"), "--reference".into(), path("ref")], "--html: "),
        (vec!["--out".into(), path("t.jinja"), "--chat-template".into(), path("t.jinja")], "--out: "),
        (vec!["--out".into(), path("x.json"), "--save-reference".into(), path("x.json")], "--save-reference: "),
        (vec!["--out".into(), path("s.ref.sha256"), "--save-reference".into(), path("s.ref")], "--save-reference (its .sha256): "),
        (
            vec!["--save-reference".into(), path("ref"), "--reference".into(), path("ref"), "--kv".into(), "f16".into()],
            "--save-reference: ",
        ),
    ];
    let before = snapshot(dir.path());
    for (extra, needle) in &cases {
        let mut args: Vec<&str> = vec!["bench", &m, "--corpus", &c];
        args.extend(extra.iter().map(String::as_str));
        let err = refused(&posrecall(&args), needle);
        assert!(err.contains("is also"), "{args:?}: {err}");
        assert_eq!(snapshot(dir.path()), before, "{args:?} changed a file");
    }
    // An output inside the corpus folder would become part of the next run's corpus.
    let inside = path("src/run.json");
    let err = refused(&posrecall(&["bench", &m, "--corpus-dir", &path("src"), "--out", &inside]), "--out: ");
    assert!(err.contains("inside the --corpus-dir folder"), "{err}");
    let nested = p("src/deeper");
    std::fs::create_dir(&nested).unwrap();
    let before = snapshot(dir.path());
    let err = refused(&posrecall(&["bench", &m, "--corpus-dir", &path("src"), "--html", s(&nested.join("r.html"))]), "--html: ");
    assert!(err.contains("inside"), "{err}");
    assert_eq!(snapshot(dir.path()), before);
}

/// Hand-edited run files that reports would trust are refused with what is
/// wrong: totals that are not the targets' sums, a target twice, a depth
/// outside [0, 1], no targets, a score missing or present against the run's
/// decoding, a ladder with no lengths (on which the HTML page used to spin
/// for ever). Each is one line, and nothing is written.
#[test]
fn hand_edited_run_files_are_checked_not_trusted() {
    let dir = TempDir::new().unwrap();
    let good: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(fixture("compare/a.json")).unwrap()).unwrap();
    let edit = |name: &str, f: &dyn Fn(&mut serde_json::Value)| {
        let mut v = good.clone();
        f(&mut v);
        let p = dir.path().join(name);
        std::fs::write(&p, serde_json::to_string(&v).unwrap()).unwrap();
        p
    };
    let cases: Vec<(PathBuf, &str)> = vec![
        (edit("passes.json", &|v| v["summary"]["passes"] = 99.into()), "is not the sum of its targets"),
        (edit("quarter.json", &|v| v["summary"]["by_quarter"][0]["matched"] = 999.into()), "depth quarters"),
        (
            edit("twice.json", &|v| {
                let first = v["targets"][0].clone();
                v["targets"].as_array_mut().unwrap().push(first);
            }),
            "is listed twice",
        ),
        (edit("depth.json", &|v| v["targets"][0]["depth"] = 1.5.into()), "outside [0, 1]"),
        (edit("empty.json", &|v| v["targets"] = serde_json::json!([])), "holds no target"),
        // A score that does not parse reads as absent: found as missing, not
        // trusted as a forced-only target.
        (
            edit("noscore.json", &|v| v["targets"][0]["matched"] = "twelve".into()),
            "has no score (its `lines` … `pass` fields are missing or malformed)",
        ),
        (edit("forcedonly.json", &|v| v["manifest"]["params"]["decode_mode"] = "forced-only".into()), "of a forced-only run has a score"),
        // Scores no scorer gives (the fixture asks 10 lines, passes at 5;
        // its first target matched 6, missed 4, all 4 truncated).
        (edit("fifty.json", &|v| v["targets"][0]["matched"] = 50.into()), "has 50 matched and 4 missing, where every one of its 10 lines"),
        (edit("truncated.json", &|v| v["targets"][0]["truncated"] = 5.into()), "has 5 truncated of 4 missing"),
        (
            edit("hollow.json", &|v| {
                v["targets"][0]["matched"] = 0.into();
                v["targets"][0]["missing"] = 10.into();
            }),
            "has pass true with 0 matched, where a pass is 5 or more",
        ),
        (
            edit("rungs.json", &|v| v["ladder"] = serde_json::json!({"effective_at": 0.5, "effective_length": null, "rungs": []})),
            "no lengths",
        ),
    ];
    for (path, needle) in &cases {
        for format in ["table", "html"] {
            let out = dir.path().join("out.html");
            let started = std::time::Instant::now();
            let o = posrecall(&["report", s(path), "--format", format, "-o", s(&out)]);
            assert!(started.elapsed().as_secs() < 10, "{}: took {:?}", path.display(), started.elapsed());
            refused(&o, needle);
            assert!(!out.exists(), "{} wrote a report", path.display());
        }
        refused(&posrecall(&["compare", s(path), s(&fixture("compare/b.json"))]), needle);
    }
}

/// `--only` names are trimmed (`--only 'a, b'`), and a name given twice is
/// refused before any model work.
#[test]
fn only_names_are_trimmed_and_given_once() {
    let dir = TempDir::new().unwrap();
    let missing = dir.path().join("absent.gguf");
    let corpus = fixture("dense.js");
    let err = refused(&posrecall(&["bench", s(&missing), "--corpus", s(&corpus), "--only", "chunkArray, chunkArray"]), "--only");
    assert!(err.contains("names `chunkArray` twice"), "{err}");
    // Trimmed and distinct, the names pass the check: what fails is the model.
    let err = refused(&posrecall(&["bench", s(&missing), "--corpus", s(&corpus), "--only", " chunkArray , flattenDeep"]), "absent.gguf");
    assert!(!err.contains("--only"), "{err}");
}

/// A model whose logits are NaN (NaN in its output norm, as a broken
/// quantisation or backend gives): bench stops with one line instead of
/// writing `null`s into a run file that report and compare then refuse.
#[test]
fn a_model_with_nan_logits_stops_the_run_and_writes_no_file() {
    let dir = TempDir::new().unwrap();
    let broken = dir.path().join("nan.gguf");
    std::fs::copy(smollm2(), &broken).unwrap();
    let (start, size) = posrecall::engine::gguf::Header::read(&broken).unwrap().tensor_bytes("output_norm.weight").unwrap();
    assert_eq!(size, 576 * 4, "SmolLM2's output norm: 576 f32 values");
    let mut bytes = std::fs::read(&broken).unwrap();
    // All of it: the quantised matmul after it drops a lone NaN.
    for v in bytes[start as usize..(start + size) as usize].chunks_exact_mut(4) {
        v.copy_from_slice(&f32::NAN.to_le_bytes());
    }
    std::fs::write(&broken, &bytes).unwrap();
    let (out, dense) = (dir.path().join("run.json"), fixture("dense.js"));
    let args = [
        "bench",
        s(&broken),
        "--corpus",
        s(&dense),
        "--crop-lines",
        "1:60",
        "--count",
        "1",
        "--lines",
        "4",
        "--max-new-tokens",
        "4",
        "--quiet",
        "--out",
        s(&out),
    ];
    let err = refused(&posrecall(&args), "are not finite");
    assert!(err.contains("forced token 0"), "{err}");
    assert!(!out.exists(), "a run file was written");
}

/// `n` one-function JavaScript files in folders of 100.
fn many_files(root: &Path, n: usize) {
    for i in 0..n {
        let dir = root.join(format!("d{:03}", i / 100));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("f{i:05}.js")), format!("function f{i}(x) {{\n  x = x + 1;\n  x = x * 2;\n  return x;\n}}\n"))
            .unwrap();
    }
}

/// A folder's time grows with its files, not with their square: the line
/// count before each file was counted from the start of the concatenation
/// (20,000 files took 15.5 s; now about 2 s). Eight times the files must
/// take well under 64 times as long, measured in one run. The model tests
/// may share the cores meanwhile: each size is timed three times,
/// alternating, and the fastest of each is compared (a load that slows one
/// run slows the others too, or is missed by the fastest).
#[test]
fn a_corpus_folder_is_read_in_linear_time() {
    let dir = TempDir::new().unwrap();
    let (small, large) = (dir.path().join("small"), dir.path().join("large"));
    many_files(&small, 2_000);
    many_files(&large, 16_000);
    let time = |root: &Path| {
        let t = std::time::Instant::now();
        ok(&posrecall(&["targets", "--corpus-dir", s(root), "--lines", "2", "--count", "2"]));
        t.elapsed().as_secs_f64()
    };
    let (mut a, mut b) = (f64::INFINITY, f64::INFINITY);
    for _ in 0..3 {
        a = a.min(time(&small));
        b = b.min(time(&large));
    }
    assert!(b < 20.0 * a, "2,000 files in {a:.2} s, 16,000 in {b:.2} s: {:.1} times as long", b / a);
}

/// What a folder corpus leaves out says so: a symbolic link (not followed)
/// and a name that is not UTF-8 each get a note; the rest is read.
#[test]
fn a_corpus_folder_notes_the_links_and_names_it_skips() {
    use std::os::unix::ffi::OsStrExt;
    let dir = TempDir::new().unwrap();
    let root = dir.path().join("src");
    many_files(&root, 3);
    std::os::unix::fs::symlink(root.join("d000/f00000.js"), root.join("link.js")).unwrap();
    std::os::unix::fs::symlink("d000", root.join("linked-dir")).unwrap();
    let latin1 = root.join(std::ffi::OsStr::from_bytes(b"caf\xe9.js"));
    std::fs::write(&latin1, "function g(x) {\n  return x;\n}\n").unwrap();
    let o = posrecall(&["targets", "--corpus-dir", s(&root), "--lines", "2", "--count", "3"]);
    let (out, err) = (ok(&o), String::from_utf8_lossy(&o.stderr).into_owned());
    for needle in ["skipped link.js: a symbolic link", "skipped linked-dir: a symbolic link", "caf\u{fffd}.js: its name is not UTF-8"] {
        assert!(err.contains(needle), "`{needle}` not in: {err}");
    }
    for f in ["f0", "f1", "f2"] {
        assert!(out.contains(f), "{f} missing: {out}");
    }
}

/// An answer of 20 MB (1.8 million lines) is scored in bounded memory: only
/// the lines that can change its score are read, and a note says so. It
/// peaked at 2.8 GB; here it must run under a 1 GB address-space limit.
#[test]
fn a_huge_answer_is_scored_in_bounded_memory() {
    let dir = TempDir::new().unwrap();
    let t = targets_json(dir.path());
    let targets: serde_json::Value = common::read(&t);
    let names: Vec<&str> = targets["targets"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    let mut jsonl = String::new();
    for (i, name) in names.iter().enumerate() {
        let response = if i == 0 { "  return 1;\n".repeat(1_800_000) } else { "  return 1;".to_string() };
        jsonl.push_str(&(serde_json::json!({"name": name, "response": response}).to_string() + "\n"));
    }
    let r = dir.path().join("huge.jsonl");
    std::fs::write(&r, jsonl).unwrap();
    let out = dir.path().join("run.json");
    let script = format!("ulimit -v 1000000; exec {} score {} {} --quiet --out {}", common::bin(), s(&t), s(&r), s(&out));
    let o = Command::new("sh").arg("-c").arg(&script).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!("note: `{}`: the first 4000 lines of its answer were scored; the 1796000 after them", names[0])),
        "{err}"
    );
    let run = common::read(&out);
    assert_eq!(run["targets"][0]["unread_lines"], 1_796_000, "{}", run["targets"][0]);
}

/// A template that renders the message twice would have sent posrecall's
/// stand-in text to the model (the second copy stayed in the prompt, with a
/// note): refused, for `prompt` and `bench` alike, before any prefill.
#[test]
fn a_template_that_renders_the_message_twice_is_refused() {
    let dir = TempDir::new().unwrap();
    let twice = dir.path().join("twice.jinja");
    std::fs::write(&twice, "{% for m in messages %}<|user|>{{ m.content }}\n{{ m.content }}<|end|>{% endfor %}<|assistant|>").unwrap();
    let (model, dense, out) = (smollm2(), fixture("dense.js"), dir.path().join("run.json"));
    let prompt = posrecall(&["prompt", s(&model), "--corpus", s(&dense), "--target", "memoizeLast", "--chat-template", s(&twice)]);
    refused(&prompt, "renders the user message more than once");
    let bench =
        posrecall(&["bench", s(&model), "--corpus", s(&dense), "--count", "1", "--chat-template", s(&twice), "-q", "--out", s(&out)]);
    refused(&bench, "renders the user message more than once");
    assert!(!out.exists());
}

/// A flag that cannot take effect with the others given is refused in one
/// line naming it and what it needs, before the model is reached (the model
/// given does not exist), instead of being silently ignored.
#[test]
fn flags_that_cannot_take_effect_are_refused() {
    let dir = TempDir::new().unwrap();
    let missing = dir.path().join("absent.gguf");
    let template = dir.path().join("t.jinja");
    std::fs::write(&template, "{% for m in messages %}{{ m.content }}{% endfor %}").unwrap();
    let (model, dense, template) = (s(&missing), fixture("dense.js"), s(&template));
    let bench = |extra: &[&str]| posrecall(&[&["bench", model, "--corpus", s(&dense)][..], extra].concat());
    for (extra, needle, needs) in [
        (&["--think-budget", "64"][..], "--think-budget", "--think on"),
        (&["--probe", "completion", "--think", "on"], "--think on sets the chat template", "--probe chat"),
        (&["--probe", "completion", "--template-kwargs", "{\"a\": 1}"], "--template-kwargs sets the chat template", "--probe chat"),
        (&["--probe", "completion", "--chat-template", template], "--chat-template sets the chat template", "--probe chat"),
        (&["--reference-top-k", "16"], "--reference-top-k", "--save-reference"),
        (&["--kv-memory", "1GiB"], "--kv-memory", "--parallel N"),
        (&["--parallel", "1", "--kv-memory", "1GiB"], "--kv-memory", "--parallel N"),
    ] {
        let err = refused(&bench(extra), needle);
        assert!(err.contains(needs) && !err.contains("absent.gguf"), "{extra:?}: {err}");
    }
    let prompt = ["prompt", model, "--corpus", s(&dense), "--target", "chunkArray", "--probe", "completion", "--think", "on"];
    refused(&posrecall(&prompt), "--think on sets the chat template");
    refused(&posrecall(&["prompt", model, "--corpus", s(&dense), "--target", "chunkArray", "--think-budget", "9"]), "--think-budget");
    // With what they need, the same flags pass the check: what fails is the model.
    for extra in [
        &["--think", "on", "--think-budget", "64"][..],
        &["--probe", "chat", "--think", "on", "--template-kwargs", "{\"a\": 1}", "--chat-template", template],
        &["--save-reference", "r.ref", "--reference-top-k", "16"],
        &["--parallel", "2", "--kv-memory", "1GiB"],
    ] {
        refused(&bench(extra), "absent.gguf");
    }
}

/// Layers asked to go to a GPU on a build that has none: the run goes on,
/// on the CPU, and says so, so that its timings are not read as a GPU's.
#[test]
fn an_offload_without_a_gpu_is_noted() {
    let (dense, model) = (fixture("dense.js"), smollm2());
    let args = [
        "bench",
        s(&model),
        "--corpus",
        s(&dense),
        "--crop-lines",
        "1:60",
        "--count",
        "1",
        "--lines",
        "2",
        "--max-new-tokens",
        "4",
        "--quiet",
        "--gpu-layers",
        "99",
    ];
    let o = posrecall(&args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{err}");
    // Whether a GPU is there to offload to, known without posrecall: a
    // build without a GPU backend has none; a CUDA build has one where the
    // driver shows a device; a Metal build always (Apple silicon).
    let gpu = match () {
        _ if cfg!(feature = "metal") => true,
        _ if cfg!(feature = "cuda") => std::path::Path::new("/dev/nvidia0").exists(),
        _ if cfg!(feature = "vulkan") => return, // no device list to read without Vulkan itself
        _ => false,
    };
    let note = "note: 99 layers were asked to go to a GPU, but this build has no GPU device to offload to; the whole model runs on the CPU";
    assert_eq!(err.contains(note), !gpu, "{err}");
}
