//! Cropping: which range of whole lines of the corpus the model is given.
//!
//! A small-context model cannot hold a 100K-token library, so posrecall keeps a
//! range of whole lines. The range is chosen from per-line costs (tokens, once a
//! model is loaded) so that this module needs no tokenizer: see
//! [`choose_range`]. Targets come only from the kept range, and depth is measured
//! within it.

use crate::settings::{Explain, Names, Setting};
use serde::{Deserialize, Serialize};

/// A range that cannot be kept. The messages name no command-line flag: the
/// command that chose the mode adds what would fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CropError {
    #[error("lines {first}:{last} go past the end of the corpus ({line_count} lines)")]
    PastTheEnd { first: usize, last: usize, line_count: usize },
    #[error("the corpus has no lines")]
    NoLines,
    #[error("the corpus needs {total} tokens but only {budget} fit in the context")]
    DoesNotFit { total: usize, budget: usize },
    #[error("not even the first line of the corpus fits in {budget} tokens")]
    FirstLineTooLong { budget: usize },
    #[error("no line of the corpus fits in {budget} tokens")]
    NoLineFits { budget: usize },
}

crate::settings::named_choice! {
    /// How the kept range was chosen.
    #[derive(Default)]
    pub enum CropMode {
        /// The first lines that fit.
        #[default]
        Head,
        /// The window of lines that fits and holds the most eligible targets.
        Densest,
        /// Keep the whole file; not fitting is an error.
        None,
        /// Exactly the lines of a range given by hand.
        Lines,
    }
}

impl CropMode {
    /// The modes a user chooses between (`Lines` follows from a range given).
    pub const CHOSEN: [CropMode; 3] = [CropMode::Head, CropMode::Densest, CropMode::None];
}

/// The kept range, as recorded in `manifest.corpus.crop` and in targets files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Crop {
    pub mode: CropMode,
    /// 1-based, inclusive.
    pub first_line: usize,
    /// 1-based, inclusive.
    pub last_line: usize,
    /// sha256 of the kept text (line endings included).
    pub sha256: String,
}

impl Crop {
    /// The record of the 0-based lines `first..=last` of `corpus`.
    pub fn of(corpus: &crate::corpus::Corpus, mode: CropMode, first: usize, last: usize) -> Crop {
        Crop {
            mode,
            first_line: first + 1,
            last_line: last + 1,
            sha256: crate::support::fsutil::sha256_hex(corpus.slice_lines(first, last).as_bytes()),
        }
    }
}

/// A 1-based inclusive line range as typed on the command line: `A:B`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineRange {
    pub first: usize,
    pub last: usize,
}

impl std::str::FromStr for LineRange {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (a, b) = s.split_once(':').ok_or_else(|| format!("expected A:B (1-based, inclusive line numbers), got `{s}`"))?;
        let first: usize = a.trim().parse().map_err(|_| format!("`{a}` is not a line number"))?;
        let last: usize = b.trim().parse().map_err(|_| format!("`{b}` is not a line number"))?;
        if first == 0 || last < first {
            return Err(format!("line range {s} must satisfy 1 <= A <= B"));
        }
        Ok(LineRange { first, last })
    }
}

impl LineRange {
    /// Checks the range against a file of `line_count` lines and returns 0-based bounds.
    pub(crate) fn to_zero_based(self, line_count: usize) -> Result<(usize, usize), CropError> {
        if self.last > line_count {
            return Err(CropError::PastTheEnd { first: self.first, last: self.last, line_count });
        }
        Ok((self.first - 1, self.last - 1))
    }
}

