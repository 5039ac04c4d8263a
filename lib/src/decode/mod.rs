//! How answers are generated, below the engine and free of llama.cpp: the
//! drafts of exact speculative decoding ([`draft`]), the reading of a
//! next-token logits row ([`logits`]: the greedy choice, its margin, the
//! log-probabilities, which the teacher-forced metrics read as well), and
//! the statistics of the decode steps ([`StepStats`]). The engine runs them;
//! the record keeps their statistics.

pub mod draft;
pub mod logits;

use serde::{Deserialize, Serialize};

/// Where the time of a run's answering decode steps went.
///
/// Steps that held only generated tokens are counted apart from steps that
/// also evaluated (part of) a question, so the generation throughput can be
/// compared with a benchmark that generates without questions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StepStats {
    pub steps: usize,
    /// Steps with generated tokens only: their time and tokens.
    pub generation_only_ms: f64,
    pub generation_only_tokens: usize,
    /// Steps that also evaluated question tokens: time, and all tokens in them.
    pub mixed_ms: f64,
    pub mixed_tokens: usize,
    /// The most sequences decoded in one step.
    pub max_live: usize,
}

impl StepStats {
    /// Counts one decode step of `tokens` tokens, `question_tokens` of them
    /// from questions, over `live` sequences.
    pub(crate) fn count_step(&mut self, ms: f64, tokens: usize, question_tokens: usize, live: usize) {
        self.steps += 1;
        self.max_live = self.max_live.max(live);
        if question_tokens == 0 {
            self.generation_only_ms += ms;
            self.generation_only_tokens += tokens;
        } else {
            self.mixed_ms += ms;
            self.mixed_tokens += tokens;
        }
    }

    /// Adds the steps of another pass (a length ladder's next window).
    pub fn merge(&mut self, other: &StepStats) {
        self.steps += other.steps;
        self.generation_only_ms += other.generation_only_ms;
        self.generation_only_tokens += other.generation_only_tokens;
        self.mixed_ms += other.mixed_ms;
        self.mixed_tokens += other.mixed_tokens;
        self.max_live = self.max_live.max(other.max_live);
    }
}
