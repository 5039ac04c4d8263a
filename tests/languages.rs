//! Languages beyond JavaScript: extraction on fixtures written for the edge
//! cases (nested functions, methods, decorators, one-liners, generics,
//! macros, `#ifdef`-split C functions, unicode), folders as one corpus, and
//! bad input.

mod common;

use posrecall::corpus::{CorpusSpec, Source};
use posrecall::targets::{Target, TargetOptions, eligible};
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    common::fixture(&format!("languages/{name}"))
}

fn all(src: &Source, lines: usize) -> Vec<Target> {
    let opts = TargetOptions { count: 1, lines, seed: 1, skip_blank: false };
    eligible(&src.corpus, &src.parsed, 0, src.corpus.line_count() - 1, &opts)
}

fn listing(name: &str, lines: usize) -> Vec<(String, usize, String)> {
    let src = Source::open_spec(&CorpusSpec::file(&fixture(name)), None).unwrap();
    all(&src, lines).into_iter().map(|t| (t.name, t.line, t.expected[0].trim().to_string())).collect()
}

#[test]
fn print_all() {
    for f in ["sample.py", "sample.rs", "sample.go", "sample.c", "sample.cpp", "sample.ts", "sample.tsx", "Sample.java"] {
        let src = Source::open_spec(&CorpusSpec::file(&fixture(f)), None).unwrap();
        eprintln!("== {f} {} errors at {:?}", src.parsed.error_regions, src.parsed.error_lines);
        for d in &src.parsed.functions {
            eprintln!("   decl {} / {} clean={}", d.name, d.qualified, d.clean);
        }
        for t in listing(f, 3) {
            eprintln!("   {t:?}");
        }
    }
}
