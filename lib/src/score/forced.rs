//! Teacher-forced recall: how close the model was to reproducing each
//! expected line, measured without sampling.
//!
//! After the question, the expected lines are fed to the model as if it had
//! written them, in one batched decode with logits at every position. At each
//! forced token we read: the log-probability the model gave it, the model's
//! own top-1 choice, and the gap between its two best logits. This module turns
//! those per-token readings into per-target metrics; the engine produces them
//! (with [`crate::decode::logits::read_logits`]).

use serde::{Deserialize, Serialize};

/// Two top logits closer than this are a near tie: a batched decode may round
/// differently from one-token steps and flip the choice. Measured on CPU with
/// SmolLM2 and an f16 KV cache: flips happened at gaps up to 0.14 logits.
pub const NEAR_TIE_EPS: f32 = 0.25;

/// What the model thought at one forced position.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct TokenReading {
    /// The forced token.
    pub token: i32,
    /// The model's top-1 token at this position.
    pub top1: i32,
    /// log p(forced token).
    pub logprob: f32,
    /// Logit gap between the best and second-best tokens.
    pub top_gap: f32,
    /// 0-based line of the forced text this token starts on.
    pub line: usize,
}

/// Where the model's top-1 choice first leaves the forced text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Divergence {
    /// 1-based line of the forced text.
    pub line: usize,
    /// 0-based token index within that line.
    pub token: usize,
}

/// Per-target teacher-forced metrics (`targets[].forced` in the run file).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Forced {
    /// Forced tokens scored (the expected lines; scaffolding excluded).
    pub tokens: usize,
    /// Share of forced tokens that are the model's top-1 choice.
    pub top1_share: f64,
    /// Mean log-probability of the forced tokens (natural log).
    pub mean_logprob: f64,
    /// Per line: the summed log-probability of its tokens (the line's log-likelihood).
    pub line_logprob: Vec<f64>,
    /// Where top-1 first differs from the forced text, or null.
    pub first_divergence: Option<Divergence>,
    /// Per line: every token of it is top-1, so greedy decoding from the true
    /// prefix would produce the line exactly.
    pub lines_exact: Vec<bool>,
    /// Positions whose two best logits are within [`NEAR_TIE_EPS`].
    pub near_ties: usize,
    /// The code-fence line fed before the expected lines, unscored (empty: none).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub scaffold: String,
    /// Divergence from a reference run's distributions (`bench --reference`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kld: Option<crate::score::kld::Kld>,
    /// What the file in the context adds to the forced pass (`bench --closed-book`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_gain: Option<ContextGain>,
}

/// The forced pass with the file minus the same pass without it: what the
/// context adds, sampling-free (positive: the file helps).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct ContextGain {
    pub top1_share: f64,
    pub mean_logprob: f64,
}

impl ContextGain {
    pub fn between(with_file: &Forced, without: &Forced) -> ContextGain {
        ContextGain { top1_share: with_file.top1_share - without.top1_share, mean_logprob: with_file.mean_logprob - without.mean_logprob }
    }
}

impl Forced {
    /// Summarises the readings of a forced text of `n_lines` lines.
    pub(crate) fn from_readings(readings: &[TokenReading], n_lines: usize) -> Forced {
        let n = readings.len();
        let mut line_logprob = vec![0.0f64; n_lines];
        let mut lines_exact = vec![true; n_lines];
        let mut first_divergence = None;
        let mut index_in_line = 0usize;
        let mut prev_line = usize::MAX;
        let mut top1 = 0usize;
        let mut near_ties = 0usize;
        let mut sum = 0.0f64;
        for r in readings {
            if r.line != prev_line {
                index_in_line = 0;
                prev_line = r.line;
            }
            let hit = r.top1 == r.token;
            top1 += usize::from(hit);
            near_ties += usize::from(r.top_gap < NEAR_TIE_EPS);
            sum += f64::from(r.logprob);
            if let Some(l) = line_logprob.get_mut(r.line) {
                *l += f64::from(r.logprob);
            }
            if !hit {
                if let Some(e) = lines_exact.get_mut(r.line) {
                    *e = false;
                }
                if first_divergence.is_none() {
                    first_divergence = Some(Divergence { line: r.line + 1, token: index_in_line });
                }
            }
            index_in_line += 1;
        }
        Forced {
            tokens: n,
            top1_share: if n == 0 { 0.0 } else { top1 as f64 / n as f64 },
            mean_logprob: if n == 0 { 0.0 } else { sum / n as f64 },
            line_logprob,
            first_divergence,
            lines_exact,
            near_ties,
            scaffold: String::new(),
            kld: None,
            context_gain: None,
        }
    }
}

