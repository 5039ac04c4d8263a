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
//!
//! Beside it, the figures llama-perplexity's `--kl-divergence` report prints
//! ([`KldStats`]): the same definitions over the forced tokens of a run, so
//! that a reader can set posrecall's numbers beside published ones.

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
    /// The log-probability of the forced token (the text's next token),
    /// inside the K or not: llama-perplexity's Δp compares the probability of
    /// the text's own next token, which the top K alone would lose whenever
    /// the text surprised the reference.
    pub forced: f32,
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

/// log p(`forced`); −∞ for an id outside the vocabulary (which a forced
/// token of this model's own tokenizer never is).
fn forced_logprob(logits: &[f32], norm: f64, forced: u32) -> f32 {
    logits.get(forced as usize).map_or(f32::NEG_INFINITY, |&l| logprob(l, norm))
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
    /// The `k` most likely tokens of `logits`, the mass of the rest and the
    /// log-probability of `forced`, the token the text has next.
    pub fn top_k(&mut self, logits: &[f32], k: usize, forced: u32) -> TopK {
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
        TopK { ids, logprobs, rest, forced: forced_logprob(logits, norm, forced) }
    }

    /// KL(reference ‖ logits) over the reference's support plus the rest, and
    /// what a comparison records at this token, where the text's next token
    /// is `forced`.
    pub fn compare(&mut self, reference: &TopK, logits: &[f32], forced: u32) -> TokenKld {
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
            forced_delta_p: f64::from(forced_logprob(logits, norm, forced)).exp() - f64::from(reference.forced).exp(),
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
    /// p(forced token) here minus in the reference: llama-perplexity's Δp,
    /// the probability of the text's own next token.
    pub forced_delta_p: f64,
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
    /// Per forced token, in order: [`TokenKld::forced_delta_p`], the Δp of
    /// [`KldStats`]; absent in older run files, whose statistics are then
    /// not given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_delta_p: Option<Vec<f32>>,
    /// The forced tokens (0-based, in the order of `tokens`) where this run's
    /// top token is not the reference's; absent in older run files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_changed: Option<Vec<u32>>,
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
            token_delta_p: Some(readings.iter().map(|r| r.forced_delta_p as f32).collect()),
            top_changed: Some(readings.iter().enumerate().filter(|(_, r)| !r.same_top1).map(|(i, _)| i as u32).collect()),
        }
    }

    /// The per-token values [`KldStats`] reads (KLD, Δp, whether the top
    /// token is the reference's), where this target recorded them whole.
    fn per_token(&self) -> Option<impl Iterator<Item = (f64, f64, bool)> + '_> {
        let (delta_p, changed) = (self.token_delta_p.as_ref()?, self.top_changed.as_ref()?);
        if delta_p.len() != self.tokens.len() || changed.iter().any(|&i| i as usize >= self.tokens.len()) {
            return None;
        }
        let mut same = vec![true; self.tokens.len()];
        changed.iter().for_each(|&i| same[i as usize] = false);
        Some(self.tokens.iter().zip(delta_p).zip(same).map(|((&k, &d), s)| (f64::from(k), f64::from(d), s)))
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
    /// llama-perplexity's figures over the same tokens; absent where a
    /// target's run file predates them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stats: Option<KldStats>,
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
            stats: KldStats::of(&all),
        })
    }
}

/// How a sample of per-token values spreads, as llama-perplexity prints it:
/// the mean with its standard error, the extremes, and percentiles by
/// [`percentile`]'s rule.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Spread {
    pub mean: f64,
    /// The standard error of the mean ([`mean_and_se`]).
    pub mean_se: f64,
    pub max: f64,
    pub p99_9: f64,
    pub p99: f64,
    pub p95: f64,
    pub p90: f64,
    pub p75: f64,
    pub median: f64,
    pub p25: f64,
    pub p10: f64,
    pub p5: f64,
    pub p1: f64,
    pub p0_1: f64,
    pub min: f64,
}

