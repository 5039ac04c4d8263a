//! How a run decodes its answers: one at a time, or N sequences at once over
//! the shared prefix, decided per model before any decoding.

use super::plan::Plan;
use crate::decode::draft::DraftMode;
use crate::engine::model::Model;
use crate::record::run::DecodeMode;
use crate::settings::Named as _;
use crate::settings::{ContextConfig, Explain, KvType, Names, RestoreMode, Setting};

/// llama.cpp's limit on sequences in one context; one holds the prefix.
pub(crate) const MAX_SEQUENCES: usize = 256;

/// llama.cpp rounds a KV cache up to a multiple of this many cells.
pub(crate) const CELL_PADDING: u64 = 256;

/// What the run asks for.
#[derive(Debug, Clone)]
pub struct DecodeOptions {
    /// Sequences answered at once; 1 is one at a time.
    pub parallel: usize,
    /// Also answer one at a time and compare (parallel runs only).
    pub check_sequential: bool,
    /// Generate exactly this many tokens per answer.
    pub fixed_tokens: Option<usize>,
    /// The most bytes the parallel KV cache may take; `None`: 90% of the free
    /// memory where it lives.
    pub kv_memory: Option<u64>,
    /// How each question's changes to the prefix state are undone.
    pub restore: RestoreMode,
    /// The most host memory the prefix snapshot may take; `None`: 90% of the
    /// free main memory.
    pub snapshot_memory: Option<u64>,
    /// Skip generation; only the teacher-forced pass.
    pub forced_only: bool,
    /// Skip the teacher-forced pass.
    pub no_forced: bool,
    /// Where answers' draft tokens come from ([`crate::decode::draft`]).
    pub draft: DraftMode,
    /// The most draft tokens verified in one step.
    pub draft_max: usize,
    /// Also answer every question without drafts, and compare.
    pub check_draft: bool,
    /// Whether the draft mode and the draft length were asked for (a flag
    /// or models.toml), not defaults: one that cannot take effect is refused.
    pub draft_asked: bool,
    pub draft_max_asked: bool,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions {
            parallel: 1,
            check_sequential: false,
            fixed_tokens: None,
            kv_memory: None,
            restore: RestoreMode::default(),
            snapshot_memory: None,
            forced_only: false,
            no_forced: false,
            draft: DraftMode::default(),
            draft_max: crate::decode::draft::DEFAULT_MAX,
            check_draft: false,
            draft_asked: false,
            draft_max_asked: false,
        }
    }
}

/// Where the limit on a parallel KV cache came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemoryLimit {
    /// The limit the run was given, in bytes.
    Given(u64),
    /// 90% of the memory free on this device (bytes free, device).
    Free(u64, String),
}

