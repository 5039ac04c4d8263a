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

use crate::settings::StepStats;
use super::session::{Generation, Limit, Session, greedy_sampler};
use anyhow::{Context, Result, bail};
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

/// The slots of a parallel run: the live ones, the free sequence ids, the
/// next question to start, and where each live slot's logits are in the
/// current batch.
struct Slots {
    live: Vec<Slot>,
    free: Vec<i32>,
    next_job: usize,
    logits_at: Vec<Option<i32>>,
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
        let mut sampler = greedy_sampler(self.model, limit);
        let mut batch = LlamaBatch::new(self.n_batch, 1);
        let mut stats = StepStats::default();
        let mut s = Slots {
            live: Vec::with_capacity(slots),
            free: (1..=slots as i32).rev().collect(),
            next_job: 0,
            logits_at: Vec::with_capacity(slots),
        };
        loop {
            self.start_slots(&mut s, queries.len())?;
            if s.live.is_empty() {
                break;
            }
            let question_tokens = fill_batch(&mut batch, &mut s, queries, self.n_batch)?;
            let t = Instant::now();
            self.ctx
                .decode(&mut batch)
                .with_context(|| format!("llama.cpp decode failed in a parallel step of {} tokens", batch.n_tokens()))?;
            stats.count_step(t.elapsed().as_secs_f64() * 1e3, batch.n_tokens() as usize, question_tokens, s.live.len());
            self.sample_step(&mut s, &mut sampler, limit, &stop, &mut done)?;
        }
        Ok(stats)
    }

    /// Gives every free sequence the next question, as a copy of the prefix.
    fn start_slots(&mut self, s: &mut Slots, jobs: usize) -> Result<()> {
        while s.next_job < jobs
            && let Some(seq) = s.free.pop()
        {
            self.fork_prefix(seq)?;
            s.live.push(Slot {
                seq,
                job: s.next_job,
                fed: 0,
                pos: self.prefix_len,
                next: None,
                tokens: Vec::new(),
                bytes: Vec::new(),
                started: Instant::now(),
            });
            s.next_job += 1;
        }
        Ok(())
    }

    /// Samples for every slot that has logits; finished slots free their
    /// cells and leave.
    fn sample_step(
        &mut self,
        s: &mut Slots,
        sampler: &mut llama_cpp_2::sampling::LlamaSampler,
        limit: Limit,
        stop: &impl Fn(usize, &str) -> bool,
        done: &mut impl FnMut(usize, Generation) -> Result<()>,
    ) -> Result<()> {
        let vocab = self.model.model.vocab();
        let mut i = 0;
        for k in 0..s.logits_at.len() {
            let Some(idx) = s.logits_at[k] else {
                i += 1;
                continue;
            };
            let slot = &mut s.live[i];
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
            if !finished {
                slot.next = Some(tok);
                i += 1;
                continue;
            }
            let slot = s.live.remove(i);
            self.clear_seq(slot.seq);
            s.free.push(slot.seq);
            let answer = Generation::new(&slot.bytes, slot.tokens, slot.started.elapsed().as_secs_f64() * 1e3);
            done(slot.job, answer)?;
        }
        Ok(())
    }
}

/// One batch: every generating slot's next token first (one each, so they
/// always fit), then question tokens while there is room. Returns how many
/// question tokens it holds.
fn fill_batch(batch: &mut LlamaBatch, s: &mut Slots, queries: &[Vec<LlamaToken>], n_batch: usize) -> Result<usize> {
    batch.clear();
    s.logits_at.clear();
    s.logits_at.resize(s.live.len(), None);
    for (i, slot) in s.live.iter_mut().enumerate() {
        if let Some(tok) = slot.next {
            s.logits_at[i] = Some(batch.n_tokens());
            batch.add(tok, slot.pos as i32, &[slot.seq], true)?;
            slot.pos += 1;
        }
    }
    let mut question_tokens = 0;
    for (i, slot) in s.live.iter_mut().enumerate() {
        let query = &queries[slot.job];
        let room = n_batch - batch.n_tokens() as usize;
        if slot.next.is_some() || slot.fed == query.len() || room == 0 {
            continue;
        }
        let take = room.min(query.len() - slot.fed);
        for &tok in &query[slot.fed..slot.fed + take] {
            slot.fed += 1;
            let last = slot.fed == query.len();
            if last {
                s.logits_at[i] = Some(batch.n_tokens());
            }
            batch.add(tok, slot.pos as i32, &[slot.seq], last)?;
            slot.pos += 1;
        }
        question_tokens += take;
    }
    Ok(question_tokens)
}
