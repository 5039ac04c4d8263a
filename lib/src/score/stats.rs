//! Paired statistics for comparing two runs over the same targets.
//!
//! Two runs asked about the same targets give paired observations: per target,
//! pass or fail in each run, matched lines in each run. Paired tests use that
//! pairing (a target that is hard for one build is usually hard for the other)
//! and so detect differences that unpaired tests on the two pass rates miss.
//! Benchmarks here have tens of targets, not thousands, so every test is
//! *exact*: no normal approximation whose error is unknown at n = 16.
//!
//! Everything is a pure function of its arguments; `posrecall compare` turns the
//! results into words.

use serde::Serialize;

/// The two-sided 95% normal quantile, Φ⁻¹(0.975).
pub(crate) const Z95: f64 = 1.959963984540054;

/// Differences (and gaps between differences) no larger than this count as zero
/// (resp. as tied) in [`wilcoxon_signed_rank`]. Integer data are unaffected;
/// ratios such as `top1_share` that are equal in exact arithmetic may differ in
/// the last bits of an `f64` difference.
pub(crate) const TIE_TOLERANCE: f64 = 1e-9;

/// ln(n!), to within a few ulps.
///
/// Exact summation of logarithms below 64, Stirling's series above (its first
/// omitted term is below 1e-18 there). Log space lets binomial probabilities be
/// computed for thousands of trials without overflow.
pub(crate) fn ln_factorial(n: u64) -> f64 {
    if n < 64 {
        return (2..=n).map(|k| (k as f64).ln()).sum();
    }
    let x = n as f64;
    let x2 = x * x;
    x * x.ln() - x + 0.5 * (2.0 * std::f64::consts::PI * x).ln() + 1.0 / (12.0 * x) - 1.0 / (360.0 * x * x2) + 1.0 / (1260.0 * x * x2 * x2)
}

/// ln C(n, k); −∞ when k > n.
pub(crate) fn ln_choose(n: u64, k: u64) -> f64 {
    if k > n {
        return f64::NEG_INFINITY;
    }
    ln_factorial(n) - ln_factorial(k) - ln_factorial(n - k)
}

/// ln P[X = k] for X ~ Bin(n, p); handles p = 0 and p = 1 (−∞ for impossible k).
pub(crate) fn binom_ln_pmf(n: u64, k: u64, p: f64) -> f64 {
    if k > n {
        return f64::NEG_INFINITY;
    }
    if p <= 0.0 {
        return if k == 0 { 0.0 } else { f64::NEG_INFINITY };
    }
    if p >= 1.0 {
        return if k == n { 0.0 } else { f64::NEG_INFINITY };
    }
    ln_choose(n, k) + k as f64 * p.ln() + (n - k) as f64 * (-p).ln_1p()
}

/// P[X ≤ k] for X ~ Bin(n, p), accurate in relative terms in the lower tail.
///
/// Sums from `k` away from the mode, where the terms fall monotonically, and
/// stops once they no longer change the sum: below the mode it adds
/// P[X = k], P[X = k−1], …; at or above it, it returns 1 − P[X > k]. Only the
/// first term is computed in log space (no overflow at any n); the others
/// follow by the ratio of consecutive terms. That keeps the cost near O(√n)
/// cheap steps per call, which the power search needs.
pub(crate) fn binom_cdf(n: u64, k: u64, p: f64) -> f64 {
    if k >= n {
        return 1.0;
    }
    let p = p.clamp(0.0, 1.0);
    if p == 0.0 {
        return 1.0;
    }
    if p == 1.0 {
        return 0.0;
    }
    let odds = p / (1.0 - p);
    let mode = (((n + 1) as f64 * p).floor() as u64).min(n);
    let v = if k < mode {
        // P[X = j − 1] = P[X = j] · j / ((n − j + 1) · odds)
        let (mut term, mut sum) = (1.0f64, 1.0f64);
        let mut j = k;
        while j > 0 {
            term *= j as f64 / ((n - j + 1) as f64 * odds);
            sum += term;
            if term <= sum * 1e-17 {
                break;
            }
            j -= 1;
        }
        sum * binom_ln_pmf(n, k, p).exp()
    } else {
        // P[X = j + 1] = P[X = j] · (n − j) · odds / (j + 1)
        let (mut term, mut sum) = (1.0f64, 1.0f64);
        let mut j = k + 1;
        while j < n {
            term *= (n - j) as f64 * odds / (j + 1) as f64;
            sum += term;
            if term <= sum * 1e-17 {
                break;
            }
            j += 1;
        }
        1.0 - sum * binom_ln_pmf(n, k + 1, p).exp()
    };
    v.clamp(0.0, 1.0)
}

