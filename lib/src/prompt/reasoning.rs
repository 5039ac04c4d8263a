//! Splitting a thinking model's reasoning off its answer, before the answer
//! is parsed: the reasoning is recorded but never scored (docs/METHOD.md §3,
//! "Thinking models").
//!
//! The formats are those of the chat templates people run: a tag pair such as
//! `<think>…</think>` at the start of the answer, the closing tag alone (the
//! template opened the block in the generation prompt, as QwQ and the
//! DeepSeek R1 distills do), an unclosed block (the budget ran out while
//! thinking), and gpt-oss's `analysis` channel before its `final` one.

/// Opening and closing markers of a reasoning block, per family.
pub(crate) const TAG_PAIRS: [(&str, &str); 10] = [
    // Qwen 3.x, QwQ, DeepSeek R1 and V3.x, GLM, Kimi, Granite, SmolLM3, MiniMax…
    ("<think>", "</think>"),
    ("<thinking>", "</thinking>"),
    // ByteDance Seed-OSS.
    ("<seed:think>", "</seed:think>"),
    // MiniMax M3.
    ("<mm:think>", "</mm:think>"),
    // Cohere Command R7B / A.
    ("<|START_THINKING|>", "<|END_THINKING|>"),
    // Mistral Magistral and the Ministral reasoning models.
    ("[THINK]", "[/THINK]"),
    // Gemma 4.
    ("<|channel>thought", "<channel|>"),
    // Kimi VL.
    ("◁think▷", "◁/think▷"),
    // Kimi K3.
    ("<|open|>think<|sep|>", "<|close|>think<|sep|>"),
    // Hunyuan 3.
    ("<think:opensource>", "</think:opensource>"),
];

/// The reasoning markers of a chat template, for closing the reasoning when
/// its budget is spent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Markers {
    pub open: &'static str,
    /// The text whose presence says the reasoning was closed.
    pub close: &'static str,
    /// What is fed to close it, as the family writes it.
    pub closing: String,
    /// The generation prompt ends inside an opened block.
    pub opened_in_prompt: bool,
}

impl Markers {
    /// Every text the markers are made of (the opening and closing markers
    /// and what is fed to close), where a control token of the vocabulary
    /// may spell a part.
    pub(crate) fn texts(&self) -> Vec<String> {
        vec![self.open.to_string(), self.close.to_string(), self.closing.clone()]
    }

    fn tags(open: &'static str, close: &'static str, opened_in_prompt: bool) -> Markers {
        // The closing marker on its own line and a blank line, as these
        // models write it when they stop thinking (`\n</think>\n\n`).
        Markers { open, close, closing: format!("\n{close}\n\n"), opened_in_prompt }
    }
}

/// The markers a template's answers use: the pair whose opening marker ends
/// the generation prompt `tail` (the template opened the block), else the
/// first pair whose markers both appear in the template's text, else
/// gpt-oss's channels (the analysis message is ended and the final channel
/// opened). `None` where the template shows none.
pub fn markers(tail: &str, template: &str) -> Option<Markers> {
    let end = tail.trim_end();
    if let Some((open, close)) = TAG_PAIRS.iter().find(|(open, _)| end.ends_with(open)) {
        return Some(Markers::tags(open, close, true));
    }
    if let Some(&(open, close)) = TAG_PAIRS.iter().find(|(open, close)| template.contains(open) && template.contains(close)) {
        return Some(Markers::tags(open, close, false));
    }
    template.contains("<|channel|>final").then(|| Markers {
        open: HARMONY_CHANNEL,
        close: HARMONY_FINAL,
        closing: format!("<|end|><|start|>assistant{HARMONY_FINAL}"),
        opened_in_prompt: false,
    })
}

/// gpt-oss (the harmony format): the channel markers.
const HARMONY_CHANNEL: &str = "<|channel|>";
const HARMONY_MESSAGE: &str = "<|message|>";
const HARMONY_FINAL: &str = "<|channel|>final<|message|>";
const HARMONY_ENDS: [&str; 3] = ["<|return|>", "<|end|>", "<|call|>"];

