//! What each line of a file is made of, from its parse tree: code,
//! comment, docstring (Python) or blank. A line with any code on it is code
//! (`x = 1  # note` is code); a line of comment or docstring text only is
//! that; a line of whitespace is blank. So a score can say how much of it is
//! code and how much prose (issue #63, "what each score is made of").

use tree_sitter::{Node, Tree};

crate::settings::named_choice! {
    /// What one line of a file is made of.
    #[derive(Hash, PartialOrd, Ord)]
    pub enum LineClass {
        /// Holds code, with or without a trailing comment.
        Code,
        /// Comment text only.
        Comment,
        /// Docstring text only (Python).
        Docstring,
        /// Whitespace only.
        Blank,
    }
}

/// A byte range of prose: a comment, or a docstring.
pub type ProseSpan = (usize, usize, LineClass);

/// The comments of `tree` (every outermost node whose kind names a
/// comment), and with `docstrings` Python's docstrings: a string statement
/// that opens a module, a class or a function body (comments before it
/// aside), as Python's `ast` finds them (an f-string or bytes is no
/// docstring).
pub(crate) fn prose_spans(tree: &Tree, text: &str, docstrings: bool) -> Vec<ProseSpan> {
    let mut out = Vec::new();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        if node.kind().contains("comment") {
            out.push((node.start_byte(), node.end_byte(), LineClass::Comment));
            continue;
        }
        if docstrings && let Some(doc) = docstring(node, text) {
            out.push((doc.start_byte(), doc.end_byte(), LineClass::Docstring));
        }
        let mut cursor = node.walk();
        stack.extend(node.children(&mut cursor));
    }
    out.sort_unstable();
    out
}

/// The docstring statement of `node` when it is a module, or a class's or
/// function's body.
fn docstring<'t>(node: Node<'t>, text: &str) -> Option<Node<'t>> {
    let opens = match node.kind() {
        "module" => true,
        "block" => node.parent().is_some_and(|p| matches!(p.kind(), "function_definition" | "class_definition")),
        _ => false,
    };
    if !opens {
        return None;
    }
    let mut cursor = node.walk();
    let first = node.named_children(&mut cursor).find(|c| c.kind() != "comment")?;
    if first.kind() != "expression_statement" || first.named_child_count() != 1 {
        return None;
    }
    let value = first.named_child(0)?;
    let strings: Vec<Node> = match value.kind() {
        "string" => vec![value],
        "concatenated_string" => {
            let mut c = value.walk();
            value.named_children(&mut c).collect()
        }
        _ => return None,
    };
    let plain = |s: &Node| {
        let prefix: String = text[s.start_byte()..s.end_byte()].chars().take_while(|c| c.is_ascii_alphabetic()).collect();
        !prefix.contains(['f', 'F', 'b', 'B'])
    };
    (strings.iter().all(|s| s.kind() == "string" && plain(s))).then_some(first)
}

/// The class of every line of `text` (lines end at `\n`; a final newline
/// opens no line, as [`super::Corpus`] counts them), given its prose spans.
pub fn line_classes(text: &str, spans: &[ProseSpan]) -> Vec<LineClass> {
    // What covers each byte: nothing (code), or a prose class.
    let mut covered: Vec<Option<LineClass>> = vec![None; text.len()];
    for &(start, end, class) in spans {
        for c in &mut covered[start.min(text.len())..end.min(text.len())] {
            *c = Some(class);
        }
    }
    let body = text.strip_suffix('\n').unwrap_or(text);
    let mut out = Vec::new();
    let mut at = 0;
    for line in body.split('\n') {
        let mut class = LineClass::Blank;
        for (i, ch) in line.char_indices() {
            if ch.is_whitespace() || ch == '\u{feff}' {
                continue;
            }
            match covered[at + i] {
                None => {
                    class = LineClass::Code;
                    break;
                }
                Some(LineClass::Docstring) => class = LineClass::Docstring,
                Some(c) if class == LineClass::Blank => class = c,
                Some(_) => {}
            }
        }
        out.push(class);
        at += line.len() + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::language_named;
    use LineClass::*;

    fn classes(language: &str, text: &str) -> Vec<LineClass> {
        language_named(language).unwrap().line_classes(text).unwrap()
    }

    /// Each rule on a line of its own: code with a trailing comment is code,
    /// a comment inside a block comment's lines is comment, a docstring is
    /// docstring only where it opens a body, an f-string never.
    #[test]
    fn every_rule_on_a_line_of_its_own() {
        let js = "// lead\nfunction f(a) {\n  var x = 1; // trailing\n\n  /* a\n     b */ return x;\n  /* only\n   */\n}\n";
        assert_eq!(classes("javascript", js), [Comment, Code, Code, Blank, Comment, Code, Comment, Comment, Code]);
        let py = "\"\"\"Module.\"\"\"\n# note\ndef f(a):\n    \"\"\"Doc\n\n    more.\"\"\"\n    s = \"\"\"not\n    a doc\"\"\"\n    return s  # why\n\ndef g():\n    f\"\"\"{1}\"\"\"\n";
        assert_eq!(classes("python", py), [Docstring, Comment, Code, Docstring, Blank, Docstring, Code, Code, Code, Blank, Code, Code]);
    }
}
