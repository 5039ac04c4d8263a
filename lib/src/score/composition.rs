//! What a score is made of (docs/METHOD.md §6, "What a score is made
//! of"): each expected line's class from the corpus's parse tree (code,
//! comment, docstring, blank; [`crate::corpus::classify`]), and per class
//! how many of the LINES lines there are and how many were credited; and
//! `--credit code`, which lets code lines alone count.

use crate::corpus::classify::LineClass;

crate::settings::named_choice! {
    /// Which lines a score counts (docs/METHOD.md §6).
    #[derive(Default)]
    pub enum Credit {
        /// Every line the policy counts: code, comments and docstrings (and
        /// blank lines where the policy credits them).
        #[default]
        All,
        /// Code lines only: comments, docstrings and blank lines are aligned
        /// but neither credited nor counted, and the pass is a share of the
        /// code lines.
        Code,
    }
}

impl Credit {
    /// Whether this is the default (a run file leaves it out, so that runs
    /// scored as before stay byte for byte as before).
    #[must_use]
    pub fn is_default(&self) -> bool {
        *self == Credit::default()
    }
}

/// One class's lines among the LINES expected lines, and how many of them
/// the alignment credited.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Tally {
    pub lines: usize,
    pub matched: usize,
}

impl Tally {
    fn add(&mut self, other: Tally) {
        self.lines += other.lines;
        self.matched += other.matched;
    }
}

/// Per class, the expected lines and the credited ones. `blank` is absent
/// where the policy neither credits nor counts blank lines (codeneedle).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Composition {
    pub code: Tally,
    pub comment: Tally,
    pub docstring: Tally,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blank: Option<Tally>,
}

impl Composition {
    /// The composition of lines of `classes` of which those at `credited`
    /// were credited; with `blank_counts` false the blank lines are left out.
    pub(crate) fn of(classes: &[LineClass], credited: &[bool], blank_counts: bool) -> Composition {
        let mut out = Composition { blank: blank_counts.then(Tally::default), ..Composition::default() };
        for (i, class) in classes.iter().enumerate() {
            let matched = usize::from(credited.get(i).copied().unwrap_or(false));
            let one = Tally { lines: 1, matched };
            match class {
                LineClass::Code => out.code.add(one),
                LineClass::Comment => out.comment.add(one),
                LineClass::Docstring => out.docstring.add(one),
                LineClass::Blank => {
                    if let Some(b) = out.blank.as_mut() {
                        b.add(one);
                    }
                }
            }
        }
        out
    }

    /// Comments and docstrings together: the prose.
    #[must_use]
    pub fn prose(&self) -> Tally {
        Tally { lines: self.comment.lines + self.docstring.lines, matched: self.comment.matched + self.docstring.matched }
    }

    /// Whether more of the scored lines are prose than code: the one rule
    /// behind the reports' prose flag.
    #[must_use]
    pub fn prose_dominated(&self) -> bool {
        self.prose().lines > self.code.lines
    }

    /// The sum of two compositions (a run's, a quarter's); blank stays
    /// absent only where both leave it out.
    pub fn add(&mut self, other: &Composition) {
        self.code.add(other.code);
        self.comment.add(other.comment);
        self.docstring.add(other.docstring);
        if let Some(b) = other.blank {
            self.blank.get_or_insert_with(Tally::default).add(b);
        }
    }
}

/// The code lines among `classes`: what `--min-code-lines` counts.
#[must_use]
pub fn code_lines(classes: &[LineClass]) -> usize {
    classes.iter().filter(|c| **c == LineClass::Code).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use LineClass::*;

    /// Hand-counted: two code lines (one credited), a comment (credited), a
    /// docstring line, a blank line (credited), kept or left out.
    #[test]
    fn counts_per_class_and_the_prose_rule() {
        let classes = [Code, Comment, Code, Docstring, Blank];
        let credited = [true, true, false, false, true];
        let c = Composition::of(&classes, &credited, true);
        assert_eq!(
            (c.code, c.comment, c.docstring),
            (Tally { lines: 2, matched: 1 }, Tally { lines: 1, matched: 1 }, Tally { lines: 1, matched: 0 })
        );
        assert_eq!(c.blank, Some(Tally { lines: 1, matched: 1 }));
        assert_eq!(Composition::of(&classes, &credited, false).blank, None);
        // Two prose lines against two code lines: not more, so not flagged.
        assert!(!c.prose_dominated());
        assert!(Composition::of(&[Comment, Docstring, Code], &[], true).prose_dominated());
        assert_eq!(code_lines(&classes), 2);
    }
}