/// Exact McNemar test, two-sided.
///
/// Of the targets the runs disagree on, `b` pass only in A and `c` only in B.
/// Under "no difference" each disagreement is equally likely to go either way,
/// so b ~ Bin(b + c, 1/2); the p-value is min(1, 2·P[X ≤ min(b, c)]). The
/// targets both pass or both fail carry no information about the difference
/// and do not enter. With no disagreements p = 1.
pub(crate) fn mcnemar_exact(b: u64, c: u64) -> f64 {
    let n = b + c;
    if n == 0 {
        return 1.0;
    }
    if b.abs_diff(c) <= 1 {
        // P[X ≤ min(b, c)] ≥ ½ exactly: the p-value is 1, without rounding.
        return 1.0;
    }
    let m = b.min(c);
    let tail = if n <= 1000 {
        // Small n, in linear space: 2^−n is exact, and each further term
        // C(n, j + 1)/2^n = C(n, j)/2^n · (n − j) / (j + 1) is exact while the
        // binomial coefficients fit in 53 bits (n up to about 50), else one
        // rounding per term.
        let mut term = 0.5f64.powi(n as i32);
        let mut sum = term;
        for j in 0..m {
            term = term * (n - j) as f64 / (j + 1) as f64;
            sum += term;
        }
        sum
    } else {
        binom_cdf(n, m, 0.5)
    };
    (2.0 * tail).min(1.0)
}

/// Wilson score interval for the proportion k/n at normal quantile `z`.
///
/// Unlike k/n ± z·se it stays inside [0, 1] and keeps its coverage near 0 and
/// 1 and for small n, which is where benchmark pass rates live. n = 0 gives
/// the uninformative (0, 1).
pub(crate) fn wilson(k: u64, n: u64, z: f64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let n = n as f64;
    let p = k as f64 / n;
    let z2 = z * z;
    let denom = 1.0 + z2 / n;
    let center = (p + z2 / (2.0 * n)) / denom;
    let half = z / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((center - half).max(0.0), (center + half).min(1.0))
}

/// The 95% Wilson score interval ([`wilson`] at [`Z95`]).
pub fn wilson95(k: u64, n: u64) -> (f64, f64) {
    wilson(k, n, Z95)
}

/// Result of an exact Wilcoxon signed-rank test.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Wilcoxon {
    /// Nonzero differences: the pairs the test uses.
    pub n: usize,
    /// Zero differences, dropped (Wilcoxon's method).
    pub zeros: usize,
    /// Sum of the ranks of |d| over positive differences (mid-ranks on ties).
    pub w_plus: f64,
    /// Sum of the ranks of |d| over negative differences.
    pub w_minus: f64,
    /// Two-sided exact p-value.
    pub p: f64,
}

