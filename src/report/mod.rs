//! What people read: the per-target colour diff and the aggregate.
//!
//! Each output format is its own small module.

pub mod terminal;

// `posrecall report`: the data (aggregate), the trait (export), one module per format.
pub mod aggregate;
pub mod charts;
pub mod compare;
pub mod csv;
pub mod export;
pub mod html;
pub mod json;
pub mod kv_table;
pub mod markdown;
pub mod table;
pub mod tabular;
pub mod verdict;

/// A runaway answer line (a model looping without a newline) is shown cut
/// to `max` characters; the run file keeps it whole.
pub fn clip(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}… ({} more chars)", &text[..i], text[i..].chars().count()).into(),
        None => text.into(),
    }
}

/// One target's teacher-forced metrics as phrases: top-1 share, mean
/// log-prob, exact lines, first divergence, near ties.
pub fn forced_phrases(f: &crate::score::forced::Forced) -> [String; 5] {
    let exact = f.lines_exact.iter().filter(|&&e| e).count();
    let divergence = match f.first_divergence {
        Some(d) => format!("first divergence line {} token {}", d.line, d.token),
        None => "no divergence".into(),
    };
    [
        format!("top-1 {:.3}", f.top1_share),
        format!("mean log-prob {:.3}", f.mean_logprob),
        format!("{exact}/{} lines exact", f.lines_exact.len()),
        divergence,
        format!("{} near tie{}", f.near_ties, if f.near_ties == 1 { "" } else { "s" }),
    ]
}
