//! One llama.cpp context: prefill, snapshot, restore, greedy generation.
//!
//! The prefix (file) is evaluated once and snapshot; every question starts
//! from that identical state. How a question's changes are undone is the
//! session's [`RestoreMode`]:
//!
//! - `full` copies the whole sequence state out once (`state_seq_get`) and
//!   writes all of it back before every question.
//! - `lean` (the default) undoes only what a question can change. The cells
//!   of full-attention layers after the prefix are removed (`seq_rm` from the
//!   prefix end), which gives back exactly the prefix's cells. The parts that
//!   cannot be rolled back that way are saved once as llama.cpp's partial
//!   sequence state (`LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY`) and written back:
//!   the sliding-window layers' cache (with the window-only cache, a
//!   question's cells reuse the cells of prefix positions that slid out of
//!   its window) and the recurrent layers' state (one state per sequence,
//!   overwritten by every token). A model with neither has no partial
//!   snapshot at all. The partial state is written back first, so that a
//!   hybrid model's recurrent part already stands at the prefix end when
//!   `seq_rm` runs (llama.cpp refuses to cut a recurrent state short, and
//!   then removes nothing).
//!
//! Both are exact: the tests compare every restored answer with a fresh
//! context's on plain, sliding-window and hybrid recurrent models.

use super::model::Model;
use crate::draft::Drafter;
use crate::settings::{ContextConfig, FlashAttn, KvType, RestoreMode, RopeScaling, StepStats};
use anyhow::{Context, Result, anyhow, bail};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::{KvCacheType, LlamaContextParams, RopeScalingType};
use llama_cpp_2::context::session::{LlamaStateSeqFlags, SeqState};
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::logit_bias::LlamaLogitBias;
use std::num::NonZeroU32;
use std::time::Instant;

/// The one place a run's context parameters become llama.cpp's.
fn llama_params(cfg: &ContextConfig) -> LlamaContextParams {
    let flash = match cfg.flash_attn {
        FlashAttn::Auto => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_AUTO,
        FlashAttn::On => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_ENABLED,
        FlashAttn::Off => llama_cpp_sys_2::LLAMA_FLASH_ATTN_TYPE_DISABLED,
    };
    let mut params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(cfg.n_ctx))
        .with_n_batch(cfg.n_batch)
        .with_n_ubatch(cfg.n_ubatch)
        .with_n_seq_max(cfg.n_seq.max(1))
        .with_kv_unified(cfg.kv_unified)
        .with_n_threads(cfg.threads)
        .with_n_threads_batch(cfg.threads)
        .with_type_k(kv_cache_type(cfg.type_k))
        .with_type_v(kv_cache_type(cfg.type_v))
        .with_flash_attention_policy(flash)
        .with_swa_full(cfg.swa_full)
        // Without this, llama.cpp's own timings read 0.
        .with_no_perf(false);
    // Each RoPE setting not given stays llama.cpp's "from the model".
    let rope = &cfg.rope;
    if let Some(s) = rope.scaling {
        params = params.with_rope_scaling_type(match s {
            RopeScaling::None => RopeScalingType::None,
            RopeScaling::Linear => RopeScalingType::Linear,
            RopeScaling::Yarn => RopeScalingType::Yarn,
        });
    }
    if let Some(b) = rope.freq_base {
        params = params.with_rope_freq_base(b);
    }
    if let Some(s) = rope.freq_scale {
        params = params.with_rope_freq_scale(s);
    }
    if let Some(n) = rope.yarn_orig_ctx {
        params = params.with_yarn_orig_ctx(n);
    }
    params
}

pub(super) fn kv_cache_type(t: KvType) -> KvCacheType {
    match t {
        KvType::F32 => KvCacheType::F32,
        KvType::F16 => KvCacheType::F16,
        KvType::Bf16 => KvCacheType::BF16,
        KvType::Q8_0 => KvCacheType::Q8_0,
        KvType::Q5_1 => KvCacheType::Q5_1,
        KvType::Q5_0 => KvCacheType::Q5_0,
        KvType::Q4_1 => KvCacheType::Q4_1,
        KvType::Q4_0 => KvCacheType::Q4_0,
        KvType::Iq4Nl => KvCacheType::IQ4_NL,
    }
}

/// When generation stops.
#[derive(Debug, Clone, Copy)]
pub struct Limit {
    /// At most this many new tokens.
    pub max_new: usize,
    /// Generate exactly `max_new` tokens: end-of-generation and the stop
    /// check are ignored (throughput measurement on equal work).
    pub fixed: bool,
}

