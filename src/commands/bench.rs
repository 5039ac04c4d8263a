//! `posrecall bench`: run a model in-process and score its answers. The
//! flags become one [`bench::BenchOptions`] ([`super::convert::bench`]); the
//! run is [`bench::run`]'s.

use crate::cli::BenchArgs;
use crate::commands::{corpus_spec, hint};
use anyhow::Result;
use posrecall::bench::{self, Env};
use posrecall::report::export::Format;
use posrecall::report::list_table;
use posrecall::report::terminal;
use posrecall::sweep::list::{BenchList, run_list};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::commands::progress::Terminal;

pub fn run(args: &BenchArgs) -> Result<()> {
    let started = Instant::now();
    let (opts, list) = super::convert::bench(args)?;
    let spec = corpus_spec(args.corpus.as_deref(), &args.source)?;
    if list.len() > 1 {
        return run_as_list(args, opts, &list, &spec);
    }
    check_outputs(args, &spec)?;
    // The file to finish is read before the model loads: a missing or
    // damaged one costs nothing.
    let resumed = match (&args.out, args.resume) {
        (Some(out), true) => Some(resumed(out)?),
        _ => None,
    };
    let term = Terminal::new(args.quiet);
    let bench::Opened { model, src, reference } = bench::open(&list.models[0], &spec, &opts, &term, &term).map_err(|e| hint(e, None))?;
    let planned = bench::plan_run(&model, &src, &opts, &term).map_err(|e| hint(e, Some(args.crop)))?;
    if let bench::Planned::Ladder(l) = &planned
        && let Some(note) = &l.stopped
    {
        eprintln!("note: {note}");
    }
    let color = super::stdout_wants_color();
    let mut shown =
        super::shown::Run { term: &term, quiet: args.quiet, color, lines: opts.plan.target.lines, crop: args.crop, stdout: Ok(()) };
    let out = args.out.as_deref().map(|path| bench::RunOut { path, made: false, resumed: resumed.as_ref() });
    let env = Env { progress: &term, started, notes: &term, out };
    let run = bench::run(&model, &src, &planned, &opts, reference.as_ref(), &env, &mut shown)?;
    // A finished file resumed is left as it is: nothing was asked.
    let finished_before = resumed.as_ref().is_some_and(|r| r.unfinished.is_none());
    if let Some(out) = args.out.as_ref().filter(|_| !finished_before) {
        run.save(out)?;
    }
    if let Some(html) = &args.html {
        posrecall::report::export::html::write_bench_page(&run, args.out.as_deref(), html)?;
    }
    // A failed write to stdout does not lose the run: the diffs stop, the
    // run goes on, its files are written, and then the error is reported.
    shown.stdout?;
    let mut text = terminal::summary(&run.summary);
    if let Some(l) = &run.ladder {
        text.push_str(&terminal::ladder_grid(l));
    }
    crate::commands::out(&text)
}

/// The run file `--resume` finishes: a regular file that reads as a run
/// file (a FIFO would block the read).
fn resumed(out: &Path) -> Result<posrecall::record::run::RunFile> {
    match std::fs::metadata(out) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            anyhow::bail!("--resume: {} does not exist: there is no run to finish; run without --resume to start it", out.display())
        }
        Ok(m) if !m.is_file() => anyhow::bail!("--resume: {} is not a regular file, so it holds no run to finish", out.display()),
        _ => posrecall::record::run::RunFile::load(out).map_err(|e| anyhow::anyhow!("--resume: {e:#}")),
    }
}

/// Output paths are checked before the model is loaded, against every input
/// and each other: a wrong path must not cost the run, nor destroy a file.
fn check_outputs(args: &BenchArgs, corpus: &posrecall::corpus::CorpusSpec) -> Result<()> {
    let sidecars: Vec<PathBuf> =
        [&args.reference, &args.save_reference].iter().filter_map(|p| p.as_deref()).map(posrecall::record::reference::sidecar).collect();
    let mut inputs: Vec<&Path> = args.model.iter().map(PathBuf::as_path).collect();
    let mut dirs: Vec<(&str, &Path)> = Vec::new();
    match corpus.dir {
        true => dirs.push(("--corpus-dir", &corpus.path)),
        false => inputs.push(&corpus.path),
    }
    inputs.extend(args.reference.as_deref());
    if args.reference.is_some() {
        inputs.push(&sidecars[0]);
    }
    inputs.extend(args.template.chat_template.as_deref());
    let mut outputs: Vec<(&str, &Path)> = Vec::new();
    outputs.extend(args.out.as_deref().map(|p| ("--out", p)));
    outputs.extend(args.html.as_deref().map(|p| ("--html", p)));
    if let Some(save) = &args.save_reference {
        outputs.push(("--save-reference", save));
        outputs.push(("--save-reference (its .sha256)", sidecars.last().expect("the saved reference's sidecar")));
    }
    crate::commands::check_outputs(&outputs, &inputs, &dirs)
}

/// A list (several models, `--kv A,B,…`, …): its runs (the sweep's loop)
/// and their table, with why a row has no divergence under it.
fn run_as_list(args: &BenchArgs, opts: bench::ValidOptions, list: &BenchList, spec: &posrecall::corpus::CorpusSpec) -> Result<()> {
    let out_dir = args.out_dir.clone().expect("convert::bench refuses a list without --out-dir");
    let term = Terminal::new(args.quiet);
    // A table's reader reads the lines too; JSON, CSV and the other exports
    // on standard output must parse as what they claim, so the lines go to
    // standard error.
    let to_stdout = matches!(args.format, Format::Table | Format::Md);
    let mut shown = super::shown::List { term: &term, quiet: args.quiet, crop: args.crop, to_stdout: args.format == Format::Table };
    let sweep = posrecall::sweep::SweepOptions { out_dir, resume: args.resume };
    let rows = run_list(list, opts, spec, sweep, &mut shown, &term).map_err(|e| hint(e, None))?;
    if !args.quiet && args.format == Format::Table {
        outln!()?;
    }
    crate::commands::out(&list_table::render(&rows, args.format)?)?;
    if let Some(note) = list_table::missing_note(&rows) {
        match to_stdout {
            true => crate::commands::out(&format!("\n{note}\n"))?,
            false => posrecall::support::progress::Notes::note(&term, &note),
        }
    }
    Ok(())
}
