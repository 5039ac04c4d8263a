//! KL divergence against a reference run, on the teacher-forced tokens.
//!
//! docs/METHOD.md §4d (KL divergence). A reference run (`bench
//! --save-reference`) keeps, for every scored forced token, the K most likely
//! next tokens of its distribution P with their log-probabilities and the mass
//! P leaves outside them. A later run (`bench --reference`) reads its own
//! distribution Q at the same token after the same text and computes
//! KL(P ‖ Q) over the K stored tokens plus one bin for the rest: exact on the
//! stored support, and, by the log-sum inequality, never more than the
//! divergence over the whole vocabulary (a lower bound that is tight when P
//! leaves little mass outside its top K).

use serde::{Deserialize, Serialize};

/// The reference distribution at one forced token.
#[derive(Debug, Clone, PartialEq)]
pub struct TopK {
    /// The K most likely tokens, most likely first (ties: the lower id first,
    /// as greedy sampling picks).
    pub ids: Vec<u32>,
    /// Their log-probabilities (natural log).
    pub logprobs: Vec<f32>,
    /// The probability of every other token together.
    pub rest: f32,
}

impl TopK {
    /// How much more likely the reference found its top token than `id`:
    /// the difference of their log-probabilities; for a token outside the
    /// stored K, the difference to the K-th, which it is at least.
    fn margin_to(&self, id: u32) -> f64 {
        let top = self.logprobs.first().copied().unwrap_or(0.0);
        let other = match self.ids.iter().position(|&i| i == id) {
            Some(at) => self.logprobs[at],
            None => self.logprobs.last().copied().unwrap_or(top),
        };
        f64::from(top) - f64::from(other)
    }
}

/// log Σ exp(logits), computed stably in f64.
fn log_norm(logits: &[f32]) -> f64 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if !max.is_finite() {
        return f64::from(max);
    }
    let sum: f64 = logits.iter().map(|&v| f64::from(v - max).exp()).sum();
    f64::from(max) + sum.ln()
}

/// log p(i), rounded to f32 the one way both sides of a comparison use, so
/// that a distribution compared with itself gives exactly 0.
fn logprob(logit: f32, norm: f64) -> f32 {
    (f64::from(logit) - norm) as f32
}

/// The mass outside `ids`, summed over the other tokens (not 1 − the sum over
/// `ids`, which would cancel to noise when the rest is small).
fn rest_mass(logits: &[f32], norm: f64, ids: &[u32], mask: &mut Vec<bool>) -> f32 {
    mask.clear();
    mask.resize(logits.len(), false);
    for &i in ids {
        if let Some(m) = mask.get_mut(i as usize) {
            *m = true;
        }
    }
    let rest: f64 = logits.iter().zip(mask.iter()).filter(|(_, inside)| !**inside).map(|(&v, _)| (f64::from(v) - norm).exp()).sum();
    rest as f32
}

/// Reads distributions from logits; holds buffers reused across tokens.
#[derive(Debug, Default)]
pub struct Reader {
    order: Vec<u32>,
    mask: Vec<bool>,
}

impl Reader {
    /// The `k` most likely tokens of `logits` and the mass of the rest.
    pub fn top_k(&mut self, logits: &[f32], k: usize) -> TopK {
        let norm = log_norm(logits);
        let k = k.clamp(1, logits.len().max(1));
        self.order.clear();
        self.order.extend(0..logits.len() as u32);
        // Larger logit first; the lower id first among equals.
        let rank = |a: &u32, b: &u32| logits[*b as usize].total_cmp(&logits[*a as usize]).then(a.cmp(b));
        if k < self.order.len() {
            self.order.select_nth_unstable_by(k - 1, rank);
            self.order.truncate(k);
        }
        self.order.sort_unstable_by(rank);
        let ids = self.order.clone();
        let logprobs = ids.iter().map(|&i| logprob(logits[i as usize], norm)).collect();
        let rest = rest_mass(logits, norm, &ids, &mut self.mask);
        TopK { ids, logprobs, rest }
    }

    /// KL(reference ‖ logits) over the reference's support plus the rest, and
    /// what a comparison records at this token.
    pub fn compare(&mut self, reference: &TopK, logits: &[f32]) -> TokenKld {
        let norm = log_norm(logits);
        let mut kld = 0.0f64;
        for (&i, &lp) in reference.ids.iter().zip(&reference.logprobs) {
            let lq = logits.get(i as usize).map_or(f32::NEG_INFINITY, |&l| logprob(l, norm));
            let p = f64::from(lp).exp();
            if p > 0.0 {
                kld += p * (f64::from(lp) - f64::from(lq));
            }
        }
        let q_rest = rest_mass(logits, norm, &reference.ids, &mut self.mask);
        let p_rest = f64::from(reference.rest);
        if p_rest > 0.0 {
            // A rest the run gives no mass at all would be an infinite
            // divergence; the smallest positive f64 keeps it finite and huge.
            kld += p_rest * (p_rest.ln() - f64::from(q_rest).max(f64::MIN_POSITIVE).ln());
        }
        let top = reference.ids.first().copied().unwrap_or(0);
        let p_top = reference.logprobs.first().map_or(0.0, |&lp| f64::from(lp).exp());
        let q_top = logits.get(top as usize).map_or(0.0, |&l| f64::from(logprob(l, norm)).exp());
        let run_top = crate::decode::logits::read_logits(logits, 0).0;
        TokenKld {
            // Rounding can leave a few ulps below zero for near-equal distributions.
            kld: kld.max(0.0),
            delta_p: q_top - p_top,
            same_top1: run_top == top as usize,
            flip_margin: (run_top != top as usize).then(|| reference.margin_to(run_top as u32)),
        }
    }
}

