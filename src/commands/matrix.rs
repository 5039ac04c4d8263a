//! `posrecall matrix models.toml`: every (model × KV) run of a sweep.
//!
//! The sweep's file becomes one set of options per run ([`posrecall::sweep::file`]);
//! the loop (one shared range, each model loaded once, its reference run
//! first, resume, shards) is [`posrecall::sweep::run`]'s. Here: the flags, the
//! shard, `--list`, and what is printed.

use crate::cli::MatrixArgs;
use crate::commands::sweep_hint;
use anyhow::{Result, anyhow};
use posrecall::bench::Plan;
use posrecall::corpus::Source;
use posrecall::record::run::RunFile;
use posrecall::report::aggregate::LoadedRun;
use posrecall::report::export::{self, Format, Options};
use posrecall::sweep::{Shard, Sweep, SweepOptions, SweepRun, SweepSink, run_sweep};
use std::time::Instant;

use crate::commands::progress::Terminal;

pub fn run(args: &MatrixArgs) -> Result<()> {
    let mut sweep = Sweep::load(&args.file)?;
    // The flags over the file's options: its drafts are what --draft and
    // --draft-max default to.
    let file = &sweep.base.decode;
    let drafts = (file.draft_asked.then_some(file.draft), file.draft_max_asked.then_some(file.draft_max));
    sweep.base.decode = super::convert::decode(&args.decode, false, false, drafts);
    sweep.base.prefix_cache = args.prefix_cache.clone();
    // The file was checked as it was read; what the flags add is checked
    // here, by the same rules.
    sweep.validate(&super::SweepWords)?;
    let shard =
        args.shard.map(|s| s.resolve(&|name: &str| std::env::var(name).ok())).transpose().map_err(|e| sweep_hint(e.into(), None))?;
    let (mine, shard_note) = sweep.shard_runs(shard);
    let templates = sweep.templates()?;
    if args.list {
        return list(args, &sweep, &mine, &shard_note);
    }
    if mine.is_empty() {
        return outln!("{}: {shard_note}: nothing to do", args.file.display());
    }
    let spec = sweep.corpus_spec().map_err(|e| sweep_hint(e.into(), None))?;
    let src = Source::open_spec(&spec, sweep.base.plan.target.rename_seed())?;
    if let Some(note) = src.error_note() {
        eprintln!("{note}");
    }
    let opts = SweepOptions { out_dir: args.out_dir.clone(), resume: args.resume };
    let term = Terminal::new(args.quiet);
    let mut shown = Shown { term: &term, args, corpus: spec.path.display().to_string(), shard_note, crop: sweep.base.plan.crop };
    run_sweep(&sweep, templates, &mine, &src, &opts, &mut shown, &term).map_err(|e| worded(e, args, None))?;
    print_aggregate(args, &mine, shard)
}

/// `--list`: this shard's runs and their files, without loading a model.
fn list(args: &MatrixArgs, sweep: &Sweep, mine: &[SweepRun], shard_note: &str) -> Result<()> {
    eprintln!("{}: {shard_note}", args.file.display());
    for r in mine {
        let e = &sweep.models[r.model];
        outln!("{}\t{}\t{}\t{}", r.id, r.file(&args.out_dir).display(), e.name, e.path.display())?;
    }
    Ok(())
}

/// The terminal as the sweep's sink.
struct Shown<'a> {
    term: &'a Terminal,
    args: &'a MatrixArgs,
    corpus: String,
    shard_note: String,
    crop: posrecall::targets::crop::CropMode,
}

impl SweepSink for Shown<'_> {
    fn planned(&mut self, plan: &Plan) -> Result<()> {
        if self.args.quiet {
            return Ok(());
        }
        let (crop, n) = (&plan.crop, plan.targets.len());
        outln!(
            "{}: {}; every run keeps lines {}..{} of {} and is asked about the same {n} targets",
            self.args.file.display(),
            self.shard_note,
            crop.first_line,
            crop.last_line,
            self.corpus,
        )
    }

    fn skipped(&mut self, r: &SweepRun) -> Result<()> {
        match self.args.quiet {
            true => Ok(()),
            false => self.term.out(&format!("{}: {}\n", r.id, super::SKIPPED)),
        }
    }

    /// Says a run is done, with its totals (and its ladder).
    fn finished(&mut self, r: &SweepRun, run: &RunFile, started: Instant) -> Result<()> {
        if self.args.quiet {
            return Ok(());
        }
        let mut text = format!(
            "{}: {} ({:.1} s)\n",
            r.id,
            posrecall::report::terminal::totals_line(&run.summary.total),
            started.elapsed().as_secs_f64()
        );
        if let Some(l) = &run.ladder {
            text.push_str(&format!("{}\n", posrecall::report::terminal::ladder_grid(l)));
        }
        self.term.out(&text)
    }

    fn explain(&self, e: anyhow::Error) -> anyhow::Error {
        worded(e, self.args, Some(self.crop))
    }
}

/// An error of the sweep's run in the file's words ([`sweep_hint`]); one
/// about a model names the file and the model first, as an error found
/// when the file is read does (`models.toml: model `smol`: …`).
fn worded(e: anyhow::Error, args: &MatrixArgs, crop: Option<posrecall::targets::crop::CropMode>) -> anyhow::Error {
    let of_model = e.downcast_ref::<posrecall::bench::plan::OfModel>().is_some();
    let e = sweep_hint(e, crop);
    match of_model {
        true => anyhow!("{}: {e:#}", args.file.display()),
        false => e,
    }
}

/// The aggregate over this shard's runs, as `posrecall report` shows it.
fn print_aggregate(args: &MatrixArgs, mine: &[SweepRun], shard: Option<Shard>) -> Result<()> {
    let mut loaded = Vec::with_capacity(mine.len());
    for r in mine {
        let path = r.file(&args.out_dir);
        let run = RunFile::load(&path)?;
        loaded.push(LoadedRun { path: Some(path), label: r.id.clone(), run });
    }
    let color = super::stdout_wants_color();
    let exporter = export::exporter(Format::Table, Options { diff: false, color })?;
    if !args.quiet {
        outln!()?;
    }
    crate::commands::out(&exporter.render(&loaded)?)?;
    if shard.is_some() && !args.quiet {
        outln!("\n(this shard's runs; `posrecall report {}` merges every shard)", args.out_dir.display())?;
    }
    Ok(())
}
