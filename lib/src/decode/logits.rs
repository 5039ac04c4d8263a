//! Reading the model's next-token logits: pure functions over the f32
//! slice the engine hands out, shared by the engine's forced pass and the
//! metrics built on it (teacher forcing, KL divergence).

/// Index of the largest value (the first on ties, as greedy sampling picks),
/// the gap to the second largest, and log-softmax of `token`.
pub(crate) fn read_logits(logits: &[f32], token: usize) -> (usize, f32, f32) {
    let mut best = 0usize;
    let mut best_v = f32::NEG_INFINITY;
    let mut second_v = f32::NEG_INFINITY;
    for (i, &v) in logits.iter().enumerate() {
        if v > best_v {
            second_v = best_v;
            best_v = v;
            best = i;
        } else if v > second_v {
            second_v = v;
        }
    }
    let sum: f64 = logits.iter().map(|&v| f64::from(v - best_v).exp()).sum();
    let logprob = f64::from(logits.get(token).copied().unwrap_or(f32::NEG_INFINITY) - best_v) - sum.ln();
    (best, best_v - second_v, logprob as f32)
}

/// The first value that no distribution can come from (NaN or +inf; a
/// masked token's −inf is a probability of 0), by index.
pub(crate) fn first_unusable(logits: &[f32]) -> Option<(usize, f32)> {
    logits.iter().position(|v| v.is_nan() || *v == f32::INFINITY).map(|i| (i, logits[i]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_logits_argmax_gap_and_logprob() {
        let (best, gap, lp) = read_logits(&[0.0, 2.0, 1.0, 2.0], 2);
        assert_eq!(best, 1, "first maximum wins, as greedy sampling");
        assert_eq!(gap, 0.0);
        let z: f64 = [0.0f64, 2.0, 1.0, 2.0].iter().map(|v| v.exp()).sum();
        assert!((f64::from(lp) - (1.0 - z.ln())).abs() < 1e-5);
    }

    #[test]
    fn nan_and_plus_infinity_are_unusable_minus_infinity_is_not() {
        assert_eq!(first_unusable(&[0.0, f32::NEG_INFINITY, 1.0]), None);
        assert_eq!(first_unusable(&[0.0, f32::INFINITY, f32::NAN]).map(|u| u.0), Some(1));
        assert!(first_unusable(&[0.5, f32::NAN]).is_some_and(|(i, v)| i == 1 && v.is_nan()));
    }
}
