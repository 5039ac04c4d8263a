//! C through tree-sitter-c and C++ through tree-sitter-cpp.
//!
//! A target is a function definition with a body. In C++ that includes
//! methods defined inside a class and out of line (`void Foo::bar() {`),
//! constructors, destructors and operators; a function is named by its
//! enclosing namespaces and classes and by its own declarator
//! (`ns::Foo::bar`) when its bare name repeats. Overloads share a name and
//! are never targets. A function whose header is split by `#ifdef`
//! branches does not parse as one definition and is skipped.

use super::walk::{self, Decl, Grammar, braced, field_text, text_of};
use super::{Parsed, joined};
use tree_sitter::Node;

/// The text with every conditional directive line (`#if`, `#ifdef`,
/// `#ifndef`, `#elif`, `#else`, `#endif`, with their continuation lines)
/// and every `#elif`/`#else` branch replaced by spaces, byte for byte: the
/// first branch of each conditional, as one program. Returns it with the
/// byte ranges of the branches left out.
fn first_branches(text: &str) -> (String, Vec<(usize, usize)>) {
    let mut out = String::with_capacity(text.len());
    let mut dropped: Vec<(usize, usize)> = Vec::new();
    // Per open conditional: whether its current branch is left out.
    let mut stack: Vec<bool> = Vec::new();
    let mut continued = false;
    let mut at = 0;
    for line in text.split_inclusive('\n') {
        let t = line.trim_start();
        let directive = t.strip_prefix('#').map(|d| d.trim_start().split(|c: char| !c.is_ascii_alphabetic()).next().unwrap_or(""));
        let mut blank = continued;
        if !continued && let Some(d) = directive {
            match d {
                "if" | "ifdef" | "ifndef" => {
                    stack.push(false);
                    blank = true;
                }
                "elif" | "elifdef" | "elifndef" | "else" => {
                    if let Some(top) = stack.last_mut() {
                        *top = true;
                    }
                    blank = true;
                }
                "endif" => {
                    stack.pop();
                    blank = true;
                }
                _ => {}
            }
        }
        let left_out = stack.iter().any(|&b| b) || matches!(directive, Some("elif" | "elifdef" | "elifndef" | "else"));
        if blank || left_out {
            // Byte for byte: every byte but line endings becomes a space.
            out.extend(line.bytes().map(|b| if b == b'\n' || b == b'\r' { b as char } else { ' ' }));
            if left_out {
                dropped.push((at, at + line.len()));
            }
        } else {
            out.push_str(line);
        }
        continued = (blank || directive.is_some()) && line.trim_end().ends_with('\\');
        at += line.len();
    }
    (out, dropped)
}

/// Functions of a C or C++ file. Where the file has syntax errors (often a
/// header split between `#ifdef` branches), it is parsed again with only the
/// first branch of every conditional; if that has fewer errors it is used,
/// and a function that spans a left-out branch is never a target.
fn c_functions<G: Grammar>(g: &G, text: &str) -> anyhow::Result<Parsed> {
    let parsed = walk::functions(g, text)?;
    if parsed.error_regions == 0 {
        return Ok(parsed);
    }
    let (first, dropped) = first_branches(text);
    let mut alt = walk::functions(g, &first)?;
    if alt.error_bytes >= parsed.error_bytes {
        return Ok(parsed);
    }
    // A function split by a left-out branch, or whose name is declared or
    // called in one (another definition may be there), is never a target.
    let left_out: Vec<&str> = dropped.iter().map(|&(s, e)| &text[s..e]).collect();
    for f in &mut alt.functions {
        if dropped.iter().any(|&(s, e)| s < f.body_end && e > f.start_byte) || left_out.iter().any(|t| names_a_function(t, &f.name)) {
            f.clean = false;
        }
    }
    Ok(alt)
}

/// Whether `text` holds `name(` (spaces allowed before the parenthesis) as a
/// whole word.
fn names_a_function(text: &str, name: &str) -> bool {
    let word = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(name)
        .any(|(i, _)| !text[..i].chars().next_back().is_some_and(word) && text[i + name.len()..].trim_start().starts_with('('))
}

/// Implements [`super::Language`] for C and C++ through [`c_functions`].
macro_rules! c_language {
    ($ty:ty, $name:literal, $words:expr) => {
        impl super::Language for $ty {
            fn name(&self) -> &'static str {
                $name
            }
            fn line_comment(&self) -> &'static str {
                "//"
            }
            fn reserved_words(&self) -> &'static [&'static str] {
                $words
            }
            fn functions(&self, text: &str) -> anyhow::Result<Parsed> {
                c_functions(self, text)
            }
            fn identifier_spans(&self, text: &str, wanted: &dyn Fn(&str) -> bool) -> anyhow::Result<Vec<(usize, usize)>> {
                walk::identifier_spans(self, text, wanted)
            }
            fn prose_spans(&self, text: &str) -> anyhow::Result<Vec<super::classify::ProseSpan>> {
                walk::prose_spans(self, text)
            }
        }
    };
}

/// C source (`.c`, `.h`).
pub struct C;

/// C++ source.
pub struct Cpp;

/// The name node a function declarator declares, through pointer,
/// reference and parenthesized declarators.
fn declared_name(mut node: Node) -> Option<Node> {
    loop {
        match node.kind() {
            "function_declarator"
            | "pointer_declarator"
            | "reference_declarator"
            | "parenthesized_declarator"
            | "attributed_declarator" => {
                node = node.child_by_field_name("declarator").or_else(|| node.named_child(0))?;
            }
            "identifier" | "field_identifier" | "qualified_identifier" | "destructor_name" | "operator_name" | "template_function" => {
                return Some(node);
            }
            _ => return None,
        }
    }
}

