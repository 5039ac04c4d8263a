//! Running a benchmark: the library behind `posrecall bench` and `matrix`.
//!
//! A run is a short sequence of steps, each in its own file:
//! [`plan`] decides everything before decoding (probe, kept range, targets,
//! context size); [`decoding`] decides how the answers are decoded (one at a
//! time or N at once) and the context that needs; [`execute`] evaluates the
//! prefix once and runs the passes; [`record`] builds the run file. The
//! commands turn flags into [`BenchOptions`] and print; nothing here knows a
//! flag.

pub mod decoding;
pub mod execute;
pub mod ladder;
pub mod plan;
pub mod record;

/// The most tokens one answer may generate.
pub const MAX_NEW_TOKENS: usize = 131_072;
/// The most CPU threads a run may ask for.
pub const MAX_THREADS: usize = 1_024;

pub use decoding::{DecodeError, DecodeOptions, Decoding, MemoryLimit};
pub use execute::{ExecOptions, Executed, check_reference, execute};
pub use plan::{Plan, PlanError, PlanOptions, plan};
pub use record::RunSpec;

use crate::settings::{ContextConfig, FlashAttn, KvType};
use crate::engine::model::Model;
use anyhow::Result;
use std::path::PathBuf;

/// The context a run asks for, before the plan sizes it.
#[derive(Debug, Clone)]
pub struct ContextSettings {
    /// (K, V) cache types.
    pub kv: (KvType, KvType),
    pub flash_attn: FlashAttn,
    pub swa_full: bool,
    /// `None`: every core.
    pub threads: Option<i32>,
    pub gpu_layers: u32,
}

impl Default for ContextSettings {
    /// The method's defaults: q8_0 K and V, nothing offloaded (the commands
    /// offload what fits on a GPU build: [`default_gpu_layers`]).
    fn default() -> Self {
        ContextSettings {
            kv: (KvType::Q8_0, KvType::Q8_0),
            flash_attn: FlashAttn::Auto,
            swa_full: false,
            threads: None,
            gpu_layers: 0,
        }
    }
}

impl ContextSettings {
    /// A sequential run's context of `n_ctx` cells.
    pub fn config(&self, n_ctx: u32) -> ContextConfig {
        ContextConfig::sequential(n_ctx, self.kv, self.flash_attn, self.swa_full, self.threads, self.gpu_layers)
    }
}

/// Everything one benchmark run reads besides the model and the corpus.
#[derive(Debug, Clone, Default)]
pub struct BenchOptions {
    pub plan: PlanOptions,
    pub context: ContextSettings,
    pub decode: DecodeOptions,
    /// The build label in reports; `None`: the model file's name.
    pub build: Option<String>,
    /// Also ask every question with no file in the context.
    pub closed_book: bool,
    /// Keep the evaluated prefix state in this folder.
    pub prefix_cache: Option<PathBuf>,
    /// Ask at each of these lengths, from one evaluation of the file.
    pub lengths: Option<ladder::Lengths>,
    /// The pass rate the effective length keeps at every length up to it.
    pub effective_at: f64,
}

impl BenchOptions {
    /// Refuses settings that cannot run, before any model is loaded.
    pub fn validate(&self) -> Result<()> {
        self.plan.target.validate()?;
        self.context.config(crate::settings::CtxSize::MIN).validate()?;
        self.decode.validate()?;
        Ok(())
    }
}

/// A planned run: what it asks, how it decodes, and its context.
pub struct Prepared {
    pub plan: Plan,
    pub decoding: Decoding,
    pub cfg: ContextConfig,
}

/// How a planned run decodes for these context settings, and its context.
/// `to_run`: see [`DecodeOptions::decide`].
pub fn decide(
    model: &Model,
    plan: &Plan,
    context: &ContextSettings,
    decode: &DecodeOptions,
    to_run: bool,
) -> Result<(ContextConfig, Decoding)> {
    let sequential = context.config(plan.n_ctx);
    let decoding = decode.decide(model, plan, &sequential, to_run)?;
    Ok((decoding.context(sequential, plan), decoding))
}

/// Plans a run of `model` on `src` and decides its decoding.
pub fn prepare(model: &Model, src: &crate::corpus::Source, opts: &BenchOptions) -> Result<Prepared> {
    let plan = plan(model, src, &opts.plan)?;
    let (cfg, decoding) = decide(model, &plan, &opts.context, &opts.decode, true)?;
    Ok(Prepared { plan, decoding, cfg })
}

/// Layers offloaded when none are asked for: on a build with a GPU backend,
/// as many as fit in the device's memory (resolved when the model is loaded,
/// see [`crate::engine::device::resolve_layers`]), else none.
pub fn default_gpu_layers() -> u32 {
    match crate::engine::backend() {
        Ok(b) if b.supports_gpu_offload() => crate::engine::device::GPU_LAYERS_AUTO,
        _ => 0,
    }
}