/// Means over targets (`summary.forced`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ForcedSummary {
    pub targets: usize,
    pub top1_share: f64,
    pub mean_logprob: f64,
    /// Share of all expected lines that greedy decoding would reproduce exactly.
    pub lines_exact_share: f64,
    pub near_ties: usize,
    /// Divergence from the reference over every forced token (`bench --reference`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kld: Option<crate::score::kld::KldSummary>,
    /// The same per depth quarter ([0, .25), [.25, .5), [.5, .75), [.75, 1]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kld_by_quarter: Option<[Option<crate::score::kld::KldSummary>; 4]>,
    /// Mean over targets of what the file adds (`bench --closed-book`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_gain: Option<ContextGain>,
}

impl ForcedSummary {
    pub fn of<'a>(all: impl IntoIterator<Item = &'a Forced>) -> Option<ForcedSummary> {
        let all: Vec<&Forced> = all.into_iter().collect();
        if all.is_empty() {
            return None;
        }
        let n = all.len() as f64;
        let lines: usize = all.iter().map(|f| f.lines_exact.len()).sum();
        let exact: usize = all.iter().map(|f| f.lines_exact.iter().filter(|&&e| e).count()).sum();
        Some(ForcedSummary {
            targets: all.len(),
            top1_share: all.iter().map(|f| f.top1_share).sum::<f64>() / n,
            mean_logprob: all.iter().map(|f| f.mean_logprob).sum::<f64>() / n,
            lines_exact_share: if lines == 0 { 0.0 } else { exact as f64 / lines as f64 },
            near_ties: all.iter().map(|f| f.near_ties).sum(),
            kld: crate::score::kld::KldSummary::of(all.iter().filter_map(|f| f.kld.as_ref())),
            kld_by_quarter: None,
            context_gain: {
                let gains: Vec<ContextGain> = all.iter().filter_map(|f| f.context_gain).collect();
                let n = gains.len() as f64;
                (!gains.is_empty()).then(|| ContextGain {
                    top1_share: gains.iter().map(|g| g.top1_share).sum::<f64>() / n,
                    mean_logprob: gains.iter().map(|g| g.mean_logprob).sum::<f64>() / n,
                })
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(token: i32, top1: i32, logprob: f32, line: usize) -> TokenReading {
        TokenReading { token, top1, logprob, top_gap: 1.0, line }
    }

    #[test]
    fn metrics_from_readings() {
        let rs = [r(1, 1, -0.1, 0), r(2, 2, -0.2, 0), r(3, 9, -2.0, 1), r(4, 4, -0.1, 1)];
        let f = Forced::from_readings(&rs, 2);
        assert_eq!(f.tokens, 4);
        assert!((f.top1_share - 0.75).abs() < 1e-9);
        assert!((f.mean_logprob - (-2.4 / 4.0)).abs() < 1e-6);
        assert_eq!(f.lines_exact, vec![true, false]);
        assert_eq!(f.first_divergence, Some(Divergence { line: 2, token: 0 }));
        assert!((f.line_logprob[1] - (-2.1)).abs() < 1e-6);
    }
}
