//! `posrecall targets`: the functions a run would ask about.

use crate::cli::TargetsArgs;
use crate::commands::{check_output, corpus_spec, hint, out};
use anyhow::Result;
use posrecall::corpus::Source;
use posrecall::record::run::{CorpusInfo, Params, TARGETS_FORMAT_VERSION, TargetsFile};
use posrecall::support::fsutil;
use posrecall::targets::TargetSpec;
use posrecall::targets::crop::{Crop, CropMode};
use posrecall::{prompt, targets};
use std::fmt::Write as _;

pub fn run(args: &TargetsArgs) -> Result<()> {
    let spec = crate::commands::options::target_spec(&args.target);
    let kwargs =
        posrecall::ask::chat_template_kwargs(args.think, &crate::commands::options::template_kwargs(args.template_kwargs.as_deref())?);
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
    let file = targets_file(&src, &spec).map_err(|e| hint(e, None))?;
    if let Some(path) = &args.emit_prompts {
        let corpus = &src.corpus;
        let kept = corpus.slice_lines(file.corpus.crop.first_line - 1, file.corpus.crop.last_line - 1);
        let mut jsonl = String::new();
        for t in &file.targets {
            let q = prompt::query(&t.name, file.params.lines, file.params.skip_blank);
            let line = serde_json::json!({
                "name": t.name,
                "prompt": prompt::instruction_prompt(kept, &q),
                "chat_template_kwargs": kwargs,
            });
            jsonl.push_str(&line.to_string());
            jsonl.push('\n');
        }
        fsutil::write_atomic(path, jsonl.as_bytes())?;
    }
    if args.json {
        let mut json = serde_json::to_value(&file)?;
        if let Some(r) = &src.renamed {
            // The targets file carries the whole mapping, old name → new name.
            json["corpus"]["rename"] = serde_json::to_value(r)?;
        }
        outln!("{}", serde_json::to_string_pretty(&json)?)?;
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

/// Crops and selects: the targets file for a corpus already read.
fn targets_file(src: &Source, opts: &TargetSpec) -> Result<TargetsFile> {
    let corpus = &src.corpus;
    let (mode, (first, last)) = match opts.crop_lines {
        Some(r) => (CropMode::Lines, r.to_zero_based(corpus.line_count())?),
        None => (CropMode::None, (0, corpus.line_count() - 1)),
    };
    let selected = targets::select(corpus, &src.parsed, first, last, &opts.options())?;
    Ok(TargetsFile {
        format: TARGETS_FORMAT_VERSION,
        corpus: CorpusInfo::of(src, Crop::of(corpus, mode, first, last), None),
        params: Params::of(opts),
        error_regions: src.parsed.error_regions,
        targets: selected,
    })
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
