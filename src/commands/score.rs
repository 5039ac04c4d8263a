//! `posrecall score`: score answers that a model produced elsewhere.

use crate::cli::ScoreArgs;
use anyhow::Result;
use posrecall::ask::grade::{ScoreError, ScoreSettings, score_responses};
use posrecall::record::run::{External, RunFile};
use posrecall::report::terminal;

pub fn run(args: &ScoreArgs) -> Result<()> {
    if let Some(out) = &args.out {
        crate::commands::check_output("--out", out, &[&args.targets, &args.responses])?;
    }
    let settings = ScoreSettings {
        crop_lines: args.crop_lines,
        pass: args.pass,
        normalize: args.normalize,
        policy: args.policy,
        credit: args.credit,
        external: (args.url.is_some() || args.model.is_some()).then(|| External {
            // Credentials in a URL are not recorded (reports show it).
            url: args.url.as_deref().map(posrecall::support::shown::shown_url),
            model: args.model.clone(),
        }),
    };
    let run = score_responses(&args.targets, &args.responses, &settings, &super::Stderr).map_err(|e| match e.downcast::<ScoreError>() {
        Ok(ScoreError::CropLines { path, made, asked }) => anyhow::anyhow!(
            "{path} was made for lines {}..{}, not {}..{}; rerun `posrecall targets --crop-lines {}:{}`",
            made.first,
            made.last,
            asked.first,
            asked.last,
            asked.first,
            asked.last
        ),
        Ok(ScoreError::PassAboveLines { pass, lines }) => {
            anyhow::anyhow!("--pass {pass} is more than the targets' {lines} lines: nothing could pass")
        }
        Ok(ScoreError::Pass(e)) => anyhow::anyhow!("--pass {e}"),
        Ok(ScoreError::Policy { path, made, asked }) => anyhow::anyhow!(
            "{path} was made for --policy {made}, whose extra window differs; make it with `posrecall targets --policy {asked} --json`, or leave --policy out"
        ),
        Ok(e) => e.into(),
        Err(e) => e,
    })?;
    if let Some(out) = &args.out {
        run.save(out)?;
    }
    print_run(&run, args.quiet)
}

/// Prints the legend, every target's diff (unless quiet) and the aggregate.
pub fn print_run(run: &RunFile, quiet: bool) -> Result<()> {
    let color = super::stdout_wants_color();
    if !quiet {
        outln!("{}\n", terminal::legend(color))?;
        for t in &run.targets {
            outln!("{}", terminal::target_diff(t, run.manifest.params.lines, color))?;
        }
    }
    crate::commands::out(&terminal::summary(&run.summary))
}
