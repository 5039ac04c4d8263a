//! A run that stops loses nothing: while a plain run goes, its run file is
//! written again after each finished target, marked unfinished
//! ([`crate::record::run::Unfinished`]); `bench --resume` keeps the targets
//! such a file holds and asks only the rest, so that the finished file is
//! the one an uninterrupted run writes (timings apart).
//!
//! A file is the same run when its resume key ([`crate::record::keys::resume_key`],
//! the rule a sweep keeps finished runs by) and its reference are this
//! run's; anything else is refused with the first field that differs.

use super::plan::Plan;
use crate::record::run::{FORMAT_VERSION, MadeBy, Manifest, RunFile, Summary, TargetResult, Unfinished};
use crate::settings::{Explain, Names, Setting};
use std::path::{Path, PathBuf};

/// Where a run writes its run file as it goes.
#[derive(Clone, Copy)]
pub struct RunOut<'a> {
    /// The run file.
    pub path: &'a Path,
    /// `path` is a name posrecall made in a folder the user gave (a sweep's
    /// run file): written onto that name, never through a link.
    pub made: bool,
    /// The unfinished run file read back from `path` to be finished
    /// (`BenchOptions::resume`).
    pub resumed: Option<&'a RunFile>,
}

/// A run file that `--resume` cannot finish as this run.
#[derive(Debug, thiserror::Error)]
#[error("{} {why}", .path.display())]
pub struct NotThisRun {
    pub path: PathBuf,
    pub why: String,
}

impl Explain for NotThisRun {
    fn explain(&self, n: &dyn Names) -> String {
        format!("{}: {self}; run it without {} to start it again", n.name(Setting::Resume), n.name(Setting::Resume))
    }
}

/// What a resumed run keeps: per target of `plan`, in order, the result the
/// file holds, if it does. Refused when the file is not a run of this
/// manifest (the first key that differs), or holds a target this run does
/// not ask, or was decoded with draft checks when this one is not (or the
/// other way round).
pub(crate) fn kept(
    out: &RunOut,
    existing: &RunFile,
    manifest: &Manifest,
    plan: &Plan,
    check_draft: bool,
) -> Result<Vec<Option<TargetResult>>, NotThisRun> {
    let refuse = |why: String| NotThisRun { path: out.path.to_path_buf(), why };
    if existing.manifest.command != MadeBy::Bench || existing.manifest.rescored_from.is_some() {
        return Err(refuse("was not written by a bench run".into()));
    }
    if existing.ladder.is_some() {
        return Err(refuse("is a length ladder's run, which is not resumed".into()));
    }
    if let Some((field, theirs, ours)) = crate::record::keys::resume_difference(&existing.manifest, manifest) {
        return Err(refuse(format!("is another run: its {field} is {theirs}, this run's is {ours}")));
    }
    let reference = |m: &Manifest| m.reference.as_ref().map(|r| r.sha256.clone());
    if reference(&existing.manifest) != reference(manifest) {
        let show = |s: Option<String>| s.map_or_else(|| "none".to_string(), |s| format!("sha256 {}…", &s[..s.len().min(12)]));
        return Err(refuse(format!(
            "is another run: it was measured against reference {}, this run against {}",
            show(reference(&existing.manifest)),
            show(reference(manifest))
        )));
    }
    let mut kept: Vec<Option<TargetResult>> = vec![None; plan.targets.len()];
    for t in &existing.targets {
        let Some(i) = plan.targets.iter().position(|p| p.name == t.name && p.line == t.line) else {
            return Err(refuse(format!("holds target `{}` (line {}), which this run does not ask", t.name, t.line)));
        };
        if t.undrafted.is_some() != check_draft {
            let why = match check_draft {
                true => "was decoded without a check of its drafts, which this run makes",
                false => "was decoded with a check of its drafts, which this run does not make",
            };
            return Err(refuse(why.into()));
        }
        kept[i] = Some(t.clone());
    }
    Ok(kept)
}

/// What a plain run starts from.
pub(crate) enum Start {
    /// Per target of the plan, the result the file being resumed holds
    /// (none at all without `--resume`).
    Kept(Vec<Option<TargetResult>>),
    /// The file to resume is a finished run of this configuration: nothing
    /// is left to ask, and it is the run.
    Finished(Box<RunFile>),
}

