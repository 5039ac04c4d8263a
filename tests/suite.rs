//! The integration tests, as one test binary: each file of tests/ is one
//! module of it. One binary instead of one per file saves linking llama.cpp
//! and every dependency into 29 executables (recompiling the tests took 1m29s
//! here against 2m43s), and one process holds the one model lock
//! (`common::serial`) for all of them.
//! Run one file's tests with `cargo test --release --test suite FILE::`.

mod common;

mod anchor;
mod architecture;
mod ask;
mod atomic_writes;
mod bench_cli;
mod blank_lines;
mod cli_model_free;
mod compare;
mod composition;
mod controls;
mod draft;
mod engine;
mod extract;
mod face;
mod forced;
mod hardening;
mod hub;
mod hybrid;
mod kld;
mod kld_stats;
mod kv_list;
mod ladder;
mod languages;
mod matrix;
mod parallel;
mod policy;
mod qwen_coder;
mod real_corpus;
mod report;
mod resume;
mod rope;
mod sampling;
mod split;
mod sweep_params;
mod template_fidelity;
mod think;
mod timing_model;