/// The greedy sampler of a generation. Under a fixed length, end-of-generation
/// tokens are masked (as llama.cpp's `ignore_eos` does), so an answer goes on
/// with the best other token.
pub(super) fn greedy_sampler(model: &Model, limit: Limit) -> LlamaSampler {
    if !limit.fixed {
        return LlamaSampler::greedy();
    }
    let vocab = model.model.vocab();
    let n = model.model.n_vocab();
    let masked: Vec<LlamaLogitBias> =
        (0..n).map(LlamaToken).filter(|&t| vocab.is_eog(t)).map(|t| LlamaLogitBias::new(t, f32::NEG_INFINITY)).collect();
    LlamaSampler::chain_simple([LlamaSampler::logit_bias(n, &masked), LlamaSampler::greedy()])
}

/// One generated answer.
#[derive(Debug, Clone)]
pub struct Generation {
    /// The answer's text; bytes that were not UTF-8 became U+FFFD.
    pub text: String,
    pub tokens: Vec<LlamaToken>,
    /// Query evaluation plus generation, in milliseconds.
    pub ms: f64,
    /// Whether the generated bytes were not valid UTF-8 (a token can end in
    /// the middle of a character), so `text` holds replacement characters.
    pub invalid_utf8: bool,
    /// A drafted answer's drafts: filled here for parallel answers; a
    /// sequential answer's drafter is its caller's, which fills it.
    pub draft: Option<crate::draft::DraftStats>,
}

impl Generation {
    /// The answer made of `bytes`, in `tokens`, after `ms` milliseconds.
    pub(super) fn new(bytes: &[u8], tokens: Vec<LlamaToken>, ms: f64) -> Generation {
        Generation {
            text: String::from_utf8_lossy(bytes).into_owned(),
            tokens,
            ms,
            invalid_utf8: std::str::from_utf8(bytes).is_err(),
            draft: None,
        }
    }
}

/// A context over one model, holding at most one snapshot.
pub struct Session<'m> {
    pub ctx: LlamaContext<'m>,
    pub(super) model: &'m Model,
    pub(super) n_batch: usize,
    /// Tokens in the evaluated prefix (positions 0..prefix_len).
    pub(super) prefix_len: usize,
    /// Sequences in the context (the prefix is sequence 0).
    pub(super) n_seq: u32,
    /// The sequence [`Session::generate`] and [`Session::force`] extend.
    seq: i32,
    /// Where generation's decode steps spent their time, summed over calls.
    pub steps: StepStats,
    /// How [`Session::restore`] works.
    restore_mode: RestoreMode,
    /// The snapshot and the prefix length it holds.
    snapshot: Option<(Snapshot, usize)>,
    /// A span an answer must close within a budget of tokens (a thinking
    /// model's reasoning); [`Session::generate`] closes it when the budget is spent.
    pub span_budget: Option<SpanBudget>,
    /// The texts of the template's reasoning markers: a control token that
    /// spells part of one is kept in an answer's text (see [`super::model::answer_piece`]).
    pub marker_texts: Vec<String>,
    /// The sliding-window cache keeps whole sequences (see
    /// [`Session::drafts_roll_back`]).
    swa_full: bool,
}

/// What [`Session::snapshot`] keeps (see the module's notes).
enum Snapshot {
    /// The whole sequence state.
    Full(SeqState),
    /// The sliding-window and recurrent parts; none for a model with only
    /// full-attention layers.
    Lean(Option<SeqState>),
}

impl Snapshot {
    fn byte_len(&self) -> usize {
        match self {
            Snapshot::Full(s) | Snapshot::Lean(Some(s)) => s.byte_len(),
            Snapshot::Lean(None) => 0,
        }
    }
}

/// A point of the evaluated prefix to come back to ([`Session::checkpoint`]).
pub struct Checkpoint {
    state: Snapshot,
    len: usize,
}

impl Checkpoint {
    /// The prefix tokens it stands after.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it stands before any token.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes it keeps.
    pub fn byte_len(&self) -> usize {
        self.state.byte_len()
    }
}

/// A prefix state that another context over the same model and KV types can
/// adopt ([`Session::set_snapshot`]): the whole sequence state and the prefix
/// length.
pub struct PortableSnapshot(SeqState, usize);

