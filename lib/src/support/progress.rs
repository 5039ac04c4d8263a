//! How a long run shows itself, and how it measures its time. The library
//! draws nothing and prints nothing: the face hands it a [`Progress`] for
//! its bars and a [`Notes`] for the lines that are not errors, and decides
//! how (and whether: `-q`, a pipe) each is shown.

use std::time::Instant;

/// Milliseconds since `t`.
pub fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// What a bar counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Prompt tokens evaluated.
    Tokens,
    /// Questions asked (or answered, checked, scored).
    Questions,
    /// Targets done, over a whole sweep.
    Targets,
    /// Bytes downloaded; the bar's label is the file's name.
    Bytes,
}

/// One bar, drawn by the face and moved by the library; the face takes it
/// away when it is dropped.
pub trait Bar: Send + Sync {
    fn set_position(&self, pos: u64);
    fn inc(&self, n: u64);
    /// What the bar is busy with now (the run of a sweep, a model loading).
    fn set_message(&self, msg: &str);
}

/// Where the library's bars go. `Sync`: `ask`'s workers move one from
/// their threads.
pub trait Progress: Sync {
    /// A bar of `len` steps of `unit`, labelled `what`.
    fn bar(&self, len: u64, what: &str, unit: Unit) -> Box<dyn Bar>;
}

/// Where the library tells the user what is not an error (a fallback taken,
/// a cache entry replaced, a file left out): the face passes one in and
/// decides where each line goes (above its bars), so that nothing below it
/// prints. `Sync`, as `ask`'s workers note from their threads. `line` is
/// complete (`note: …`), one line or several.
pub trait Notes: Sync {
    fn note(&self, line: &str);
}

/// Both: what a run shows through (the face's terminal, or [`Quiet`]).
pub trait Show: Progress + Notes {}

impl<T: Progress + Notes> Show for T {}

/// Nothing shown: no bar, no note. For callers that show nothing (tests of
/// what a plan is, library users that want only the run file).
pub struct Quiet;

impl Notes for Quiet {
    fn note(&self, _line: &str) {}
}

struct NoBar;

impl Bar for NoBar {
    fn set_position(&self, _pos: u64) {}
    fn inc(&self, _n: u64) {}
    fn set_message(&self, _msg: &str) {}
}

impl Progress for Quiet {
    fn bar(&self, _len: u64, _what: &str, _unit: Unit) -> Box<dyn Bar> {
        Box::new(NoBar)
    }
}
