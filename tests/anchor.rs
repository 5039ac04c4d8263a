//! Asking by the header (`--anchor header`): which functions become
//! targets, written out by hand on a jQuery-like fixture and cross-checked
//! against acorn (lodash, the fixtures) and the TypeScript compiler (mobx);
//! what `targets`, `prompt` and `score` show and record; and that asking by
//! name, the default, is what it was.

use crate::common;

use common::{fixture, ok, posrecall, read, s, smollm2};
use posrecall::corpus::{CorpusSpec, Source};
use posrecall::targets::{Anchor, TargetOptions, ambiguous, eligible};
use std::path::{Path, PathBuf};

fn jquery_like() -> PathBuf {
    fixture("anchor/jquery_like.js")
}

fn opts(lines: usize, anchor: Anchor) -> TargetOptions {
    TargetOptions { count: 1, lines, seed: 1, skip_blank: false, anchor, policy: Default::default(), min_code_lines: 0 }
}

/// (name, line, expected lines, header) of every eligible function of `src`.
type Listed = (String, usize, Vec<String>, String);

fn ours(src: &Source, lines: usize, anchor: Anchor) -> Vec<Listed> {
    eligible(&src.corpus, &src.parsed, 0, src.corpus.line_count() - 1, &opts(lines, anchor))
        .into_iter()
        .map(|t| (t.name, t.line, t.expected, t.header))
        .collect()
}

/// The fixture's targets by header, typed out from the file: property,
/// assignment, variable, object-literal and class-method definitions with a
/// block body; not the computed key, the one-liner, the callback passed to
/// `jQuery.each`, the `+=` assignment, the parenthesised function or the
/// wrapper around the file. `each` is defined twice with two headers: each
/// is asked by its header alone, as `each@LINE`. `val` is defined twice with
/// one header: neither can be asked, and both are listed. By name, only the
/// one declaration is a target.
#[test]
fn the_jquery_like_fixtures_targets_by_header_are_written_out() {
    let src = Source::open_spec(&CorpusSpec::file(&jquery_like()), None).unwrap();
    let got: Vec<(String, usize, String)> = ours(&src, 3, Anchor::Header).into_iter().map(|(n, l, _, h)| (n, l, h)).collect();
    let want = [
        ("jQuery", 7, "var jQuery = function( selector, context ) {"),
        ("toArray", 18, "\ttoArray: function() {"),
        ("size", 25, "\tget size() {"),
        ("default", 32, "\t\"default\": function( value ) {"),
        ("jQuery.fn.extend", 49, "jQuery.extend = jQuery.fn.extend = function() {"),
        ("jQuery.parseHTML", 57, "jQuery.parseHTML = function( data, context, keepScripts ) {"),
        ("each@72", 72, "\teach( callback ) {"),
        ("each@81", 81, "\teach: function( obj, callback ) {"),
        ("access", 96, "function access( elems, fn, key ) {"),
        ("handler", 103, "var handler = ( event ) => {"),
        ("jQuery[ method ]", 111, "\tjQuery[ method ] = function( url, data ) {"),
        ("run", 120, "\trun( percent ) {"),
    ];
    let want: Vec<(String, usize, String)> = want.iter().map(|(n, l, h)| (n.to_string(), *l, h.to_string())).collect();
    assert_eq!(got, want);
    let left_out = ambiguous(&src.corpus, &src.parsed, 0, src.corpus.line_count() - 1, &opts(3, Anchor::Header));
    let left_out: Vec<(&str, usize, &str)> = left_out.iter().map(|a| (a.name.as_str(), a.line, a.header.as_str())).collect();
    assert_eq!(left_out, [("val", 65, "\tval: function( value ) {"), ("val", 88, "\tval: function( value ) {")]);
    // Kept lines without the second `val`: the first one's header is unique there.
    let first_half = eligible(&src.corpus, &src.parsed, 0, 78, &opts(3, Anchor::Header));
    assert!(first_half.iter().any(|t| t.name == "val@65" && t.header_only), "{:?}", first_half.iter().map(|t| &t.name).collect::<Vec<_>>());
    // By name: the declaration alone, and nothing listed.
    let by_name: Vec<String> = ours(&src, 3, Anchor::Name).into_iter().map(|t| t.0).collect();
    assert_eq!(by_name, ["access"]);
    assert!(ambiguous(&src.corpus, &src.parsed, 0, src.corpus.line_count() - 1, &opts(3, Anchor::Name)).is_empty());
}