/// Decoding settings that cannot run. The messages name no command-line
/// flag; the command adds them.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    #[error("a forced-only run generates nothing: it cannot answer in parallel, at a fixed length, twice, or with drafts")]
    ForcedOnlyGeneratesNothing,
    #[error("a draft length sets how many draft tokens a step verifies, and this run drafts nothing")]
    DraftMaxWithoutDrafts,
    /// Answers of a fixed length are throughput work, not copies: they are
    /// never drafted, and the run records no drafts.
    #[error("answers of a fixed length are not drafted")]
    DraftsAtFixedLength,
    #[error("checking against sequential answers needs parallel answers (2 or more sequences)")]
    CheckNeedsParallel,
    #[error("the draft length must be 1 to {max}, not {0}", max = crate::decode::draft::LIMIT_MAX)]
    DraftMax(usize),
    #[error(
        "checking drafted answers against undrafted ones needs drafted answers: a draft mode other than none, one sequence, no fixed length"
    )]
    CheckNeedsDrafts,
    /// A memory limit bounds how many answering sequences fit; one sequence
    /// is never limited by it, so the limit would change nothing.
    #[error("a KV memory limit bounds parallel answering sequences, and this run answers one question at a time")]
    KvMemoryWithoutParallel,
    #[error(
        "llama.cpp holds at most {MAX_SEQUENCES} sequences in one context and one of them holds the file; \
         the largest N is {}", MAX_SEQUENCES - 1
    )]
    TooManySequences { requested: usize },
    #[error("must be at least 1")]
    ZeroParallel,
    #[error("{slots} sequences need a KV cache of {cells} cells ({bytes} bytes), more than the limit")]
    KvDoesNotFit {
        slots: usize,
        cells: u64,
        bytes: u64,
        /// The (K, V) cache types.
        kv: (KvType, KvType),
        limit: MemoryLimit,
        /// The largest number of sequences that fits, when two or more do.
        largest: Option<u64>,
    },
    #[error("a context of {cells} cells needs a KV cache of {bytes} bytes on the GPU, more than the limit")]
    ContextDoesNotFit {
        cells: u64,
        bytes: u64,
        kv: (KvType, KvType),
        /// Bytes free on the GPU, and the GPU's name.
        free: u64,
        device: String,
        /// The largest context, in cells, whose cache fits.
        largest: u64,
    },
    #[error("the prefix snapshot ({restore} restore) would take {bytes} bytes of host memory, more than the limit")]
    SnapshotDoesNotFit {
        restore: RestoreMode,
        bytes: u64,
        limit: MemoryLimit,
        /// The lean snapshot's bytes, when the full one was asked for and
        /// the lean one fits.
        lean_fits: Option<u64>,
        /// The longest prefix, in tokens, whose snapshot fits.
        largest_prefix: u64,
    },
}

/// A byte count as people read it (`1.5 GiB`).
fn size(b: u64) -> String {
    bytesize::ByteSize(b).display().iec().to_string()
}

fn free_text(free: u64, device: &str) -> String {
    format!("90% of the {} free in {device}", size(free))
}

impl MemoryLimit {
    /// The memory a check measured against: what `setting` allowed, or
    /// the share of a device's free memory the checks use.
    fn explain(&self, n: &dyn Names, setting: Setting) -> String {
        match self {
            MemoryLimit::Given(b) => format!("{} {} allows", size(*b), n.name(setting)),
            MemoryLimit::Free(free, device) => free_text(*free, device),
        }
    }
}

