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

use super::session::{Generation, Limit, Session, greedy_sampler};
use crate::decode::StepStats;
use crate::decode::draft::Drafter;
use anyhow::{Context, Result, bail};
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::token::LlamaToken;
use std::time::Instant;

/// One slot's progress on its question.
struct Slot<'f> {
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
    /// The answer's drafter, and the draft evaluated after `next` in the
    /// current batch.
    drafter: Option<Drafter<'f>>,
    draft: Vec<LlamaToken>,
    /// The current batch evaluates a generated token of this slot.
    stepped: bool,
}

/// The slots of a parallel run: the live ones, the free sequence ids, the
/// next question to start, and where each live slot's logits are in the
/// current batch.
struct Slots<'f> {
    live: Vec<Slot<'f>>,
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
    /// evaluated prefix in sequence 0. `drafter(index)` gives a question's
    /// drafter, if any: its drafts are verified in the slot's part of each
    /// step, as [`Session::generate_drafted`] does, and its counts come back
    /// in the answer's [`Generation::draft`].
    pub(crate) fn generate_parallel<'f>(
        &mut self,
        queries: &[Vec<LlamaToken>],
        slots: usize,
        limit: Limit,
        stop: impl Fn(usize, &str) -> bool,
        mut drafter: impl FnMut(usize) -> Option<Drafter<'f>>,
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
        let drafting = self.span_budget.is_none() && self.drafts_roll_back();
        loop {
            self.start_slots(&mut s, queries.len(), &mut drafter)?;
            if s.live.is_empty() {
                break;
            }
            let question_tokens = fill_batch(&mut batch, &mut s, queries, self.n_batch, limit, drafting)?;
            let t = Instant::now();
            self.ctx
                .decode(&mut batch)
                .with_context(|| format!("llama.cpp decode failed in a parallel step of {} tokens", batch.n_tokens()))?;
            // A GPU's work ends after decode returns; the step's time includes it.
            self.ctx.synchronize();
            stats.count_step(t.elapsed().as_secs_f64() * 1e3, batch.n_tokens() as usize, question_tokens, s.live.len());
            self.sample_step(&mut s, &mut sampler, limit, &stop, &mut done)?;
        }
        Ok(stats)
    }

    /// Gives every free sequence the next question, as a copy of the prefix.
    fn start_slots<'f>(&mut self, s: &mut Slots<'f>, jobs: usize, drafter: &mut impl FnMut(usize) -> Option<Drafter<'f>>) -> Result<()> {
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
                drafter: drafter(s.next_job),
                draft: Vec::new(),
                stepped: false,
            });
            s.next_job += 1;
        }
        Ok(())
    }

    /// Samples for every slot that has logits: the greedy choice after each
    /// evaluated token, while it is the slot's draft, then the model's own
    /// next token; the rejected draft tokens' cells are removed. Finished
    /// slots free their cells and leave.
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
            let draft = std::mem::take(&mut slot.draft);
            let mut accepted = 0;
            let finished = loop {
                let tok = sampler.sample(&self.ctx, idx + accepted as i32);
                if vocab.is_eog(tok) {
                    break true;
                }
                slot.tokens.push(tok);
                let piece = super::model::answer_piece(&vocab, tok, &self.marker_texts);
                let ends_line = piece.contains(&b'\n');
                slot.bytes.extend_from_slice(&piece);
                if slot.tokens.len() >= super::session::answer_cap(self.span_budget.as_ref(), limit.max_new, &slot.bytes)
                    || (ends_line && !limit.fixed && stop(slot.job, &String::from_utf8_lossy(&slot.bytes)))
                {
                    break true;
                }
                if accepted < draft.len() && tok == draft[accepted] {
                    accepted += 1;
                    continue;
                }
                slot.next = Some(tok);
                break false;
            };
            if std::mem::take(&mut slot.stepped)
                && let Some(d) = slot.drafter.as_mut()
            {
                d.verified(draft.len(), accepted);
            }
            if !finished {
                // `pos` stands after the draft; keep the accepted part.
                let keep = slot.pos - (draft.len() - accepted);
                if accepted < draft.len() {
                    let from = u32::try_from(keep).context("position out of range")?;
                    self.ctx
                        .kv_cache_seq_rm(slot.seq, Some(from), None)
                        .with_context(|| format!("llama.cpp could not remove the cells of a rejected draft at position {keep}"))?;
                }
                slot.pos = keep;
                i += 1;
                continue;
            }
            let slot = s.live.remove(i);
            self.clear_seq(slot.seq);
            s.free.push(slot.seq);
            let mut answer = Generation::new(&slot.bytes, slot.tokens, slot.started.elapsed().as_secs_f64() * 1e3);
            answer.draft = slot.drafter.map(|d| d.stats);
            done(slot.job, answer)?;
        }
        Ok(())
    }
}

/// One batch: every generating slot's next token first, each with its
/// draft (a share of the batch's room, so that all fit), then question
/// tokens while there is room. Returns how many question tokens it holds.
fn fill_batch(
    batch: &mut LlamaBatch,
    s: &mut Slots,
    queries: &[Vec<LlamaToken>],
    n_batch: usize,
    limit: Limit,
    drafting: bool,
) -> Result<usize> {
    batch.clear();
    s.logits_at.clear();
    s.logits_at.resize(s.live.len(), None);
    let generating = s.live.iter().filter(|slot| slot.next.is_some()).count();
    let share = n_batch.saturating_sub(generating) / generating.max(1);
    for (i, slot) in s.live.iter_mut().enumerate() {
        let Some(tok) = slot.next.take() else { continue };
        slot.draft = match slot.drafter.as_mut().filter(|_| drafting) {
            // The answer's last token is never evaluated: at most max_new - len - 1.
            Some(d) => {
                let ids: Vec<i32> = slot.tokens.iter().map(|t| t.0).collect();
                let room = (limit.max_new - slot.tokens.len()).saturating_sub(1).min(share);
                d.propose(&ids, room).into_iter().map(LlamaToken).collect()
            }
            None => Vec::new(),
        };
        s.logits_at[i] = Some(batch.n_tokens());
        slot.stepped = true;
        batch.add(tok, slot.pos as i32, &[slot.seq], true)?;
        slot.pos += 1;
        for &d in &slot.draft {
            batch.add(d, slot.pos as i32, &[slot.seq], true)?;
            slot.pos += 1;
        }
    }
    let mut question_tokens = 0;
    for (i, slot) in s.live.iter_mut().enumerate() {
        let query = &queries[slot.job];
        let room = n_batch - batch.n_tokens() as usize;
        if s.logits_at[i].is_some() || slot.fed == query.len() || room == 0 {
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
