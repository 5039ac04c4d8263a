//! The memorisation controls: renamed corpora and closed-book answers.

use crate::common;

use common::*;
use posrecall::corpus::rename::rename;
use posrecall::corpus::{JavaScript, Language};
use serde_json::Value;
use std::collections::HashSet;
use std::process::Command;

fn identifiers(text: &str) -> HashSet<String> {
    JavaScript.identifier_spans(text, &|_| true).unwrap().into_iter().map(|(a, b)| text[a..b].to_string()).collect()
}

fn check_rename(path: &std::path::Path) {
    let text = std::fs::read_to_string(path).unwrap();
    let a = rename(&text, &JavaScript, 7).unwrap();
    let b = rename(&text, &JavaScript, 7).unwrap();
    let c = rename(&text, &JavaScript, 8).unwrap();
    assert_eq!(a.text, b.text, "the same seed must give the same text");
    assert_eq!(a.mapping, b.mapping);
    assert_ne!(a.mapping, c.mapping, "another seed must give other names");

    // Line structure and indentation are untouched.
    let (old_lines, new_lines): (Vec<&str>, Vec<&str>) = (text.lines().collect(), a.text.lines().collect());
    assert_eq!(old_lines.len(), new_lines.len());
    for (o, n) in old_lines.iter().zip(&new_lines) {
        let indent = |l: &str| l.len() - l.trim_start().len();
        assert_eq!(&o[..indent(o)], &n[..indent(n)]);
    }

    // Every line of the file is the original with declared names replaced
    // by their new names and nothing else changed: compared word by word,
    // without the renaming code. (The target lines checked in
    // renaming_the_real_corpus_keeps_the_same_targets are a few dozen of
    // the file's lines: a word renamed only elsewhere would pass there.)
    for (o, n) in old_lines.iter().zip(&new_lines) {
        let (wo, wn) = (words(o), words(n));
        assert_eq!(wo.len(), wn.len(), "{o:?} -> {n:?}");
        for (u, v) in wo.iter().zip(&wn) {
            assert!(u == v || a.mapping.get(u.as_str()) == Some(v), "{u} -> {v} in {o:?} -> {n:?}");
        }
    }

    // Every declared name changed, to a fresh name, consistently.
    let old_parsed = JavaScript.functions(&text).unwrap();
    let new_parsed = JavaScript.functions(&a.text).unwrap();
    let declared: HashSet<&str> = old_parsed.functions.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(a.mapping.len(), declared.len());
    let new_ids = identifiers(&a.text);
    for (old, new) in &a.mapping {
        assert_ne!(old, new);
        assert!(!new_ids.contains(old.as_str()), "`{old}` is still used as an identifier");
        assert!(!text.contains(new.as_str()) || identifiers(&text).iter().all(|i| i != new));
    }
    for (o, n) in old_parsed.functions.iter().zip(&new_parsed.functions) {
        assert_eq!(a.mapping[&o.name], n.name, "declaration renamed inconsistently");
    }
    // Calls are renamed too: every old call site now names the new function.
    assert_eq!(old_parsed.functions.len(), new_parsed.functions.len());
    // No new syntax errors.
    assert!(new_parsed.error_regions <= old_parsed.error_regions);
}

#[test]
fn renaming_is_deterministic_structure_preserving_and_complete() {
    check_rename(&fixture("dense.js"));
    check_rename(&fixture("distinct.js"));
}