impl PortableSnapshot {
    pub fn byte_len(&self) -> usize {
        self.0.byte_len()
    }
}

/// The most tokens an answer that begins with `bytes` may take: `max_new`
/// (the answer's budget plus the span's), less the span's budget once the
/// answer shows it never opens the span; it has no reasoning to spend it on.
pub(super) fn answer_cap(span: Option<&SpanBudget>, max_new: usize, bytes: &[u8]) -> usize {
    match span {
        Some(b) if b.never_opened(bytes) => max_new.saturating_sub(b.budget).max(1),
        _ => max_new,
    }
}

/// A span the answer opens (or the prompt opened) and must close within
/// `budget` generated tokens: when the budget is spent and the span is still
/// open, `close` is fed as if generated, and generation goes on after it.
#[derive(Debug, Clone)]
pub struct SpanBudget {
    pub budget: usize,
    /// The text that opens the span at the start of an answer.
    pub open: String,
    /// The text that closes it, and its tokens (what is fed).
    pub close_text: String,
    pub close: Vec<LlamaToken>,
    /// The prompt ends inside the span (the template opened it).
    pub opened_in_prompt: bool,
}

impl SpanBudget {
    /// Whether an answer that begins with `bytes` has shown that it does not
    /// open the span (and the prompt did not): its start is neither the
    /// opening text nor on the way to it.
    fn never_opened(&self, bytes: &[u8]) -> bool {
        if self.opened_in_prompt {
            return false;
        }
        let text = String::from_utf8_lossy(bytes);
        let t = text.trim_start();
        !t.is_empty() && !t.starts_with(&self.open) && !self.open.starts_with(t)
    }

    /// Whether an answer of `n` tokens and text `bytes` must be closed now.
    fn due(&self, n: usize, bytes: &[u8]) -> bool {
        if n < self.budget || self.close.is_empty() {
            return false;
        }
        let text = String::from_utf8_lossy(bytes);
        let opened = self.opened_in_prompt || text.trim_start().starts_with(&self.open);
        opened && !text.contains(&self.close_text)
    }
}

