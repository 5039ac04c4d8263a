//! TypeScript and TSX through tree-sitter-typescript.
//!
//! A target is a named `function` declaration (as in JavaScript) or a
//! method with a body defined in a class; a method is named `Class.method`
//! when its bare name repeats. Overload signatures and abstract methods have
//! no body and are not functions here.

use super::javascript::JS_WORDS;
use super::joined;
use super::walk::{Decl, Grammar, braced, field_text, grammar_language};
use tree_sitter::Node;

/// TypeScript source (`.ts`, `.mts`, `.cts`).
pub struct TypeScript;

/// TSX source (`.tsx`).
pub struct Tsx;

fn declaration(node: Node, text: &str) -> Option<Decl> {
    match node.kind() {
        "function_declaration" | "generator_function_declaration" => {}
        "method_definition" if node.parent().is_some_and(|p| p.kind() == "class_body") => {
            let n = node.child_by_field_name("name")?;
            if !matches!(n.kind(), "property_identifier" | "private_property_identifier") {
                return None;
            }
        }
        _ => return None,
    }
    let name = field_text(node, "name", text)?;
    let (open_end, body_end) = braced(node.child_by_field_name("body")?)?;
    Some(Decl { spelled: name.clone(), name, start: node.start_byte(), open_end, body_end })
}

fn scope(node: Node, text: &str) -> Option<String> {
    match node.kind() {
        "class_declaration" | "abstract_class_declaration" | "class" | "internal_module" | "module" => field_text(node, "name", text),
        _ => None,
    }
}

/// TypeScript's own reserved and contextual words, beyond JavaScript's.
const TS_OWN_WORDS: &[&str] = &[
    "abstract",
    "any",
    "asserts",
    "bigint",
    "boolean",
    "declare",
    "infer",
    "is",
    "keyof",
    "module",
    "namespace",
    "never",
    "number",
    "object",
    "readonly",
    "require",
    "satisfies",
    "string",
    "symbol",
    "type",
    "unique",
    "unknown",
    "override",
    "accessor",
    "constructor",
];

/// A TypeScript file holds JavaScript, so JavaScript's words are reserved
/// too: they come first, then TypeScript's own.
const TS_WORDS: &[&str] = &joined::<{ JS_WORDS.len() + TS_OWN_WORDS.len() }>(JS_WORDS, TS_OWN_WORDS);

macro_rules! ts_grammar {
    ($ty:ty, $lang:expr, $title:literal) => {
        impl Grammar for $ty {
            const TITLE: &'static str = $title;
            const SEPARATOR: &'static str = ".";
            const IDENTIFIER_KINDS: &'static [&'static str] = &["identifier", "property_identifier"];
            const RULE: &'static str = "a named `function` declaration or class method whose name (or Class.name) is unique";
            fn grammar(&self) -> tree_sitter::Language {
                $lang.into()
            }
            fn declaration(&self, node: Node, text: &str) -> Option<Decl> {
                declaration(node, text)
            }
            fn scope(&self, node: Node, text: &str) -> Option<String> {
                scope(node, text)
            }
            fn definition(&self, node: Node, text: &str) -> Option<Decl> {
                // Class methods are declarations here already.
                super::javascript::definition(node, text, false)
            }
        }
    };
}

ts_grammar!(TypeScript, tree_sitter_typescript::LANGUAGE_TYPESCRIPT, "TypeScript");
ts_grammar!(Tsx, tree_sitter_typescript::LANGUAGE_TSX, "TSX");
grammar_language!(TypeScript, "typescript", "//", TS_WORDS);
grammar_language!(Tsx, "tsx", "//", TS_WORDS);
