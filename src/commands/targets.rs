//! `posrecall targets`: the functions a run would ask about.

use crate::cli::TargetsArgs;
use crate::commands::{check_output, corpus_spec, hint, out};
use anyhow::Result;
use posrecall::corpus::Source;
use posrecall::record::run::TargetsFile;
use posrecall::support::fsutil;
use std::fmt::Write as _;

pub fn run(args: &TargetsArgs) -> Result<()> {
    let spec = crate::commands::convert::target_spec(&args.target);
    let kwargs =
        posrecall::ask::chat_template_kwargs(args.think, &crate::commands::convert::template_kwargs(args.template_kwargs.as_deref())?);
    let corpus = corpus_spec(args.corpus.as_deref(), &args.source)?;
    if let Some(path) = &args.emit_prompts {
        check_output("--emit-prompts", path, &[&corpus.path])?;
    }
    spec.validate().map_err(|e| hint(e.into(), None))?;
    let src = Source::open_spec(&corpus, spec.rename_seed()).map_err(|e| hint(e, None))?;
    // Before the targets are chosen: skipped files and syntax errors are
    // often why too few are found.
    if let Some(note) = src.error_note() {
        eprintln!("{note}");
    }
    let file = TargetsFile::select(&src, &spec).map_err(|e| hint(e, None))?;
    if let Some(note) = posrecall::targets::ambiguity_note(&file.corpus.ambiguous) {
        eprintln!("{note}");
    }
    if let Some(path) = &args.emit_prompts {
        fsutil::write_atomic(path, file.prompt_lines(&src, &serde_json::to_value(&kwargs)?).as_bytes())?;
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&file.to_json(&src)?)?)?;
    } else {
        out(&table(&file))?;
        if let Some(r) = &src.renamed {
            outln!("\nrenamed with seed {} ({} names; renamed text sha256 {}):", r.seed, r.mapping.len(), r.sha256)?;
            for (old, new) in &r.mapping {
                outln!("  {old} -> {new}")?;
            }
        }
    }
    Ok(())
}

/// The human-readable listing: name, line, depth, first expected line.
fn table(file: &TargetsFile) -> String {
    let width = file.targets.iter().map(|t| t.name.len()).max().unwrap_or(4).max(4);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} targets in {} (lines {}..{}, {} lines each, seed {})",
        file.targets.len(),
        file.corpus.path,
        file.corpus.crop.first_line,
        file.corpus.crop.last_line,
        file.params.lines,
        file.params.seed
    );
    let _ = writeln!(out, "{:<width$}  {:>6}  {:>5}  first expected line", "name", "line", "depth");
    for t in &file.targets {
        let first: String = t.expected.first().map(|l| l.trim()).unwrap_or("").chars().take(60).collect();
        let _ = writeln!(out, "{:<width$}  {:>6}  {:>5.3}  {}", t.name, t.line, t.depth, first);
    }
    out
}
