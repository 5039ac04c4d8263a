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
