//! What people read: the per-target colour diff and the aggregate.
//!
//! Each output format is its own small module.

pub mod terminal;

// `posrecall report`: the data (aggregate), the trait and one module per
// format (export).
pub mod aggregate;
pub mod compare;
pub mod export;
pub mod list_table;
pub mod tabular;

/// A runaway answer line (a model looping without a newline) is shown cut
/// to `max` characters; the run file keeps it whole.
/// Control characters but the tab are shown escaped (`\r`, `\u{1b}`): a
/// lone CR kept in a line, or an escape sequence in an answer, would move
/// the cursor or restyle the terminal instead of showing; so are bidi and
/// zero-width characters, which would reorder or hide the line's text
/// (`support::shown::for_terminal`).
pub fn clip(text: &str, max: usize) -> std::borrow::Cow<'_, str> {
    let shown = match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}… ({} more chars)", &text[..i], text[i..].chars().count()).into(),
        None => std::borrow::Cow::Borrowed(text),
    };
    match crate::support::shown::for_terminal(&shown) {
        std::borrow::Cow::Borrowed(_) => shown,
        std::borrow::Cow::Owned(escaped) => escaped.into(),
    }
}

/// One answer's verdict and counts as phrases, for the terminal's and the
/// HTML page's diff headings: `PASS`, `matched 6/8`, `missing 2 (truncated
/// 1)`, `hallucinated 0`, `extra 0`, then its composition where known
/// ([`composition_phrases`]).
pub(crate) fn score_phrases(s: &crate::score::Score, lines: usize) -> Vec<String> {
    let mut out = vec![
        if s.pass { "PASS" } else { "FAIL" }.to_string(),
        // Under codeneedle, a share of the scored lines, and the re-indented apart.
        format!("matched {}/{}", s.matched, s.scored.unwrap_or(lines)),
        match s.reindented {
            Some(r) => format!("missing {} (re-indented {r})", s.missing),
            None => format!("missing {} (truncated {})", s.missing, s.truncated),
        },
        format!("hallucinated {}", s.hallucinated),
        format!("extra {}", s.extra),
    ];
    out.extend(s.composition.iter().flat_map(composition_phrases));
    out
}

/// What the lines are made of, as matched of lines per kind: `code 6/9`,
/// `prose 1/3` (comments and docstrings), `blank 2/2` where the policy
/// credits blank lines; and `prose-dominated` when more of the lines are
/// prose than code ([`crate::score::Composition::prose_dominated`]).
pub(crate) fn composition_phrases(c: &crate::score::Composition) -> Vec<String> {
    let prose = c.prose();
    let mut out = vec![format!("code {}/{}", c.code.matched, c.code.lines), format!("prose {}/{}", prose.matched, prose.lines)];
    if let Some(b) = c.blank {
        out.push(format!("blank {}/{}", b.matched, b.lines));
    }
    if c.prose_dominated() {
        out.push(PROSE_FLAG.to_string());
    }
    out
}

/// The flag of a target whose lines are more prose than code.
pub(crate) const PROSE_FLAG: &str = "prose-dominated";

/// One target's teacher-forced metrics as phrases: top-1 share, mean
/// log-prob, exact lines, first divergence, near ties.
pub(crate) fn forced_phrases(f: &crate::score::forced::Forced) -> [String; 5] {
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

#[cfg(test)]
mod tests {
    use super::clip;

    #[test]
    fn clip_shows_control_characters_escaped_and_cuts_long_lines() {
        assert_eq!(clip("let a = 1;\r// b", 160), "let a = 1;\\r// b");
        assert_eq!(clip("\u{1b}[31mred\u{1b}[0m\tx", 160), "\\u{1b}[31mred\\u{1b}[0m\tx");
        assert_eq!(clip("plain", 160), "plain");
        assert_eq!(clip("if (a) {\u{202e} }\u{2066}", 160), "if (a) {\\u{202e} }\\u{2066}");
        assert_eq!(clip("abcdef", 3), "abc… (3 more chars)");
        assert_eq!(clip("a\rbcdef", 3), "a\\rb… (4 more chars)");
    }
}