impl Explain for DecodeError {
    fn explain(&self, n: &dyn Names) -> String {
        let name = |s| n.name(s);
        let parallel_n = n.set(Setting::Parallel, "N");
        match self {
            DecodeError::ForcedOnlyGeneratesNothing => format!(
                "{} generates nothing; drop {}, {}, {}, {} and {}",
                name(Setting::ForcedOnly),
                name(Setting::Parallel),
                name(Setting::FixedTokens),
                name(Setting::CheckSequential),
                name(Setting::Draft),
                name(Setting::DraftMax)
            ),
            DecodeError::DraftMaxWithoutDrafts => {
                format!("{} with {}: {self}; drop one of them", name(Setting::DraftMax), n.set(Setting::Draft, "none"))
            }
            DecodeError::DraftsAtFixedLength => format!(
                "{} with {}: {self}; drop {} and {}",
                name(Setting::Draft),
                name(Setting::FixedTokens),
                name(Setting::Draft),
                name(Setting::DraftMax)
            ),
            DecodeError::CheckNeedsParallel => format!(
                "{} compares a {} run with sequential answers; add {parallel_n} (N >= 2)",
                name(Setting::CheckSequential),
                name(Setting::Parallel)
            ),
            DecodeError::KvMemoryWithoutParallel => format!(
                "{} bounds the KV cache of {} answering; add {parallel_n} (N >= 2) or drop {}",
                name(Setting::KvMemory),
                name(Setting::Parallel),
                name(Setting::KvMemory)
            ),
            DecodeError::TooManySequences { requested } => format!("{}: {self}", n.set(Setting::Parallel, &requested.to_string())),
            DecodeError::ZeroParallel => format!("{}: {self}", n.set(Setting::Parallel, "0")),
            DecodeError::DraftMax(k) => format!("{}: {self}", n.set(Setting::DraftMax, &k.to_string())),
            DecodeError::CheckNeedsDrafts => format!(
                "{} compares drafted answers with undrafted ones; it needs {} or lookup, and no {}, {} or {}",
                name(Setting::CheckDraft),
                n.set(Setting::Draft, "truth"),
                name(Setting::Parallel),
                name(Setting::FixedTokens),
                name(Setting::ForcedOnly)
            ),
            DecodeError::KvDoesNotFit { slots, cells, bytes, kv, limit, largest } => {
                let largest = match largest {
                    Some(n) => format!("the largest N that fits is {n}"),
                    None => format!("not even two sequences fit; run without {}", name(Setting::Parallel)),
                };
                format!(
                    "{} needs a KV cache of {cells} cells ({} at K {} / V {}), more than the {}; {largest}",
                    n.set(Setting::Parallel, &slots.to_string()),
                    size(*bytes),
                    kv.0.as_str(),
                    kv.1.as_str(),
                    limit.explain(n, Setting::KvMemory)
                )
            }
            DecodeError::ContextDoesNotFit { cells, bytes, kv, free, device, largest } => format!(
                "a context of {cells} cells needs a KV cache of {} on the GPU at K {} / V {}, more than the {}; \
                 a context of at most {largest} cells fits ({}), or offload fewer layers ({}){}",
                size(*bytes),
                kv.0.as_str(),
                kv.1.as_str(),
                free_text(*free, device),
                name(Setting::Ctx),
                name(Setting::GpuLayers),
                match kv.0.is_quantized() && kv.1.is_quantized() {
                    true => String::new(),
                    false => format!(", or use {}", n.set(Setting::Kv, "q8_0")),
                }
            ),
            DecodeError::SnapshotDoesNotFit { restore, bytes, limit, lean_fits, largest_prefix } => {
                let fits = match lean_fits {
                    Some(lean) => format!("{} ({}) fits", n.set(Setting::Restore, "lean"), size(*lean)),
                    None if *largest_prefix == 0 => "no prefix fits".to_string(),
                    None => format!("a prefix of at most {largest_prefix} tokens fits ({})", name(Setting::MaxPrefixTokens)),
                };
                format!(
                    "the prefix snapshot ({}) would take {}, more than the {}; {fits}",
                    n.set(Setting::Restore, &restore.to_string()),
                    size(*bytes),
                    limit.explain(n, Setting::SnapshotMemory)
                )
            }
        }
    }
}

impl DecodeOptions {
    /// With these drafts: a mode and a length where given, else the
    /// defaults ([`DraftMode::default`], [`crate::decode::draft::DEFAULT_MAX`]).
    pub fn drafting(mut self, draft: Option<DraftMode>, draft_max: Option<usize>) -> Self {
        (self.draft_asked, self.draft_max_asked) = (draft.is_some(), draft_max.is_some());
        self.draft = draft.unwrap_or_default();
        self.draft_max = draft_max.unwrap_or(crate::decode::draft::DEFAULT_MAX);
        self
    }

    /// Refuses combinations that mean nothing.
    pub fn validate(&self) -> Result<(), DecodeError> {
        let drafts_asked = (self.draft_asked && self.draft != DraftMode::None) || self.draft_max_asked;
        if self.forced_only && (self.parallel > 1 || self.fixed_tokens.is_some() || self.check_sequential || drafts_asked) {
            return Err(DecodeError::ForcedOnlyGeneratesNothing);
        }
        if self.draft_max_asked && self.draft == DraftMode::None {
            return Err(DecodeError::DraftMaxWithoutDrafts);
        }
        if self.fixed_tokens.is_some() && drafts_asked {
            return Err(DecodeError::DraftsAtFixedLength);
        }
        if self.check_sequential && self.parallel < 2 {
            return Err(DecodeError::CheckNeedsParallel);
        }
        if self.kv_memory.is_some() && self.parallel < 2 {
            return Err(DecodeError::KvMemoryWithoutParallel);
        }
        if !(1..=crate::decode::draft::LIMIT_MAX).contains(&self.draft_max) {
            return Err(DecodeError::DraftMax(self.draft_max));
        }
        if self.check_draft && (self.draft == DraftMode::None || self.parallel > 1 || self.fixed_tokens.is_some() || self.forced_only) {
            return Err(DecodeError::CheckNeedsDrafts);
        }
        if self.parallel == 0 {
            return Err(DecodeError::ZeroParallel);
        }
        // Before any model is loaded, though only a model decides how many run.
        if self.parallel > MAX_SEQUENCES - 1 {
            return Err(DecodeError::TooManySequences { requested: self.parallel });
        }
        Ok(())
    }