/// One forced token compared with the reference.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TokenKld {
    pub kld: f64,
    /// p(reference's top token) here minus in the reference.
    pub delta_p: f64,
    /// This run's top token is the reference's.
    pub same_top1: bool,
    /// Where it is not: how much more likely the reference found its own top
    /// token than this run's (log-probability difference, nats; at least this
    /// much when this run's top token is outside the stored K). A small margin
    /// is a near tie that rounding alone can tip.
    pub flip_margin: Option<f64>,
}

/// The widest margin among the tokens whose top-1 changed (`None`: none did).
fn widest(margins: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    margins.flatten().fold(None, |w, m| Some(w.map_or(m, |w: f64| w.max(m))))
}

/// The 99th percentile (nearest rank) of `values`.
fn p99(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((0.99 * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// Per-target divergence from the reference (`targets[].forced.kld`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Kld {
    /// Mean KL(reference ‖ run) over the forced tokens (nats).
    pub mean: f64,
    /// Its 99th percentile and maximum over the tokens.
    pub p99: f64,
    pub max: f64,
    /// Share of tokens where the run's top token is the reference's.
    pub same_top1: f64,
    /// Mean change of the reference's top token's probability (run − reference).
    pub mean_delta_p: f64,
    /// Where the top token changed, the widest margin the reference had
    /// between its top token and this run's ([`TokenKld::flip_margin`]);
    /// absent when it never changed, and in older run files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_flip_margin: Option<f64>,
    /// Per expected line: the mean over its tokens (0 for a line without tokens).
    pub line_mean: Vec<f64>,
    /// Per forced token, in order: the divergence (for run-wide percentiles).
    pub tokens: Vec<f32>,
}

impl Kld {
    /// Summarises per-token comparisons; `lines[i]` is token i's 0-based line.
    pub fn of(readings: &[TokenKld], lines: &[usize], n_lines: usize) -> Kld {
        let n = readings.len().max(1) as f64;
        let values: Vec<f64> = readings.iter().map(|r| r.kld).collect();
        let mut line_sum = vec![(0.0f64, 0usize); n_lines];
        for (r, &l) in readings.iter().zip(lines) {
            if let Some(s) = line_sum.get_mut(l) {
                s.0 += r.kld;
                s.1 += 1;
            }
        }
        Kld {
            mean: values.iter().sum::<f64>() / n,
            p99: p99(&values),
            max: values.iter().copied().fold(0.0, f64::max),
            same_top1: readings.iter().filter(|r| r.same_top1).count() as f64 / n,
            mean_delta_p: readings.iter().map(|r| r.delta_p).sum::<f64>() / n,
            max_flip_margin: widest(readings.iter().map(|r| r.flip_margin)),
            line_mean: line_sum.iter().map(|&(s, c)| if c == 0 { 0.0 } else { s / c as f64 }).collect(),
            tokens: values.iter().map(|&v| v as f32).collect(),
        }
    }
}

/// The divergence over many targets, every token weighted alike (as
/// llama-perplexity weighs them).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KldSummary {
    pub targets: usize,
    pub tokens: usize,
    pub mean: f64,
    pub p99: f64,
    pub max: f64,
    pub same_top1: f64,
    pub mean_delta_p: f64,
    /// The widest of the targets' [`Kld::max_flip_margin`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_flip_margin: Option<f64>,
}

impl KldSummary {
    pub fn of<'a>(all: impl IntoIterator<Item = &'a Kld>) -> Option<KldSummary> {
        let all: Vec<&Kld> = all.into_iter().collect();
        let values: Vec<f64> = all.iter().flat_map(|k| k.tokens.iter().map(|&v| f64::from(v))).collect();
        if values.is_empty() {
            return None;
        }
        let n = values.len() as f64;
        let weighted = |f: fn(&Kld) -> f64| all.iter().map(|k| f(k) * k.tokens.len() as f64).sum::<f64>() / n;
        Some(KldSummary {
            targets: all.len(),
            tokens: values.len(),
            mean: values.iter().sum::<f64>() / n,
            p99: p99(&values),
            max: values.iter().copied().fold(0.0, f64::max),
            same_top1: weighted(|k| k.same_top1),
            mean_delta_p: weighted(|k| k.mean_delta_p),
            max_flip_margin: widest(all.iter().map(|k| k.max_flip_margin)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn softmax(l: &[f32]) -> Vec<f64> {
        let n = log_norm(l);
        l.iter().map(|&v| (f64::from(v) - n).exp()).collect()
    }

    fn full_kld(p: &[f32], q: &[f32]) -> f64 {
        let (p, q) = (softmax(p), softmax(q));
        p.iter().zip(&q).map(|(a, b)| a * (a / b).ln()).sum()
    }

    #[test]
    fn top_k_orders_by_logit_then_id_and_keeps_the_rest() {
        let logits = [1.0, 3.0, 2.0, 3.0, -1.0];
        let t = Reader::default().top_k(&logits, 3);
        assert_eq!(t.ids, vec![1, 3, 2], "ties: the lower id first, as greedy sampling");
        let p = softmax(&logits);
        assert!((f64::from(t.rest) - (p[0] + p[4])).abs() < 1e-7);
        assert!((f64::from(t.logprobs[0]) - p[1].ln()).abs() < 1e-6);
        // K larger than the vocabulary keeps everything, nothing outside.
        let all = Reader::default().top_k(&logits, 99);
        assert_eq!(all.ids.len(), 5);
        assert_eq!(all.rest, 0.0);
    }

    #[test]
    fn identical_distributions_give_exactly_zero() {
        let logits: Vec<f32> = (0..500).map(|i| ((i * 37 % 101) as f32) / 7.0).collect();
        let mut r = Reader::default();
        let t = r.top_k(&logits, 16);
        let c = r.compare(&t, &logits);
        assert_eq!(c.kld, 0.0);
        assert_eq!(c.delta_p, 0.0);
        assert!(c.same_top1);
    }

    #[test]
    fn the_stored_support_bounds_the_full_divergence() {
        let p: Vec<f32> = (0..300).map(|i| ((i * 37 % 101) as f32) / 9.0).collect();
        let q: Vec<f32> = p.iter().enumerate().map(|(i, v)| v + ((i * 13 % 7) as f32 - 3.0) / 10.0).collect();
        let exact = full_kld(&p, &q);
        let mut r = Reader::default();
        let mut last = 0.0;
        for k in [1, 4, 16, 64, 300] {
            let stored = r.top_k(&p, k);
            let got = r.compare(&stored, &q).kld;
            assert!(got <= exact + 1e-9, "K={k}: {got} above the full {exact}");
            assert!(got >= last - 1e-9, "a larger K never loosens the bound");
            last = got;
        }
        assert!((last - exact).abs() < 1e-6, "the whole vocabulary stored: exact");
    }

    #[test]
    fn delta_p_and_top1_follow_the_reference_token() {
        let p = [0.0f32, 2.0, 1.0];
        let q = [0.0f32, 1.0, 2.0];
        let mut r = Reader::default();
        let stored = r.top_k(&p, 2);
        let c = r.compare(&stored, &q);
        assert!(!c.same_top1);
        let sp = softmax(&p);
        // The reference found its top token (1) more likely than this run's (2) by this much.
        assert!((c.flip_margin.unwrap() - (sp[1].ln() - sp[2].ln())).abs() < 1e-6);
        assert_eq!(r.compare(&stored, &p).flip_margin, None);
        // This run's top token outside the stored one: at least the stored span.
        let narrow = r.top_k(&p, 1);
        assert_eq!(r.compare(&narrow, &q).flip_margin, Some(0.0));
        let (sp, sq) = (softmax(&p), softmax(&q));
        assert!((c.delta_p - (sq[1] - sp[1])).abs() < 1e-6);
        assert!(c.kld > 0.0);
    }

    #[test]
    fn summaries_weight_tokens_alike() {
        let t = |kld: f64, same: bool| TokenKld { kld, delta_p: -kld, same_top1: same, flip_margin: (!same).then_some(kld / 2.0) };
        let a = Kld::of(&[t(0.0, true), t(0.2, false)], &[0, 1], 3);
        assert_eq!(a.line_mean, vec![0.0, 0.2, 0.0]);
        assert!((a.mean - 0.1).abs() < 1e-12);
        assert_eq!(a.same_top1, 0.5);
        let b = Kld::of(&[t(0.4, true); 8], &[0; 8], 1);
        let s = KldSummary::of([&a, &b]).unwrap();
        assert_eq!((s.targets, s.tokens), (2, 10));
        assert!((s.mean - (0.2 + 3.2) / 10.0).abs() < 1e-6);
        assert!((s.same_top1 - 0.9).abs() < 1e-12);
        assert!((s.max - 0.4).abs() < 1e-6);
        assert!((s.p99 - 0.4).abs() < 1e-6);
        assert_eq!((a.max_flip_margin, b.max_flip_margin, s.max_flip_margin), (Some(0.1), None, Some(0.1)));
        assert!(KldSummary::of([]).is_none());
    }
}
