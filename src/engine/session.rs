//! One llama.cpp context: prefill, snapshot, restore, greedy generation.
//!
//! The prefix (file) is evaluated once and its sequence state is copied out
//! with `state_seq_get`. Each question restores that full state, so every
//! question starts from the identical state. Restoring the whole sequence
//! state, rather than removing the question's tokens from the cache, is what
//! keeps sliding-window models (whose cache has already forgotten old
//! positions) and recurrent/hybrid models (whose state cannot be rolled back)
//! exact.

use super::model::Model;
use super::config::{ContextConfig, FlashAttn, KvType, StepStats};
use anyhow::{Context, Result, anyhow, bail};
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::{KvCacheType, LlamaContextParams};
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
    LlamaContextParams::default()
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
        .with_no_perf(false)
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
    let masked: Vec<LlamaLogitBias> = (0..n)
        .map(LlamaToken)
        .filter(|&t| vocab.is_eog(t))
        .map(|t| LlamaLogitBias::new(t, f32::NEG_INFINITY))
        .collect();
    LlamaSampler::chain_simple([LlamaSampler::logit_bias(n, &masked), LlamaSampler::greedy()])
}

/// One generated answer.
#[derive(Debug, Clone)]
pub struct Generation {
    pub text: String,
    pub tokens: Vec<LlamaToken>,
    /// Query evaluation plus generation, in milliseconds.
    pub ms: f64,
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
    /// The snapshot and the prefix length it holds.
    snapshot: Option<(SeqState, usize)>,
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
            snapshot: None,
        })
    }

    /// Evaluates `tokens` at positions 0.. in `n_batch` chunks; `progress`
    /// gets the number of tokens done after each chunk.
    pub fn prefill(&mut self, tokens: &[LlamaToken], mut progress: impl FnMut(usize)) -> Result<()> {
        self.ctx.clear_kv_cache();
        self.snapshot = None;
        self.seq = 0;
        self.decode_at(tokens, 0, false, &mut progress)
            .context("prefill failed")?;
        self.prefix_len = tokens.len();
        Ok(())
    }

    /// Decodes `tokens` at positions `start..` in chunks; with `logits_last`
    /// the last token's logits are kept for sampling.
    fn decode_at(
        &mut self,
        tokens: &[LlamaToken],
        start: usize,
        logits_last: bool,
        progress: &mut dyn FnMut(usize),
    ) -> Result<()> {
        let mut batch = LlamaBatch::new(self.n_batch, 1);
        let mut done = 0;
        for chunk in tokens.chunks(self.n_batch) {
            batch.clear();
            for (i, &tok) in chunk.iter().enumerate() {
                let pos = start + done + i;
                let last = done + i + 1 == tokens.len();
                batch.add(tok, pos as i32, &[self.seq], logits_last && last)?;
            }
            self.ctx
                .decode(&mut batch)
                .with_context(|| format!("llama.cpp decode failed at position {}", start + done))?;
            done += chunk.len();
            progress(done);
        }
        Ok(())
    }

    /// Copies the evaluated prefix's sequence state out; returns its size in bytes.
    pub fn snapshot(&mut self) -> Result<usize> {
        let state = self
            .ctx
            .state_seq_get(0, LlamaStateSeqFlags::empty())
            .context("cannot snapshot the prefix state")?;
        let bytes = state.byte_len();
        self.snapshot = Some((state, self.prefix_len));
        Ok(bytes)
    }

    /// Puts the snapshot back: the sequence is cleared, then the whole saved
    /// state (cache cells and any recurrent state) is written back.
    pub fn restore(&mut self) -> Result<()> {
        let (state, len) = self
            .snapshot
            .as_ref()
            .ok_or_else(|| anyhow!("no snapshot to restore"))?;
        self.prefix_len = *len;
        self.seq = 0;
        // Clearing a whole sequence works for every memory type; only partial
        // removal is refused by recurrent ones.
        let _ = self.ctx.clear_kv_cache_seq(Some(0), None, None);
        self.ctx
            .state_seq_set(state, 0)
            .context("cannot restore the prefix state")?;
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
        self.ctx
            .kv_cache_seq_cp(0, seq, None, None)
            .with_context(|| format!("cannot copy the prefix into sequence {seq}"))?;
        self.seq = seq;
        Ok(())
    }

    /// Frees a sequence's cells (those it shares with the prefix stay).
    pub(super) fn clear_seq(&mut self, seq: i32) {
        // Removing a whole sequence cannot fail.
        let _ = self.ctx.clear_kv_cache_seq(Some(seq as u32), None, None);
    }

    /// The snapshot, to put into another context over the same model
    /// ([`Session::set_snapshot`]) without evaluating the prefix again.
    pub fn take_snapshot(&mut self) -> Option<(SeqState, usize)> {
        self.snapshot.take()
    }

    /// Adopts a snapshot taken from another context of the same model and KV
    /// types, and restores it.
    pub fn set_snapshot(&mut self, snapshot: (SeqState, usize)) -> Result<()> {
        self.snapshot = Some(snapshot);
        self.restore()
    }

    /// Empties the context (the snapshot is kept): the next question is
    /// evaluated from position 0 with nothing before it, as in a closed-book
    /// run. [`Session::restore`] brings the prefix back.
    pub fn start_empty(&mut self) {
        self.ctx.clear_kv_cache();
        self.prefix_len = 0;
        self.seq = 0;
    }

    /// Evaluates `query` after the prefix and generates greedily until an
    /// end-of-generation token, `max_new` tokens, or `stop(text)` says so
    /// (checked after each token that ends a line).
    pub fn generate(
        &mut self,
        query: &[LlamaToken],
        max_new: usize,
        stop: impl Fn(&str) -> bool,
    ) -> Result<Generation> {
        self.generate_with(query, Limit { max_new, fixed: false }, stop)
    }

    /// [`Session::generate`] under a [`Limit`].
    pub fn generate_with(
        &mut self,
        query: &[LlamaToken],
        limit: Limit,
        stop: impl Fn(&str) -> bool,
    ) -> Result<Generation> {
        let max_new = limit.max_new;
        if query.is_empty() {
            bail!("empty question");
        }
        let t = Instant::now();
        let vocab = self.model.model.vocab();
        self.decode_at(query, self.prefix_len, true, &mut |_| {})
            .context("evaluating the question failed")?;
        self.steps.steps += query.len().div_ceil(self.n_batch);
        self.steps.mixed_ms += t.elapsed().as_secs_f64() * 1e3;
        self.steps.mixed_tokens += query.len();
        self.steps.max_live = self.steps.max_live.max(1);
        let mut sampler = greedy_sampler(self.model, limit);
        let mut pos = self.prefix_len + query.len();
        let mut bytes = Vec::new();
        let mut tokens = Vec::new();
        let mut batch = LlamaBatch::new(1, 1);
        let mut logits_idx = ((query.len() - 1) % self.n_batch) as i32;
        while tokens.len() < max_new {
            let tok = sampler.sample(&self.ctx, logits_idx);
            if vocab.is_eog(tok) {
                break;
            }
            tokens.push(tok);
            let piece = vocab.token_to_piece(tok, false, None);
            let ends_line = piece.contains(&b'\n');
            bytes.extend_from_slice(&piece);
            if ends_line && !limit.fixed && stop(&String::from_utf8_lossy(&bytes)) {
                break;
            }
            if tokens.len() == max_new {
                break;
            }
            batch.clear();
            batch.add(tok, pos as i32, &[self.seq], true)?;
            let step = Instant::now();
            self.ctx
                .decode(&mut batch)
                .with_context(|| format!("llama.cpp decode failed at position {pos}"))?;
            self.steps.steps += 1;
            self.steps.generation_only_ms += step.elapsed().as_secs_f64() * 1e3;
            self.steps.generation_only_tokens += 1;
            pos += 1;
            logits_idx = 0;
        }
        Ok(Generation {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            tokens,
            ms: t.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// Teacher forcing: evaluates `query` then `forced` after the prefix in
    /// batched decodes with logits at every position, and returns, for each
    /// forced token, the model's top-1 token, the gap between its two best
    /// logits, and the forced token's log-probability (see [`crate::forced`]).
    /// Call [`Session::restore`] first, as for [`Session::generate`].
    pub fn force(
        &mut self,
        query: &[LlamaToken],
        forced: &[LlamaToken],
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
            self.ctx
                .decode(&mut batch)
                .context("llama.cpp decode failed in the forced pass")?;
            for j in 0..chunk.len() {
                let i = base + j;
                if i >= first_logit && i + 1 < seq.len() {
                    let logits = self.ctx.get_logits_ith(j as i32);
                    let next = seq[i + 1].0 as usize;
                    let (best, gap, logprob) = crate::forced::read_logits(logits, next);
                    out.push((LlamaToken(best as i32), gap, logprob));
                }
            }
        }
        Ok(out)
    }

    /// Writes the evaluated prefix's sequence state, with its tokens, to `path`.
    pub fn save_prefix_file(&self, path: &std::path::Path, tokens: &[LlamaToken]) -> Result<()> {
        self.ctx
            .state_seq_save_file(path, 0, tokens)
            .context("llama.cpp could not save the prefix state")?;
        Ok(())
    }

    /// Loads a prefix state saved by [`Session::save_prefix_file`]; it must hold
    /// exactly `tokens`. Replaces any evaluated prefix and snapshot.
    pub fn load_prefix_file(&mut self, path: &std::path::Path, tokens: &[LlamaToken]) -> Result<()> {
        self.ctx.clear_kv_cache();
        self.snapshot = None;
        self.prefix_len = 0;
        let (saved, _) = self
            .ctx
            .state_seq_load_file(path, 0, tokens.len() + 1)
            .context("llama.cpp could not read the state file")?;
        if saved != tokens {
            self.ctx.clear_kv_cache();
            bail!("it holds a different prefix");
        }
        self.prefix_len = tokens.len();
        Ok(())
    }
}