    /// The run's [`Decoding`] for this model and plan. For a run about to
    /// start (`to_run`), the memory is checked and a fallback or a changed
    /// cache is noted on stderr; otherwise (a sweep deciding whether a
    /// finished run may be kept) neither.
    pub fn decoding(&self, model: &Model, plan: &Plan, cfg: &ContextConfig, to_run: bool) -> Result<Decoding, DecodeError> {
        if to_run {
            self.check_snapshot_memory(model, plan, cfg)?;
        }
        let requested = if self.forced_only { 1 } else { self.parallel };
        let memory = to_run.then_some(self.kv_memory);
        let (slots, fallback) = slots(model, plan, cfg, requested, memory)?;
        if to_run && slots == 1 {
            check_device_kv(model, cfg)?;
        }
        let mut notes = Vec::new();
        if let Some(why) = fallback.as_ref().filter(|_| to_run) {
            notes.push(format!("note: {requested} parallel sequences asked for: answering one question at a time ({why})"));
        }
        let swa_full = slots > 1 && !cfg.swa_full && !window_cache_holds(model, plan, cfg, slots);
        if swa_full && to_run {
            notes.push(format!(
                "note: {slots} parallel sequences: keeping whole sequences in the sliding-window cache (as swa-full on): \
                 the window-only cache cannot hold the shared prefix and {slots} answers"
            ));
        }
        let whole_window = cfg.swa_full || swa_full;
        let (draft, draft_fallback) = self.draft_mode(model, plan, whole_window);
        if let Some(why) = draft_fallback.as_ref().filter(|_| to_run) {
            notes.push(format!("note: answering without drafts ({why})"));
        }
        Ok(Decoding {
            draft,
            draft_max: self.draft_max,
            draft_fallback,
            check_draft: self.check_draft && draft != DraftMode::None,
            forced_only: self.forced_only,
            no_forced: self.no_forced,
            slots,
            check_sequential: self.check_sequential && slots > 1,
            fallback,
            swa_full,
            fixed_tokens: self.fixed_tokens,
            restore: self.restore,
            notes,
        })
    }
}

impl DecodeOptions {
    /// The draft mode that runs, and why it is none where one was asked for:
    /// drafts are only exact where rejected tokens can be rolled back.
    fn draft_mode(&self, model: &Model, plan: &Plan, whole_window: bool) -> (DraftMode, Option<String>) {
        if self.draft == DraftMode::None || self.forced_only || self.fixed_tokens.is_some() {
            return (DraftMode::None, None);
        }
        let why = if model.recurrent_or_hybrid {
            "the model's recurrent state cannot be rolled back past rejected draft tokens"
        } else if model.n_swa > 0 && !whole_window {
            "the window-only sliding-window cache may reuse cells a rejected draft needs back; swa-full on keeps them"
        } else if plan.reasoning_markers.is_some() && plan.think_budget.is_some() {
            "thinking on: the reasoning's closing text is fed at its budget"
        } else {
            return (self.draft, None);
        };
        (DraftMode::None, Some(why.to_string()))
    }
}