impl Spread {
    /// Every figure with its field name, in field order (the exports' columns).
    pub fn figures(&self) -> [(&'static str, f64); 15] {
        [
            ("mean", self.mean),
            ("mean_se", self.mean_se),
            ("max", self.max),
            ("p99_9", self.p99_9),
            ("p99", self.p99),
            ("p95", self.p95),
            ("p90", self.p90),
            ("p75", self.p75),
            ("median", self.median),
            ("p25", self.p25),
            ("p10", self.p10),
            ("p5", self.p5),
            ("p1", self.p1),
            ("p0_1", self.p0_1),
            ("min", self.min),
        ]
    }

    fn of(values: &[f64]) -> Spread {
        let (mean, mean_se) = mean_and_se(values);
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let at = |f: f64| percentile(&sorted, f);
        Spread {
            mean,
            mean_se,
            max: at(1.0),
            p99_9: at(0.999),
            p99: at(0.99),
            p95: at(0.95),
            p90: at(0.90),
            p75: at(0.75),
            median: at(0.5),
            p25: at(0.25),
            p10: at(0.10),
            p5: at(0.05),
            p1: at(0.01),
            p0_1: at(0.001),
            min: at(0.0),
        }
    }
}

/// Every figure of llama-perplexity's `--kl-divergence` report on KLD and
/// Δp, over a run's (or a depth quarter's) forced tokens, every token
/// weighted alike across targets, as it weighs the tokens of its chunks.
/// Units: KLD in nats; Δp, its RMS and the same-top share as fractions
/// (llama-perplexity prints them ×100, as %). docs/METHOD.md §4d gives the
/// formulas and where posrecall's tokens differ from its.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KldStats {
    pub tokens: usize,
    /// KL(reference ‖ run) per token.
    pub kld: Spread,
    /// p(forced token) in this run minus in the reference, per token.
    pub delta_p: Spread,
    /// √(mean Δp²), and its standard error by the delta method.
    pub delta_p_rms: f64,
    pub delta_p_rms_se: f64,
    /// Share of tokens whose most likely token is the reference's, and its
    /// standard error as a proportion.
    pub same_top_p: f64,
    pub same_top_p_se: f64,
}

impl KldStats {
    /// Every figure by its path in the run file with `_` for `.`
    /// (`kld_p99_9`, `delta_p_rms`), in field order: the CSV's columns.
    pub fn figures(&self) -> Vec<(String, f64)> {
        let mut out = vec![("tokens".to_string(), self.tokens as f64)];
        for (prefix, spread) in [("kld", &self.kld), ("delta_p", &self.delta_p)] {
            out.extend(spread.figures().map(|(name, v)| (format!("{prefix}_{name}"), v)));
        }
        out.extend(
            [
                ("delta_p_rms", self.delta_p_rms),
                ("delta_p_rms_se", self.delta_p_rms_se),
                ("same_top_p", self.same_top_p),
                ("same_top_p_se", self.same_top_p_se),
            ]
            .map(|(n, v)| (n.to_string(), v)),
        );
        out
    }

    /// The figures over every token of `all`; `None` when there are no
    /// tokens or a target lacks its per-token Δp (an older run file).
    fn of(all: &[&Kld]) -> Option<KldStats> {
        let mut kld = Vec::new();
        let mut delta_p = Vec::new();
        let mut same = 0usize;
        for k in all {
            for (v, d, s) in k.per_token()? {
                kld.push(v);
                delta_p.push(d);
                same += usize::from(s);
            }
        }
        if kld.is_empty() {
            return None;
        }
        let n = kld.len();
        let squares: Vec<f64> = delta_p.iter().map(|d| d * d).collect();
        let (mse, mse_se) = mean_and_se(&squares);
        let rms = mse.sqrt();
        let same_top_p = same as f64 / n as f64;
        Some(KldStats {
            tokens: n,
            kld: Spread::of(&kld),
            delta_p: Spread::of(&delta_p),
            delta_p_rms: rms,
            // d√x/dx = 1/(2√x); no spread to carry where every Δp is 0.
            delta_p_rms_se: if rms > 0.0 { 0.5 / rms * mse_se } else { 0.0 },
            same_top_p,
            same_top_p_se: if n > 1 { (same_top_p * (1.0 - same_top_p) / (n - 1) as f64).sqrt() } else { 0.0 },
        })
    }
}