/// Exact Wilcoxon signed-rank test, two-sided, on paired differences.
///
/// Zero differences are dropped (Wilcoxon's original method, not Pratt's) and
/// `n` counts what is left; |d| within [`TIE_TOLERANCE`] of zero counts as
/// zero, and |d| within it of each other as tied. Tied |d| get the mean of the
/// ranks they span. The null distribution of W+ is computed exactly,
/// conditional on those ranks: each of the 2^n sign patterns is equally likely,
/// and a dynamic programme over the rank sums counts them. Mid-ranks can be
/// half-integers, so the programme runs on doubled ranks, which are integers.
/// p = min(1, 2·min(P[W+ ≤ w], P[W+ ≥ w])); n = 0 gives p = 1.
///
/// Cost is O(n³) time and O(n²) memory: fine for the hundreds of targets a
/// benchmark has.
pub(crate) fn wilcoxon_signed_rank(diffs: &[f64]) -> Wilcoxon {
    let nonzero: Vec<f64> = diffs.iter().copied().filter(|d| d.abs() > TIE_TOLERANCE).collect();
    let zeros = diffs.len() - nonzero.len();
    let n = nonzero.len();
    if n == 0 {
        return Wilcoxon { n: 0, zeros, w_plus: 0.0, w_minus: 0.0, p: 1.0 };
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| nonzero[i].abs().total_cmp(&nonzero[j].abs()));
    // Doubled mid-rank of each difference: positions i..=j (1-based) share i + j.
    let mut rank2 = vec![0u64; n];
    let mut start = 0;
    while start < n {
        let mut end = start;
        while end + 1 < n && nonzero[order[end + 1]].abs() - nonzero[order[end]].abs() <= TIE_TOLERANCE {
            end += 1;
        }
        for &i in &order[start..=end] {
            rank2[i] = (start + 1 + end + 1) as u64;
        }
        start = end + 1;
    }
    let w2_plus: u64 = (0..n).filter(|&i| nonzero[i] > 0.0).map(|i| rank2[i]).sum();
    let total: u64 = rank2.iter().sum();
    // dist[s] = P[doubled W+ = s] under random signs.
    let mut dist = vec![0.0f64; total as usize + 1];
    dist[0] = 1.0;
    let mut reach = 0usize;
    for &r in &rank2 {
        let r = r as usize;
        reach += r;
        for s in (0..=reach).rev() {
            let with = if s >= r { dist[s - r] } else { 0.0 };
            dist[s] = 0.5 * (dist[s] + with);
        }
    }
    let w = w2_plus as usize;
    let le: f64 = dist[..=w].iter().sum();
    let ge: f64 = dist[w..].iter().sum();
    Wilcoxon { n, zeros, w_plus: w2_plus as f64 / 2.0, w_minus: (total - w2_plus) as f64 / 2.0, p: (2.0 * le.min(ge)).min(1.0) }
}

/// Exact power of the two-sided exact McNemar test at level `alpha` for a
/// study of `n` targets, when per target A-only passes occur with probability
/// `p10` and B-only passes with `p01`.
///
/// The number of disagreements is D ~ Bin(n, p10 + p01); given D = d, the A-only
/// count is B ~ Bin(d, p10 / (p10 + p01)); the study rejects when
/// [`mcnemar_exact`] on (B, d − B) is ≤ `alpha`. Power is the probability of
/// that, summed exactly over d.
pub fn mcnemar_power(n: u64, p10: f64, p01: f64, alpha: f64) -> f64 {
    PowerCalc::new(p10, p01, alpha).power(n)
}

/// How many targets a study needs for the exact McNemar test to detect a
/// given difference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleSize {
    /// This many targets give at least the asked power.
    Targets(u64),
    /// p10 = p01: there is no difference to detect, at any size.
    NotReachable,
    /// Not reached at the cap searched to (the cap is given).
    BeyondCap(u64),
}

/// Below this the search for [`mcnemar_targets_for_power`] tries every size.
pub(crate) const POWER_LINEAR_LIMIT: u64 = 2000;