/// Refuses a one-sequence context whose KV cache would not fit in 90% of
/// the GPU's free memory (after the weights were loaded), naming the
/// longest context that fits. Parallel contexts are checked by [`slots`].
/// The prefix snapshot is copied to main memory and is checked there.
fn check_device_kv(model: &Model, cfg: &ContextConfig) -> Result<(), DecodeError> {
    if cfg.gpu_layers == 0 {
        return Ok(());
    }
    let Some(gpu) = crate::engine::device::gpu().filter(|d| d.free > 0) else {
        return Ok(());
    };
    let usable = gpu.free / 10 * 9;
    let bytes_at = |n_ctx: u64| model.device_kv_bytes(&ContextConfig { n_ctx: n_ctx as u32, ..cfg.clone() });
    let bytes = bytes_at(cfg.n_ctx as u64);
    if bytes <= usable {
        return Ok(());
    }
    let (mut lo, mut hi) = (0u64, cfg.n_ctx as u64);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        match bytes_at(mid) <= usable {
            true => lo = mid,
            false => hi = mid - 1,
        }
    }
    Err(DecodeError::ContextDoesNotFit {
        cells: cfg.n_ctx as u64,
        bytes,
        kv: (cfg.type_k, cfg.type_v),
        free: gpu.free,
        device: gpu.label(),
        largest: lo,
    })
}

impl DecodeOptions {
    /// Refuses a run whose prefix snapshot would not fit in host memory (the
    /// limit given, else 90% of the free main memory), naming what fits.
    fn check_snapshot_memory(&self, model: &Model, plan: &Plan, cfg: &ContextConfig) -> Result<(), DecodeError> {
        let limit = match self.snapshot_memory {
            Some(b) => (b, MemoryLimit::Given(b)),
            None => match crate::engine::free_memory(false) {
                Some((free, device)) => (free / 10 * 9, MemoryLimit::Free(free, device)),
                None => return Ok(()),
            },
        };
        let shape = model.state_shape(cfg.type_k, cfg.type_v);
        let prefix = plan.prefix_tokens.len() as u64;
        let bytes = shape.snapshot_bytes(prefix, self.restore);
        if bytes <= limit.0 {
            return Ok(());
        }
        let lean = shape.snapshot_bytes(prefix, RestoreMode::Lean);
        // The snapshot grows with the prefix: the longest that fits, by bisection.
        let (mut lo, mut hi) = (0u64, prefix);
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            match shape.snapshot_bytes(mid, self.restore) <= limit.0 {
                true => lo = mid,
                false => hi = mid - 1,
            }
        }
        Err(DecodeError::SnapshotDoesNotFit {
            restore: self.restore,
            bytes,
            limit: limit.1,
            lean_fits: (self.restore == RestoreMode::Full && lean <= limit.0).then_some(lean),
            largest_prefix: lo,
        })
    }
}

/// How a run decodes its answers, decided before decoding.
#[derive(Debug, Clone, Default)]
pub struct Decoding {
    /// Skip generation; only the teacher-forced pass.
    pub forced_only: bool,
    /// Skip the teacher-forced pass.
    pub no_forced: bool,
    /// Sequences answered at once; 1 is sequential.
    pub slots: usize,
    /// Why a requested parallel run runs sequentially.
    pub fallback: Option<String>,
    /// Parallel slots need the whole sequence in a sliding-window model's
    /// cache (see [`window_cache_holds`]).
    pub swa_full: bool,
    /// Answer every question one at a time as well, and compare.
    pub check_sequential: bool,
    /// Generate exactly this many tokens per answer.
    pub fixed_tokens: Option<usize>,
    /// How each question's changes to the prefix state are undone.
    pub restore: RestoreMode,
    /// The draft mode that runs (none where it cannot be exact).
    pub draft: DraftMode,
    pub draft_max: usize,
    /// Why drafts were asked for and not used.
    pub draft_fallback: Option<String>,
    /// Answer every question without drafts as well, and compare.
    pub check_draft: bool,
    /// What the user should know about the decoding decided for a run (a
    /// fallback taken), for the run to pass on to its notes.
    pub notes: Vec<String>,
}

impl Decoding {
    pub fn parallel(&self) -> bool {
        self.slots > 1
    }