/// An answer with its reasoning split off.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split<'a> {
    /// The reasoning, without its markers; `None` when the answer had none.
    pub reasoning: Option<String>,
    /// What is scored.
    pub answer: &'a str,
    /// The reasoning block was never closed: the answer is empty because the
    /// model was still thinking when it stopped.
    pub unclosed: bool,
}

impl<'a> Split<'a> {
    /// Where the answer starts in `text` (the text [`split`] was given).
    pub(crate) fn answer_offset(&self, text: &str) -> usize {
        (self.answer.as_ptr() as usize).saturating_sub(text.as_ptr() as usize).min(text.len())
    }

    fn plain(answer: &'a str) -> Split<'a> {
        Split { reasoning: None, answer, unclosed: false }
    }
}

/// Splits the reasoning off `text`. Text without any reasoning marker comes
/// back whole as the answer. Only a block at the very start (after
/// whitespace) is taken: a marker later in an answer is the model's text.
pub fn split(text: &str) -> Split<'_> {
    if let Some(s) = split_harmony(text) {
        return s;
    }
    let lead = text.len() - text.trim_start().len();
    let start = &text[lead..];
    for (open, close) in TAG_PAIRS {
        if let Some(inner) = start.strip_prefix(open) {
            return match inner.find(close) {
                Some(end) => {
                    Split { reasoning: Some(inner[..end].trim().to_string()), answer: &inner[end + close.len()..], unclosed: false }
                }
                None => Split { reasoning: Some(inner.trim().to_string()), answer: "", unclosed: true },
            };
        }
    }
    // The template opened the block in the generation prompt: the answer
    // starts inside it, and the first closing tag (with no opening tag
    // before it) ends it.
    for (open, close) in TAG_PAIRS {
        if let Some(end) = text.find(close)
            && !text[..end].contains(open)
        {
            return Split { reasoning: Some(text[..end].trim().to_string()), answer: &text[end + close.len()..], unclosed: false };
        }
    }
    Split::plain(text)
}