/// The last part of a (possibly qualified) name: `bar` of `Foo::bar`.
fn bare(mut node: Node, text: &str) -> Option<String> {
    while node.kind() == "qualified_identifier" {
        node = node.child_by_field_name("name")?;
    }
    if node.kind() == "template_function" {
        node = node.child_by_field_name("name")?;
    }
    text_of(node, text).map(|t| t.split_whitespace().collect())
}

fn definition(node: Node, text: &str) -> Option<Decl> {
    if node.kind() != "function_definition" {
        return None;
    }
    let name_node = declared_name(node.child_by_field_name("declarator")?)?;
    let name = bare(name_node, text)?;
    let spelled: String = text_of(name_node, text)?.split_whitespace().collect();
    let (open_end, body_end) = braced(node.child_by_field_name("body")?)?;
    Some(Decl { spelled, name, start: node.start_byte(), open_end, body_end })
}

impl Grammar for C {
    const TITLE: &'static str = "C";
    const SEPARATOR: &'static str = "::";
    const IDENTIFIER_KINDS: &'static [&'static str] = &["identifier", "field_identifier"];
    const RULE: &'static str = "a function definition whose name is unique";
    fn grammar(&self) -> tree_sitter::Language {
        tree_sitter_c::LANGUAGE.into()
    }
    fn declaration(&self, node: Node, text: &str) -> Option<Decl> {
        definition(node, text)
    }
    fn scope(&self, _node: Node, _text: &str) -> Option<String> {
        None
    }
}

impl Grammar for Cpp {
    const TITLE: &'static str = "C++";
    const SEPARATOR: &'static str = "::";
    const IDENTIFIER_KINDS: &'static [&'static str] = &["identifier", "field_identifier"];
    const RULE: &'static str = "a function definition whose name (or Class::name) is unique";
    fn grammar(&self) -> tree_sitter::Language {
        tree_sitter_cpp::LANGUAGE.into()
    }
    fn declaration(&self, node: Node, text: &str) -> Option<Decl> {
        definition(node, text)
    }
    fn scope(&self, node: Node, text: &str) -> Option<String> {
        match node.kind() {
            "namespace_definition" => field_text(node, "name", text),
            "class_specifier" | "struct_specifier" | "union_specifier" => {
                let mut name = node.child_by_field_name("name")?;
                if name.kind() == "template_type" {
                    name = name.child_by_field_name("name")?;
                }
                text_of(name, text)
            }
            _ => None,
        }
        .map(|s| s.split_whitespace().collect())
    }
}

/// C's keywords and the names a rename must not take (`NULL`, `main`);
/// C++'s words start with these.
const C_WORDS: &[&str] = &[
    "auto",
    "break",
    "case",
    "char",
    "const",
    "continue",
    "default",
    "do",
    "double",
    "else",
    "enum",
    "extern",
    "float",
    "for",
    "goto",
    "if",
    "inline",
    "int",
    "long",
    "register",
    "restrict",
    "return",
    "short",
    "signed",
    "sizeof",
    "static",
    "struct",
    "switch",
    "typedef",
    "union",
    "unsigned",
    "void",
    "volatile",
    "while",
    "bool",
    "true",
    "false",
    "NULL",
    "main",
    "alignas",
    "alignof",
    "nullptr",
    "static_assert",
    "thread_local",
    "typeof",
    "constexpr",
];

c_language!(C, "c", C_WORDS);

/// C++'s own keywords and the names a rename must not take, beyond C's.
const CPP_OWN_WORDS: &[&str] = &[
    "and",
    "asm",
    "catch",
    "class",
    "concept",
    "consteval",
    "constinit",
    "co_await",
    "co_return",
    "co_yield",
    "decltype",
    "delete",
    "dynamic_cast",
    "explicit",
    "export",
    "friend",
    "mutable",
    "namespace",
    "new",
    "noexcept",
    "not",
    "operator",
    "or",
    "private",
    "protected",
    "public",
    "reinterpret_cast",
    "requires",
    "const_cast",
    "static_cast",
    "template",
    "this",
    "throw",
    "try",
    "typeid",
    "typename",
    "using",
    "virtual",
    "wchar_t",
    "xor",
    "final",
    "override",
    "std",
];

/// C++ keeps C's keywords: they come first, then C++'s own.
const CPP_WORDS: &[&str] = &joined::<{ C_WORDS.len() + CPP_OWN_WORDS.len() }>(C_WORDS, CPP_OWN_WORDS);

c_language!(Cpp, "cpp", CPP_WORDS);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_branches_keeps_offsets_and_the_first_branch() {
        let text = "#ifdef A\nlong f(long a) {\n#else\nint f(int a) { /* ü */\n#endif\n  return a;\n}\n";
        let (first, dropped) = first_branches(text);
        assert_eq!(first.len(), text.len());
        assert_eq!(first.lines().map(str::trim).collect::<Vec<_>>(), ["", "long f(long a) {", "", "", "", "return a;", "}"]);
        let left_out: Vec<&str> = dropped.iter().map(|&(s, e)| &text[s..e]).collect();
        assert_eq!(left_out, ["#else\n", "int f(int a) { /* ü */\n"]);
        assert!(names_a_function(left_out[1], "f") && !names_a_function(left_out[1], "in"));
    }
}
