//! The tree walk the tree-sitter languages share: a language says which
//! nodes are named functions with a body, and which nodes give a name to the
//! functions inside them (a class, an `impl`, a namespace); this module finds
//! them at any depth, qualifies their names, and counts the error regions.
//!
//! JavaScript keeps its own walk for functions (`javascript.rs`), which came
//! first and whose targets must not change; it shares the identifier walk.

use super::{FunctionDecl, MAX_QUALIFIED_NAME, Parsed};
use anyhow::{Context, Result};
use std::rc::Rc;
use tree_sitter::{Node, Parser, Tree};

/// A function a grammar found, before its enclosing names are added.
pub(crate) struct Decl {
    /// The bare name (`bar` for C++'s `Foo::bar`).
    pub name: String,
    /// The name as the declaration spells it (`Foo::bar`; Go: `Recv.Name`).
    pub spelled: String,
    pub start: usize,
    pub open_end: usize,
    pub body_end: usize,
}

/// What one language says about its syntax tree. What is fixed per
/// language is an associated const, so that no implementor can make it
/// depend on a node or on state; the walk takes the grammar as a type
/// parameter (a trait with consts cannot be used as `dyn`).
pub(crate) trait Grammar {
    /// The language's name in messages: `Python`.
    const TITLE: &'static str;
    /// What joins the parts of a qualified name: `.` or `::`.
    const SEPARATOR: &'static str;
    /// Node kinds of plain identifiers and of member names (`x.name`) that
    /// renaming rewrites when their text is a declared function's name.
    const IDENTIFIER_KINDS: &'static [&'static str];
    /// The eligibility rule in a few words, for messages.
    const RULE: &'static str;
    /// What the lines asked for follow, for messages.
    const AFTER: &'static str = "its opening brace";
    /// Whether `/* … */` is a comment (every language here but Python).
    const BLOCK_COMMENTS: bool = true;
    /// Whether a string opening a body is a docstring (Python).
    const DOCSTRINGS: bool = false;
    fn grammar(&self) -> tree_sitter::Language;
    /// The function `node` is, when it is a named function with a body.
    fn declaration(&self, node: Node, text: &str) -> Option<Decl>;
    /// The function `node` defines, when only its header identifies it
    /// ([`super::Parsed::definitions`]); none in most languages.
    fn definition(&self, _node: Node, _text: &str) -> Option<Decl> {
        None
    }
    /// The name `node` gives the functions inside it, when it is a class,
    /// an `impl`, a namespace or a module.
    fn scope(&self, node: Node, text: &str) -> Option<String>;
}

/// Where a block comment opens that never closes, if one does: a token
/// inside an error region that starts with `/*` while no `*/` follows. A
/// compiler reads the rest of the file as that comment; tree-sitter, which
/// cannot lex it as one, parses on as code. Only error subtrees are walked
/// (a comment that closes is a comment node, never an error).
pub(crate) fn unclosed_comment(root: Node, text: &str) -> Option<usize> {
    let mut stack = vec![(root, false)];
    let mut first: Option<usize> = None;
    while let Some((node, in_error)) = stack.pop() {
        let in_error = in_error || node.is_error();
        if node.child_count() == 0 {
            let at = node.start_byte();
            if in_error
                && !node.kind().contains("comment")
                && text.get(at..).is_some_and(|t| t.starts_with("/*"))
                && !text[at + 2..].contains("*/")
            {
                first = Some(first.map_or(at, |f| f.min(at)));
            }
            continue;
        }
        let mut cursor = node.walk();
        stack.extend(node.children(&mut cursor).filter(|c| c.has_error() || c.is_error() || in_error).map(|c| (c, in_error)));
    }
    first
}

/// Marks every function that reaches past an unclosed block comment
/// ([`unclosed_comment`]) as not a target: to a compiler it is comment.
pub(crate) fn drop_after_unclosed_comment(parsed: &mut Parsed, root: Node, text: &str) {
    if let Some(at) = unclosed_comment(root, text) {
        for f in parsed.functions.iter_mut().chain(parsed.definitions.iter_mut()).filter(|f| f.body_end > at) {
            f.clean = false;
        }
    }
}

pub(crate) fn parse<G: Grammar>(g: &G, text: &str) -> Result<Tree> {
    let mut parser = Parser::new();
    parser.set_language(&g.grammar()).with_context(|| format!("cannot load the tree-sitter {} grammar", G::TITLE))?;
    parser.parse(text, None).context("tree-sitter gave up parsing the corpus")
}