#[test]
fn renaming_the_real_corpus_keeps_the_same_targets() {
    let lodash = posrecall::support::fsutil::default_corpus_path();
    assert!(lodash.exists(), "run scripts/env/fetch-corpus first");
    check_rename(&lodash);
    let targets = |rename: bool| -> Value {
        let mut cmd = Command::new(bin());
        cmd.arg("targets").arg(&lodash).arg("--json");
        if rename {
            cmd.arg("--rename");
        }
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let (plain, renamed) = (targets(false), targets(true));
    let mapping = &renamed["corpus"]["rename"]["mapping"];
    assert_eq!(renamed["corpus"]["rename"]["seed"], 1);
    assert_eq!(renamed["corpus"]["sha256"], plain["corpus"]["sha256"], "sha256 names the file on disk");
    assert_ne!(renamed["corpus"]["rename"]["sha256"], plain["corpus"]["sha256"]);
    let (p, r) = (plain["targets"].as_array().unwrap(), renamed["targets"].as_array().unwrap());
    assert_eq!(p.len(), r.len());
    for (a, b) in p.iter().zip(r) {
        assert_eq!(mapping[a["name"].as_str().unwrap()], b["name"], "not the same function");
        assert_eq!(a["line"], b["line"]);
        assert_eq!(a["depth"], b["depth"]);
        assert_eq!(a["expected"].as_array().unwrap().len(), b["expected"].as_array().unwrap().len());
    }
    // Every expected and extra-window line of the renamed targets is the
    // original line with declared names replaced by their new names, at the
    // same places, and nothing else changed: compared word by word here,
    // without the renaming code. Some lines must have changed.
    let mut changed = 0;
    for (a, b) in p.iter().zip(r) {
        for key in ["expected", "extra_window"] {
            let (xs, ys) = (a[key].as_array().unwrap(), b[key].as_array().unwrap());
            assert_eq!(xs.len(), ys.len());
            for (x, y) in xs.iter().zip(ys) {
                let (x, y) = (x.as_str().unwrap(), y.as_str().unwrap());
                let (wx, wy) = (words(x), words(y));
                assert_eq!(wx.len(), wy.len(), "{x:?} -> {y:?}");
                for (u, v) in wx.iter().zip(&wy) {
                    assert!(u == v || mapping[u.as_str()] == v.as_str(), "{u} -> {v} in {x:?} -> {y:?}");
                }
                changed += usize::from(x != y);
            }
        }
    }
    assert!(changed > 0, "no expected line mentions a renamed function");
}

/// A line cut into identifier-like words and the runs between them.
fn words(line: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut last_ident = None;
    for c in line.chars() {
        let ident = c.is_alphanumeric() || c == '_' || c == '$';
        match out.last_mut() {
            Some(w) if last_ident == Some(ident) => w.push(c),
            _ => out.push(c.to_string()),
        }
        last_ident = Some(ident);
    }
    out
}

#[test]
fn closed_book_answers_are_made_without_the_file_and_add_up() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cb.json");
    let run = |corpus: &std::path::Path, out: &std::path::Path| -> Value {
        let o = Command::new(bin())
            .arg("bench")
            .arg(smollm2())
            .arg("--corpus")
            .arg(corpus)
            .args(["--count", "3", "--lines", "6", "--crop-lines", "1:150", "--kv", "f16", "--ctx", "2048"])
            .args(["--max-new-tokens", "24", "--threads", "2", "--quiet", "--closed-book", "--out"])
            .arg(out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap()
    };
    let r = run(&fixture("dense.js"), &out);

    // The same functions in a file whose bodies say `let` where dense.js says
    // `var`: the headers, line counts and byte offsets are unchanged, so the
    // sampler picks the same targets and the closed-book questions are the
    // same tokens. Answers made without the file must then be byte-identical;
    // answers made with it see other bodies.
    let other = dir.path().join("dense-let.js");
    std::fs::write(&other, std::fs::read_to_string(fixture("dense.js")).unwrap().replace("var ", "let ")).unwrap();
    let r2 = run(&other, &dir.path().join("cb-let.json"));
    let by_name = |r: &Value, key: &str| -> Vec<(String, String)> {
        r["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let resp = if key == "closed_book" { &t["closed_book"]["response"] } else { &t["response"] };
                (t["name"].as_str().unwrap().to_string(), resp.as_str().unwrap().to_string())
            })
            .collect()
    };
    assert_eq!(by_name(&r, "closed_book"), by_name(&r2, "closed_book"), "closed-book answers depend on the file");
    // Control for the check above: the answers with the file follow its
    // bodies (SmolLM2 copies at least one `let` line), so a closed-book pass
    // that still saw the file would differ too.
    assert!(
        by_name(&r2, "context").iter().any(|(_, a)| a.contains("let ")),
        "no answer with the file copied a `let` line: {:?}",
        by_name(&r2, "context")
    );
    let prefix = r["manifest"]["corpus"]["prefix_tokens"].as_u64().unwrap();
    let mut total_ctx = 0i64;
    let mut total_cb = 0u64;
    for t in r["targets"].as_array().unwrap() {
        let cb = &t["closed_book"];
        let evaluated = cb["prompt_tokens"].as_u64().unwrap();
        // The question alone: a tiny fraction of the file's prefix.
        assert!(evaluated > 0 && evaluated * 10 < prefix, "{evaluated} tokens vs prefix {prefix}");
        assert!(cb["response"].is_string());
        let (m, cm) = (t["matched"].as_i64().unwrap(), cb["matched"].as_i64().unwrap());
        assert_eq!(t["context_matched"].as_i64().unwrap(), m - cm);
        assert_eq!(cm + cb["missing"].as_i64().unwrap(), 6);
        total_ctx += m - cm;
        total_cb += cm as u64;
    }
    let s = &r["summary"]["closed_book"];
    assert_eq!(s["context_matched"].as_i64().unwrap(), total_ctx);
    assert_eq!(s["matched"].as_u64().unwrap(), total_cb);
    assert_eq!(s["context_matched"].as_i64().unwrap(), r["summary"]["matched"].as_i64().unwrap() - total_cb as i64);

    // Reports show both: with the file and without it.
    let report = |format: &str| -> String {
        let o = Command::new(bin()).args(["report", "--format", format]).arg(&out).output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8(o.stdout).unwrap()
    };
    let csv = report("csv");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let row: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| row[header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no {name} in {header:?}"))];
    assert_eq!(col("closed_book_matched"), total_cb.to_string());
    assert_eq!(col("context_matched"), total_ctx.to_string());
    let md = report("md");
    assert!(md.contains("closed-book matched") && md.contains("context matched"), "{md}");
}