/// The smallest number of targets at which the exact McNemar test at level
/// `alpha` reaches `power` (e.g. 0.8), for per-target discordance
/// probabilities `p10` (A only) and `p01` (B only), as estimated by b/N and c/N
/// from an observed comparison of N targets.
///
/// The power of an exact test is not monotone in the number of targets (it
/// saw-tooths as the discrete critical region jumps), so bisection could miss
/// the first crossing. Up to [`POWER_LINEAR_LIMIT`] every size is tried, and the
/// answer is the exact smallest. Beyond it sizes grow in steps of 1%; at the
/// first step that reaches the power, the sizes since the previous step are
/// tried one by one and the smallest that reaches it is returned. (A crossing
/// that starts and ends between two 1% steps above 2000 could be missed; the
/// saw-tooth there is a small fraction of the power.) The search stops at
/// `cap`. p10 = p01 (including no discordance at all) is [`SampleSize::NotReachable`].
pub(crate) fn mcnemar_targets_for_power(p10: f64, p01: f64, alpha: f64, power: f64, cap: u64) -> SampleSize {
    if !(p10 >= 0.0 && p01 >= 0.0) || p10 == p01 || p10 + p01 > 1.0 + 1e-12 {
        return SampleSize::NotReachable;
    }
    let mut calc = PowerCalc::new(p10, p01, alpha);
    for n in 1..=POWER_LINEAR_LIMIT.min(cap) {
        if calc.power(n) >= power {
            return SampleSize::Targets(n);
        }
    }
    let mut prev = POWER_LINEAR_LIMIT;
    while prev < cap {
        let next = (prev + (prev / 100).max(1)).min(cap);
        if calc.power(next) >= power {
            for n in prev + 1..=next {
                if calc.power(n) >= power {
                    return SampleSize::Targets(n);
                }
            }
        }
        prev = next;
    }
    SampleSize::BeyondCap(cap)
}

/// Power of the exact McNemar test, with the rejection probability per number
/// of discordant targets memoised so that a search over many sizes reuses it.
struct PowerCalc {
    alpha: f64,
    /// P[a target is discordant] = p10 + p01.
    pd: f64,
    /// P[a discordant target is A-only] = p10 / (p10 + p01).
    theta: f64,
    /// d → P[the test rejects | d discordant targets].
    reject: std::collections::HashMap<u64, f64>,
    /// The last critical value found, (d, k): the guess for the next one.
    hint: Option<(u64, i64)>,
}

impl PowerCalc {
    fn new(p10: f64, p01: f64, alpha: f64) -> PowerCalc {
        let pd = (p10 + p01).min(1.0);
        let theta = if pd > 0.0 { p10 / (p10 + p01) } else { 0.5 };
        PowerCalc { alpha, pd, theta, reject: std::collections::HashMap::new(), hint: None }
    }

    /// The critical value for d discordant targets: the largest k with
    /// 2·P[Bin(d, ½) ≤ k] ≤ alpha (so the test rejects when min(b, c) ≤ k), or
    /// −1 when no split of d rejects.
    ///
    /// P[Bin(d, ½) ≤ k] rises with k, so the answer is found by stepping from
    /// a guess: the last critical value found, scaled as d/2 − c·√d.
    fn critical(&mut self, d: u64) -> i64 {
        let guess = match self.hint {
            Some((d0, k0)) if d0 > 0 && k0 >= 0 => {
                let c = (d0 as f64 / 2.0 - k0 as f64) / (d0 as f64).sqrt();
                (d as f64 / 2.0 - c * (d as f64).sqrt()).floor() as i64
            }
            _ => (d as f64 / 2.0 - (d as f64).sqrt()).floor() as i64,
        };
        let rejects = |k: i64| k < 0 || 2.0 * binom_cdf(d, k as u64, 0.5) <= self.alpha;
        let mut k = guess.clamp(-1, d as i64 / 2);
        while !rejects(k) {
            k -= 1;
        }
        while 2 * (k + 1) < d as i64 && rejects(k + 1) {
            k += 1;
        }
        self.hint = Some((d, k));
        k
    }

