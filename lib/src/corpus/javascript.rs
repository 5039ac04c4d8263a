//! JavaScript through tree-sitter-javascript.

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
            if node.is_error() || node.is_missing() {
                // Declarations inside an error region are still listed (so that their
                // names count for uniqueness) but marked unclean by `has_error`.
                collect_inside_error(node, text, &mut out.functions);
                continue;
            }
            let mut cursor = node.walk();
            let children: Vec<Node> = node.children(&mut cursor).collect();
            stack.extend(children.into_iter().rev());
        }
        out.functions.sort_by_key(|f| f.start_byte);
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

/// Lists the declarations inside an error node without counting nested error nodes again.
fn collect_inside_error(node: Node, text: &str, out: &mut Vec<FunctionDecl>) {
    let mut stack = vec![node];
    while let Some(n) = stack.pop() {
        if n.id() != node.id()
            && matches!(n.kind(), "function_declaration" | "generator_function_declaration")
            && let Some(mut decl) = declaration(n, text)
        {
            decl.clean = false;
            out.push(decl);
        }
        let mut cursor = n.walk();
        stack.extend(n.children(&mut cursor));
    }
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
