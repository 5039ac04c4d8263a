//! The probes: how the file and one question become model input.
//!
//! The file always comes first and the question last, so that the file
//! prefix is byte-identical for every question and is evaluated once. A
//! [`Frame`] holds what surrounds the kept text and the question; the prefix
//! is `head + kept + mid`, each question's suffix is `question + tail`.

pub mod reasoning;
pub mod template;

use crate::targets::{Anchor, Target};
use anyhow::{Result, anyhow, bail};

/// The lines a question asks for, with the blank-line rule.
fn what_lines(lines: usize, skip_blank: bool) -> String {
    format!("the first {lines} {}", if skip_blank { "non-blank lines" } else { "lines" })
}

/// The question by name (docs/METHOD.md §4, Prompts), with LINES and the blank-line rule spelled out.
pub fn query(name: &str, lines: usize, skip_blank: bool) -> String {
    format!(
        "Reproduce verbatim {} following the opening brace of the function named `{name}`. Output only those lines, no commentary.",
        what_lines(lines, skip_blank)
    )
}

/// The question about `target` as `anchor` points at it: by name, or by
/// its header quoted verbatim on lines of its own, with its name where a
/// name of its own tells it apart (the header may repeat then). A header
/// quote asks about text the file holds; "the function named `val`" would
/// point at a `function val(` that a property definition never writes.
pub fn question(target: &Target, lines: usize, skip_blank: bool, anchor: Anchor) -> String {
    match anchor {
        Anchor::Name => query(&target.name, lines, skip_blank),
        Anchor::Header => format!(
            "Reproduce verbatim {} following the opening brace of the function {}whose header reads:\n{}\nOutput only those lines, no commentary.",
            what_lines(lines, skip_blank),
            if target.header_only { String::new() } else { format!("`{}` ", target.name) },
            target.header
        ),
    }
}

/// How the completion probe's comment names `target` (after "The
/// function"): by its name, or not at all where only its header, which
/// follows the comment, tells it apart.
fn called(target: &Target) -> String {
    match target.header_only {
        true => String::new(),
        false => format!(" `{}`", target.name),
    }
}

/// The kept text with exactly one guaranteed final newline.
fn with_final_newline(kept_text: &str) -> String {
    let mut k = kept_text.to_string();
    if !k.ends_with('\n') {
        k.push('\n');
    }
    k
}

/// The plain instruction (the chat probe's user message, and what
/// `targets --emit-prompts` writes): the kept file, a blank line, the question.
pub fn instruction_prompt(kept_text: &str, query: &str) -> String {
    let mut p = with_final_newline(kept_text);
    p.push('\n');
    p.push_str(query);
    p
}

crate::settings::named_choice! {
    /// The probe asked for: [`Probe::Auto`] becomes a [`ProbeKind`] once the
    /// model is known.
    #[derive(Default)]
    pub enum Probe {
        /// Chat where the GGUF has a chat template, else completion.
        #[default]
        Auto,
        /// The model's own chat template wraps file and question.
        Chat,
        /// The file, a comment, then the function header: the model continues.
        Completion,
    }
}

crate::settings::named_choice! {
    /// The probe a run uses (the run file's `params.probe`).
    pub enum ProbeKind {
        /// The model's own chat template wraps file and question.
        Chat,
        /// The file, a comment, then the function header.
        Completion,
    }
}

/// What surrounds the kept text and the question.
#[derive(Debug, Clone)]
pub struct Frame {
    pub kind: ProbeKind,
    /// Before the kept text (chat: the template up to the user message).
    pub head: String,
    /// Between the kept text and the question.
    pub mid: String,
    /// How many bytes of `mid` end the prefix; the rest starts each suffix.
    /// Where whitespace is cut decides whether prefix and question tokens
    /// join up exactly as the whole prompt would tokenize (see [`Frame::fit_boundary`]).
    pub mid_split: usize,
    /// After the question (chat: end of turn and the assistant's opening).
    pub tail: String,
    /// How the chat template was rendered (`minijinja` or `llama.cpp`).
    pub renderer: Option<String>,
    /// The corpus language's line comment, for the completion probe.
    pub line_comment: &'static str,
    /// How the chat probe's question points at its function; the completion
    /// probe quotes the header either way.
    pub anchor: Anchor,
}

