//! posrecall: positional, verbatim recall of long code by local LLMs.
//!
//! The data flows one way, and each stage is a folder: [`corpus`] (read a
//! source file, find function declarations) → [`targets`] (crop,
//! eligibility, ground truth, depth-stratified sampling) → [`prompt`] (the
//! probes, chat templates, thinking) → [`engine`] (llama.cpp, in-process,
//! running the [`decode`] method: drafts, logits) → [`score`] (parse and align
//! answers, teacher-forced metrics, KL divergence, statistics) → [`record`]
//! (the run file, the reference file, the reuse keys) → [`report`] (what
//! people read). [`bench`] runs one benchmark through these stages, [`sweep`]
//! many of them from a models.toml, [`ask`] a served model; [`settings`] is the
//! neutral data they share and [`support`] the plumbing (files, the model
//! hub, the traits through which the face shows progress). The face, the
//! `posrecall` binary with its flags and bars, is a crate of its own.

pub mod ask;
pub mod bench;
pub mod corpus;
pub mod decode;
pub mod engine;
pub mod prompt;
pub mod record;
pub mod report;
pub mod score;
pub mod settings;
pub mod support;
pub mod sweep;
pub mod targets;

use settings::{Explain, Names};

/// The message of `e` worded for the face whose names are `n`, when `e` (or
/// the error it wraps) is one of the library's errors about settings: the
/// facts, and the settings that would fix it. `crop`: how the kept range of
/// a run was chosen (`None` for commands without a model), which decides
/// the fix for too few targets. `None`: `e` names no setting.
pub fn explain(e: &anyhow::Error, n: &dyn Names, crop: Option<targets::crop::CropMode>) -> Option<String> {
    let text = explain_one(e, n, crop)?;
    // The model it is about (a sweep's entry, a list's instance) first, as
    // the error's own chain would print it.
    Some(match e.downcast_ref::<bench::plan::OfModel>() {
        Some(model) => format!("{model}: {text}"),
        None => text,
    })
}

/// [`explain`] without the model.
fn explain_one(e: &anyhow::Error, n: &dyn Names, crop: Option<targets::crop::CropMode>) -> Option<String> {
    // A context capped at the model's trained one: what goes past it.
    let past_training = || match e.downcast_ref::<bench::plan::TrainedCap>() {
        Some(cap) => format!("; {}", cap.explain(n)),
        None => String::new(),
    };
    if let Some(t) = e.downcast_ref::<targets::TooFewTargets>() {
        return Some(t.explain_with(n, crop));
    }
    if let Some(c) = e.downcast_ref::<targets::crop::CropError>() {
        return Some(match c {
            targets::crop::CropError::PastTheEnd { .. } => c.explain(n),
            _ => format!("{}{}", c.explain(n), past_training()),
        });
    }
    if let Some(p) = e.downcast_ref::<bench::PlanError>() {
        return Some(format!("{}{}", p.explain(n), past_training()));
    }
    let explained: Option<&dyn Explain> = None
        .or_else(|| e.downcast_ref::<bench::Invalid>().map(|x| x as &dyn Explain))
        .or_else(|| e.downcast_ref::<bench::OptionsError>().map(|x| x as &dyn Explain))
        .or_else(|| e.downcast_ref::<targets::SpecError>().map(|x| x as &dyn Explain))
        .or_else(|| e.downcast_ref::<settings::ConfigError>().map(|x| x as &dyn Explain))
        .or_else(|| e.downcast_ref::<bench::DecodeError>().map(|x| x as &dyn Explain))
        .or_else(|| e.downcast_ref::<settings::RopeError>().map(|x| x as &dyn Explain))
        .or_else(|| e.downcast_ref::<bench::instances::ListError>().map(|x| x as &dyn Explain))
        .or_else(|| e.downcast_ref::<corpus::CorpusSpecError>().map(|x| x as &dyn Explain))
        .or_else(|| e.downcast_ref::<corpus::CorpusError>().map(|x| x as &dyn Explain))
        .or_else(|| e.downcast_ref::<bench::ReferenceMismatch>().map(|x| x as &dyn Explain))
        .or_else(|| e.downcast_ref::<bench::NotThisRun>().map(|x| x as &dyn Explain))
        .or_else(|| e.downcast_ref::<sweep::OutDirError>().map(|x| x as &dyn Explain))
        .or_else(|| e.downcast_ref::<bench::plan::NoSharedRange>().map(|x| x as &dyn Explain))
        .or_else(|| e.downcast_ref::<sweep::list::ModelListError>().map(|x| x as &dyn Explain))
        .or_else(|| e.downcast_ref::<bench::ladder::LadderError>().map(|x| x as &dyn Explain))
        .or_else(|| e.downcast_ref::<prompt::template::TemplateError>().map(|x| x as &dyn Explain))
        .or_else(|| e.downcast_ref::<sweep::ShardError>().map(|x| x as &dyn Explain))
        .or_else(|| e.downcast_ref::<engine::device::DeviceError>().map(|x| x as &dyn Explain));
    explained.map(|x| x.explain(n))
}
