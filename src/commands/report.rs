//! `posrecall report`: aggregate tables, the colour diffs and one HTML page
//! from run files and folders of run files.

use super::stdout_wants_color;
use crate::cli::ReportArgs;
use anyhow::Result;
use posrecall::report::aggregate::{DifferentLines, load_inputs};
use posrecall::report::export::{self, Options};

pub fn run(args: &ReportArgs) -> Result<()> {
    let opts = Options { diff: args.diff, color: args.out.is_none() && stdout_wants_color() };
    // The format and the output are checked before any file is read, the
    // whole report is rendered before anything is written.
    if let Some(out) = &args.out {
        let mut inputs: Vec<std::path::PathBuf> = args.inputs.clone();
        for dir in args.inputs.iter().filter(|p| p.is_dir()) {
            if let Ok(entries) = std::fs::read_dir(dir) {
                inputs.extend(entries.flatten().map(|e| e.path()));
            }
        }
        let inputs: Vec<&std::path::Path> = inputs.iter().map(|p| p.as_path()).collect();
        crate::commands::check_output("--out", out, &inputs)?;
    }
    let exporter = export::exporter(args.format, opts).map_err(|e| match e.downcast_ref::<export::NoDiffs>() {
        Some(n) => anyhow::anyhow!("--diff works with --format table, md or html (the HTML page always has the diffs), not {}", n.0),
        None => e,
    })?;
    let runs = load_inputs(&args.inputs, &super::Stderr).map_err(|e| match e.downcast_ref::<DifferentLines>() {
        Some(d) => {
            anyhow::anyhow!("cannot compare runs with different --lines: {} has {}, {} has {}", d.first.0, d.first.1, d.other.0, d.other.1)
        }
        None => e,
    })?;
    let text = exporter.render(&runs)?;
    match &args.out {
        Some(path) => posrecall::support::fsutil::write_atomic(path, text.as_bytes()),
        None => crate::commands::out(&text),
    }
}
