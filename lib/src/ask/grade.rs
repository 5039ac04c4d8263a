//! Scoring answers a model produced elsewhere (a responses file, from `ask`
//! or any tool) against the targets file they answer, into a run file like
//! `bench`'s, with the same scorer and the same split of reasoning.

use super::responses::{self, Response};
use crate::prompt::reasoning;
use crate::record::run::{External, FORMAT_VERSION, Manifest, RunFile, Runtime, Summary, TargetResult, TargetsFile};
use crate::score::{self, Credit, Normalize, Policy, ScoreOptions};
use crate::support::progress::Notes;
use crate::targets::crop::LineRange;
use crate::targets::{SpecError, TargetSpec};
use anyhow::Result;
use std::collections::HashMap;
use std::path::Path;

/// What may differ from the targets file, and who answered.
#[derive(Debug, Clone, Default)]
pub struct ScoreSettings {
    /// The lines the targets file must have been made for (an error otherwise).
    pub crop_lines: Option<LineRange>,
    /// Instead of the targets file's pass threshold.
    pub pass: Option<usize>,
    /// Instead of the targets file's line comparison.
    pub normalize: Option<Normalize>,
    /// The policy to score under: the targets file's (its extra window is
    /// made for it), or an error.
    pub policy: Option<Policy>,
    /// Instead of the targets file's credit (all lines, or code alone).
    pub credit: Option<Credit>,
    /// The server and model that answered, for the manifest.
    pub external: Option<External>,
}

/// Why a responses file cannot be scored against a targets file; the face
/// words the first two as the setting that caused them.
#[derive(Debug, thiserror::Error)]
pub enum ScoreError {
    #[error("{path} was made for lines {}..{}, not {}..{}", made.first, made.last, asked.first, asked.last)]
    CropLines { path: String, made: LineRange, asked: LineRange },
    /// The pass threshold given instead of the file's is above its lines.
    #[error("{pass} is more than the targets' {lines} lines: nothing could pass")]
    PassAboveLines { pass: usize, lines: usize },
    /// The pass threshold given instead of the file's is out of range.
    #[error("{0}")]
    Pass(SpecError),
    /// The targets file's own settings are out of range.
    #[error("{path}: {}", crate::settings::Explain::explain(source, &crate::settings::Keys))]
    TargetsParams { path: String, source: SpecError },
    #[error("{responses} answers `{name}`, which is not a target in {targets}")]
    UnknownTarget { responses: String, name: String, targets: String },
    /// The policy asked for is not the one the targets file's windows were made for.
    #[error("{path} was made for the {made} policy, not {asked}")]
    Policy { path: String, made: Policy, asked: Policy },
    /// Code alone is credited, and the targets file does not say which lines are code.
    #[error("{path} does not record its lines' classes (it predates them), so code lines cannot be told apart")]
    NoClasses { path: String },
}

/// Scores `responses_path` against `targets_path`: every target's answer (an
/// empty one where there is none, said through `notes`).
pub fn score_responses(targets_path: &Path, responses_path: &Path, settings: &ScoreSettings, notes: &dyn Notes) -> Result<RunFile> {
    let targets = TargetsFile::load(targets_path)?;
    if let Some(asked) = settings.crop_lines {
        let c = &targets.corpus.crop;
        let made = LineRange { first: c.first_line, last: c.last_line };
        if made != asked {
            return Err(ScoreError::CropLines { path: targets_path.display().to_string(), made, asked }.into());
        }
    }
    let answers = responses::read_all(responses_path)?;
    if let Some(unknown) = answers.keys().find(|n| !targets.targets.iter().any(|t| &t.name == *n)) {
        return Err(ScoreError::UnknownTarget {
            responses: responses_path.display().to_string(),
            name: unknown.clone(),
            targets: targets_path.display().to_string(),
        }
        .into());
    }
    let mut params = targets.params.clone();
    if let Some(asked) = settings.policy.filter(|p| *p != params.policy) {
        return Err(ScoreError::Policy { path: targets_path.display().to_string(), made: params.policy, asked }.into());
    }
    params.pass = settings.pass.unwrap_or(params.pass);
    params.normalize = settings.normalize.unwrap_or(params.normalize);
    params.credit = settings.credit.unwrap_or(params.credit);
    if params.credit == Credit::Code && targets.targets.iter().any(|t| t.classes.len() != t.expected.len()) {
        return Err(ScoreError::NoClasses { path: targets_path.display().to_string() }.into());
    }
    // The targets file's settings get the bounds the flags get, by the same rule.
    let spec = TargetSpec {
        count: params.count,
        lines: params.lines,
        seed: params.seed,
        crop_lines: None,
        skip_blank: params.skip_blank,
        rename: false,
        // The file's own pass is the default one under codeneedle, which
        // has none of its own: only one given here is refused there.
        pass: (params.policy == Policy::Posrecall || settings.pass.is_some()).then_some(params.pass),
        normalize: Some(params.normalize),
        policy: params.policy,
        anchor: params.anchor,
        credit: params.credit,
        min_code_lines: params.min_code_lines,
    };
    if let Err(e) = spec.validate() {
        return Err(match (e, settings.pass) {
            (SpecError::PassAboveLines { pass, lines }, Some(_)) => ScoreError::PassAboveLines { pass, lines },
            (e, Some(_)) if e.setting() == crate::settings::Setting::Pass => ScoreError::Pass(e),
            (source, _) => ScoreError::TargetsParams { path: targets_path.display().to_string(), source },
        }
        .into());
    }
    let opts = params.score_options();
    let results = score_all(&targets, answers, &opts, notes);
    Ok(RunFile {
        format: FORMAT_VERSION,
        manifest: Manifest {
            command: crate::record::run::MadeBy::Score,
            model: None,
            context: None,
            corpus: targets.corpus.clone(),
            params,
            runtime: Runtime::current(),
            external: settings.external.clone(),
            reference: None,
            rescored_from: None,
        },
        summary: Summary::of(&results),
        targets: results,
        timings: None,
        ladder: None,
        unfinished: None,
    })
}

/// Scores every target's answer.
fn score_all(targets: &TargetsFile, mut answers: HashMap<String, Response>, opts: &ScoreOptions, notes: &dyn Notes) -> Vec<TargetResult> {
    let mut results = Vec::with_capacity(targets.targets.len());
    let mut unanswered = 0;
    for t in &targets.targets {
        let a = answers.remove(&t.name).unwrap_or_else(|| {
            unanswered += 1;
            Response { name: t.name.clone(), ..Response::default() }
        });
        // Reasoning inside the answer text is split off as `bench` splits it,
        // and joins any the server gave apart.
        let split = reasoning::split(&a.response);
        let s = score::score_raw(split.answer, &t.header, &t.expected, &t.extra_window, &t.classes, opts);
        if let Some(n) = s.unread_lines {
            let read = score::answer_line_cap(t.expected.len() + t.extra_window.len());
            notes.note(&format!(
                "note: `{}`: the first {read} lines of its answer were scored; the {n} after them cannot change its score and were not read",
                t.name
            ));
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
        notes.note(&format!("note: {unanswered} target(s) had no answer and were scored as empty answers"));
    }
    results
}