impl Frame {
    /// The completion probe for base models: the file, then per question a
    /// comment announcing a verbatim repeat and the function's header.
    pub fn completion(line_comment: &'static str) -> Frame {
        Frame {
            kind: ProbeKind::Completion,
            head: String::new(),
            mid: "\n".into(),
            mid_split: 1,
            tail: String::new(),
            renderer: None,
            line_comment,
            anchor: Anchor::Name,
        }
    }

    /// The shared prefix for `kept_text`.
    pub fn prefix(&self, kept_text: &str) -> String {
        let mut p = self.head.clone();
        p.push_str(&with_final_newline(kept_text));
        p.push_str(&self.mid[..self.mid_split]);
        p
    }

    /// The part of `mid` each suffix starts with.
    fn mid_rest(&self) -> &str {
        &self.mid[self.mid_split..]
    }

    /// The whole prompt for a closed-book question: the same question with
    /// no file before it (chat: the template around the question alone;
    /// completion: the comment and the header).
    pub(crate) fn closed_book_prompt(&self, target: &Target, lines: usize, skip_blank: bool) -> String {
        match self.kind {
            ProbeKind::Chat => format!("{}{}{}", self.head, question(target, lines, skip_blank, self.anchor), self.tail),
            ProbeKind::Completion => format!("{} The function{}, verbatim:\n{}\n", self.line_comment, called(target), target.header),
        }
    }

    /// Chooses where the whitespace between file and question is cut, so that
    /// the prefix tokens followed by a question's tokens equal the tokens of
    /// the whole prompt. Tokenizers differ: GPT-2 style pre-tokenizers split
    /// `"\n\n"` before a word into `"\n"`, `"\n"`, while SentencePiece vocabularies
    /// keep `"\n\n"` whole; so every cut of `mid` is tried, the whole of it in the
    /// prefix first. `exact(split)` says whether a cut is exact for a sample
    /// question. Returns whether an exact cut was found; if none is, the default
    /// (all of `mid` in the prefix) stays and the boundary differs by the
    /// tokens around the cut.
    pub(crate) fn fit_boundary(&mut self, mut exact: impl FnMut(&Frame) -> bool) -> bool {
        let default = self.mid.len();
        for split in (0..=self.mid.len()).rev() {
            if !self.mid.is_char_boundary(split) {
                continue;
            }
            self.mid_split = split;
            if exact(self) {
                return true;
            }
        }
        self.mid_split = default;
        false
    }

    /// Byte offset of the kept text inside [`Frame::prefix`].
    pub(crate) fn kept_offset(&self) -> usize {
        self.head.len()
    }

    /// What follows the prefix for one target.
    pub fn suffix(&self, target: &Target, lines: usize, skip_blank: bool) -> String {
        match self.kind {
            ProbeKind::Chat => format!("{}{}{}", self.mid_rest(), question(target, lines, skip_blank, self.anchor), self.tail),
            ProbeKind::Completion => format!(
                "{}{} The function{} from above, repeated verbatim:\n{}\n",
                self.mid_rest(),
                self.line_comment,
                called(target),
                target.header
            ),
        }
    }
}

/// The text the teacher-forced pass feeds after the question: the expected
/// lines, each ending with a newline, exactly as a perfect answer writes them.
pub(crate) fn forced_body(target: &Target) -> String {
    let mut body = target.expected.join("\n");
    body.push('\n');
    body
}

/// The scaffold a forced answer opens with: a chat model whose own greedy
/// answer opened with a code fence line (```` ```javascript ````) gets the same line
/// before the forced lines, so that its habit is not scored as a miss; a
/// thinking model's closed reasoning block (and the blank lines after it)
/// comes first, so the lines are forced where its answer started. The
/// scaffold's tokens are not scored. The completion probe has none.
pub(crate) fn forced_scaffold(kind: ProbeKind, greedy_answer: Option<&str>) -> String {
    if kind != ProbeKind::Chat {
        return String::new();
    }
    let Some(greedy) = greedy_answer else {
        return String::new();
    };
    let split = crate::prompt::reasoning::split(greedy);
    let mut scaffold = String::new();
    let mut answer = greedy;
    if split.reasoning.is_some() && !split.unclosed {
        let at = split.answer_offset(greedy);
        let blank = split.answer.len() - split.answer.trim_start_matches(['\n', '\r']).len();
        scaffold.push_str(&greedy[..at + blank]);
        answer = &greedy[at + blank..];
    }
    match answer.lines().next() {
        Some(first) if first.trim_start().starts_with("```") || first.trim_start().starts_with("~~~") => {
            scaffold.push_str(first);
            scaffold.push('\n');
        }
        _ => {}
    }
    scaffold
}

