//! Python through tree-sitter-python.
//!
//! A target is a `def` (or `async def`) with a name, at any depth: module
//! functions, methods, nested functions. The lines asked for are those after
//! the line holding the colon that ends the header; the body ends with its
//! last statement (a trailing comment is not part of it), as Python's own
//! `ast` module sees it.

use super::walk::{Decl, Grammar, field_text, grammar_language};
use tree_sitter::Node;

/// Python source.
pub struct Python;

impl Grammar for Python {
    const TITLE: &'static str = "Python";
    const SEPARATOR: &'static str = ".";
    const IDENTIFIER_KINDS: &'static [&'static str] = &["identifier"];
    const BLOCK_COMMENTS: bool = false;
    const DOCSTRINGS: bool = true;
    const AFTER: &'static str = "the line ending its header";
    const RULE: &'static str = "a `def` whose name (or Class.name) is unique";
    fn grammar(&self) -> tree_sitter::Language {
        tree_sitter_python::LANGUAGE.into()
    }
    fn declaration(&self, node: Node, text: &str) -> Option<Decl> {
        if node.kind() != "function_definition" {
            return None;
        }
        let name = field_text(node, "name", text)?;
        let body = node.child_by_field_name("body")?;
        let mut cursor = node.walk();
        let colon = node.children(&mut cursor).filter(|c| c.kind() == ":" && c.end_byte() <= body.start_byte()).last()?;
        let mut cursor = body.walk();
        let last = body.named_children(&mut cursor).filter(|c| c.kind() != "comment").last()?;
        let end = last.end_byte().max(last.start_byte() + 1) - 1;
        Some(Decl {
            spelled: name.clone(),
            name,
            start: node.start_byte(),
            open_end: colon.end_byte(),
            body_end: super::line_end_after(text, end),
        })
    }
    fn scope(&self, node: Node, text: &str) -> Option<String> {
        (node.kind() == "class_definition").then(|| field_text(node, "name", text)).flatten()
    }
}

grammar_language!(
    Python,
    "python",
    "#",
    &[
        "False", "None", "True", "and", "as", "assert", "async", "await", "break", "case", "class", "continue", "def", "del", "elif",
        "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "match", "nonlocal", "not", "or",
        "pass", "raise", "return", "self", "cls", "try", "type", "while", "with", "yield", "print", "len", "super", "object", "int", "str",
        "list", "dict", "set", "tuple", "bool", "float", "bytes", "range", "open",
    ]
);