/// The JSON lines `node scripts/oracles/SCRIPT --anchor header ARGS` prints.
fn oracle(script: &str, args: &[&std::ffi::OsStr]) -> Vec<serde_json::Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/oracles").join(script);
    let o = std::process::Command::new("node").arg(&script).args(["--anchor", "header"]).args(args).output().unwrap();
    assert!(o.status.success(), "{}: {}", script.display(), String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn listed(v: &serde_json::Value) -> Listed {
    let e = v["expected"].as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect();
    (v["name"].as_str().unwrap().to_string(), v["line"].as_u64().unwrap() as usize, e, v["header"].as_str().unwrap().to_string())
}

fn theirs(script: &str, path: &Path, lines: usize) -> Vec<Listed> {
    let lines = lines.to_string();
    oracle(script, &[path.as_os_str(), lines.as_ref()]).iter().map(listed).collect()
}

/// By header, posrecall's JavaScript targets (names, lines, expected lines
/// and headers) are exactly acorn's (scripts/oracles/js-targets --anchor
/// header) on lodash, the jQuery-like fixture, the dense fixture and the
/// extraction fixtures.
#[test]
fn javascript_header_targets_agree_with_acorn() {
    let lodash = posrecall::support::fsutil::default_corpus_for("javascript").unwrap();
    assert!(lodash.exists(), "{} is missing: run scripts/env/fetch-corpus", lodash.display());
    let mut files = vec![(lodash, 20), (jquery_like(), 3), (fixture("dense.js"), 10), (fixture("distinct.js"), 4)];
    for f in ["allman.js", "async_gen.js", "nested.js", "skipped.js", "verbatim.js", "crlf.js", "blank.js"] {
        files.push((fixture(&format!("extract/{f}")), 2));
    }
    let mut more = 0;
    for (path, lines) in files {
        let src = Source::open_spec(&CorpusSpec::file(&path), None).unwrap();
        let mine = ours(&src, lines, Anchor::Header);
        assert_eq!(mine, theirs("js-targets", &path, lines), "{}", path.display());
        more += mine.len() - ours(&src, lines, Anchor::Name).len();
    }
    assert!(more >= 11, "asking by header adds {more} targets in all");
}

/// By header, posrecall's TypeScript targets are exactly the TypeScript
/// compiler's (scripts/oracles/ts-targets --anchor header) in every mobx file
/// tree-sitter opens, and in the TypeScript and TSX fixtures.
#[test]
fn typescript_header_targets_agree_with_the_typescript_compiler() {
    let mobx = posrecall::support::fsutil::default_corpus_for("typescript").unwrap();
    let mut files: Vec<PathBuf> =
        walk(&mobx).into_iter().filter(|p| p.extension().is_some_and(|x| x == "ts") && !p.to_string_lossy().ends_with(".d.ts")).collect();
    assert!(files.len() > 40, "{} files", files.len());
    files.sort();
    let args: Vec<&std::ffi::OsStr> = ["--each".as_ref(), "20".as_ref()].into_iter().chain(files.iter().map(|f| f.as_os_str())).collect();
    let mut compiler: std::collections::HashMap<PathBuf, Vec<Listed>> = Default::default();
    for v in oracle("ts-targets", &args) {
        compiler.entry(PathBuf::from(v["file"].as_str().unwrap())).or_default().push(listed(&v));
    }
    let (mut targets, mut more, mut given_up) = (0, 0, Vec::new());
    let fixtures = [(common::fixture("languages/sample.ts"), 3), (common::fixture("languages/sample.tsx"), 3)];
    for (path, lines) in files.into_iter().map(|p| (p, 20)).chain(fixtures) {
        let want = match lines {
            20 => compiler.remove(&path).unwrap_or_default(),
            _ => theirs("ts-targets", &path, lines),
        };
        match Source::open_spec(&CorpusSpec::file(&path), None) {
            Ok(src) => {
                let mine = ours(&src, lines, Anchor::Header);
                assert_eq!(mine, want, "{}", path.display());
                targets += mine.len();
                more += mine.len() - ours(&src, lines, Anchor::Name).len();
            }
            // One error region covers the whole file (see languages.rs).
            Err(e) => {
                assert!(e.to_string().contains("cover 100% of it"), "{}: {e}", path.display());
                given_up.push(path.strip_prefix(&mobx).unwrap().display().to_string());
            }
        }
    }
    assert_eq!(given_up, ["api/action.ts"]);
    let unread: Vec<_> = compiler.keys().collect();
    assert!(unread.is_empty(), "the compiler listed targets of files never compared: {unread:?}");
    assert!(more > 0 && targets > 55, "{targets} targets, {more} more than by name");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() { out.extend(walk(&p)) } else { out.push(p) }
    }
    out
}