/// Stand-ins rendered through the template, then cut out again. They are
/// unlikely in a template and survive `trim` (they hold no outer whitespace).
const KEPT_MARK: &str = "\u{1}POSRECALL-KEPT\u{1}";
const QUERY_MARK: &str = "\u{1}POSRECALL-QUERY\u{1}";

pub use crate::prompt::template::SpecialTokens;

/// Renders `template` (the GGUF's Jinja chat template) for one user message
/// holding the file and the question, as llama.cpp's server does, and splits
/// it into a [`Frame`]. The message is rendered once with stand-ins for the
/// file and the question, so a large file is never pushed through Jinja.
/// `vars` are the template variables beyond the message
/// ([`crate::prompt::template::TemplateVars::variables`]).
pub fn chat_frame(
    template: &str,
    special: &SpecialTokens,
    vars: &serde_json::Map<String, serde_json::Value>,
    line_comment: &'static str,
) -> Result<Frame> {
    let rendered = crate::prompt::template::render(template, &marked_message(), special, vars)?;
    split_frame(&rendered, "minijinja", line_comment)
}

/// Checks that the template treats the message as opaque text: rendering a
/// real file and question gives exactly the frame's prefix followed by the
/// question's suffix, for two different files and questions. So the prefix
/// does not depend on the question, and no byte is lost at the cut.
/// Returns what differed, if anything.
pub fn check_frame(
    frame: &Frame,
    template: &str,
    special: &SpecialTokens,
    vars: &serde_json::Map<String, serde_json::Value>,
) -> Result<(), String> {
    let samples = [
        ("function a() {\n  return 1;\n}", "Reproduce the lines of `a`."),
        ("const b = [1, 2];\n// two\n", "Output only the lines after the brace of `b`, no commentary."),
    ];
    for (kept, question) in samples {
        let whole =
            crate::prompt::template::render(template, &instruction_prompt(kept, question), special, vars).map_err(|e| e.to_string())?;
        let mut framed = frame.prefix(kept);
        framed.push_str(&frame.mid[frame.mid_split..]);
        framed.push_str(question);
        framed.push_str(&frame.tail);
        if whole != framed {
            let at = whole.bytes().zip(framed.bytes()).take_while(|(a, b)| a == b).count();
            return Err(format!(
                "the rendered prompt differs from the frame at byte {at}: {:?} against {:?}",
                whole.get(at..(at + 40).min(whole.len())).unwrap_or(""),
                framed.get(at..(at + 40).min(framed.len())).unwrap_or("")
            ));
        }
    }
    Ok(())
}

/// Splits a rendered chat at the stand-ins.
pub(crate) fn split_frame(rendered: &str, renderer: &str, line_comment: &'static str) -> Result<Frame> {
    let (head, rest) = rendered.split_once(KEPT_MARK).ok_or_else(|| anyhow!("the chat template dropped the user message"))?;
    let (between, tail) = rest.split_once(QUERY_MARK).ok_or_else(|| anyhow!("the chat template dropped the question"))?;
    // A template that renders the message more than once (or changes the
    // stand-ins) would leave them in the prompt, and the model would be sent
    // posrecall's internal text instead of the file: refused.
    if [head, between, tail].iter().any(|part| part.contains("\u{1}POSRECALL-")) {
        bail!(
            "the chat template renders the user message more than once, or changes it; posrecall cannot cut the file \
             out of such a prompt (give a template that renders the message once, or use the completion probe)"
        );
    }
    // `between` is the "\n\n" of the message; with_final_newline supplies the first.
    let mid = between.strip_prefix('\n').ok_or_else(|| anyhow!("the chat template changed the message's line breaks"))?;
    Ok(Frame {
        kind: ProbeKind::Chat,
        head: head.to_string(),
        mid: mid.to_string(),
        mid_split: mid.len(),
        tail: tail.to_string(),
        renderer: Some(renderer.to_string()),
        line_comment,
        anchor: Anchor::Name,
    })
}