    /// P[reject | d discordant].
    fn reject_given(&mut self, d: u64) -> f64 {
        if let Some(&r) = self.reject.get(&d) {
            return r;
        }
        let k = self.critical(d);
        let r = if k < 0 {
            0.0
        } else {
            // P[B ≤ k] + P[B ≥ d − k] = P[B ≤ k] + P[d − B ≤ k]
            let k = k as u64;
            (binom_cdf(d, k, self.theta) + binom_cdf(d, k, 1.0 - self.theta)).min(1.0)
        };
        self.reject.insert(d, r);
        r
    }

    fn power(&mut self, n: u64) -> f64 {
        if self.pd <= 0.0 {
            return 0.0;
        }
        if self.pd >= 1.0 {
            return self.reject_given(n);
        }
        // Sum over d outward from the mode of D ~ Bin(n, pd) while the weights
        // matter; the weights follow from the mode's by the ratio of
        // consecutive binomial probabilities.
        let odds = self.pd / (1.0 - self.pd);
        let mode = (((n + 1) as f64 * self.pd).floor() as u64).min(n);
        let w_mode = binom_ln_pmf(n, mode, self.pd).exp();
        let mut total = w_mode * self.reject_given(mode);
        let mut w = w_mode;
        let mut d = mode;
        while d > 0 && w >= 1e-20 {
            w *= d as f64 / ((n - d + 1) as f64 * odds);
            d -= 1;
            total += w * self.reject_given(d);
        }
        let mut w = w_mode;
        let mut d = mode;
        while d < n && w >= 1e-20 {
            w *= (n - d) as f64 * odds / (d + 1) as f64;
            d += 1;
            total += w * self.reject_given(d);
        }
        total.min(1.0)
    }
}

#[cfg(test)]
mod tests {
    //! Every cited value is recomputed exactly, from its definition and with
    //! no code shared with this module, by `scripts/oracles/stats-reference` (Python 3,
    //! standard library), whose output names the test citing each value. The
    //! power figures and sample sizes up to N = 120 are also recomputed on
    //! every test run by an integer brute force in tests/compare.rs
    //! (`cited_values_match_an_independent_enumeration`).
    use super::*;

    fn close(a: f64, b: f64, tol: f64) {
        assert!((a - b).abs() <= tol, "{a} != {b} (tolerance {tol})");
    }

    #[test]
    fn ln_factorial_matches_products_and_both_branches_agree() {
        close(ln_factorial(0), 0.0, 0.0);
        close(ln_factorial(10), (3628800f64).ln(), 1e-12);
        // 64! by exact summation of logs vs Stirling at the cut-over.
        let direct: f64 = (2..=64u64).map(|k| (k as f64).ln()).sum();
        close(ln_factorial(64), direct, 1e-11);
        let direct: f64 = (2..=1000u64).map(|k| (k as f64).ln()).sum();
        close(ln_factorial(1000), direct, 1e-9);
    }

    #[test]
    fn binomial_cdf_known_values() {
        // Σ_{j≤k} C(n, j) / 2^n (scripts/oracles/stats-reference prints them reduced:
        // 7/128 and 5425/262144).
        close(binom_cdf(10, 2, 0.5), 56.0 / 1024.0, 1e-15);
        close(binom_cdf(20, 5, 0.5), 21700.0 / 1048576.0, 1e-15);
        // Bin(10, 0.3) P[X <= 3] = 0.6496107184 (Σ_j C(10, j)·0.3^j·0.7^(10−j) in Fractions)
        close(binom_cdf(10, 3, 0.3), 0.6496107184, 1e-10);
        // the upper-branch (k above the mode): Bin(10, 0.3) P[X <= 5] = 0.9526510126
        close(binom_cdf(10, 5, 0.3), 0.9526510126, 1e-10);
        close(binom_cdf(10, 10, 0.3), 1.0, 0.0);
        close(binom_cdf(5, 4, 1.0), 0.0, 0.0);
        close(binom_cdf(5, 0, 0.0), 1.0, 0.0);
        // A far tail without underflow: P[Bin(1000, ½) ≤ 400] = 1.3642320780330092e-10
        // (float(Fraction(Σ_{j≤400} C(1000, j), 2^1000)), scripts/oracles/stats-reference)
        let v = binom_cdf(1000, 400, 0.5);
        assert!((v / 1.3642320780330092e-10 - 1.0).abs() < 1e-9, "{v}");
    }