impl<'m> Session<'m> {
    pub fn new(model: &'m Model, cfg: &ContextConfig) -> Result<Session<'m>> {
        cfg.validate()?;
        let ctx = model
            .model
            .new_context(super::backend()?, llama_params(cfg))
            .with_context(|| {
                format!(
                    "llama.cpp could not create a context of {} tokens with K {} / V {} (out of memory, or a KV type this model or backend does not support)",
                    cfg.n_ctx,
                    cfg.type_k.as_str(),
                    cfg.type_v.as_str()
                )
            })?;
        Ok(Session {
            ctx,
            model,
            n_batch: cfg.n_batch as usize,
            prefix_len: 0,
            n_seq: cfg.n_seq.max(1),
            seq: 0,
            steps: StepStats::default(),
            restore_mode: RestoreMode::default(),
            snapshot: None,
            span_budget: None,
            marker_texts: Vec::new(),
            swa_full: cfg.swa_full,
        })
    }

    /// Sets how [`Session::restore`] works; takes effect at the next
    /// [`Session::snapshot`].
    pub fn set_restore_mode(&mut self, mode: RestoreMode) {
        self.restore_mode = mode;
    }

    /// Whether the model has a part that `seq_rm` cannot roll back: sliding-
    /// window layers or recurrent ones.
    fn has_partial_state(&self) -> bool {
        self.model.n_swa > 0 || self.model.recurrent_or_hybrid
    }

    /// Evaluates `tokens` at positions 0.. in `n_batch` chunks; `progress`
    /// gets the number of tokens done after each chunk.
    pub fn prefill(&mut self, tokens: &[LlamaToken], mut progress: impl FnMut(usize)) -> Result<()> {
        self.ctx.clear_kv_cache();
        self.snapshot = None;
        self.seq = 0;
        self.decode_at(tokens, 0, self.n_batch, false, &mut progress).context("prefill failed")?;
        self.prefix_len = tokens.len();
        Ok(())
    }

    /// Decodes `tokens` at positions `start..` in chunks of `n_batch` (the
    /// first one `first` tokens at most); with `logits_last` the last token's
    /// logits are kept for sampling.
    fn decode_at(
        &mut self,
        tokens: &[LlamaToken],
        start: usize,
        first: usize,
        logits_last: bool,
        progress: &mut dyn FnMut(usize),
    ) -> Result<()> {
        let mut batch = LlamaBatch::new(self.n_batch, 1);
        let mut done = 0;
        let head = first.clamp(1, self.n_batch).min(tokens.len());
        let chunks = std::iter::once(&tokens[..head]).chain(tokens[head..].chunks(self.n_batch));
        for chunk in chunks.filter(|c| !c.is_empty()) {
            batch.clear();
            for (i, &tok) in chunk.iter().enumerate() {
                let pos = start + done + i;
                let last = done + i + 1 == tokens.len();
                batch.add(tok, pos as i32, &[self.seq], logits_last && last)?;
            }
            self.ctx.decode(&mut batch).with_context(|| format!("llama.cpp decode failed at position {}", start + done))?;
            done += chunk.len();
            progress(done);
        }
        // A GPU computes after decode returns: wait for it, so that the
        // prefill's and the question's times are the device's work.
        self.ctx.synchronize();
        Ok(())
    }

    /// The size of the whole context's state as llama.cpp would save it
    /// (counted, not written).
    pub fn state_bytes(&self) -> usize {
        self.ctx.get_state_size()
    }

    /// Saves the evaluated prefix's state as the session's [`RestoreMode`]
    /// asks; returns the bytes kept (0 for a lean snapshot of a model with
    /// only full-attention layers).
    pub fn snapshot(&mut self) -> Result<usize> {
        let snapshot = self.capture()?;
        let bytes = snapshot.byte_len();
        self.snapshot = Some((snapshot, self.prefix_len));
        Ok(bytes)
    }

    /// The evaluated prefix's state, kept as the session's [`RestoreMode`] asks.
    fn capture(&self) -> Result<Snapshot> {
        Ok(match self.restore_mode {
            RestoreMode::Full => Snapshot::Full(self.seq_state(LlamaStateSeqFlags::empty())?),
            RestoreMode::Lean => Snapshot::Lean(match self.has_partial_state() {
                true => Some(self.seq_state(LlamaStateSeqFlags::PARTIAL_ONLY)?),
                false => None,
            }),
        })
    }

    /// Evaluates `tokens` after the evaluated prefix, which they lengthen
    /// (the snapshot, now of a shorter prefix, is dropped); `progress` gets
    /// the number of tokens done after each chunk. A length ladder evaluates
    /// each window as the previous one's continuation this way.
    pub fn extend(&mut self, tokens: &[LlamaToken], mut progress: impl FnMut(usize)) -> Result<()> {
        self.snapshot = None;
        self.seq = 0;
        // The chunks end where a prefill from position 0 would end them (at
        // multiples of n_batch), so each token after the first chunk is
        // evaluated in the batch a plain prefill of the longer prefix puts it
        // in: batch shape can change the rounding of a CPU f16 cache.
        let first = self.n_batch - self.prefix_len % self.n_batch;
        self.decode_at(tokens, self.prefix_len, first, false, &mut progress).context("prefill failed")?;
        self.prefix_len += tokens.len();
        Ok(())
    }

    /// Tokens decoded at once: a prefill's chunks end at multiples of it.
    pub fn n_batch(&self) -> usize {
        self.n_batch
    }

    /// The evaluated prefix as it stands, to come back to with
    /// [`Session::rewind`] after the prefix was extended past it. Kept the
    /// way the snapshot is: a lean checkpoint of a model with only
    /// full-attention layers holds nothing but its length.
    pub fn checkpoint(&self) -> Result<Checkpoint> {
        Ok(Checkpoint { state: self.capture()?, len: self.prefix_len })
    }

    /// Cuts the evaluated prefix back to `checkpoint` (taken from this
    /// session, which has only extended it since): the other sequences are
    /// emptied and the snapshot, of a longer prefix, is dropped.
    pub fn rewind(&mut self, checkpoint: &Checkpoint) -> Result<()> {
        for seq in 1..self.n_seq as i32 {
            self.clear_seq(seq);
        }
        self.snapshot = None;
        self.apply(&checkpoint.state, checkpoint.len)
    }

    fn seq_state(&self, flags: LlamaStateSeqFlags) -> Result<SeqState> {
        self.ctx.state_seq_get(0, flags).context("cannot snapshot the prefix state")
    }

    /// Puts the snapshot back (see the module's notes for the two ways).
    pub fn restore(&mut self) -> Result<()> {
        let (snapshot, len) = self.snapshot.take().ok_or_else(|| anyhow!("no snapshot to restore"))?;
        let result = self.apply(&snapshot, len);
        self.snapshot = Some((snapshot, len));
        result
    }

    /// Makes sequence 0 the prefix of `len` tokens that `snapshot` kept.
    fn apply(&mut self, snapshot: &Snapshot, len: usize) -> Result<()> {
        self.prefix_len = len;
        self.seq = 0;
        match snapshot {
            Snapshot::Full(state) => {
                // Clearing a whole sequence works for every memory type; only
                // partial removal is refused by recurrent ones.
                let _ = self.ctx.clear_kv_cache_seq(Some(0), None, None);
                self.ctx.state_seq_set(state, 0).context("cannot restore the prefix state")?;
            }
            Snapshot::Lean(partial) => {
                if let Some(state) = partial {
                    // Clears and rewrites only the window and recurrent parts.
                    self.ctx.state_seq_set(state, 0).context("cannot restore the prefix's window and recurrent state")?;
                }
                let from = u32::try_from(self.prefix_len).context("prefix too long")?;
                self.ctx.kv_cache_seq_rm(0, Some(from), None).context("cannot remove the question's cells after the prefix")?;
            }
        }
        Ok(())
    }

    /// Gives sequence `seq` (1..n_seq) its own copy of the evaluated prefix
    /// (sequence 0, left as it is) and points [`Session::generate`] and
    /// [`Session::force`] at it. In a unified cache the copy shares the
    /// prefix's cells, so it costs no memory and almost no time.
    pub fn fork_prefix(&mut self, seq: i32) -> Result<()> {
        if seq < 1 || seq as u32 >= self.n_seq {
            bail!("sequence {seq} is not one of this context's 1..{}", self.n_seq);
        }
        self.clear_seq(seq);
        self.ctx.kv_cache_seq_cp(0, seq, None, None).with_context(|| format!("cannot copy the prefix into sequence {seq}"))?;
        self.seq = seq;
        Ok(())
    }

    /// Frees a sequence's cells (those it shares with the prefix stay).
    pub(super) fn clear_seq(&mut self, seq: i32) {
        // Removing a whole sequence cannot fail.
        let _ = self.ctx.clear_kv_cache_seq(Some(seq as u32), None, None);
    }

    /// The prefix state, to put into another context over the same model
    /// ([`Session::set_snapshot`]) without evaluating the prefix again. A
    /// lean snapshot is not enough there, so sequence 0 is restored and
    /// copied out whole.
    pub fn take_snapshot(&mut self) -> Result<PortableSnapshot> {
        let snapshot = self.snapshot.take().ok_or_else(|| anyhow!("no prefix snapshot"))?;
        if let (Snapshot::Full(state), len) = snapshot {
            return Ok(PortableSnapshot(state, len));
        }
        self.snapshot = Some(snapshot);
        self.restore()?;
        let (_, len) = self.snapshot.take().expect("restored above");
        Ok(PortableSnapshot(self.seq_state(LlamaStateSeqFlags::empty())?, len))
    }

    /// Adopts a prefix state taken from another context of the same model
    /// and KV types ([`Session::take_snapshot`]), and snapshots it as this
    /// session's [`RestoreMode`] asks.
    pub fn set_snapshot(&mut self, snapshot: PortableSnapshot) -> Result<()> {
        let PortableSnapshot(state, len) = snapshot;
        self.ctx.clear_kv_cache();
        self.ctx.state_seq_set(&state, 0).context("cannot restore the prefix state")?;
        self.prefix_len = len;
        self.seq = 0;
        match self.restore_mode {
            RestoreMode::Full => self.snapshot = Some((Snapshot::Full(state), len)),
            RestoreMode::Lean => {
                self.snapshot()?;
            }
        }
        Ok(())
    }

    /// Empties the context (the snapshot is kept): the next question is
    /// evaluated from position 0 with nothing before it, as in a closed-book
    /// run. [`Session::restore`] brings the prefix back; a lean snapshot
    /// cannot once the cache is empty, so it is made whole first.
    pub fn start_empty(&mut self) -> Result<()> {
        if let Some((Snapshot::Lean(_), _)) = &self.snapshot {
            let portable = self.take_snapshot()?;
            self.snapshot = Some((Snapshot::Full(portable.0), portable.1));
        }
        self.ctx.clear_kv_cache();
        self.prefix_len = 0;
        self.seq = 0;
        Ok(())
    }

    /// Evaluates `query` after the prefix and generates greedily until an
    /// end-of-generation token, `max_new` tokens, or `stop(text)` says so
    /// (checked after each token that ends a line).
    pub fn generate(&mut self, query: &[LlamaToken], max_new: usize, stop: impl Fn(&str) -> bool) -> Result<Generation> {
        self.generate_with(query, Limit { max_new, fixed: false }, stop)
    }

    /// [`Session::generate`] under a [`Limit`].
    pub fn generate_with(&mut self, query: &[LlamaToken], limit: Limit, stop: impl Fn(&str) -> bool) -> Result<Generation> {
        self.generate_drafted(query, limit, stop, None)
    }

    /// Whether the cells of rejected draft tokens can be removed exactly:
    /// not where a recurrent state was overwritten by them, nor in a
    /// window-only cache, whose cells of positions that slid out of the
    /// window may have been reused for them.
    pub fn drafts_roll_back(&self) -> bool {
        !self.model.recurrent_or_hybrid && (self.model.n_swa == 0 || self.swa_full)
    }

    /// [`Session::generate_with`], with the draft tokens `drafter` proposes
    /// verified in the step that evaluates the last sampled token (see
    /// [`crate::draft`]): the longest run the greedy choices agree with is
    /// kept, with the model's own next token, and the rejected tokens' cells
    /// are removed. Without a drafter, with a reasoning budget (whose
    /// closing text is fed into the answer), or where drafts cannot be rolled
    /// back ([`Session::drafts_roll_back`]), every step is one token.
    // One loop keeps the order of a step's parts visible: take the sampled
    // token, feed a reasoning budget's closing text or a draft, decode, keep
    // the agreeing draft tokens, remove the rest; long because of that.
    pub fn generate_drafted(
        &mut self,
        query: &[LlamaToken],
        limit: Limit,
        stop: impl Fn(&str) -> bool,
        mut drafter: Option<&mut Drafter<'_>>,
    ) -> Result<Generation> {
        let max_new = limit.max_new;
        if query.is_empty() {
            bail!("empty question");
        }
        // The drafter still counts the steps where it may not propose.
        let drafting = self.span_budget.is_none() && self.drafts_roll_back();
        let t = Instant::now();
        let vocab = self.model.model.vocab();
        self.decode_at(query, self.prefix_len, self.n_batch, true, &mut |_| {}).context("evaluating the question failed")?;
        self.steps.steps += query.len().div_ceil(self.n_batch);
        self.steps.mixed_ms += t.elapsed().as_secs_f64() * 1e3;
        self.steps.mixed_tokens += query.len();
        self.steps.max_live = self.steps.max_live.max(1);
        let mut sampler = greedy_sampler(self.model, limit);
        let mut pos = self.prefix_len + query.len();
        let mut bytes = Vec::new();
        let mut tokens = Vec::new();
        let mut ids: Vec<i32> = Vec::new();
        let close_len = self.span_budget.as_ref().map_or(0, |b| b.close.len());
        let draft_room = if drafting && drafter.is_some() { crate::draft::LIMIT_MAX } else { 0 };
        let mut batch = LlamaBatch::new(1 + close_len.max(draft_room), 1);
        let mut closed = false;
        let mut tok = sampler.sample(&self.ctx, ((query.len() - 1) % self.n_batch) as i32);
        let span = self.span_budget.clone();
        let markers = &self.marker_texts.clone();
        // Takes a sampled token into the answer; true when the answer ends
        // before it, with it, or at the length limit.
        let take = |tok: LlamaToken, tokens: &mut Vec<LlamaToken>, bytes: &mut Vec<u8>, ids: &mut Vec<i32>| -> bool {
            if vocab.is_eog(tok) {
                return true;
            }
            tokens.push(tok);
            ids.push(tok.0);
            let piece = super::model::answer_piece(&vocab, tok, markers);
            let ends_line = piece.contains(&b'\n');
            bytes.extend_from_slice(&piece);
            (ends_line && !limit.fixed && stop(&String::from_utf8_lossy(bytes)))
                || tokens.len() >= answer_cap(span.as_ref(), max_new, bytes)
        };
        loop {
            if take(tok, &mut tokens, &mut bytes, &mut ids) {
                break;
            }
            // The span's budget is spent: its closing tokens follow this one.
            let inject: Vec<LlamaToken> = match &self.span_budget {
                Some(b) if !closed && b.due(tokens.len(), &bytes) => {
                    closed = true;
                    b.close.clone()
                }
                _ => Vec::new(),
            };
            // Room for drafts: the last token of the answer is never
            // evaluated, so at most max_new - len - 1 are worth checking.
            let draft: Vec<LlamaToken> = match drafter.as_mut().filter(|_| drafting) {
                Some(d) => d.propose(&ids, max_new - tokens.len() - 1).into_iter().map(LlamaToken).collect(),
                None => Vec::new(),
            };
            batch.clear();
            let all_logits = !draft.is_empty();
            batch.add(tok, pos as i32, &[self.seq], inject.is_empty() || all_logits)?;
            for (j, &c) in inject.iter().enumerate() {
                batch.add(c, (pos + 1 + j) as i32, &[self.seq], j + 1 == inject.len())?;
                tokens.push(c);
                ids.push(c.0);
                bytes.extend_from_slice(&super::model::answer_piece(&vocab, c, &self.marker_texts));
            }
            for (j, &d) in draft.iter().enumerate() {
                batch.add(d, (pos + 1 + j) as i32, &[self.seq], true)?;
            }
            let step = Instant::now();
            self.ctx.decode(&mut batch).with_context(|| format!("llama.cpp decode failed at position {pos}"))?;
            // The step's time is the device's work, which ends after decode returns.
            self.ctx.synchronize();
            self.steps.steps += 1;
            self.steps.generation_only_ms += step.elapsed().as_secs_f64() * 1e3;
            self.steps.generation_only_tokens += 1 + inject.len() + draft.len();
            if !inject.is_empty() {
                if let Some(d) = drafter.as_mut() {
                    d.verified(0, 0);
                }
                pos += 1 + inject.len();
                tok = sampler.sample(&self.ctx, inject.len() as i32);
                continue;
            }
            // The greedy choice after each evaluated token, while it is the draft's.
            let mut accepted = 0;
            let mut next = sampler.sample(&self.ctx, 0);
            let mut ended = false;
            while accepted < draft.len() && next == draft[accepted] {
                accepted += 1;
                if take(next, &mut tokens, &mut bytes, &mut ids) {
                    ended = true;
                    break;
                }
                next = sampler.sample(&self.ctx, accepted as i32);
            }
            if let Some(d) = drafter.as_mut() {
                d.verified(draft.len(), accepted);
            }
            if ended {
                break;
            }
            pos += 1 + accepted;
            if accepted < draft.len() {
                let from = u32::try_from(pos).context("position out of range")?;
                self.ctx
                    .kv_cache_seq_rm(self.seq, Some(from), None)
                    .with_context(|| format!("llama.cpp could not remove the cells of a rejected draft at position {pos}"))?;
            }
            tok = next;
        }
        Ok(Generation::new(&bytes, tokens, t.elapsed().as_secs_f64() * 1e3))
    }

    /// Teacher forcing: evaluates `query` then `forced` after the prefix in
    /// batched decodes with logits at every position, and returns, for each
    /// forced token, the model's top-1 token, the gap between its two best
    /// logits, and the forced token's log-probability (see [`crate::logits::read_logits`]).
    /// Call [`Session::restore`] first, as for [`Session::generate`].
    pub fn force(&mut self, query: &[LlamaToken], forced: &[LlamaToken]) -> Result<Vec<(LlamaToken, f32, f32)>> {
        self.force_with(query, forced, |_, _| {})
    }

    /// [`Session::force`], also handing `each(i, logits)` the whole
    /// distribution before forced token `i` (for comparisons with a reference).
    pub fn force_with(
        &mut self,
        query: &[LlamaToken],
        forced: &[LlamaToken],
        mut each: impl FnMut(usize, &[f32]),
    ) -> Result<Vec<(LlamaToken, f32, f32)>> {
        if query.is_empty() || forced.is_empty() {
            bail!("teacher forcing needs a question and forced text");
        }
        let seq: Vec<LlamaToken> = query.iter().chain(forced).copied().collect();
        let first_logit = query.len() - 1;
        let mut out = Vec::with_capacity(forced.len());
        let mut batch = LlamaBatch::new(self.n_batch, 1);
        for (c, chunk) in seq.chunks(self.n_batch).enumerate() {
            let base = c * self.n_batch;
            batch.clear();
            for (j, &tok) in chunk.iter().enumerate() {
                let i = base + j;
                let wants = i >= first_logit && i + 1 < seq.len();
                batch.add(tok, (self.prefix_len + i) as i32, &[self.seq], wants)?;
            }
            self.ctx.decode(&mut batch).context("llama.cpp decode failed in the forced pass")?;
            for j in 0..chunk.len() {
                let i = base + j;
                if i >= first_logit && i + 1 < seq.len() {
                    let logits = self.ctx.get_logits_ith(j as i32);
                    let next = seq[i + 1].0 as usize;
                    let (best, gap, logprob) = crate::logits::read_logits(logits, next);
                    each(i - first_logit, logits);
                    out.push((LlamaToken(best as i32), gap, logprob));
                }
            }
        }
        Ok(out)
    }

    /// Writes the evaluated prefix's sequence state, with its tokens, to
    /// `path` in posrecall's own layout (see [`PREFIX_STATE_MAGIC`]).
    pub fn save_prefix_file(&self, path: &std::path::Path, tokens: &[LlamaToken]) -> Result<()> {
        let size = self.ctx.state_seq_get_size_ext(0, LlamaStateSeqFlags::empty());
        let mut state = vec![0u8; size];
        // SAFETY: `state` holds the `size` bytes llama.cpp just said this
        // sequence's state takes; nothing runs on the context in between.
        let written = unsafe { self.ctx.state_seq_get_data_ext(state.as_mut_ptr(), 0, LlamaStateSeqFlags::empty()) };
        if written != size {
            bail!("llama.cpp wrote {written} bytes of a {size}-byte prefix state");
        }
        let mut head = Vec::with_capacity(PREFIX_STATE_MAGIC.len() + 8 + 4 * tokens.len());
        head.extend_from_slice(PREFIX_STATE_MAGIC);
        head.extend_from_slice(&(tokens.len() as u64).to_le_bytes());
        for t in tokens {
            head.extend_from_slice(&t.0.to_le_bytes());
        }
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(path)?;
            f.write_all(&head)?;
            f.write_all(&state)?;
            f.sync_all()
        };
        write().with_context(|| format!("cannot write {}", path.display()))
    }