/// `targets --anchor header` records the anchor and the functions left out
/// (and says so on stderr); `--emit-prompts` quotes each header; `score`
/// keeps both in its run file. By name, nothing new is written.
#[test]
fn targets_and_score_record_the_anchor_and_the_left_out() {
    let dir = tempfile::tempdir().unwrap();
    let (file, prompts) = (dir.path().join("t.json"), dir.path().join("p.jsonl"));
    let fx = jquery_like();
    let args = ["targets", s(&fx), "--anchor", "header", "--lines", "3", "--count", "12", "--json", "--emit-prompts", s(&prompts)];
    let o = posrecall(&args);
    let json = ok(&o);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("2 function(s) left out") && stderr.contains("`val` (line 65), `val` (line 88)"), "{stderr}");
    std::fs::write(&file, &json).unwrap();
    let t = read(&file);
    assert_eq!(t["params"]["anchor"], "header");
    assert_eq!(t["corpus"]["ambiguous"][1], serde_json::json!({"name": "val", "line": 88, "header": "\tval: function( value ) {"}));
    let each = t["targets"].as_array().unwrap().iter().find(|t| t["name"] == "each@81").unwrap();
    assert_eq!(each["header_only"], true);
    let lines = std::fs::read_to_string(&prompts).unwrap();
    let asked: Vec<serde_json::Value> = lines.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let q = |name: &str| asked.iter().find(|p| p["name"] == name).unwrap()["prompt"].as_str().unwrap().to_string();
    assert!(
        q("each@81")
            .ends_with("of the function whose header reads:\n\teach: function( obj, callback ) {\nOutput only those lines, no commentary.")
    );
    assert!(q("jQuery.parseHTML").ends_with(
        "of the function `jQuery.parseHTML` whose header reads:\njQuery.parseHTML = function( data, context, keepScripts ) {\nOutput only those lines, no commentary."
    ));

    // Scored answers keep both; the right lines pass.
    let responses = dir.path().join("r.jsonl");
    std::fs::write(
        &responses,
        "{\"name\": \"each@81\", \"response\": \"\\t\\tvar length, i = 0;\\n\\t\\tlength = obj.length;\\n\\t\\tcallback( i, length );\"}\n",
    )
    .unwrap();
    let run = dir.path().join("run.json");
    ok(&posrecall(&["score", s(&file), s(&responses), "--out", s(&run)]));
    let r = read(&run);
    assert_eq!(r["manifest"]["params"]["anchor"], "header");
    assert_eq!(r["manifest"]["corpus"]["ambiguous"].as_array().unwrap().len(), 2);
    let scored = r["targets"].as_array().unwrap().iter().find(|t| t["name"] == "each@81").unwrap();
    assert_eq!(scored["matched"], 3);

    // By name: no anchor, nothing left out, the question by name.
    let o = posrecall(&["targets", s(&fx), "--lines", "3", "--count", "1", "--json", "--emit-prompts", s(&prompts)]);
    let json = ok(&o);
    assert!(!json.contains("\"anchor\"") && !json.contains("\"ambiguous\"") && !json.contains("\"header_only\""), "{json}");
    assert!(String::from_utf8_lossy(&o.stderr).is_empty());
    assert!(std::fs::read_to_string(&prompts).unwrap().contains("of the function named `access`. Output only"));
}

/// What the model is given by header, on a real model's chat template and
/// its completion probe (`prompt` loads only the vocabulary).
#[test]
fn the_prompt_quotes_the_header() {
    let fx = jquery_like();
    let m = smollm2();
    let base = ["prompt", s(&m), "--corpus", s(&fx), "--anchor", "header", "--lines", "3", "--count", "12", "--target", "each@72"];
    let chat = ok(&posrecall(&base));
    assert!(
        chat.contains("of the function whose header reads:\n\teach( callback ) {\nOutput only those lines, no commentary.<|im_end|>"),
        "{chat}"
    );
    let completion = ok(&posrecall(&[&base[..], &["--probe", "completion"]].concat()));
    assert!(completion.contains("// The function from above, repeated verbatim:\n\teach( callback ) {\n"), "{completion}");
}