/// gpt-oss: `<|channel|>analysis<|message|>…<|end|><|start|>assistant<|channel|>final<|message|>ANSWER<|return|>`.
/// `None` when the text is not in that format.
fn split_harmony(text: &str) -> Option<Split<'_>> {
    let t = text.trim_start();
    if !t.starts_with(HARMONY_CHANNEL) {
        return None;
    }
    let (before, answer, unclosed) = match t.find(HARMONY_FINAL) {
        Some(at) => {
            let mut answer = &t[at + HARMONY_FINAL.len()..];
            for end in HARMONY_ENDS {
                if let Some(cut) = answer.find(end) {
                    answer = &answer[..cut];
                }
            }
            (&t[..at], answer, false)
        }
        None => (t, "", true),
    };
    // The reasoning: each non-final message's text, markers dropped.
    let mut reasoning = Vec::new();
    for part in before.split(HARMONY_CHANNEL).filter(|p| !p.is_empty()) {
        let body = part.split_once(HARMONY_MESSAGE).map_or("", |(_, b)| b);
        let body = HARMONY_ENDS.iter().chain(&["<|start|>"]).fold(body, |b, end| b.split(end).next().unwrap_or(b));
        if !body.trim().is_empty() {
            reasoning.push(body.trim());
        }
    }
    Some(Split { reasoning: Some(reasoning.join("\n\n")), answer, unclosed })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_think_block_is_split_off() {
        let s = split("<think>\nThe user wants lines.\n```js\nwrong();\n```\n</think>\n\n```js\nright();\n```\n");
        assert_eq!(s.reasoning.as_deref(), Some("The user wants lines.\n```js\nwrong();\n```"));
        assert_eq!(s.answer, "\n\n```js\nright();\n```\n");
        assert!(!s.unclosed);
    }

    #[test]
    fn empty_think_block_of_thinking_off() {
        let s = split("<think>\n\n</think>\n\nreturn x;\n");
        assert_eq!(s.reasoning.as_deref(), Some(""));
        assert_eq!(s.answer, "\n\nreturn x;\n");
    }

    #[test]
    fn unclosed_think_block_leaves_no_answer() {
        let s = split("  <think>\nstill going");
        assert_eq!(s.reasoning.as_deref(), Some("still going"));
        assert_eq!(s.answer, "");
        assert!(s.unclosed);
    }

    #[test]
    fn block_opened_by_the_template_ends_at_the_first_close() {
        let s = split("Okay, the function is...\n</think>\n\nvar a = 1;\n");
        assert_eq!(s.reasoning.as_deref(), Some("Okay, the function is..."));
        assert_eq!(s.answer, "\n\nvar a = 1;\n");
    }

    #[test]
    fn other_families() {
        for (text, reasoning, answer) in [
            ("<seed:think>hmm</seed:think>a()", "hmm", "a()"),
            ("<|START_THINKING|>hmm<|END_THINKING|>a()", "hmm", "a()"),
            ("[THINK]hmm[/THINK]a()", "hmm", "a()"),
            ("<|channel>thought\nhmm<channel|>a()", "hmm", "a()"),
            ("<mm:think>hmm</mm:think>a()", "hmm", "a()"),
        ] {
            let s = split(text);
            assert_eq!((s.reasoning.as_deref(), s.answer), (Some(reasoning), answer), "{text}");
        }
    }

    #[test]
    fn a_marker_inside_the_answer_is_text() {
        let text = "const a = '<think>';\nconst b = 2;\n";
        assert_eq!(split(text), Split::plain(text));
        let plain = "return 1;\n}\n";
        assert_eq!(split(plain), Split::plain(plain));
    }

    #[test]
    fn markers_follow_the_generation_prompt_then_the_template() {
        let m = markers("<|im_start|>assistant\n<think>\n", "").unwrap();
        assert_eq!((m.open, m.close, m.opened_in_prompt), ("<think>", "</think>", true));
        let m = markers("<|im_start|>assistant\n", "{{ '<think>' }}...{{ '</think>' }}").unwrap();
        assert!(!m.opened_in_prompt);
        assert_eq!(m.closing, "\n</think>\n\n");
        assert!(markers("<|start|>assistant", "nothing").is_none());
        let oss = markers("<|start|>assistant", "<|channel|>analysis ... <|channel|>final").unwrap();
        assert_eq!(oss.closing, "<|end|><|start|>assistant<|channel|>final<|message|>");
        // A closed empty block (thinking off) does not end with an opening marker.
        let m = markers("assistant\n<think>\n\n</think>\n\n", "<think></think>").unwrap();
        assert!(!m.opened_in_prompt);
    }

    #[test]
    fn gpt_oss_channels() {
        let s = split(
            "<|channel|>analysis<|message|>We need the lines.<|end|><|start|>assistant<|channel|>final<|message|>```js\nx();\n```<|return|>",
        );
        assert_eq!(s.reasoning.as_deref(), Some("We need the lines."));
        assert_eq!(s.answer, "```js\nx();\n```");
        let s = split("<|channel|>analysis<|message|>We need");
        assert_eq!((s.reasoning.as_deref(), s.answer, s.unclosed), (Some("We need"), "", true));
        // As bench detokenizes it: llama.cpp renders the channel markers but
        // drops the control token <|end|>.
        let s = split("<|channel|>analysis<|message|>Need lines.<|start|>assistant<|channel|>final<|message|>x();");
        assert_eq!((s.reasoning.as_deref(), s.answer), (Some("Need lines."), "x();"));
        // A final channel straight away (reasoning effort low may skip analysis).
        let s = split("<|channel|>final<|message|>x();");
        assert_eq!((s.reasoning.as_deref(), s.answer), (Some(""), "x();"));
    }
}