/// Chooses 0-based inclusive `(first, last)` lines under a budget.
///
/// `cost[i]` is what line `i` costs (tokens); the kept lines' costs must sum to at
/// most `budget`. `spans` are the eligible targets as 0-based inclusive line spans
/// (declaration line through the last line its scoring needs); `densest` keeps the
/// window that holds the most of them entirely, the earliest among equals.
pub(crate) fn choose_range(mode: CropMode, cost: &[usize], budget: usize, spans: &[(usize, usize)]) -> Result<(usize, usize), CropError> {
    let n = cost.len();
    if n == 0 {
        return Err(CropError::NoLines);
    }
    let total: usize = cost.iter().sum();
    match mode {
        CropMode::None | CropMode::Lines => {
            if total > budget {
                return Err(CropError::DoesNotFit { total, budget });
            }
            Ok((0, n - 1))
        }
        CropMode::Head => {
            let mut sum = 0;
            let mut last = None;
            for (i, c) in cost.iter().enumerate() {
                if sum + c > budget {
                    break;
                }
                sum += c;
                last = Some(i);
            }
            match last {
                Some(l) => Ok((0, l)),
                None => Err(CropError::FirstLineTooLong { budget }),
            }
        }
        CropMode::Densest => {
            // Two pointers: for each first line, the furthest last line that fits.
            let mut best: Option<(usize, usize, usize)> = None; // (count, first, last)
            let mut last_fit = 0usize; // exclusive end
            let mut sum = 0usize;
            for first in 0..n {
                if last_fit < first {
                    last_fit = first;
                    sum = 0;
                }
                while last_fit < n && sum + cost[last_fit] <= budget {
                    sum += cost[last_fit];
                    last_fit += 1;
                }
                if last_fit > first {
                    let last = last_fit - 1;
                    let count = spans.iter().filter(|(a, b)| *a >= first && *b <= last).count();
                    if best.is_none_or(|(c, _, _)| count > c) {
                        best = Some((count, first, last));
                    }
                    sum -= cost[first];
                }
            }
            match best {
                Some((_, f, l)) => Ok((f, l)),
                None => Err(CropError::NoLineFits { budget }),
            }
        }
    }
}

