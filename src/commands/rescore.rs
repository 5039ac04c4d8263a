//! `posrecall rescore RUN… --policy P`: the stored answers of run files
//! scored again ([`posrecall::ask::rescore`]), each into a new run file.

use crate::cli::RescoreArgs;
use anyhow::{Result, anyhow, bail};
use posrecall::ask::rescore::{RescoreError, RescoreSettings, rescore};
use posrecall::settings::Explain;
use std::path::PathBuf;

pub fn run(args: &RescoreArgs) -> Result<()> {
    let outputs: Vec<PathBuf> = match (&args.out, &args.out_dir) {
        (Some(out), _) if args.runs.len() == 1 => vec![out.clone()],
        (Some(_), _) => bail!("--out names one file, but {} runs are given; use --out-dir", args.runs.len()),
        (None, Some(dir)) => {
            if !dir.is_dir() {
                bail!("--out-dir {} is not a folder", dir.display());
            }
            args.runs
                .iter()
                .map(|r| r.file_name().map(|n| dir.join(n)).ok_or_else(|| anyhow!("{} names no file", r.display())))
                .collect::<Result<_>>()?
        }
        (None, None) => bail!("give --out or --out-dir"),
    };
    let flag = if args.out.is_some() { "--out" } else { "--out-dir" };
    let labelled: Vec<(&str, &std::path::Path)> = outputs.iter().map(|o| (flag, o.as_path())).collect();
    let inputs: Vec<&std::path::Path> = args.runs.iter().map(PathBuf::as_path).collect();
    crate::commands::check_outputs(&labelled, &inputs, &[])?;

    let settings = RescoreSettings { policy: args.policy, normalize: args.normalize, pass: args.pass, credit: args.credit };
    // Every run is rescored before any is written: one that cannot be is
    // refused with nothing half done.
    let mut runs = Vec::with_capacity(args.runs.len());
    for path in &args.runs {
        let run = rescore(path, &settings, args.corpus.as_deref(), &super::Stderr).map_err(|e| match e.downcast::<RescoreError>() {
            Ok(RescoreError::Spec(s)) => anyhow!("{}", s.explain(&super::Flags)),
            Ok(e @ RescoreError::CorpusMissing { .. }) => anyhow!("{e}; give where it is now with --corpus PATH"),
            Ok(e) => e.into(),
            Err(e) => e,
        })?;
        runs.push(run);
    }
    for (run, out) in runs.iter().zip(&outputs) {
        run.save(out)?;
        if args.runs.len() > 1 {
            crate::commands::out(&format!("{}\n", out.display()))?;
        }
        super::score::print_run(run, args.quiet)?;
    }
    Ok(())
}
