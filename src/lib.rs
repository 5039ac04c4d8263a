//! posrecall: positional, verbatim recall of long code by local LLMs.
//!
//! The data flows one way through the modules, and each stage has its own file:
//! [`corpus`] (read a source file, find function declarations) → [`targets`]
//! (crop, eligibility, ground truth, depth-stratified sampling) → [`prompt`]
//! (the probes) → [`engine`] (llama.cpp, in-process) → [`score`] (parse and
//! align answers) → [`run`] (the run file) → [`report`] (what people read).

pub mod ask;
pub mod bench;
pub mod cli;
pub mod commands;
pub mod corpus;
pub mod crop;
pub mod draft;
pub mod engine;
pub mod forced;
pub mod fsutil;
pub mod hub;
pub mod keys;
pub mod kld;
pub mod logits;
pub mod progress;
pub mod prompt;
pub mod reasoning;
pub mod reference;
pub mod report;
pub mod run;
pub mod score;
pub mod settings;
pub mod stats;
pub mod sweep;
pub mod targets;
pub mod template;
