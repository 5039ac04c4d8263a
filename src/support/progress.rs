//! Progress bars and elapsed times: how a long run shows and measures itself.

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use std::time::Instant;

/// Milliseconds since `t`.
pub fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// A bar of `len` steps labelled `what`, counting `unit`s, with a rate and
/// an ETA; hidden unless `show`. Inside `multi` (a sweep's display) when given.
pub fn bar(show: bool, multi: Option<&MultiProgress>, len: u64, what: &str, unit: &str) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = match multi {
        Some(m) => m.add(ProgressBar::new(len)),
        None => ProgressBar::new(len),
    };
    bar.set_style(style(&format!("{what:>8} [{{bar:30}}] {{pos}}/{{len}} {unit}  {{per_sec}}  ETA {{eta}}")));
    bar
}

/// A bar style from an indicatif template, in posrecall's look.
pub fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()).progress_chars("=> ")
}

/// Where the library tells the user what is not an error (a fallback taken,
/// a cache entry replaced, a file left out): the face passes one in and
/// decides where each line goes, so that nothing below it prints. `Sync`,
/// as `ask`'s workers note from their threads. `line` is complete
/// (`note: …`), one line or several.
pub trait Notes: Sync {
    fn note(&self, line: &str);
}

/// Notes dropped: for callers that show none (tests of what a plan is).
pub struct Quiet;

impl Notes for Quiet {
    fn note(&self, _line: &str) {}
}
