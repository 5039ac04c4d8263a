//! JavaScript through tree-sitter-javascript.

use super::walk::{Decl, braced, text_of};
use super::{FunctionDecl, Language, Parsed};
use anyhow::{Context, Result};
use tree_sitter::{Node, Parser};

/// JavaScript (and JSX) source.
pub struct JavaScript;

/// The node kinds renaming rewrites: plain identifiers only, so that
/// property names (`obj.name`) are left alone.
const IDENTIFIER_KINDS: &[&str] = &["identifier"];

/// ECMAScript's reserved words, the strict-mode and contextual ones, and
/// the global names a rename must not shadow. TypeScript's words start with
/// these.
pub(super) const JS_WORDS: &[&str] = &[
    "arguments",
    "as",
    "async",
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "eval",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "from",
    "function",
    "get",
    "if",
    "implements",
    "import",
    "in",
    "instanceof",
    "interface",
    "let",
    "new",
    "null",
    "of",
    "package",
    "private",
    "protected",
    "public",
    "return",
    "set",
    "static",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "undefined",
    "var",
    "void",
    "while",
    "with",
    "yield",
    "NaN",
    "Infinity",
];

impl Language for JavaScript {
    fn name(&self) -> &'static str {
        "javascript"
    }

    fn line_comment(&self) -> &'static str {
        "//"
    }

    fn reserved_words(&self) -> &'static [&'static str] {
        JS_WORDS
    }

    fn identifier_spans(&self, text: &str, wanted: &dyn Fn(&str) -> bool) -> Result<Vec<(usize, usize)>> {
        Ok(super::walk::spans_of_kinds(&parse(text)?, text, IDENTIFIER_KINDS, wanted))
    }

    fn prose_spans(&self, text: &str) -> Result<Vec<super::classify::ProseSpan>> {
        Ok(super::classify::prose_spans(&parse(text)?, text, false))
    }

    fn functions(&self, text: &str) -> Result<Parsed> {
        let tree = parse(text)?;
        let mut out = Parsed { rule: "a unique named `function` declaration", after: "its opening brace", ..Parsed::default() };
        // Iterative walk: real libraries nest deeply enough to make recursion risky.
        let mut stack = vec![tree.root_node()];
        while let Some(node) = stack.pop() {
            if node.is_error() || node.is_missing() {
                // One region per outermost error; its insides are not counted again.
                out.error_regions += 1;
                out.error_lines.push(node.start_position().row + 1);
                out.error_bytes += node.end_byte() - node.start_byte();
            }
            if matches!(node.kind(), "function_declaration" | "generator_function_declaration")
                && let Some(decl) = declaration(node, text)
            {
                out.functions.push(decl);
            }
            if let Some(d) = definition(node, text, true) {
                out.definitions.push(from_definition(d, !node.has_error()));
            }
            if node.is_error() || node.is_missing() {
                // Declarations inside an error region are still listed (so that their
                // names count for uniqueness) but marked unclean by `has_error`.
                collect_inside_error(node, text, &mut out);
                continue;
            }
            let mut cursor = node.walk();
            let children: Vec<Node> = node.children(&mut cursor).collect();
            stack.extend(children.into_iter().rev());
        }
        out.functions.sort_by_key(|f| f.start_byte);
        out.definitions.sort_by_key(|f| f.start_byte);
        out.error_lines.sort_unstable();
        crate::corpus::walk::drop_after_unclosed_comment(&mut out, tree.root_node(), text);
        Ok(out)
    }
}

fn parse(text: &str) -> Result<tree_sitter::Tree> {
    let mut parser = Parser::new();
    parser.set_language(&tree_sitter_javascript::LANGUAGE.into()).context("cannot load the tree-sitter JavaScript grammar")?;
    parser.parse(text, None).context("tree-sitter gave up parsing the corpus")
}

/// Lists the declarations and definitions inside an error node, unclean,
/// without counting nested error nodes again.
fn collect_inside_error(node: Node, text: &str, out: &mut Parsed) {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if n.id() != node.id()
            && matches!(n.kind(), "function_declaration" | "generator_function_declaration")
            && let Some(mut decl) = declaration(n, text)
        {
            decl.clean = false;
            out.functions.push(decl);
        }
        if n.id() != node.id()
            && let Some(d) = definition(n, text, true)
        {
            out.definitions.push(from_definition(d, false));
        }
        let mut cursor = n.walk();
        stack.extend(n.children(&mut cursor));
    }
}

