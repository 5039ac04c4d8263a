//! Rust through tree-sitter-rust.
//!
//! A target is a `fn` item with a body at any depth: free functions, methods
//! in `impl` and `trait` blocks, functions in modules and inside other
//! functions. Methods are named `Type::method` (the `impl`'s type without its
//! generic arguments, or the trait's name) when the bare name repeats.

use super::walk::{Decl, Grammar, braced, field_text, grammar_language, text_of};
use tree_sitter::Node;

/// Rust source.
pub struct Rust;

/// The type an `impl` is for, without generic arguments or references.
fn base_type(mut node: Node, text: &str) -> Option<String> {
    loop {
        match node.kind() {
            "generic_type" => node = node.child_by_field_name("type")?,
            "reference_type" | "pointer_type" => node = node.child_by_field_name("type")?,
            "scoped_type_identifier" => node = node.child_by_field_name("name")?,
            _ => return text_of(node, text).map(|t| t.split_whitespace().collect()),
        }
    }
}

impl Grammar for Rust {
    const TITLE: &'static str = "Rust";
    const SEPARATOR: &'static str = "::";
    const IDENTIFIER_KINDS: &'static [&'static str] = &["identifier", "field_identifier"];
    const RULE: &'static str = "a `fn` with a body whose name (or Type::name) is unique";
    fn grammar(&self) -> tree_sitter::Language {
        tree_sitter_rust::LANGUAGE.into()
    }
    fn declaration(&self, node: Node, text: &str) -> Option<Decl> {
        if node.kind() != "function_item" {
            return None;
        }
        let name = field_text(node, "name", text)?;
        let (open_end, body_end) = braced(node.child_by_field_name("body")?)?;
        Some(Decl { spelled: name.clone(), name, start: node.start_byte(), open_end, body_end })
    }
    fn scope(&self, node: Node, text: &str) -> Option<String> {
        match node.kind() {
            "impl_item" => base_type(node.child_by_field_name("type")?, text),
            "trait_item" | "mod_item" => field_text(node, "name", text),
            _ => None,
        }
    }
}

grammar_language!(
    Rust,
    "rust",
    "//",
    &[
        "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern", "false", "fn", "for", "if", "impl",
        "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "self", "Self", "static", "struct", "super", "trait",
        "true", "type", "unsafe", "use", "where", "while", "abstract", "become", "box", "do", "final", "macro", "override", "priv",
        "typeof", "unsized", "virtual", "yield", "try", "gen", "union", "main",
    ]
);
