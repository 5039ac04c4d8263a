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
