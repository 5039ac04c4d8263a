//! Scoring a run file's stored answers again, under another policy,
//! comparison or pass threshold, without a model (`posrecall rescore`).
//!
//! The answers are in the run file; what scoring needs besides them (each
//! target's header, its extra window, which depends on the policy) is not,
//! so the targets are found again in the corpus the manifest names, with
//! its kept lines and renaming, and must give the stored ground truth line
//! for line. Everything a model measured (forced metrics, timings, tokens)
//! is kept as it was; every score is made again (the answer's, the
//! closed-book answer's, a sequential or undrafted check's).

use crate::corpus::Source;
use crate::prompt::reasoning;
use crate::record::run::{RescoredFrom, RunFile, RungRecord, Summary};
use crate::score::{self, Normalize, Policy, Score, ScoreOptions};
use crate::support::progress::Notes;
use crate::targets::{SpecError, Target, TargetSpec};
use anyhow::{Result, bail};
use std::path::Path;

/// How to score the answers again; what is not given is the run's own,
/// where the run's policy is the one asked for, else the policy's default.
#[derive(Debug, Clone, Copy)]
pub struct RescoreSettings {
    pub policy: Policy,
    pub normalize: Option<Normalize>,
    pub pass: Option<usize>,
    /// Which lines count; not given, the run's own.
    pub credit: Option<crate::score::Credit>,
}

/// Why a run cannot be rescored as asked.
///
/// Needs no hint: each says what is wrong and what would do; the settings
/// are worded by the face that gave them ([`SpecError`]).
#[derive(Debug, thiserror::Error)]
pub enum RescoreError {
    #[error("{0}")]
    Spec(SpecError),
    #[error("{path} has no answers to score (a forced-only run)")]
    NoAnswers { path: String },
    #[error("{path} was made from the corpus {corpus}, which is not there")]
    CorpusMissing { corpus: String, path: String },
    #[error("the corpus {corpus} is not the file {path} was made from (sha256 {found}, the run says {recorded})")]
    Corpus { corpus: String, path: String, found: String, recorded: String },
    #[error("{path}: target `{name}` at line {line} is not a target of its corpus as it reads now ({why})")]
    Target { path: String, name: String, line: usize, why: String },
}

/// The run file at `path` scored again under `settings`; `corpus` is where
/// its corpus is now when not at the path its manifest names (a run made
/// on another machine), held to the manifest's sha256 all the same.
pub fn rescore(path: &Path, settings: &RescoreSettings, corpus: Option<&Path>, notes: &dyn Notes) -> Result<RunFile> {
    let bytes = crate::support::fsutil::read_input(path, crate::support::fsutil::MAX_TEXT_BYTES)
        .map_err(|e| anyhow::anyhow!("cannot read run file {}: {e}", path.display()))?;
    let sha256 = crate::support::fsutil::sha256_hex(&bytes);
    let old = RunFile::load(path)?;
    let shown = path.display().to_string();
    if old.targets.iter().any(|t| t.score.is_none()) {
        return Err(RescoreError::NoAnswers { path: shown }.into());
    }
    let p = &old.manifest.params;
    let same_policy = p.policy == settings.policy;
    // The run's own threshold and comparison carry over to its own policy
    // only: under another they would mean something else.
    let spec = TargetSpec {
        count: p.count,
        lines: p.lines,
        seed: p.seed,
        crop_lines: None,
        skip_blank: p.skip_blank,
        rename: old.manifest.corpus.rename.is_some(),
        pass: settings.pass.or((same_policy && p.policy == Policy::Posrecall).then_some(p.pass)),
        normalize: settings.normalize.or(same_policy.then_some(p.normalize)),
        policy: settings.policy,
        // The targets are found again as the run asked about them.
        anchor: p.anchor,
        credit: settings.credit.unwrap_or(p.credit),
        // The targets are the run's; which were drawn is not decided again.
        min_code_lines: 0,
    };
    spec.validate().map_err(RescoreError::Spec)?;
    let targets = find_targets(&old, &shown, &spec, corpus)?;

    let opts = spec.score_options();
    let mut new = old.clone();
    for (r, t) in new.targets.iter_mut().zip(&targets) {
        let answer = r.response.clone().unwrap_or_default();
        let s = score_one(&answer, t, &opts);
        if let Some(n) = s.unread_lines {
            notes.note(&format!("note: `{}`: the first {n} lines past the scorer's limit were not read", t.name));
        }
        if let Some(cb) = r.closed_book.as_mut() {
            let c = score_one(reasoning::split(&cb.response).answer, t, &opts);
            (cb.matched, cb.missing, cb.hallucinated, cb.extra, cb.pass) = (c.matched, c.missing, c.hallucinated, c.extra, c.pass);
            r.context_matched = Some(s.matched as i64 - c.matched as i64);
        }
        for check in [r.sequential.as_mut(), r.undrafted.as_mut()].into_iter().flatten() {
            // An identical answer keeps no text of its own: it scores as the answer.
            let (matched, pass) = match &check.response {
                Some(text) => {
                    let c = score_one(reasoning::split(text).answer, t, &opts);
                    (c.matched, c.pass)
                }
                None => (s.matched, s.pass),
            };
            (check.matched, check.pass) = (matched, pass);
        }
        r.score = Some(s);
    }
    let params = crate::record::run::Params::of(&spec);
    let m = &mut new.manifest.params;
    (m.pass, m.normalize, m.policy, m.credit) = (params.pass, params.normalize, params.policy, params.credit);
    new.manifest.rescored_from = Some(RescoredFrom { path: shown, sha256 });
    // The summary is its targets' sums, as every run's is; a ladder's
    // windows are each their own targets' sums, and its effective length
    // follows their pass rates.
    new.summary = Summary::of(&new.targets);
    if let Some(ladder) = new.ladder.as_mut() {
        for rung in &mut ladder.rungs {
            let results: Vec<_> = new.targets.iter().filter(|t| t.length == Some(rung.length)).cloned().collect();
            rung.rescore(&results);
        }
        ladder.effective_length = RungRecord::effective_length(&ladder.rungs, ladder.effective_at);
    }
    Ok(new)
}