    #[test]
    fn mcnemar_known_values() {
        // min(1, 2·Σ_{j≤min(b,c)} C(b+c, j) / 2^(b+c)) in Fractions, scripts/oracles/stats-reference.
        close(mcnemar_exact(0, 0), 1.0, 0.0);
        close(mcnemar_exact(3, 3), 1.0, 0.0);
        close(mcnemar_exact(1, 3), 0.625, 1e-15);
        close(mcnemar_exact(0, 4), 0.125, 1e-15);
        close(mcnemar_exact(5, 0), 0.0625, 1e-15);
        close(mcnemar_exact(0, 6), 0.03125, 1e-15);
        close(mcnemar_exact(2, 10), 0.0385742188, 1e-10); // 2·79/4096 = 79/2048
        close(mcnemar_exact(10, 2), 0.0385742188, 1e-10);
        close(mcnemar_exact(7, 8), 1.0, 0.0);
        close(mcnemar_exact(20, 40), 0.01348929373119186, 1e-12); // 2·Σ_{j≤20} C(60, j)/2^60
        // Past the linear-space branch (n > 1000): scripts/oracles/stats-reference gives
        // 2·P[Bin(1100, ½) ≤ 500] = 0.0028195449914364275 (Fraction, then float).
        close(mcnemar_exact(500, 600), 0.002819544991, 1e-11);
    }

    #[test]
    fn wilson_known_values() {
        // The closed form with z = 1.959963984540054, in 50-digit decimals
        // (scripts/oracles/stats-reference):
        // 6/16 -> (0.184812325589, 0.613589594545); 9/16 -> (0.331785563988, 0.769013475945)
        let (lo, hi) = wilson95(6, 16);
        close(lo, 0.184812325589, 1e-11);
        close(hi, 0.613589594545, 1e-11);
        let (lo, hi) = wilson95(9, 16);
        close(lo, 0.331785563988, 1e-11);
        close(hi, 0.769013475945, 1e-11);
        // 0/10 -> (0, 0.277532799863); 10/10 -> (0.722467200137, 1)
        let (lo, hi) = wilson95(0, 10);
        close(lo, 0.0, 1e-12);
        close(hi, 0.277532799863, 1e-11);
        let (lo, hi) = wilson95(10, 10);
        close(lo, 0.722467200137, 1e-11);
        close(hi, 1.0, 1e-12);
        assert_eq!(wilson95(0, 0), (0.0, 1.0));
    }