    /// The run file's `decode_mode`.
    pub fn mode(&self) -> DecodeMode {
        if self.forced_only {
            DecodeMode::ForcedOnly
        } else if self.parallel() {
            DecodeMode::Parallel
        } else {
            DecodeMode::Sequential
        }
    }

    /// The context of this run: with N slots, one unified KV cache of
    /// prefix + N × (question + answer budget) cells and N + 1 sequences.
    pub fn context(&self, mut cfg: ContextConfig, plan: &Plan) -> ContextConfig {
        if self.parallel() {
            cfg.n_ctx = parallel_cells(plan, self.slots) as u32;
            cfg.n_seq = self.slots as u32 + 1;
            cfg.kv_unified = true;
            cfg.swa_full |= self.swa_full;
        }
        cfg
    }
}

/// Whether a sliding-window model's window-only cache can hold the prefix and
/// `slots` answers at once. llama.cpp sizes that cache at n_swa × sequences +
/// n_ubatch cells (rounded up to 256) and reuses a cell that slid out of the
/// window only while one sequence holds it; the prefix's cells are shared by
/// every slot, so none of them can be reused and all must fit.
fn window_cache_holds(model: &Model, plan: &Plan, cfg: &ContextConfig, slots: usize) -> bool {
    if model.n_swa == 0 {
        return true;
    }
    let window = (model.n_swa as u64 * (slots as u64 + 1) + cfg.n_ubatch as u64).div_ceil(CELL_PADDING) * CELL_PADDING;
    parallel_cells(plan, slots) as u64 <= window
}

fn parallel_cells(plan: &Plan, slots: usize) -> usize {
    plan.prefix_tokens.len() + slots * plan.per_sequence
}

/// How many of `requested` parallel sequences run for this model and plan:
/// at most one per target; one, with the reason, where the model's memory
/// cannot share a prefix between sequences; an error naming the largest N
/// that fits when the KV cache would not fit in memory (`memory`: `None`
/// unchecked, `Some(None)` the free memory, `Some(Some(b))` a given limit).
fn slots(
    model: &Model,
    plan: &Plan,
    cfg: &ContextConfig,
    requested: usize,
    memory: Option<Option<u64>>,
) -> Result<(usize, Option<String>), DecodeError> {
    if requested <= 1 {
        return Ok((1, None));
    }
    // More than llama.cpp's limit was refused by `DecodeOptions::validate`.
    if plan.reasoning_markers.is_some() {
        return Ok((1, Some("thinking on: the reasoning is closed at its budget one sequence at a time".into())));
    }
    if model.recurrent_or_hybrid {
        return Ok((1, Some("the model's recurrent or hybrid memory cannot share one prefix between sequences".into())));
    }
    let slots = requested.min(plan.targets.len()).max(1);
    if slots == 1 {
        return Ok((1, Some("there is only one target".into())));
    }
    let per_cell = model.kv_bytes_per_cell(cfg.type_k, cfg.type_v).max(1);
    let cells = (parallel_cells(plan, slots) as u64).div_ceil(CELL_PADDING) * CELL_PADDING;
    let limit = match memory {
        None => None,
        Some(Some(b)) => Some((b, MemoryLimit::Given(b))),
        // Leave a tenth for llama.cpp's compute buffers and everything else.
        Some(None) => crate::engine::free_memory(cfg.gpu_layers > 0).map(|(free, device)| (free / 10 * 9, MemoryLimit::Free(free, device))),
    };
    if let Some((usable, limit)) = limit
        && cells * per_cell > usable
    {
        let fit = (usable / per_cell / CELL_PADDING * CELL_PADDING).saturating_sub(plan.prefix_tokens.len() as u64)
            / plan.per_sequence.max(1) as u64;
        return Err(DecodeError::KvDoesNotFit {
            slots,
            cells,
            bytes: cells * per_cell,
            kv: (cfg.type_k, cfg.type_v),
            limit,
            largest: (fit >= 2).then_some(fit),
        });
    }
    Ok((slots, None))
}