/// Every named function with a body, at any depth, in file order, with its
/// qualified name: the names of the enclosing scopes and functions, outermost
/// first, joined by the language's separator.
pub(crate) fn functions<G: Grammar>(g: &G, text: &str) -> Result<Parsed> {
    let tree = parse(g, text)?;
    let mut out = Parsed { rule: G::RULE, after: G::AFTER, ..Parsed::default() };
    let sep = G::SEPARATOR;
    // A scope's qualified name, `None` once it is longer than any question
    // uses (and so are all names inside it): memory linear in the depth.
    let join = |scope: &Option<Rc<str>>, name: &str| -> Option<Rc<str>> {
        let joined = match scope.as_deref()? {
            "" => name.to_string(),
            scope => format!("{scope}{sep}{name}"),
        };
        (joined.len() <= MAX_QUALIFIED_NAME).then(|| Rc::from(joined))
    };
    // Iterative walk: real files nest deeply enough to make recursion risky.
    // Each entry: the node, the qualified name of its scope, whether it is
    // inside an error region.
    let mut stack: Vec<(Node, Option<Rc<str>>, bool)> = vec![(tree.root_node(), Some(Rc::from("")), false)];
    while let Some((node, scope, in_error)) = stack.pop() {
        let error_here = !in_error && (node.is_error() || node.is_missing());
        if error_here {
            // One region per outermost error; its insides are not counted again.
            out.error_regions += 1;
            out.error_lines.push(node.start_position().row + 1);
            out.error_bytes += node.end_byte() - node.start_byte();
        }
        let in_error = in_error || error_here;
        let mut inner = g.scope(node, text).map(|s| join(&scope, &s));
        if let Some(d) = g.declaration(node, text) {
            let qualified = join(&scope, &d.spelled);
            out.functions.push(FunctionDecl {
                name: d.name,
                qualified: qualified.as_deref().map(str::to_string),
                start_byte: d.start,
                open_brace_end: d.open_end,
                body_end: d.body_end,
                // Declarations inside an error region are still listed (so
                // that their names count for uniqueness) but never targets.
                clean: !in_error && !node.has_error(),
            });
            inner = Some(qualified);
        }
        // A definition names no scope: the qualified names of what is
        // inside it stay those a question by name has always used.
        if let Some(d) = g.definition(node, text) {
            out.definitions.push(FunctionDecl {
                name: d.name,
                qualified: join(&scope, &d.spelled).as_deref().map(str::to_string),
                start_byte: d.start,
                open_brace_end: d.open_end,
                body_end: d.body_end,
                clean: !in_error && !node.has_error(),
            });
        }
        let inner = inner.unwrap_or(scope);
        let mut cursor = node.walk();
        let children: Vec<Node> = node.children(&mut cursor).collect();
        stack.extend(children.into_iter().rev().map(|c| (c, inner.clone(), in_error)));
    }
    out.functions.sort_by_key(|f| f.start_byte);
    out.definitions.sort_by_key(|f| f.start_byte);
    out.error_lines.sort_unstable();
    if G::BLOCK_COMMENTS {
        drop_after_unclosed_comment(&mut out, tree.root_node(), text);
    }
    Ok(out)
}

/// The comments (and, where the grammar has them, docstrings) of `text`.
pub(crate) fn prose_spans<G: Grammar>(g: &G, text: &str) -> Result<Vec<super::classify::ProseSpan>> {
    Ok(super::classify::prose_spans(&parse(g, text)?, text, G::DOCSTRINGS))
}

/// Byte spans of the identifiers `wanted` accepts, in order.
pub(crate) fn identifier_spans<G: Grammar>(g: &G, text: &str, wanted: &dyn Fn(&str) -> bool) -> Result<Vec<(usize, usize)>> {
    Ok(spans_of_kinds(&parse(g, text)?, text, G::IDENTIFIER_KINDS, wanted))
}

/// Byte spans of the nodes of `tree` (parsed from `text`) whose kind is one
/// of `kinds` and whose text `wanted` accepts, in order, each once.
pub(crate) fn spans_of_kinds(tree: &Tree, text: &str, kinds: &[&str], wanted: &dyn Fn(&str) -> bool) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        if kinds.contains(&node.kind())
            && let Ok(name) = node.utf8_text(text.as_bytes())
            && wanted(name)
        {
            spans.push((node.start_byte(), node.end_byte()));
        }
        let mut cursor = node.walk();
        stack.extend(node.children(&mut cursor));
    }
    spans.sort_unstable();
    spans.dedup();
    spans
}

/// The text of `node`.
pub(crate) fn text_of(node: Node, text: &str) -> Option<String> {
    node.utf8_text(text.as_bytes()).ok().map(str::to_string)
}

/// A body delimited by braces: the byte just past `{` and the start of the
/// line holding `}`, when both are really there.
pub(crate) fn braced(body: Node) -> Option<(usize, usize)> {
    let open = body.child(0)?;
    let close = body.child(body.child_count().checked_sub(1)?)?;
    if open.kind() != "{" || close.kind() != "}" || close.is_missing() || open.is_missing() {
        return None;
    }
    Some((open.end_byte(), super::line_start_of(close)))
}

/// The named child of `node` in field `field`, as text.
pub(crate) fn field_text(node: Node, field: &str, text: &str) -> Option<String> {
    text_of(node.child_by_field_name(field)?, text)
}

/// Implements [`super::Language`] for a type that implements [`Grammar`].
macro_rules! grammar_language {
    ($ty:ty, $name:literal, $comment:literal, $words:expr) => {
        impl $crate::corpus::Language for $ty {
            fn name(&self) -> &'static str {
                $name
            }
            fn line_comment(&self) -> &'static str {
                $comment
            }
            fn reserved_words(&self) -> &'static [&'static str] {
                $words
            }
            fn functions(&self, text: &str) -> anyhow::Result<$crate::corpus::Parsed> {
                $crate::corpus::walk::functions(self, text)
            }
            fn identifier_spans(&self, text: &str, wanted: &dyn Fn(&str) -> bool) -> anyhow::Result<Vec<(usize, usize)>> {
                $crate::corpus::walk::identifier_spans(self, text, wanted)
            }
            fn prose_spans(&self, text: &str) -> anyhow::Result<Vec<$crate::corpus::classify::ProseSpan>> {
                $crate::corpus::walk::prose_spans(self, text)
            }
        }
    };
}
pub(crate) use grammar_language;