/// Where a run of `plan` with this `manifest` starts: from nothing, or
/// (`resume`) from the file `out` read back, checked by [`kept`].
pub(crate) fn start(
    resume: bool,
    out: Option<RunOut>,
    manifest: &Manifest,
    plan: &Plan,
    check_draft: bool,
    notes: &dyn crate::support::progress::Notes,
) -> anyhow::Result<Start> {
    if !resume {
        return Ok(Start::Kept(vec![None; plan.targets.len()]));
    }
    let Some(out @ RunOut { resumed: Some(existing), .. }) = out else {
        anyhow::bail!("a resumed run needs the unfinished run file it finishes");
    };
    let kept = kept(&out, existing, manifest, plan, check_draft)?;
    if existing.unfinished.is_some() {
        return Ok(Start::Kept(kept));
    }
    notes.note(&format!("note: {} is a finished run of this configuration: nothing is left to ask", out.path.display()));
    Ok(Start::Finished(Box::new(existing.clone())))
}

/// `plan` narrowed to the targets `kept` has no result for: the same
/// prefix, context and questions, fewer targets.
pub(crate) fn remaining(plan: &Plan, kept: &[Option<TargetResult>]) -> Plan {
    let mut rest = plan.clone();
    let ask = |i: &usize| kept[*i].is_none();
    rest.targets = plan.targets.iter().enumerate().filter(|(i, _)| ask(i)).map(|(_, t)| t.clone()).collect();
    rest.queries = plan.queries.iter().enumerate().filter(|(i, _)| ask(i)).map(|(_, q)| q.clone()).collect();
    rest
}

/// The run file as targets finish: rewritten atomically after each one,
/// marked unfinished, until the run writes its finished file.
pub(crate) struct Partial<'a> {
    out: Option<RunOut<'a>>,
    manifest: Manifest,
    /// Per target of the plan, its result once there is one.
    results: Vec<Option<TargetResult>>,
    /// Per target of the plan, the result the resumed file kept.
    kept: Vec<Option<TargetResult>>,
    /// Why the last write failed, said once: the run goes on, and its
    /// final write says it again if it still fails.
    failed: bool,
    /// When this run began writing: a temporary file of the run file older
    /// than that is an earlier, killed writer's.
    began: std::time::SystemTime,
}

impl<'a> Partial<'a> {
    /// `out`: where the file goes (`None`, or not a regular file such as
    /// a FIFO or `/dev/null`: nothing is written as the run goes).
    pub(crate) fn new(out: Option<RunOut<'a>>, manifest: Manifest, results: Vec<Option<TargetResult>>) -> Partial<'a> {
        let regular = |o: &RunOut| std::fs::metadata(o.path).map_or(true, |m| m.is_file());
        Partial { out: out.filter(regular), manifest, kept: results.clone(), results, failed: false, began: std::time::SystemTime::now() }
    }

    /// Records the result of the next target still to come, in plan order,
    /// and writes the file so far, unless this was the last target (the
    /// finished file follows).
    pub(crate) fn finished(&mut self, r: &TargetResult, notes: &dyn crate::support::progress::Notes) {
        if let Some(slot) = self.results.iter_mut().find(|s| s.is_none()) {
            *slot = Some(r.clone());
        }
        let done: Vec<TargetResult> = self.results.iter().flatten().cloned().collect();
        let Some(out) = self.out.filter(|_| done.len() < self.results.len()) else { return };
        let file = RunFile {
            format: FORMAT_VERSION,
            manifest: self.manifest.clone(),
            summary: Summary::of(&done),
            targets: done,
            timings: None,
            ladder: None,
            unfinished: Some(Unfinished { asked: self.results.len() }),
        };
        let written = match out.made {
            true => file.save_here(out.path),
            false => file.save(out.path),
        };
        if let Err(e) = written
            && !std::mem::replace(&mut self.failed, true)
        {
            notes.note(&format!("note: the unfinished run file could not be written ({e:#}); the run goes on"));
        }
    }

    /// Every target's result, in plan order: the kept file's where it had
    /// one, and `asked`'s (the run's results, in plan order) for the rest.
    /// `asked` are the results as the run ended, not as each target
    /// finished: a pass after the last target (closed-book answers, the
    /// sequential check) adds to them. `None` when `asked` does not fill
    /// the rest exactly.
    /// A run killed while writing its file leaves a temporary file beside
    /// it: the run that gets this far clears what was left before it began
    /// (the finished file is written next).
    pub(crate) fn into_results(self, asked: Vec<TargetResult>) -> Option<Vec<TargetResult>> {
        if let Some(out) = &self.out {
            crate::support::fsutil::remove_stale_temporaries(out.path, self.began);
        }
        let mut asked = asked.into_iter();
        let all: Option<Vec<TargetResult>> = self.kept.into_iter().map(|k| k.or_else(|| asked.next())).collect();
        all.filter(|_| asked.next().is_none())
    }
}