/// One answer scored against its target.
fn score_one(answer: &str, t: &Target, opts: &ScoreOptions) -> Score {
    score::score_raw(answer, &t.header, &t.expected, &t.extra_window, &t.classes, opts)
}

/// Each of the run's targets, in its order, found again in its corpus
/// under `spec` (whose policy decides the extra window): in the kept lines,
/// or for a ladder in the window of the target's length.
fn find_targets(run: &RunFile, shown: &str, spec: &TargetSpec, corpus: Option<&Path>) -> Result<Vec<Target>> {
    let c = &run.manifest.corpus;
    let at = corpus.unwrap_or(Path::new(&c.path));
    if corpus.is_none() && !at.exists() {
        return Err(RescoreError::CorpusMissing { corpus: c.path.clone(), path: shown.to_string() }.into());
    }
    let src = Source::open_spec(&c.spec(at), c.rename.as_ref().map(|r| r.seed))?;
    if src.file_sha256 != c.sha256 {
        return Err(RescoreError::Corpus {
            corpus: at.display().to_string(),
            path: shown.to_string(),
            found: src.file_sha256.clone(),
            recorded: c.sha256.clone(),
        }
        .into());
    }
    let lines = src.corpus.line_count();
    // The eligible targets of each window, found once per window.
    let mut windows: Vec<((usize, usize), Vec<Target>)> = Vec::new();
    run.targets
        .iter()
        .map(|r| {
            let missing = |why: &str| RescoreError::Target { path: shown.to_string(), name: r.name.clone(), line: r.line, why: why.into() };
            let crop = match (&run.ladder, r.length) {
                (Some(ladder), Some(length)) => match ladder.rungs.iter().find(|g| g.length == length) {
                    Some(rung) => &rung.crop,
                    None => return Err(missing(&format!("the ladder has no window of {length} tokens")).into()),
                },
                (Some(_), None) => return Err(missing("a ladder's target without its length").into()),
                (None, _) => &c.crop,
            };
            let window = (crop.first_line, crop.last_line);
            if window.0 == 0 || window.0 > window.1 || window.1 > lines {
                bail!("{shown} keeps lines {}..{}, but {} has {lines} lines", window.0, window.1, at.display());
            }
            let at = match windows.iter().position(|(w, _)| *w == window) {
                Some(i) => i,
                None => {
                    let all = crate::targets::eligible(&src.corpus, &src.parsed, window.0 - 1, window.1 - 1, &spec.options());
                    windows.push((window, all));
                    windows.len() - 1
                }
            };
            let t = windows[at].1.iter().find(|t| t.name == r.name && t.line == r.line).ok_or_else(|| missing("no such function there"))?;
            if t.expected != r.expected {
                return Err(missing("its lines differ from the run's").into());
            }
            Ok(t.clone())
        })
        .collect()
}