    /// Loads a prefix state saved by [`Session::save_prefix_file`]; it must hold
    /// exactly `tokens`. Replaces any evaluated prefix and snapshot.
    ///
    /// llama.cpp's own state-file loader reads past the end of a file cut
    /// short and then aborts the process (an assertion); its in-memory reader
    /// checks every read against the buffer and fails instead, so the state
    /// is read here and handed over as a buffer.
    pub fn load_prefix_file(&mut self, path: &std::path::Path, tokens: &[LlamaToken]) -> Result<()> {
        self.ctx.clear_kv_cache();
        self.snapshot = None;
        self.prefix_len = 0;
        let file = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let state = prefix_state_of(&file, tokens)?;
        // SAFETY: llama.cpp's host reader bounds every read by the slice's
        // length; a state of another shape is refused by its own checks.
        let loaded = unsafe { self.ctx.state_seq_set_data_ext(state, 0, LlamaStateSeqFlags::empty()) };
        if !loaded {
            self.ctx.clear_kv_cache();
            bail!("its state is cut short or of another shape");
        }
        self.prefix_len = tokens.len();
        Ok(())
    }
}

/// The first bytes of a prefix-cache state file; then the token count (u64,
/// little-endian), the tokens (i32 each) and llama.cpp's sequence state.
pub const PREFIX_STATE_MAGIC: &[u8] = b"POSRECALL-PREFIX-STATE-1\n";

/// The sequence state in a prefix-cache file, after checking that the file
/// holds exactly `tokens`.
fn prefix_state_of<'a>(file: &'a [u8], tokens: &[LlamaToken]) -> Result<&'a [u8]> {
    let rest = file.strip_prefix(PREFIX_STATE_MAGIC).ok_or_else(|| anyhow!("it is not a posrecall prefix state"))?;
    let (count, rest) = rest.split_at_checked(8).ok_or_else(|| anyhow!("it is cut short"))?;
    let count = u64::from_le_bytes(count.try_into().expect("8 bytes"));
    if count != tokens.len() as u64 {
        bail!("it holds a different prefix ({count} tokens, this run's has {})", tokens.len());
    }
    let (ids, state) = rest.split_at_checked(4 * tokens.len()).ok_or_else(|| anyhow!("it is cut short"))?;
    let same = ids.chunks_exact(4).zip(tokens).all(|(b, t)| i32::from_le_bytes(b.try_into().expect("4 bytes")) == t.0);
    if !same {
        bail!("it holds a different prefix");
    }
    Ok(state)
}