impl Explain for CropError {
    fn explain(&self, n: &dyn Names) -> String {
        match self {
            CropError::PastTheEnd { first, last, line_count } => {
                format!("{} goes past the end of the corpus ({line_count} lines)", n.set(Setting::CropLines, &format!("{first}:{last}")))
            }
            _ => format!(
                "{self}; use {} or {}, {}, or a larger {}",
                n.set(Setting::Crop, "head"),
                n.set(Setting::Crop, "densest"),
                n.set(Setting::CropLines, "A:B"),
                n.name(Setting::Ctx)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ranges() {
        assert_eq!("3:9".parse::<LineRange>().unwrap(), LineRange { first: 3, last: 9 });
        assert!("0:9".parse::<LineRange>().is_err());
        assert!("9:3".parse::<LineRange>().is_err());
        assert!("x".parse::<LineRange>().is_err());
    }

    #[test]
    fn head_keeps_prefix_that_fits() {
        assert_eq!(choose_range(CropMode::Head, &[3, 3, 3, 3], 7, &[]).unwrap(), (0, 1));
        assert!(choose_range(CropMode::Head, &[9], 7, &[]).is_err());
    }

    #[test]
    fn none_fails_when_too_big() {
        assert!(choose_range(CropMode::None, &[3, 3, 3], 8, &[]).is_err());
        assert_eq!(choose_range(CropMode::None, &[3, 3, 3], 9, &[]).unwrap(), (0, 2));
    }

    #[test]
    fn densest_finds_the_window_with_most_targets() {
        let cost = vec![1; 100];
        let spans = [(5, 8), (60, 65), (70, 75), (80, 88)];
        let (f, l) = choose_range(CropMode::Densest, &cost, 30, &spans).unwrap();
        assert!(f <= 60 && l >= 88, "{f}..{l}");
    }

    #[test]
    fn a_range_is_two_line_numbers_from_one_with_the_last_not_before_the_first() {
        assert_eq!("5:5".parse::<LineRange>().unwrap(), LineRange { first: 5, last: 5 });
        assert_eq!(" 1 : 2 ".parse::<LineRange>().unwrap(), LineRange { first: 1, last: 2 });
        assert_eq!("5".parse::<LineRange>().unwrap_err(), "expected A:B (1-based, inclusive line numbers), got `5`");
        assert_eq!("x:5".parse::<LineRange>().unwrap_err(), "`x` is not a line number");
        assert_eq!("5:y".parse::<LineRange>().unwrap_err(), "`y` is not a line number");
        assert_eq!("0:0".parse::<LineRange>().unwrap_err(), "line range 0:0 must satisfy 1 <= A <= B");
        assert_eq!("6:5".parse::<LineRange>().unwrap_err(), "line range 6:5 must satisfy 1 <= A <= B");
        // 0-based bounds within the file, or the file's length named.
        let r = LineRange { first: 3, last: 9 };
        assert_eq!(r.to_zero_based(9), Ok((2, 8)));
        assert_eq!(r.to_zero_based(8), Err(CropError::PastTheEnd { first: 3, last: 9, line_count: 8 }));
        assert_eq!(LineRange { first: 1, last: 1 }.to_zero_based(1), Ok((0, 0)));
    }

    #[test]
    fn the_record_names_one_based_lines_and_the_kept_texts_sha256() {
        let corpus = crate::corpus::Corpus::from_bytes(std::path::Path::new("abc.txt"), b"a\nb\nc\n".to_vec()).unwrap();
        let crop = Crop::of(&corpus, CropMode::Densest, 1, 2);
        // sha256 of "b\nc\n", by sha256sum.
        let sha = "bb9ead4c391dab4c05bd498dafac47a54f8b212625f2124a911202cc6ea61d27";
        assert_eq!(crop, Crop { mode: CropMode::Densest, first_line: 2, last_line: 3, sha256: sha.into() });
    }

    /// Every mode at the budget's edge: a range whose costs add up to the
    /// budget exactly fits, one more token does not.
    #[test]
    fn each_mode_keeps_what_fits_to_the_token() {
        for mode in [CropMode::Head, CropMode::Densest, CropMode::None, CropMode::Lines] {
            assert_eq!(choose_range(mode, &[], 10, &[]), Err(CropError::NoLines), "{mode:?}");
        }
        for mode in [CropMode::None, CropMode::Lines] {
            assert_eq!(choose_range(mode, &[3, 3, 3], 9, &[]), Ok((0, 2)));
            assert_eq!(choose_range(mode, &[3, 3, 3], 8, &[]), Err(CropError::DoesNotFit { total: 9, budget: 8 }));
        }
        let head = |cost: &[usize], budget| choose_range(CropMode::Head, cost, budget, &[(0, 3)]);
        assert_eq!(head(&[3, 3, 3, 3], 6), Ok((0, 1)));
        assert_eq!(head(&[3, 3, 3, 3], 5), Ok((0, 0)));
        assert_eq!(head(&[3, 3, 3, 3], 12), Ok((0, 3)));
        assert_eq!(head(&[3, 3, 3, 3], 100), Ok((0, 3)));
        assert_eq!(head(&[3, 1, 1, 1], 2), Err(CropError::FirstLineTooLong { budget: 2 }));
    }

    /// Densest: the window that fits and holds the most spans whole, the
    /// earliest among equals, stepping over lines that fit nowhere.
    #[test]
    fn densest_keeps_the_earliest_window_with_the_most_whole_spans() {
        let densest = |cost: &[usize], budget, spans: &[(usize, usize)]| choose_range(CropMode::Densest, cost, budget, spans);
        let ones = [1; 6];
        assert_eq!(densest(&ones, 3, &[(3, 5)]), Ok((3, 5)));
        assert_eq!(densest(&ones, 3, &[(0, 1), (4, 5)]), Ok((0, 2)));
        assert_eq!(densest(&ones, 3, &[(0, 1), (3, 4), (4, 5)]), Ok((3, 5)));
        // A span that never fits whole counts nowhere: the earliest window.
        assert_eq!(densest(&ones, 2, &[(1, 3)]), Ok((0, 1)));
        assert_eq!(densest(&ones, 3, &[]), Ok((0, 2)));
        // Windows of different lengths: each first line's furthest fit.
        assert_eq!(densest(&[2, 1, 1, 2, 1], 3, &[(1, 2)]), Ok((1, 2)));
        assert_eq!(densest(&[2, 1, 1, 2, 1], 3, &[(3, 4)]), Ok((3, 4)));
        assert_eq!(densest(&[2, 1, 1, 2, 1], 4, &[(0, 2), (2, 3)]), Ok((0, 2)));
        assert_eq!(densest(&[2, 1, 1, 2, 1], 4, &[(1, 3), (2, 3)]), Ok((1, 3)));
        // A line dearer than the budget splits the file.
        assert_eq!(densest(&[1, 5, 1, 1], 2, &[(2, 3)]), Ok((2, 3)));
        assert_eq!(densest(&[1, 5, 1, 1], 2, &[]), Ok((0, 0)));
        assert_eq!(densest(&[5, 1, 1], 2, &[]), Ok((1, 2)));
        assert_eq!(densest(&[5, 6], 2, &[(0, 1)]), Err(CropError::NoLineFits { budget: 2 }));
        // The whole file fits.
        assert_eq!(densest(&ones, 6, &[(2, 3)]), Ok((0, 5)));
    }
}
