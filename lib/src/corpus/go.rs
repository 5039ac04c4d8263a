//! Go through tree-sitter-go.
//!
//! A target is a function declaration or a method declaration with a body.
//! A method is named `Recv.Method` (its receiver's type, without `*` or type
//! arguments) when its bare name repeats.

use super::walk::{Decl, Grammar, braced, field_text, grammar_language, text_of};
use tree_sitter::Node;

/// Go source.
pub struct Go;

/// The receiver's type name: `T` for `(t *T)` or `(l List[E])`.
fn receiver_type(receiver: Node, text: &str) -> Option<String> {
    let param = receiver.named_child(0)?;
    let mut t = param.child_by_field_name("type")?;
    loop {
        match t.kind() {
            "pointer_type" | "parenthesized_type" => t = t.named_child(0)?,
            "generic_type" => t = t.child_by_field_name("type")?,
            _ => return text_of(t, text),
        }
    }
}

impl Grammar for Go {
    const TITLE: &'static str = "Go";
    const SEPARATOR: &'static str = ".";
    const IDENTIFIER_KINDS: &'static [&'static str] = &["identifier", "field_identifier"];
    const RULE: &'static str = "a `func` with a body whose name (or Recv.Name) is unique";
    fn grammar(&self) -> tree_sitter::Language {
        tree_sitter_go::LANGUAGE.into()
    }
    fn declaration(&self, node: Node, text: &str) -> Option<Decl> {
        let method = match node.kind() {
            "function_declaration" => false,
            "method_declaration" => true,
            _ => return None,
        };
        let name = field_text(node, "name", text)?;
        let (open_end, body_end) = braced(node.child_by_field_name("body")?)?;
        let spelled = match method {
            true => format!("{}.{name}", receiver_type(node.child_by_field_name("receiver")?, text)?),
            false => name.clone(),
        };
        Some(Decl { spelled, name, start: node.start_byte(), open_end, body_end })
    }
    fn scope(&self, _node: Node, _text: &str) -> Option<String> {
        None
    }
}

grammar_language!(
    Go,
    "go",
    "//",
    &[
        "break",
        "case",
        "chan",
        "const",
        "continue",
        "default",
        "defer",
        "else",
        "fallthrough",
        "for",
        "func",
        "go",
        "goto",
        "if",
        "import",
        "interface",
        "map",
        "package",
        "range",
        "return",
        "select",
        "struct",
        "switch",
        "type",
        "var",
        "any",
        "append",
        "bool",
        "byte",
        "cap",
        "clear",
        "close",
        "complex",
        "copy",
        "delete",
        "error",
        "false",
        "float32",
        "float64",
        "imag",
        "int",
        "int8",
        "int16",
        "int32",
        "int64",
        "iota",
        "len",
        "make",
        "max",
        "min",
        "new",
        "nil",
        "panic",
        "print",
        "println",
        "real",
        "recover",
        "rune",
        "string",
        "true",
        "uint",
        "uint8",
        "uint16",
        "uint32",
        "uint64",
        "uintptr",
        "main",
        "init",
    ]
);