/// A definition as the JavaScript walk lists it: named by what it defines
/// (`jQuery.fn.extend`, `val`).
fn from_definition(d: Decl, clean: bool) -> FunctionDecl {
    FunctionDecl { qualified: Some(d.spelled), name: d.name, start_byte: d.start, open_brace_end: d.open_end, body_end: d.body_end, clean }
}

/// The function `node` is when only its header identifies it (docs/METHOD.md
/// §2, `--anchor header`): a function expression, generator or arrow
/// function with a block body that is the value of an object property
/// (`val: function( value ) {`), the right side of a plain assignment
/// (`jQuery.fn.extend = function() {`) or a variable's initial value
/// (`var x = function() {`); or a method written in an object literal
/// (`name(args) {`), and with `class_methods` one written in a class too
/// (TypeScript lists those as declarations already). A function passed as an
/// argument, returned, or wrapped in parentheses defines nothing. It starts
/// where the property, the assignment or the variable does, so that its
/// header holds what names it. JavaScript and TypeScript share it.
pub(super) fn definition(node: Node, text: &str, class_methods: bool) -> Option<Decl> {
    let (named, start, body) = match node.kind() {
        "method_definition" => {
            let parent = node.parent()?.kind();
            if !(parent == "object" || (class_methods && parent == "class_body")) {
                return None;
            }
            (node.child_by_field_name("name")?, node.start_byte(), node.child_by_field_name("body")?)
        }
        "function_expression" | "generator_function" | "arrow_function" => {
            let parent = node.parent()?;
            let (value, key) = match parent.kind() {
                "pair" => ("value", "key"),
                "variable_declarator" => ("value", "name"),
                "assignment_expression" => ("right", "left"),
                _ => return None,
            };
            if parent.child_by_field_name(value)?.id() != node.id() {
                return None;
            }
            (parent.child_by_field_name(key)?, parent.start_byte(), node.child_by_field_name("body")?)
        }
        _ => return None,
    };
    // What a name can be: not a computed key (`[expr]`) or a destructuring pattern.
    if !matches!(
        named.kind(),
        "identifier"
            | "property_identifier"
            | "private_property_identifier"
            | "string"
            | "number"
            | "member_expression"
            | "subscript_expression"
    ) || body.kind() != "statement_block"
    {
        return None;
    }
    let name = text_of(named, text)?;
    let name = name.trim_matches(['"', '\'', '`']).to_string();
    let (open_end, body_end) = braced(body)?;
    Some(Decl { spelled: name.clone(), name, start, open_end, body_end })
}

fn declaration(node: Node, text: &str) -> Option<FunctionDecl> {
    let name = node.child_by_field_name("name")?;
    let body = node.child_by_field_name("body")?;
    let name = name.utf8_text(text.as_bytes()).ok()?.to_string();
    let open = body.child(0)?;
    let close = body.child(body.child_count().checked_sub(1)?)?;
    if open.kind() != "{" || close.kind() != "}" || close.is_missing() {
        return None;
    }
    Some(FunctionDecl {
        name: name.clone(),
        start_byte: node.start_byte(),
        open_brace_end: open.end_byte(),
        qualified: Some(name.clone()),
        body_end: super::line_start_of(close),
        clean: !node.has_error(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(src: &str) -> Vec<(String, bool)> {
        JavaScript.functions(src).unwrap().functions.into_iter().map(|f| (f.name, f.clean)).collect()
    }

    #[test]
    fn finds_plain_async_generator_and_nested() {
        let src = "function a() {\n  function b() {}\n}\nasync function c() {}\nfunction* d() {}\nasync function* e() {}\nconst f = () => {};\nclass K { m() {} }\nvar g = function h() {};\n";
        let got: Vec<String> = names(src).into_iter().map(|(n, _)| n).collect();
        assert_eq!(got, vec!["a", "b", "c", "d", "e"]);
    }

    #[test]
    fn counts_error_regions_and_marks_unclean() {
        let src = "function ok() {\n  return 1;\n}\nfunction bad() {\n  let = = 3;\n}\n";
        let parsed = JavaScript.functions(src).unwrap();
        assert!(parsed.error_regions >= 1);
        let ok = parsed.functions.iter().find(|f| f.name == "ok").unwrap();
        assert!(ok.clean);
        assert!(parsed.functions.iter().all(|f| f.name != "bad" || !f.clean));
    }
}
