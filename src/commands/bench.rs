//! `posrecall bench`: run a model in-process and score its answers. The
//! flags become one [`bench::BenchOptions`] ([`super::options::bench`]); the
//! run is [`bench::run`]'s.

use crate::bench::kv_list::KvItem;
use crate::bench::{self, Env};
use crate::cli::BenchArgs;
use crate::commands::{corpus_spec, hint};
use crate::record::run::TargetResult;
use crate::report::export::Format;
use crate::report::kv_table;
use crate::report::terminal;
use crate::sweep::kv_list::run_kv_list;
use crate::sweep::{SweepRun, SweepSink};
use anyhow::Result;
use std::path::{Path, PathBuf};
use std::time::Instant;

pub fn run(args: &BenchArgs) -> Result<()> {
    let started = Instant::now();
    let (mut opts, items) = super::options::bench(args)?;
    let spec = corpus_spec(args.corpus.as_deref(), &args.source)?;
    if items.len() > 1 {
        return kv_list(args, opts, &items, &spec);
    }
    check_outputs(args, &spec)?;
    let bench::Opened { model, src, reference } = bench::open(&args.model, &spec, &mut opts, &super::Stderr).map_err(|e| hint(e, None))?;
    let planned = bench::plan_run(&model, &src, &opts, &super::Stderr).map_err(|e| hint(e, Some(args.crop)))?;
    if let bench::Planned::Ladder(l) = &planned
        && let Some(note) = &l.stopped
    {
        eprintln!("note: {note}");
    }
    let color = super::stdout_wants_color();
    let mut shown = Shown { quiet: args.quiet, color, lines: opts.plan.target.lines, crop: args.crop, stdout: Ok(()) };
    let env = Env { show_progress: !args.quiet, multi: None, started, notes: &super::Stderr };
    let run = bench::run(&model, &src, &planned, &opts, reference.as_ref(), &env, &mut shown)?;
    if let Some(out) = &args.out {
        run.save(out)?;
    }
    if let Some(html) = &args.html {
        crate::report::html::write_bench_page(&run, args.out.as_deref(), html)?;
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

/// Output paths are checked before the model is loaded, against every input
/// and each other: a wrong path must not cost the run, nor destroy a file.
fn check_outputs(args: &BenchArgs, corpus: &crate::corpus::CorpusSpec) -> Result<()> {
    let sidecars: Vec<PathBuf> =
        [&args.reference, &args.save_reference].iter().filter_map(|p| p.as_deref()).map(crate::record::reference::sidecar).collect();
    let mut inputs: Vec<&Path> = vec![args.model.as_path()];
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

/// The terminal as a run's sink: per target its diff, per ladder window a
/// heading (unless quiet); the first failed write stops the output.
struct Shown {
    quiet: bool,
    color: bool,
    lines: usize,
    crop: crate::targets::crop::CropMode,
    stdout: Result<()>,
}

impl bench::Sink for Shown {
    fn starting(&mut self, answers: bool) {
        // Without answers there are no marked lines to explain.
        if !self.quiet && answers {
            self.stdout = outln!("{}\n", terminal::legend(self.color));
        }
    }

    fn window(&mut self, length: usize, plan: &bench::Plan) {
        if !self.quiet && self.stdout.is_ok() {
            self.stdout = outln!(
                "== length {}: lines {}..{}, {} tokens ==",
                bench::ladder::label(length),
                plan.crop.first_line,
                plan.crop.last_line,
                plan.prefix_tokens.len()
            );
        }
    }

    fn result(&mut self, r: &TargetResult) {
        if !self.quiet && self.stdout.is_ok() {
            self.stdout = outln!("{}", terminal::target_diff(r, self.lines, self.color));
        }
    }

    fn explain(&self, e: anyhow::Error) -> anyhow::Error {
        hint(e, Some(self.crop))
    }
}

/// `--kv A,B,…`: the list's runs (the sweep's loop) and their table.
fn kv_list(args: &BenchArgs, opts: bench::BenchOptions, items: &[KvItem], spec: &crate::corpus::CorpusSpec) -> Result<()> {
    let out_dir = args.out_dir.clone().expect("options::bench refuses a list without --out-dir");
    let mut shown = ListShown { quiet: args.quiet, crop: args.crop };
    let rows = run_kv_list(&args.model, opts, items, spec, out_dir, !args.quiet, &mut shown, &super::Stderr).map_err(|e| hint(e, None))?;
    if !args.quiet && args.format == Format::Table {
        outln!()?;
    }
    crate::commands::out(&kv_table::render(&rows, args.format)?)
}

/// The terminal as the list's sink: a line per finished run.
struct ListShown {
    quiet: bool,
    crop: crate::targets::crop::CropMode,
}

impl SweepSink for ListShown {
    fn finished(&mut self, r: &SweepRun, run: &crate::record::run::RunFile, started: Instant) -> Result<()> {
        if self.quiet {
            return Ok(());
        }
        outln!("{}: {} ({:.1} s)", r.id, terminal::totals_line(&run.summary.total), started.elapsed().as_secs_f64())
    }

    fn explain(&self, e: anyhow::Error) -> anyhow::Error {
        hint(e, Some(self.crop))
    }
}
