//! Java through tree-sitter-java.
//!
//! A target is a method or constructor with a body, in any class, interface,
//! enum or record; it is named `Class.method` when its bare name repeats.
//! Overloads share a name and are never targets.

use super::walk::{Decl, Grammar, braced, field_text, grammar_language};
use tree_sitter::Node;

/// Java source.
pub struct Java;

impl Grammar for Java {
    const TITLE: &'static str = "Java";
    const SEPARATOR: &'static str = ".";
    const IDENTIFIER_KINDS: &'static [&'static str] = &["identifier"];
    const RULE: &'static str = "a method with a body whose name (or Class.name) is unique";
    fn grammar(&self) -> tree_sitter::Language {
        tree_sitter_java::LANGUAGE.into()
    }
    fn declaration(&self, node: Node, text: &str) -> Option<Decl> {
        if !matches!(node.kind(), "method_declaration" | "constructor_declaration") {
            return None;
        }
        let name = field_text(node, "name", text)?;
        let (open_end, body_end) = braced(node.child_by_field_name("body")?)?;
        Some(Decl { spelled: name.clone(), name, start: node.start_byte(), open_end, body_end })
    }
    fn scope(&self, node: Node, text: &str) -> Option<String> {
        match node.kind() {
            "class_declaration" | "interface_declaration" | "enum_declaration" | "record_declaration" => field_text(node, "name", text),
            _ => None,
        }
    }
}

grammar_language!(
    Java,
    "java",
    "//",
    &[
        "abstract",
        "assert",
        "boolean",
        "break",
        "byte",
        "case",
        "catch",
        "char",
        "class",
        "const",
        "continue",
        "default",
        "do",
        "double",
        "else",
        "enum",
        "extends",
        "final",
        "finally",
        "float",
        "for",
        "goto",
        "if",
        "implements",
        "import",
        "instanceof",
        "int",
        "interface",
        "long",
        "native",
        "new",
        "package",
        "private",
        "protected",
        "public",
        "return",
        "short",
        "static",
        "strictfp",
        "super",
        "switch",
        "synchronized",
        "this",
        "throw",
        "throws",
        "transient",
        "try",
        "void",
        "volatile",
        "while",
        "true",
        "false",
        "null",
        "var",
        "record",
        "yield",
        "sealed",
        "permits",
        "String",
        "Object",
        "main",
    ]
);
