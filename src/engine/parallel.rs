//! Answering many questions at once over one evaluated prefix.
//!
//! The prefix lives in sequence 0 of a unified KV cache and is never
//! extended. Each of N slots is a sequence that starts as a copy of it (the
//! cells are shared, not duplicated), evaluates its question, then generates
//! greedily. Every decode step is one batch holding the next token of every
//! live slot plus as much of the waiting questions as fits; a slot that
//! finishes frees its cells and takes the next question. This is what
//! llama.cpp's own server and batched bench do, so a long prefix is read from
//! memory once per step for all slots instead of once per slot.

use super::session::{Generation, Limit, Session, StepStats, greedy_sampler};
use anyhow::{Result, anyhow, bail};
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;
use std::time::Instant;

/// One slot's progress on its question.
struct Slot {
    seq: i32,
    job: usize,
    /// Question tokens already evaluated.
    fed: usize,
    /// The position of the next token to evaluate.
    pos: usize,
    /// The last sampled token, still to be evaluated.
    next: Option<LlamaToken>,
    tokens: Vec<LlamaToken>,
    bytes: Vec<u8>,
    started: Instant,
}

impl Session<'_> {
    /// Answers every query in `queries` with up to `slots` of them decoded
    /// together; `done(index, answer)` runs as each one finishes (in finishing
    /// order). `stop(index, text)` is checked after each token that ends a
    /// line, as in [`Session::generate`]. The context must have been created
    /// with at least `slots + 1` sequences and a unified KV cache, and hold an
    /// evaluated prefix in sequence 0.
    pub fn generate_parallel(
        &mut self,
        queries: &[Vec<LlamaToken>],
        slots: usize,
        limit: Limit,
        stop: impl Fn(usize, &str) -> bool,
        mut done: impl FnMut(usize, Generation) -> Result<()>,
    ) -> Result<StepStats> {
        if slots == 0 || slots as u32 >= self.n_seq {
            bail!("{slots} parallel sequences need a context of {} sequences, this one has {}", slots + 1, self.n_seq);
        }
        if queries.iter().any(Vec::is_empty) {
            bail!("empty question");
        }
        let vocab = self.model.model.vocab();
        let mut sampler = greedy_sampler(self.model, limit);
        let mut batch = LlamaBatch::new(self.n_batch, 1);
        let mut stats = StepStats::default();
        let mut live: Vec<Slot> = Vec::with_capacity(slots);
        let mut free: Vec<i32> = (1..=slots as i32).rev().collect();
        let mut next_job = 0;
        // Per live slot, the batch index holding its logits after this step.
        let mut logits_at: Vec<Option<i32>> = Vec::with_capacity(slots);

        loop {
            while next_job < queries.len()
                && let Some(seq) = free.pop()
            {
                self.fork_prefix(seq)?;
                live.push(Slot {
                    seq,
                    job: next_job,
                    fed: 0,
                    pos: self.prefix_len,
                    next: None,
                    tokens: Vec::new(),
                    bytes: Vec::new(),
                    started: Instant::now(),
                });
                next_job += 1;
            }
            if live.is_empty() {
                break;
            }

            // One batch: every generating slot's next token first (one each,
            // so they always fit), then question tokens while there is room.
            batch.clear();
            logits_at.clear();
            logits_at.resize(live.len(), None);
            let mut question_tokens = 0;
            for (i, slot) in live.iter_mut().enumerate() {
                if let Some(tok) = slot.next {
                    logits_at[i] = Some(batch.n_tokens());
                    batch.add(tok, slot.pos as i32, &[slot.seq], true)?;
                    slot.pos += 1;
                }
            }
            for (i, slot) in live.iter_mut().enumerate() {
                let query = &queries[slot.job];
                let room = self.n_batch - batch.n_tokens() as usize;
                if slot.next.is_some() || slot.fed == query.len() || room == 0 {
                    continue;
                }
                let take = room.min(query.len() - slot.fed);
                for &tok in &query[slot.fed..slot.fed + take] {
                    slot.fed += 1;
                    let last = slot.fed == query.len();
                    if last {
                        logits_at[i] = Some(batch.n_tokens());
                    }
                    batch.add(tok, slot.pos as i32, &[slot.seq], last)?;
                    slot.pos += 1;
                }
                question_tokens += take;
            }

            let t = Instant::now();
            self.ctx
                .decode(&mut batch)
                .map_err(|e| anyhow!("llama.cpp decode failed in a parallel step of {} tokens: {e}", batch.n_tokens()))?;
            let step_ms = t.elapsed().as_secs_f64() * 1e3;
            stats.steps += 1;
            stats.max_live = stats.max_live.max(live.len());
            if question_tokens == 0 {
                stats.generation_only_ms += step_ms;
                stats.generation_only_tokens += batch.n_tokens() as usize;
            } else {
                stats.mixed_ms += step_ms;
                stats.mixed_tokens += batch.n_tokens() as usize;
            }

            // Sample for every slot that has logits; finished slots leave.
            let mut i = 0;
            let mut k = 0;
            while i < live.len() {
                let Some(idx) = logits_at[k] else {
                    i += 1;
                    k += 1;
                    continue;
                };
                k += 1;
                let slot = &mut live[i];
                let tok = sampler.sample(&self.ctx, idx);
                let mut finished = vocab.is_eog(tok);
                if !finished {
                    slot.tokens.push(tok);
                    let piece = vocab.token_to_piece(tok, false, None);
                    let ends_line = piece.contains(&b'\n');
                    slot.bytes.extend_from_slice(&piece);
                    finished = slot.tokens.len() >= limit.max_new
                        || (ends_line && !limit.fixed && stop(slot.job, &String::from_utf8_lossy(&slot.bytes)));
                }
                if finished {
                    let slot = live.remove(i);
                    self.clear_seq(slot.seq);
                    free.push(slot.seq);
                    done(
                        slot.job,
                        Generation {
                            text: String::from_utf8_lossy(&slot.bytes).into_owned(),
                            tokens: slot.tokens,
                            ms: slot.started.elapsed().as_secs_f64() * 1e3,
                        },
                    )?;
                } else {
                    slot.next = Some(tok);
                    i += 1;
                }
            }
        }
        Ok(stats)
    }
}
