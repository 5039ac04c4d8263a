//! `posrecall score`: score answers that a model produced elsewhere.

use crate::cli::ScoreArgs;
use crate::prompt::reasoning;
use crate::record::run::{External, FORMAT_VERSION, Manifest, RunFile, Runtime, Summary, TargetResult, TargetsFile};
use crate::report::terminal;
use crate::score::{self, ScoreOptions};
use anyhow::{Context, Result, bail};
use serde::Deserialize;
use std::collections::HashMap;

#[derive(Deserialize)]
struct Answer {
    name: String,
    response: String,
    /// Set by `ask` when the server's bytes were not valid UTF-8.
    #[serde(default)]
    invalid_utf8: bool,
    /// The server's reasoning, apart from the answer (`ask`).
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    reasoning_tokens: Option<usize>,
}

/// Reads `{"name", "response"}` lines; blank lines are skipped.
fn read_answers(path: &std::path::Path) -> Result<HashMap<String, Answer>> {
    let text = crate::support::fsutil::read_text(path).with_context(|| format!("cannot read responses {}", path.display()))?;
    let mut answers = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let a: Answer = serde_json::from_str(line)
            .with_context(|| format!("{} line {}: expected {{\"name\": ..., \"response\": ...}}", path.display(), i + 1))?;
        let name = a.name.clone();
        if answers.insert(name.clone(), a).is_some() {
            bail!("{} line {}: a second answer for `{name}`", path.display(), i + 1);
        }
    }
    Ok(answers)
}

pub fn run(args: &ScoreArgs) -> Result<()> {
    if let Some(out) = &args.out {
        crate::commands::check_output("--out", out, &[&args.targets, &args.responses])?;
    }
    let targets = TargetsFile::load(&args.targets)?;
    if let Some(r) = args.crop_lines {
        let c = &targets.corpus.crop;
        if (c.first_line, c.last_line) != (r.first, r.last) {
            bail!(
                "{} was made for lines {}..{}, not {}..{}; rerun `posrecall targets --crop-lines {}:{}`",
                args.targets.display(),
                c.first_line,
                c.last_line,
                r.first,
                r.last,
                r.first,
                r.last
            );
        }
    }
    let answers = read_answers(&args.responses)?;
    if let Some(unknown) = answers.keys().find(|n| !targets.targets.iter().any(|t| &t.name == *n)) {
        bail!("{} answers `{unknown}`, which is not a target in {}", args.responses.display(), args.targets.display());
    }
    let mut params = targets.params.clone();
    if let Some(p) = args.pass {
        params.pass = p;
    }
    if let Some(n) = args.normalize {
        params.normalize = n;
    }
    // The targets file's settings get the bounds the flags get, by the same rule.
    let spec = crate::targets::TargetSpec {
        count: params.count,
        lines: params.lines,
        seed: params.seed,
        crop_lines: None,
        skip_blank: params.skip_blank,
        rename: false,
        pass: Some(params.pass),
        normalize: params.normalize,
    };
    if let Err(e) = spec.validate() {
        match (e, args.pass) {
            (crate::targets::SpecError::PassAboveLines { pass, lines }, Some(_)) => {
                bail!("--pass {pass} is more than the targets' {lines} lines: nothing could pass")
            }
            (e, _) => bail!("{}: params.{} {e}", args.targets.display(), e.setting()),
        }
    }
    let opts = ScoreOptions { lines: params.lines, pass: params.pass, normalize: params.normalize, skip_blank: params.skip_blank };
    let results = score_all(&targets, answers, &opts);
    let run = RunFile {
        format: FORMAT_VERSION,
        manifest: Manifest {
            command: "score".into(),
            model: None,
            context: None,
            corpus: targets.corpus.clone(),
            params,
            runtime: Runtime::current(),
            external: (args.url.is_some() || args.model.is_some()).then(|| External {
                // Credentials in a URL are not recorded (reports show it).
                url: args.url.as_deref().map(crate::ask::without_credentials),
                model: args.model.clone(),
            }),
            reference: None,
        },
        summary: Summary::of(&results),
        targets: results,
        timings: None,
        ladder: None,
    };
    if let Some(out) = &args.out {
        run.save(out)?;
    }
    print_run(&run, args.quiet)
}

/// Scores every target's answer (an empty one where there is none, said on
/// stderr).
fn score_all(targets: &TargetsFile, mut answers: HashMap<String, Answer>, opts: &ScoreOptions) -> Vec<TargetResult> {
    let mut results = Vec::with_capacity(targets.targets.len());
    let mut unanswered = 0;
    for t in &targets.targets {
        let a = answers.remove(&t.name).unwrap_or_else(|| {
            unanswered += 1;
            Answer { name: t.name.clone(), response: String::new(), invalid_utf8: false, reasoning: None, reasoning_tokens: None }
        });
        // Reasoning inside the answer text is split off as `bench` splits it,
        // and joins any the server gave apart.
        let split = reasoning::split(&a.response);
        let s = score::score_raw(split.answer, &t.header, &t.expected, &t.extra_window, opts);
        if let Some(n) = s.unread_lines {
            let read = score::answer_line_cap(t.expected.len() + t.extra_window.len());
            eprintln!(
                "note: `{}`: the first {read} lines of its answer were scored; the {n} after them cannot change its score and were not read",
                t.name
            );
        }
        let mut r = TargetResult::new(t, split.answer.to_string(), s);
        r.invalid_utf8 = a.invalid_utf8;
        let parts: Vec<String> = a.reasoning.into_iter().chain(split.reasoning).collect();
        if !parts.is_empty() {
            r.reasoning = Some(parts.join("\n\n"));
        }
        r.reasoning_tokens = a.reasoning_tokens;
        results.push(r);
    }
    if unanswered > 0 {
        eprintln!("note: {unanswered} target(s) had no answer and were scored as empty answers");
    }
    results
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