/// The mean of `values` and its standard error, √(σ²/(n − 1)) with σ² the
/// population variance (the sample standard deviation over √n), as
/// llama-perplexity computes it: 0 where there are 10 values or fewer, or
/// no spread. The variance is taken about the mean (two passes), which
/// equals llama-perplexity's E[x²] − E[x]² without its cancellation.
fn mean_and_se(values: &[f64]) -> (f64, f64) {
    if values.is_empty() {
        return (0.0, 0.0);
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    let se = if var > 0.0 && values.len() > 10 { (var / (n - 1.0)).sqrt() } else { 0.0 };
    (mean, se)
}

/// The `fraction` percentile of `sorted` (ascending), by linear
/// interpolation between the two closest ranks at `fraction × (n − 1)`:
/// llama-perplexity's rule, numpy's default (`linear`), Hyndman and Fan's
/// type 7. Its median (the mean of the two middle values for an even count)
/// is the same rule at 0.5.
fn percentile(sorted: &[f64], fraction: f64) -> f64 {
    let (Some(&first), Some(&last)) = (sorted.first(), sorted.last()) else { return 0.0 };
    if fraction <= 0.0 {
        return first;
    }
    if fraction >= 1.0 {
        return last;
    }
    let at = fraction * (sorted.len() - 1) as f64;
    let i = at.floor() as usize;
    let t = at - i as f64;
    let next = sorted[(i + 1).min(sorted.len() - 1)];
    (1.0 - t) * sorted[i] + t * next
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
        let t = Reader::default().top_k(&logits, 3, 4);
        assert_eq!(t.ids, vec![1, 3, 2], "ties: the lower id first, as greedy sampling");
        let p = softmax(&logits);
        assert!((f64::from(t.rest) - (p[0] + p[4])).abs() < 1e-7);
        assert!((f64::from(t.logprobs[0]) - p[1].ln()).abs() < 1e-6);
        // The forced token's own log-probability, though it is outside the K.
        assert!((f64::from(t.forced) - p[4].ln()).abs() < 1e-6);
        // K larger than the vocabulary keeps everything, nothing outside.
        let all = Reader::default().top_k(&logits, 99, 0);
        assert_eq!(all.ids.len(), 5);
        assert_eq!(all.rest, 0.0);
    }

    #[test]
    fn identical_distributions_give_exactly_zero() {
        let logits: Vec<f32> = (0..500).map(|i| ((i * 37 % 101) as f32) / 7.0).collect();
        let mut r = Reader::default();
        let t = r.top_k(&logits, 16, 300);
        let c = r.compare(&t, &logits, 300);
        assert_eq!(c.kld, 0.0);
        assert_eq!(c.delta_p, 0.0);
        assert_eq!(c.forced_delta_p, 0.0);
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
            let stored = r.top_k(&p, k, 0);
            let got = r.compare(&stored, &q, 0).kld;
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
        let stored = r.top_k(&p, 2, 0);
        let c = r.compare(&stored, &q, 0);
        assert!(!c.same_top1);
        let sp = softmax(&p);
        // The reference found its top token (1) more likely than this run's (2) by this much.
        assert!((c.flip_margin.unwrap() - (sp[1].ln() - sp[2].ln())).abs() < 1e-6);
        assert_eq!(r.compare(&stored, &p, 0).flip_margin, None);
        // This run's top token outside the stored one: at least the stored span.
        let narrow = r.top_k(&p, 1, 0);
        assert_eq!(r.compare(&narrow, &q, 0).flip_margin, Some(0.0));
        let (sp, sq) = (softmax(&p), softmax(&q));
        assert!((c.delta_p - (sq[1] - sp[1])).abs() < 1e-6);
        // llama-perplexity's Δp is of the forced token (0 here, outside the
        // stored K), not of the reference's top one.
        assert!((c.forced_delta_p - (sq[0] - sp[0])).abs() < 1e-6);
        assert!(c.kld > 0.0);
    }

    #[test]
    fn summaries_weight_tokens_alike() {
        let t = |kld: f64, same: bool| TokenKld {
            kld,
            delta_p: -kld,
            forced_delta_p: kld / 4.0,
            same_top1: same,
            flip_margin: (!same).then_some(kld / 2.0),
        };
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

    /// llama-perplexity's percentile rule on hand-worked samples: linear
    /// between the ranks around fraction × (n − 1).
    #[test]
    fn percentiles_interpolate_between_the_closest_ranks() {
        let v = [1.0, 2.0, 4.0, 8.0, 16.0];
        // 0.5 × 4 = 2: the third value exactly; the median of an odd count.
        assert_eq!(percentile(&v, 0.5), 4.0);
        // 0.9 × 4 = 3.6: 8 + 0.6 × (16 − 8) = 12.8.
        assert!((percentile(&v, 0.9) - 12.8).abs() < 1e-12);
        // 0.1 × 4 = 0.4: 1 + 0.4 × (2 − 1) = 1.4.
        assert!((percentile(&v, 0.1) - 1.4).abs() < 1e-12);
        // 0.999 × 4 = 3.996: 8 + 0.996 × 8 = 15.968.
        assert!((percentile(&v, 0.999) - 15.968).abs() < 1e-12);
        assert_eq!((percentile(&v, 0.0), percentile(&v, 1.0)), (1.0, 16.0));
        // An even count: the median is the mean of the two middle values.
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 10.0], 0.5), 2.5);
        assert_eq!(percentile(&[7.0], 0.25), 7.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
    }

    /// The standard errors on hand-worked samples: of a mean, of an RMS (by
    /// the delta method) and of a proportion.
    #[test]
    fn standard_errors_follow_llama_perplexity() {
        // 0..=11: mean 5.5, population variance (12² − 1)/12 = 143/12; the
        // standard error √(143/12 / 11) = √(13/12).
        let v: Vec<f64> = (0..12).map(f64::from).collect();
        let (m, se) = mean_and_se(&v);
        assert_eq!(m, 5.5);
        assert!((se - (13.0f64 / 12.0).sqrt()).abs() < 1e-12, "{se}");
        // Ten values or fewer: no standard error, as llama-perplexity gives none.
        assert_eq!(mean_and_se(&v[..10]).1, 0.0);
        // No spread: none either.
        assert_eq!(mean_and_se(&[0.5; 20]), (0.5, 0.0));

        // 12 tokens: Δp = ±0.1 on 6, ±0.3 on the other 6 (half of each
        // sign); KLD 0 except 0.6 on one. Δp² is 0.01 or 0.09, mean 0.05,
        // population variance 0.0016, so the MSE's standard error is
        // √(0.0016 / 11) and the RMS's is that / (2 √0.05). Top token
        // changed at 3 of 12: same top p = 0.75, s.e. √(0.75 · 0.25 / 11).
        let d = [0.1, -0.1, 0.1, -0.1, 0.1, -0.1, 0.3, -0.3, 0.3, -0.3, 0.3, -0.3];
        let readings: Vec<TokenKld> = d
            .iter()
            .enumerate()
            .map(|(i, &x)| TokenKld {
                kld: if i == 5 { 0.6 } else { 0.0 },
                delta_p: 0.0,
                forced_delta_p: x,
                same_top1: ![2, 5, 7].contains(&i),
                flip_margin: None,
            })
            .collect();
        let k = Kld::of(&readings, &[0; 12], 1);
        assert_eq!(k.top_changed, Some(vec![2, 5, 7]));
        let s = KldSummary::of([&k]).unwrap().stats.unwrap();
        assert_eq!(s.tokens, 12);
        let f32_close = |a: f64, b: f64| (a - b).abs() < 1e-7;
        assert!(f32_close(s.delta_p_rms, 0.05f64.sqrt()), "{}", s.delta_p_rms);
        assert!(f32_close(s.delta_p_rms_se, (0.0016f64 / 11.0).sqrt() / (2.0 * 0.05f64.sqrt())), "{}", s.delta_p_rms_se);
        assert_eq!(s.same_top_p, 0.75);
        assert!((s.same_top_p_se - (0.75f64 * 0.25 / 11.0).sqrt()).abs() < 1e-12);
        assert!(f32_close(s.delta_p.mean, 0.0) && f32_close(s.delta_p.max, 0.3) && f32_close(s.delta_p.min, -0.3));
        // Sorted Δp: six −0.x then six +0.x; the median is between −0.1 and 0.1.
        assert!(f32_close(s.delta_p.median, 0.0));
        // KLD: one 0.6 of 12; mean 0.05, p99 at 0.99 × 11 = 10.89 → 0.89 × 0.6.
        assert!(f32_close(s.kld.mean, 0.05) && f32_close(s.kld.max, 0.6) && f32_close(s.kld.p99, 0.89 * 0.6));
        assert_eq!((s.kld.median, s.kld.min), (0.0, 0.0));
        // mean_se of the KLD: population variance 0.36/12 − 0.05² = 0.0275.
        assert!(f32_close(s.kld.mean_se, (0.0275f64 / 11.0).sqrt()), "{}", s.kld.mean_se);

        // The exports' names are the run file's fields, every one.
        let json = serde_json::to_value(&s).unwrap();
        let mut fields = Vec::new();
        for (key, v) in json.as_object().unwrap() {
            match v.as_object() {
                Some(inner) => fields.extend(inner.iter().map(|(k, x)| (format!("{key}_{k}"), x.as_f64().unwrap()))),
                None => fields.push((key.clone(), v.as_f64().unwrap())),
            }
        }
        let mut named = s.figures();
        named.sort_by(|a, b| a.0.cmp(&b.0));
        fields.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(named, fields);

        // An older run file (no per-token Δp): no statistics, the rest as before.
        let old = Kld { token_delta_p: None, ..k.clone() };
        let summary = KldSummary::of([&old]).unwrap();
        assert!(summary.stats.is_none());
        assert_eq!(summary.mean, KldSummary::of([&k]).unwrap().mean);
    }
}
