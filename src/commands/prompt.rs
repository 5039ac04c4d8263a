//! `posrecall prompt MODEL.gguf --target NAME`: exactly what the model is
//! given for one question, as `bench` would give it, with the token counts;
//! only the model's vocabulary and metadata are loaded.

use crate::cli::PromptArgs;
use crate::commands::{corpus_spec, hint};
use anyhow::{Result, bail};
use posrecall::bench;
use posrecall::corpus::Source;
use posrecall::engine::model;
use posrecall::settings::Named;

/// Lines of the file shown at each end when it is elided.
const SHOWN_LINES: usize = 8;

pub fn run(args: &PromptArgs) -> Result<()> {
    let opts = super::convert::prompt(args)?;
    let corpus = corpus_spec(args.corpus.as_deref(), &args.source)?;
    let src = Source::open_spec(&corpus, opts.target.rename_seed()).map_err(|e| hint(e, None))?;
    if let Some(note) = src.error_note() {
        eprintln!("{note}");
    }
    let (path, _) = posrecall::support::hub::locate(&args.model, &crate::commands::progress::Terminal::new(false))?;
    let model = model::load_vocab(&path)?;
    let plan = bench::plan(&model, &src, &opts, &super::Stderr).map_err(|e| hint(e, Some(args.crop)))?;
    let Some(i) = plan.targets.iter().position(|t| t.name == args.target) else {
        let names: Vec<&str> = plan.targets.iter().map(|t| t.name.as_str()).collect();
        bail!(
            "`{}` is not one of this run's {} targets ({}); pick one of them, or change --count or --seed",
            args.target,
            names.len(),
            names.join(", ")
        );
    };
    let target = &plan.targets[i];
    let topts = opts.target.options();
    let suffix = plan.frame.suffix(target, topts.lines, topts.skip_blank);
    let kept = src.corpus.slice_lines(plan.crop.first_line - 1, plan.crop.last_line - 1);
    let mut text = if args.full {
        plan.prefix_text.clone()
    } else {
        let (head, mid) = (&plan.frame.head, &plan.frame.mid[..plan.frame.mid_split]);
        let lines: Vec<&str> = kept.lines().collect();
        let body = if lines.len() <= 2 * SHOWN_LINES {
            format!("{}\n", lines.join("\n"))
        } else {
            format!(
                "{}\n[... {} lines of the file not shown; --full shows them ...]\n{}\n",
                lines[..SHOWN_LINES].join("\n"),
                lines.len() - 2 * SHOWN_LINES,
                lines[lines.len() - SHOWN_LINES..].join("\n")
            )
        };
        format!("{head}{body}{mid}")
    };
    text.push_str(&suffix);
    crate::commands::out(&text)?;
    if !text.ends_with('\n') {
        crate::commands::out("\n")?;
    }
    let think = match &plan.template {
        Some(t) if t.switches.is_empty() => format!("; thinking {}: the template has no switch", t.think.as_str()),
        Some(t) => format!("; thinking {} ({})", t.think.as_str(), t.switches.join(", ")),
        None => String::new(),
    };
    eprintln!(
        "prefix: {} tokens (lines {}..{} of {}); suffix: {} tokens ({} probe{think})",
        plan.prefix_tokens.len(),
        plan.crop.first_line,
        plan.crop.last_line,
        corpus.path.display(),
        plan.queries[i].len(),
        plan.frame.kind.as_str()
    );
    Ok(())
}
