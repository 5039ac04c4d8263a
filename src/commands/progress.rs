//! The terminal's progress bars: the face's side of the library's
//! [`Progress`] and [`Notes`]. Every bar of a command is drawn in one display
//! on standard error, none with `-q` or where standard error is not a
//! terminal; notes are printed above the bars, always.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use posrecall::support::progress::{Bar, Notes, Progress, Unit};

/// One command's display.
pub struct Terminal {
    multi: MultiProgress,
}

impl Terminal {
    /// A display; `quiet` draws no bar.
    pub fn new(quiet: bool) -> Self {
        let multi = match quiet {
            true => MultiProgress::with_draw_target(ProgressDrawTarget::hidden()),
            false => MultiProgress::new(),
        };
        Terminal { multi }
    }

    /// Runs `f` with every bar out of the way, so that it may print. Not
    /// from inside another `suspend` or a note (the display is locked).
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.multi.suspend(f)
    }

    /// Writes `text` to standard output, above the bars.
    pub fn out(&self, text: &str) -> anyhow::Result<()> {
        self.suspend(|| crate::commands::out(text))
    }
}

impl Notes for Terminal {
    fn note(&self, line: &str) {
        self.multi.suspend(|| eprintln!("{line}"));
    }
}

impl Progress for Terminal {
    fn bar(&self, len: u64, what: &str, unit: Unit) -> Box<dyn Bar> {
        let counted = match unit {
            Unit::Tokens => "{pos}/{len} tok  {per_sec}",
            Unit::Questions => "{pos}/{len} q  {per_sec}",
            Unit::Targets => "{pos}/{len} targets",
            Unit::Bytes => "{bytes}/{total_bytes}  {bytes_per_sec}",
        };
        let template = format!("{{prefix:>8}} [{{bar:30}}] {counted}  ETA {{eta}}  {{msg}}");
        let style = ProgressStyle::with_template(&template).unwrap_or_else(|_| ProgressStyle::default_bar()).progress_chars("=> ");
        let bar = self.multi.add(ProgressBar::new(len).with_style(style).with_prefix(what.to_string()));
        Box::new(Drawn { bar, multi: self.multi.clone() })
    }
}

/// A bar in the display, taken away when dropped.
struct Drawn {
    bar: ProgressBar,
    multi: MultiProgress,
}

impl Bar for Drawn {
    fn set_position(&self, pos: u64) {
        self.bar.set_position(pos);
    }

    fn inc(&self, n: u64) {
        self.bar.inc(n);
    }

    fn set_message(&self, msg: &str) {
        self.bar.set_message(msg.to_string());
    }
}

impl Drop for Drawn {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
        self.multi.remove(&self.bar);
    }
}