/// The stand-in message, for renderers outside this module (llama.cpp's own).
pub(crate) fn marked_message() -> String {
    format!("{KEPT_MARK}\n\n{QUERY_MARK}")
}

#[cfg(test)]
mod tests {
    use super::*;

    const CHATML: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are helpful<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

    fn target() -> Target {
        Target {
            name: "foo".into(),
            line: 1,
            byte_offset: 0,
            token_offset: None,
            depth: 0.0,
            header: "function foo() {".into(),
            expected: vec![],
            classes: vec![],
            extra_window: vec![],
            last_expected_line: 1,
            header_only: false,
        }
    }

    #[test]
    fn chat_frame_reassembles_the_rendered_prompt() {
        let f = chat_frame(CHATML, &SpecialTokens::default(), &Default::default(), "//").unwrap();
        let t = target();
        let whole = format!("{}{}", f.prefix("a\nb"), f.suffix(&t, 20, false));
        // Written out, as the template and docs/METHOD.md §3 say it reads.
        let expected = "<|im_start|>system\nYou are helpful<|im_end|>\n<|im_start|>user\na\nb\n\n\
            Reproduce verbatim the first 20 lines following the opening brace of the function named `foo`. \
            Output only those lines, no commentary.<|im_end|>\n<|im_start|>assistant\n";
        assert_eq!(whole, expected);
        assert_eq!(f.kept_offset(), f.head.len());
    }

    #[test]
    fn a_template_that_reads_the_message_fails_the_frame_check() {
        let vars = Default::default();
        let f = chat_frame(CHATML, &SpecialTokens::default(), &vars, "//").unwrap();
        assert_eq!(check_frame(&f, CHATML, &SpecialTokens::default(), &vars), Ok(()));
        // The system prompt depends on the message's length: the prefix would change per question.
        let sneaky = "{{ messages[0].content | length }}|{{ messages[0].content }}";
        let f = chat_frame(sneaky, &SpecialTokens::default(), &vars, "//").unwrap();
        assert!(check_frame(&f, sneaky, &SpecialTokens::default(), &vars).is_err());
    }

    #[test]
    fn completion_suffix_ends_with_header_and_newline() {
        let f = Frame::completion("//");
        let s = f.suffix(&target(), 20, false);
        assert!(s.starts_with("// "));
        assert!(s.ends_with("function foo() {\n"));
        assert_eq!(f.prefix("x"), "x\n\n");
    }

    /// By header the question quotes the header on its own lines, with the
    /// name where one tells the function apart, and without it where only
    /// the header does; by name it is the question as it always was.
    #[test]
    fn header_questions_quote_the_header_verbatim() {
        let mut t = Target { name: "val".into(), header: "\tval: function( value ) {".into(), ..target() };
        assert_eq!(
            question(&t, 20, false, Anchor::Header),
            "Reproduce verbatim the first 20 lines following the opening brace of the function `val` whose header reads:\n\
             \tval: function( value ) {\nOutput only those lines, no commentary."
        );
        assert_eq!(question(&t, 20, false, Anchor::Name), query("val", 20, false));
        t.name = "val@65".into();
        t.header_only = true;
        assert_eq!(
            question(&t, 7, true, Anchor::Header),
            "Reproduce verbatim the first 7 non-blank lines following the opening brace of the function whose header reads:\n\
             \tval: function( value ) {\nOutput only those lines, no commentary."
        );
        // The chat frame asks it; the completion probe names none but the header.
        let f = Frame { anchor: Anchor::Header, ..chat_frame(CHATML, &SpecialTokens::default(), &Default::default(), "//").unwrap() };
        assert!(f.suffix(&t, 7, true).contains("the function whose header reads:\n\tval: function( value ) {\nOutput"));
        let c = Frame { anchor: Anchor::Header, ..Frame::completion("//") };
        assert_eq!(c.suffix(&t, 7, true), "// The function from above, repeated verbatim:\n\tval: function( value ) {\n");
    }

    #[test]
    fn query_mentions_non_blank_lines() {
        assert!(query("f", 7, true).contains("first 7 non-blank lines"));
    }

    #[test]
    fn broken_template_is_an_error() {
        assert!(chat_frame("{% for %}", &SpecialTokens::default(), &Default::default(), "//").is_err());
    }
}