    #[test]
    fn wilcoxon_small_exact_cases() {
        // All 5 positive, distinct ranks: P[W+ >= 15] = 1/32, p = 2/32.
        let w = wilcoxon_signed_rank(&[1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!((w.n, w.zeros), (5, 0));
        close(w.w_plus, 15.0, 0.0);
        close(w.w_minus, 0.0, 0.0);
        close(w.p, 0.0625, 1e-15);
        // Zeros dropped; ranks 1..4, negatives on ranks 1 and 3 -> W+ = 6, W- = 4.
        // Distribution of W+ over 16 sign patterns: counts for s = 0..10 are
        // 1,1,1,2,2,2,2,2,1,1,1; P[W+ <= 6] = 11/16, P[W+ >= 6] = 7/16 -> p = 14/16.
        let w = wilcoxon_signed_rank(&[0.0, -1.0, 2.0, -3.0, 4.0, 0.0]);
        assert_eq!((w.n, w.zeros), (4, 2));
        close(w.w_plus, 6.0, 0.0);
        close(w.w_minus, 4.0, 0.0);
        close(w.p, 0.875, 1e-15);
        // Ties: |d| = 1,1,2 -> mid-ranks 1.5,1.5,3; signs +,-,+ -> W+ = 4.5.
        // Doubled ranks 3,3,6 (total 12): W2+ in {0,3,3,6,6,9,9,12} each 1/8;
        // W2+ = 9: P[<= 9] = 7/8, P[>= 9] = 3/8 -> p = 6/8.
        let w = wilcoxon_signed_rank(&[1.0, -1.0, 2.0]);
        close(w.w_plus, 4.5, 0.0);
        close(w.w_minus, 1.5, 0.0);
        close(w.p, 0.75, 1e-15);
        // Nothing but zeros.
        let w = wilcoxon_signed_rank(&[0.0, 0.0]);
        assert_eq!((w.n, w.zeros, w.p), (0, 2, 1.0));
        assert_eq!(wilcoxon_signed_rank(&[]).p, 1.0);
        // Float noise below the tolerance is a tie / a zero.
        let w = wilcoxon_signed_rank(&[0.3 - 0.1, 0.2, 1e-12]);
        assert_eq!((w.n, w.zeros), (2, 1));
        close(w.w_plus, 3.0, 0.0);
    }

    #[test]
    fn wilcoxon_symmetry_and_larger_n() {
        let d: Vec<f64> = (1..=12).map(|i| if i % 3 == 0 { -(i as f64) } else { i as f64 }).collect();
        let neg: Vec<f64> = d.iter().map(|x| -x).collect();
        let (a, b) = (wilcoxon_signed_rank(&d), wilcoxon_signed_rank(&neg));
        close(a.p, b.p, 1e-15);
        close(a.w_plus, b.w_minus, 0.0);
        // W+ = 78 - (3+6+9+12) = 48 of 78; counted by brute force over the 4096
        // sign patterns (scripts/oracles/stats-reference, itertools.product): p = 531/1024.
        close(a.w_plus, 48.0, 0.0);
        close(a.p, 531.0 / 1024.0, 1e-14);
    }

    #[test]
    fn power_matches_brute_force() {
        // Exact double sum over d discordant targets and b A-only among them:
        // Σ C(n,d) pd^d (1-pd)^(n-d) · C(d,b) t^b (1-t)^(d-b) over the (d, b)
        // with mcnemar(b, d-b) ≤ 0.05, in integers (scripts/oracles/stats-reference);
        // N ≤ 120 also by the brute force in tests/compare.rs.
        close(mcnemar_power(20, 0.25, 0.05, 0.05), 0.195620828283, 1e-10);
        close(mcnemar_power(16, 0.0625, 0.25, 0.05), 0.093835826255, 1e-10);
        close(mcnemar_power(5, 0.5, 0.1, 0.05), 0.0, 1e-15);
        // The same, critical values from integer binomial sums (scripts/oracles/stats-reference only):
        close(mcnemar_power(300, 0.2, 0.1, 0.05), 0.873566801068, 1e-10);
        close(mcnemar_power(301, 0.2, 0.1, 0.05), 0.874749565448, 1e-10);
        // All discordant (pd = 1) and one-sided (theta = 1).
        close(mcnemar_power(6, 1.0, 0.0, 0.05), 1.0, 1e-15);
    }

    #[test]
    fn sample_size_search() {
        // Linear search N = 1, 2, … of the exact power above (scripts/oracles/stats-reference:
        // power(60) = 0.797296, power(61) = 0.805160; power(73) = 0.798833,
        // power(74) = 0.804791; also tests/compare.rs's brute force).
        assert_eq!(mcnemar_targets_for_power(0.25, 0.05, 0.05, 0.8, 100_000), SampleSize::Targets(61));
        assert_eq!(mcnemar_targets_for_power(0.0625, 0.25, 0.05, 0.8, 100_000), SampleSize::Targets(74));
        assert_eq!(mcnemar_targets_for_power(0.1, 0.1, 0.05, 0.8, 100_000), SampleSize::NotReachable);
        assert_eq!(mcnemar_targets_for_power(0.0, 0.0, 0.05, 0.8, 100_000), SampleSize::NotReachable);
        // Every target discordant (p10 + p01 = 1) is a real case, not an impossible one.
        assert!(matches!(mcnemar_targets_for_power(0.75, 0.25, 0.05, 0.8, 100_000), SampleSize::Targets(_)));
        // The power at p10 = 0.2, p01 = 0.19 stays below 0.06 up to N = 500
        // (scripts/oracles/stats-reference: at most 0.055721, at N = 500).
        assert_eq!(mcnemar_targets_for_power(0.2, 0.19, 0.05, 0.8, 500), SampleSize::BeyondCap(500));
        // And beyond the linear range, where sizes grow in steps, the search
        // ends at the cap (the power there is still under 0.2).
        assert_eq!(mcnemar_targets_for_power(0.2, 0.19, 0.05, 0.8, 2100), SampleSize::BeyondCap(2100));
    }

    #[test]
    fn sample_size_beyond_the_linear_range_is_fast() {
        let t = std::time::Instant::now();
        let n = match mcnemar_targets_for_power(0.2, 0.17, 0.05, 0.8, 100_000) {
            SampleSize::Targets(n) => n,
            other => panic!("{other:?}"),
        };
        assert!(n > POWER_LINEAR_LIMIT, "{n}");
        assert!(mcnemar_power(n, 0.2, 0.17, 0.05) >= 0.8);
        assert!(mcnemar_power(n - 1, 0.2, 0.17, 0.05) < 0.8);
        assert!(t.elapsed().as_secs_f64() < 2.0, "{:?}", t.elapsed());
    }

    /// The edges: k = n, k = 0, k > n, and p at 0 and 1, from the definitions
    /// (C(n, n) = C(n, 0) = 1; P[X = n] = pⁿ; a certain outcome has ln P = 0).
    #[test]
    fn binomial_edges() {
        assert_eq!(ln_choose(5, 5), 0.0);
        assert_eq!(ln_choose(5, 0), 0.0);
        assert_eq!(ln_choose(3, 5), f64::NEG_INFINITY);
        close(binom_ln_pmf(5, 5, 0.5), 5.0 * 0.5f64.ln(), 1e-12);
        assert_eq!(binom_ln_pmf(5, 6, 0.5), f64::NEG_INFINITY);
        assert_eq!(binom_ln_pmf(5, 0, 0.0), 0.0);
        assert_eq!(binom_ln_pmf(5, 3, 0.0), f64::NEG_INFINITY);
        assert_eq!(binom_ln_pmf(5, 5, 1.0), 0.0);
        assert_eq!(binom_ln_pmf(5, 4, 1.0), f64::NEG_INFINITY);
        // Far above the mode the CDF is 1 − P[X > k]; summed from P[X = k]
        // (≈ 10⁻¹⁴⁰⁴, below the smallest double) it would come out 0.
        assert_eq!(binom_cdf(2000, 1000, 0.01), 1.0);
    }

    /// Discordance probabilities no comparison can have (negative, or more
    /// than one in all) have no sample size.
    #[test]
    fn impossible_discordance_has_no_sample_size() {
        for (p10, p01) in [(0.7, 0.6), (-0.1, 0.2), (0.2, -0.1), (1.0, 0.5)] {
            assert_eq!(mcnemar_targets_for_power(p10, p01, 0.05, 0.8, 1000), SampleSize::NotReachable, "{p10} {p01}");
        }
    }
}
