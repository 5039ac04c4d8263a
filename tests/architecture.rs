//! The layering rules of ARCHITECTURE (docs/DEVELOPMENT.md, "Layout"), checked on the
//! source tree read as Rust (`syn`), not as text: the layers point one way,
//! only the engine touches llama.cpp, the messages below the commands name no
//! command-line flag, and no function is long without a reason. Paths are
//! resolved (`super::`, `self::`, nested `use` groups, paths inside macro
//! calls); strings are the literals' values (escaped quotes, strings over
//! several lines, `#[error(...)]` messages); unit tests are the items under
//! `#[cfg(test)]`, wherever they stand in the file. The tree's indexes are
//! checked too: `tests/suite.rs` names every test file, and the READMEs of
//! `scripts/` every script.

use proc_macro2::{TokenStream, TokenTree};
use std::path::{Path, PathBuf};
use syn::spanned::Spanned;
use syn::visit::{self, Visit};

/// One source file: its path under its crate's `src/`, its text, and what it
/// names and says.
struct Source {
    file: String,
    text: String,
    facts: Facts,
}

/// A path the code names, resolved where it starts from `crate`, `self` or
/// `super` (`absolute`), else as written (an external crate, a local name).
#[derive(Debug, Clone, PartialEq)]
struct Named {
    line: usize,
    segments: Vec<String>,
    absolute: bool,
}

/// What one file refers to and says.
#[derive(Debug, Default)]
struct Facts {
    paths: Vec<Named>,
    /// String literals outside unit tests and doc comments, with their line.
    strings: Vec<(usize, String)>,
    /// Doc comments (a doc link up is a dependency up), with their line.
    docs: Vec<(usize, String)>,
    /// Functions: name, first and last line.
    fns: Vec<(String, usize, usize)>,
    /// Names called, as functions or methods, with their line.
    calls: Vec<(usize, String)>,
    /// Macros invoked outside unit tests (`eprintln`, `format`), with their line.
    macros: Vec<(usize, String)>,
}

/// Every `.rs` file under `dir`, relative to it, read; `face` as [`read_face`].
fn tree(dir: &Path, face: bool) -> Vec<Source> {
    fn walk(dir: &Path, root: &Path, face: bool, out: &mut Vec<Source>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, root, face, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let file = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
                let text = std::fs::read_to_string(&path).unwrap();
                let facts = match face {
                    true => read_face(&file, &text),
                    false => read(&file, &text),
                };
                out.push(Source { file, text, facts });
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, face, &mut out);
    out
}

/// The library: every file under `lib/src/`.
fn sources() -> Vec<Source> {
    let out = tree(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("lib/src"), false);
    assert!(out.len() > 30, "found only {} library source files", out.len());
    out
}

/// The face (the `posrecall` binary's crate): every file under `src/`.
fn face() -> Vec<Source> {
    let out = tree(&PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src"), true);
    assert!(
        out.iter().any(|s| s.file == "cli.rs") && out.iter().any(|s| s.file.starts_with("commands/")),
        "the face's files are not in src/"
    );
    out
}

/// The module a file under a `src/` is: `engine/session.rs` is
/// `engine::session`, `engine/mod.rs` is `engine`, `lib.rs` the crate.
fn module_of(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file.trim_end_matches(".rs").split('/').map(str::to_string).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

/// Parses `text` (the file `file` under `src/`) and collects its facts.
fn read(file: &str, text: &str) -> Facts {
    let ast = syn::parse_file(text).unwrap_or_else(|e| panic!("{file}: does not parse: {e}"));
    let mut r = Reader { module: module_of(file), tests: 0, facts: Facts::default(), face: false };
    r.visit_file(&ast);
    r.facts
}

/// Parses a file of the face: a path through the library
/// (`posrecall::score::x`) is read as the library's own (`crate::score::x`
/// there), so the checks on what the face names speak of library modules.
fn read_face(file: &str, text: &str) -> Facts {
    let ast = syn::parse_file(text).unwrap_or_else(|e| panic!("{file}: does not parse: {e}"));
    let mut r = Reader { module: module_of(file), tests: 0, facts: Facts::default(), face: true };
    r.visit_file(&ast);
    r.facts
}

struct Reader {
    module: Vec<String>,
    /// Reading the face: `posrecall::` is the library's root.
    face: bool,
    /// How many `#[cfg(test)]` items enclose the current one.
    tests: usize,
    facts: Facts,
}

fn is_cfg_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.meta.require_list().is_ok_and(|l| l.tokens.clone().into_iter().any(|t| matches!(&t, TokenTree::Ident(i) if i == "test")))
    })
}

impl Reader {
    /// Resolves a path's leading `crate`, `self` and `super` against the
    /// current module.
    fn name(&mut self, line: usize, segments: Vec<String>) {
        let mut out = Vec::new();
        let mut absolute = false;
        let mut rest = segments.as_slice();
        match rest.first().map(String::as_str) {
            Some("posrecall") if self.face => {
                absolute = true;
                rest = &rest[1..];
            }
            Some("crate") => {
                absolute = true;
                rest = &rest[1..];
            }
            Some("self" | "super") => {
                absolute = true;
                out = self.module.clone();
                while let Some(first) = rest.first() {
                    match first.as_str() {
                        "self" => {}
                        "super" => {
                            out.pop();
                        }
                        _ => break,
                    }
                    rest = &rest[1..];
                }
            }
            _ => {}
        }
        out.extend(rest.iter().cloned());
        if !out.is_empty() {
            self.facts.paths.push(Named { line, segments: out, absolute });
        }
    }

    /// Every path of a `use` tree, `{a, b::c}` groups flattened.
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut s = prefix.clone();
                if n.ident != "self" {
                    s.push(n.ident.to_string());
                }
                self.name(n.ident.span().start().line, s);
            }
            syn::UseTree::Rename(n) => {
                let mut s = prefix.clone();
                s.push(n.ident.to_string());
                self.name(n.ident.span().start().line, s);
            }
            syn::UseTree::Glob(g) => self.name(g.star_token.span.start().line, prefix.clone()),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }

    fn string(&mut self, line: usize, value: String) {
        if self.tests == 0 {
            self.facts.strings.push((line, value));
        }
    }

    /// The string literals and `a::b` paths inside tokens syn does not parse
    /// (a macro call's body, an attribute's arguments).
    fn tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < trees.len() {
            match &trees[i] {
                TokenTree::Group(g) => self.tokens(g.stream()),
                TokenTree::Literal(l) => {
                    if let Ok(s) = syn::parse_str::<syn::LitStr>(&l.to_string()) {
                        self.string(l.span().start().line, s.value());
                    }
                }
                TokenTree::Ident(first) => {
                    // `ident :: ident :: …`
                    let mut segments = vec![first.to_string()];
                    let mut j = i + 1;
                    while matches!(trees.get(j), Some(TokenTree::Punct(p)) if p.as_char() == ':')
                        && matches!(trees.get(j + 1), Some(TokenTree::Punct(p)) if p.as_char() == ':')
                        && let Some(TokenTree::Ident(next)) = trees.get(j + 2)
                    {
                        segments.push(next.to_string());
                        j += 3;
                    }
                    if segments.len() > 1 {
                        self.name(first.span().start().line, segments);
                        i = j;
                        continue;
                    }
                }
                TokenTree::Punct(_) => {}
            }
            i += 1;
        }
    }

    fn function(&mut self, name: &syn::Ident, sig: &syn::Signature, block: &syn::Block) {
        let first = sig.fn_token.span.start().line;
        let last = block.brace_token.span.close().end().line;
        self.facts.fns.push((name.to_string(), first, last));
    }
}

impl<'ast> Visit<'ast> for Reader {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        let test = is_cfg_test(&m.attrs);
        self.tests += test as usize;
        self.module.push(m.ident.to_string());
        visit::visit_item_mod(self, m);
        self.module.pop();
        self.tests -= test as usize;
    }

    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Static(s) => &s.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            _ => &[],
        };
        let test = is_cfg_test(attrs);
        self.tests += test as usize;
        visit::visit_item(self, item);
        self.tests -= test as usize;
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let line = p.span().start().line;
        self.name(line, p.segments.iter().map(|s| s.ident.to_string()).collect());
        visit::visit_path(self, p);
    }

    fn visit_lit_str(&mut self, s: &'ast syn::LitStr) {
        self.string(s.span().start().line, s.value());
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        if self.tests == 0
            && let Some(last) = m.path.segments.last()
        {
            self.facts.macros.push((last.ident.span().start().line, last.ident.to_string()));
        }
        visit::visit_macro(self, m);
        self.tokens(m.tokens.clone());
    }

    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        if a.path().is_ident("doc") {
            if let syn::Meta::NameValue(nv) = &a.meta
                && let syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) = &nv.value
            {
                self.facts.docs.push((s.span().start().line, s.value()));
            }
            return;
        }
        // `#[error("…")]` and the like: their arguments are tokens.
        if let syn::Meta::List(l) = &a.meta {
            self.tokens(l.tokens.clone());
        }
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.function(&f.sig.ident, &f.sig, &f.block);
        visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        let test = is_cfg_test(&f.attrs);
        self.tests += test as usize;
        self.function(&f.sig.ident, &f.sig, &f.block);
        visit::visit_impl_item_fn(self, f);
        self.tests -= test as usize;
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(block) = &f.default {
            self.function(&f.sig.ident, &f.sig, block);
        }
        visit::visit_trait_item_fn(self, f);
    }

    fn visit_expr_call(&mut self, c: &'ast syn::ExprCall) {
        if let syn::Expr::Path(p) = &*c.func
            && let Some(last) = p.path.segments.last()
        {
            self.facts.calls.push((last.ident.span().start().line, last.ident.to_string()));
        }
        visit::visit_expr_call(self, c);
    }

    fn visit_expr_method_call(&mut self, c: &'ast syn::ExprMethodCall) {
        self.facts.calls.push((c.method.span().start().line, c.method.to_string()));
        visit::visit_expr_method_call(self, c);
    }
}

/// The file's line `n` (1-based), trimmed, for a message.
fn at(s: &Source, n: usize) -> String {
    format!("{}:{n}: {}", s.file, s.text.lines().nth(n - 1).unwrap_or("").trim())
}

/// Where `s` names a module of this crate starting with one of `roots`,
/// or mentions one in a doc comment.
fn refers_to(s: &Source, roots: &[&str]) -> Vec<String> {
    let mut found: Vec<String> =
        s.facts.paths.iter().filter(|p| p.absolute && roots.contains(&p.segments[0].as_str())).map(|p| at(s, p.line)).collect();
    for (line, doc) in &s.facts.docs {
        if roots.iter().any(|r| doc.contains(&format!("crate::{r}"))) {
            found.push(at(s, *line));
        }
    }
    found.dedup();
    found
}

/// The dependencies a manifest lists (`[dependencies]` and the like), by name.
fn dependencies(manifest: &str) -> Vec<String> {
    let t: toml::Table = manifest.parse().unwrap();
    let mut out = Vec::new();
    for key in ["dependencies", "dev-dependencies", "build-dependencies"] {
        out.extend(t.get(key).and_then(|d| d.as_table()).into_iter().flat_map(|d| d.keys().cloned()));
    }
    out
}

/// The crates that parse a command line or draw on a terminal.
const FACE_CRATES: &[&str] = &["clap", "clap_complete", "clap_mangen", "indicatif", "posrecall-cli"];

/// What of the face a library manifest depends on.
fn face_crates_in(manifest: &str) -> Vec<String> {
    dependencies(manifest).into_iter().filter(|d| FACE_CRATES.contains(&d.as_str())).collect()
}

#[test]
fn the_library_depends_on_nothing_of_the_face() {
    // The library cannot name the face or parse a flag or draw a bar: the
    // compiler refuses what is not a dependency. This keeps it so.
    let manifest = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("lib/Cargo.toml")).unwrap();
    assert!(dependencies(&manifest).len() > 20, "lib/Cargo.toml's dependencies were not read");
    let found = face_crates_in(&manifest);
    assert!(found.is_empty(), "lib/Cargo.toml depends on the face's crates: {found:?}");
}

#[test]
fn the_manifest_check_sees_a_face_crate() {
    let manifest = "[package]\nname = \"x\"\n[dependencies]\nserde = \"1\"\n[dependencies.indicatif]\nversion = \"0.18\"\n[dev-dependencies]\nclap = \"4\"\n";
    assert_eq!(face_crates_in(manifest), ["indicatif", "clap"]);
}

#[test]
fn only_the_engine_touches_llama_cpp() {
    let mut found = Vec::new();
    for s in sources().iter().filter(|s| !s.file.starts_with("engine/")) {
        for p in &s.facts.paths {
            if !p.absolute && ["llama_cpp_2", "llama_cpp_sys_2"].contains(&p.segments[0].as_str()) {
                found.push(at(s, p.line));
            }
        }
    }
    found.dedup();
    assert!(found.is_empty(), "llama.cpp outside lib/src/engine/:\n{}", found.join("\n"));
}

#[test]
fn the_engine_does_not_reach_into_the_metrics() {
    let found: Vec<String> =
        sources().iter().filter(|s| s.file.starts_with("engine/")).flat_map(|s| refers_to(s, &["forced", "kld"])).collect();
    assert!(found.is_empty(), "the engine refers to the metrics built on it:\n{}", found.join("\n"));
}

#[test]
fn messages_below_the_commands_name_no_flag() {
    let mut found = Vec::new();
    for s in &sources() {
        for (line, text) in &s.facts.strings {
            if has_flag(text) {
                found.push(format!("{}: {text:?}", at(s, *line)));
            }
        }
    }
    found.dedup();
    assert!(found.is_empty(), "flag names in library messages (the command adds them):\n{}", found.join("\n"));
}

/// `--name` with a letter after the dashes, unless it is an argument of a
/// script the message tells the user to run (`scripts/env/fetch-corpus
/// --language go`), which is that script's flag.
fn has_flag(s: &str) -> bool {
    s.match_indices("--").any(|(i, _)| {
        let before = &s[..i];
        let before_ok = i == 0 || !before.ends_with(|c: char| c.is_alphanumeric() || c == '-');
        let scripts = before.rfind("scripts/").is_some_and(|j| !before[j..].contains([';', ',']));
        before_ok && !scripts && s[i + 2..].starts_with(|c: char| c.is_ascii_lowercase())
    })
}

#[test]
fn the_flag_check_sees_flags() {
    assert!(has_flag("use --crop head"));
    assert!(!has_flag("run scripts/env/fetch-corpus --language go first"));
    assert!(has_flag("run scripts/env/fetch-corpus first; or use --crop head"));
    assert!(has_flag("--count is 5"));
    assert!(!has_flag("a -- b"));
    assert!(!has_flag("x--y"));
}

/// The reader sees what a text scan missed: a string with escaped quotes,
/// one over several lines, a message in `#[error(...)]` and inside a macro
/// call, code after a unit-test module, `super::` and grouped `use` paths,
/// and a path inside a macro call.
#[test]
fn the_reader_sees_what_text_scans_miss() {
    let text = r##"
#[cfg(test)]
mod tests {
    fn t() { let _ = "--in-a-test"; }
}
#[derive(thiserror::Error)]
enum E { #[error("try --attr")] A }
fn f() {
    let a = "say \"hi\" --escaped";
    let b = "first line
 then --multi";
    anyhow::bail!("in a macro --macro {}", crate::engine::x());
}
use super::super::{engine::session, bench::{plan, record::Record}};
"##;
    let facts = read("report/html.rs", text);
    let strings: Vec<&str> = facts.strings.iter().map(|(_, s)| s.as_str()).collect();
    for flag in ["--attr", "--escaped", "--multi", "--macro"] {
        assert!(strings.iter().any(|s| s.contains(flag)), "{flag} not seen in {strings:?}");
    }
    assert!(!strings.iter().any(|s| s.contains("--in-a-test")), "a unit test's string counted: {strings:?}");
    assert!(strings.iter().any(|s| s.contains("say \"hi\"")), "{strings:?}");
    let absolute: Vec<String> = facts.paths.iter().filter(|p| p.absolute).map(|p| p.segments.join("::")).collect();
    for p in ["engine::x", "engine::session", "bench::plan", "bench::record::Record"] {
        assert!(absolute.contains(&p.to_string()), "{p} not in {absolute:?}");
    }
    assert_eq!(facts.fns.iter().map(|(n, ..)| n.as_str()).collect::<Vec<_>>(), ["t", "f"]);
}

#[test]
fn no_function_is_long_without_a_reason() {
    const LIMIT: usize = 90;
    let mut found = Vec::new();
    for s in sources() {
        let lines: Vec<&str> = s.text.lines().collect();
        for (name, first, last) in &s.facts.fns {
            // The reason sits in the comments just above, among its attributes.
            let reason = lines[..first - 1]
                .iter()
                .rev()
                .take_while(|l| {
                    let t = l.trim_start();
                    t.starts_with("//") || t.starts_with("#[")
                })
                .any(|l| l.contains("long because"));
            if last - first + 1 > LIMIT && !reason {
                found.push(format!("{}:{first}: {name}, {} lines", s.file, last - first + 1));
            }
        }
    }
    assert!(found.is_empty(), "functions over {LIMIT} lines:\n{}", found.join("\n"));
}

#[test]
fn the_record_and_report_layers_import_no_engine() {
    // The run file, the reference file, the neutral settings, the keys and
    // the reports read data; only the bench layer and the engine run models.
    let record = |f: &str| f == "settings.rs" || f.starts_with("record/") || f.starts_with("report/");
    let found: Vec<String> = sources().iter().filter(|s| record(&s.file)).flat_map(|s| refers_to(s, &["engine", "bench"])).collect();
    assert!(found.is_empty(), "the record layer reaches into the engine or the run sequence:\n{}", found.join("\n"));
}

#[test]
fn the_engine_imports_nothing_from_the_method() {
    // The engine is below the method: it may read the neutral settings, the
    // decoding method it runs (drafts, logits) and the support code, nothing
    // that plans, scores or records.
    let allowed = ["engine", "settings", "decode", "support"];
    let mut found = Vec::new();
    for s in sources().iter().filter(|s| s.file.starts_with("engine/")) {
        for p in s.facts.paths.iter().filter(|p| p.absolute && !allowed.contains(&p.segments[0].as_str())) {
            found.push(format!("{} (crate::{})", at(s, p.line), p.segments.join("::")));
        }
    }
    found.dedup();
    assert!(found.is_empty(), "the engine reaches up into the method:\n{}", found.join("\n"));
}

#[test]
fn the_bench_and_matrix_commands_hold_no_run_sequence() {
    // They turn flags (or a sweep) into options, call the library's one run
    // (or sweep) and print: no engine call, no pass of their own.
    let steps = ["execute", "execute_ladder", "plan_shared", "plan_ladder", "check_reference", "save_reference"];
    let mut found = Vec::new();
    for s in face().iter().filter(|s| s.file == "commands/bench.rs" || s.file == "commands/matrix.rs") {
        for p in s.facts.paths.iter().filter(|p| p.segments.iter().any(|seg| seg == "engine")) {
            found.push(format!("{} (names the engine)", at(s, p.line)));
        }
        for (line, name) in s.facts.calls.iter().filter(|(_, n)| steps.contains(&n.as_str())) {
            found.push(format!("{} (calls `{name}`)", at(s, *line)));
        }
        let lines = s.text.lines().count();
        assert!(lines <= 150, "{} has {lines} lines: a command file only converts, calls and prints", s.file);
    }
    assert!(found.is_empty(), "run steps in the command files:\n{}", found.join("\n"));
}

/// The token scan of macro bodies sees a path inside a nested group.
#[test]
fn paths_in_macro_bodies_are_seen() {
    let facts = read("bench/x.rs", "fn f() { println!(\"{}\", (crate::engine::model::load)(a)); }");
    assert!(facts.paths.iter().any(|p| p.absolute && p.segments == ["engine", "model", "load"]), "{:?}", facts.paths);
}

#[test]
fn bench_knows_no_sweep() {
    // The sweep is a layer above bench: it turns models.toml into one
    // BenchOptions per run and calls bench's run; bench never names it.
    let found: Vec<String> = sources().iter().filter(|s| s.file.starts_with("bench/")).flat_map(|s| refers_to(s, &["sweep"])).collect();
    assert!(found.is_empty(), "bench reaches up into the sweep:\n{}", found.join("\n"));
}

#[test]
fn nothing_below_the_face_prints() {
    // The library tells the user things through the notes, sinks and
    // progress bars the face passes in; only the face writes to the terminal.
    let found: Vec<String> = sources().iter().flat_map(prints).collect();
    assert!(found.is_empty(), "the library prints:\n{}", found.join("\n"));
}

/// Where `s` prints or takes hold of the terminal: a print macro, or the
/// standard streams however they are named (`std::io::stderr`, `io::stderr`
/// after `use std::io`, `stderr()` after `use std::io::stderr`).
fn prints(s: &Source) -> Vec<String> {
    let printing = ["print", "println", "eprint", "eprintln", "dbg"];
    let streams = ["stdout", "stderr"];
    let mut found = Vec::new();
    for (line, name) in s.facts.macros.iter().filter(|(_, n)| printing.contains(&n.as_str())) {
        found.push(format!("{} ({name}!)", at(s, *line)));
    }
    for p in &s.facts.paths {
        if let Some(i) = p.segments.iter().position(|x| x == "io")
            && p.segments.get(i + 1).is_some_and(|x| streams.contains(&x.as_str()))
        {
            found.push(format!("{} ({})", at(s, p.line), p.segments.join("::")));
        }
    }
    for (line, name) in s.facts.calls.iter().filter(|(_, n)| streams.contains(&n.as_str())) {
        found.push(format!("{} ({name}())", at(s, *line)));
    }
    found.dedup();
    found
}

/// Each way of reaching the terminal is seen, in its own file.
#[test]
fn the_print_check_sees_every_way_to_the_terminal() {
    let ways = [
        "fn f() { eprintln!(\"x\"); }",
        "use std::io; fn f() { let _ = io::stderr(); }",
        "use std::io::Write; fn f() { std::io::stdout().flush().ok(); }",
        "use std::io::stderr; fn f() { let _ = stderr(); }",
        "fn f() { let e = std::io::stderr; }",
    ];
    for text in ways {
        let s = Source { file: "bench/x.rs".into(), text: text.into(), facts: read("bench/x.rs", text) };
        assert!(!prints(&s).is_empty(), "not seen printing: {text}");
    }
    let quiet = "use std::io::Write; fn f(w: &mut dyn Write) { writeln!(w, \"x\").ok(); }";
    let s = Source { file: "bench/x.rs".into(), text: quiet.into(), facts: read("bench/x.rs", quiet) };
    assert!(prints(&s).is_empty(), "{:?}", prints(&s));
}

/// The print check sees a print in a closure inside a macro call and skips
/// unit tests.
#[test]
fn the_print_check_sees_prints() {
    let facts =
        read("bench/x.rs", "fn f() { bar.suspend(|| eprintln!(\"note\")); }\n#[cfg(test)]\nmod tests { fn t() { println!(\"x\"); } }");
    let names: Vec<&str> = facts.macros.iter().map(|(_, n)| n.as_str()).collect();
    assert_eq!(names, ["eprintln"]);
}

/// The layers, bottom up (ARCHITECTURE): the neutral settings and the
/// support code; the method, one folder per stage of the pipeline (corpus →
/// targets → prompt, the decoding method, score); the engine and the record;
/// the reports; one run (bench) or a served model's (ask); the sweep; the
/// face. A module names modules of its own layer or below, never above, and
/// every top-level module of `lib/src/` is in exactly one layer.
const LAYERS: &[&[&str]] = &[
    &["settings", "support"],
    &["corpus", "targets", "prompt", "decode", "score"],
    &["engine", "record"],
    &["report"],
    &["bench", "ask"],
    &["sweep"],
];

/// The top-level module a file belongs to (`record/run.rs` → `record`);
/// `None` for the crate root and `main.rs`.
fn top_module(file: &str) -> Option<&str> {
    let first = file.split('/').next()?;
    let name = first.trim_end_matches(".rs");
    (!matches!(name, "lib" | "main")).then_some(name)
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// Every reference from one top-level module to another: (from, to, where).
fn module_edges(sources: &[Source]) -> Vec<(String, String, String)> {
    let mut edges = Vec::new();
    for s in sources {
        let Some(from) = top_module(&s.file) else { continue };
        for p in s.facts.paths.iter().filter(|p| p.absolute) {
            let to = p.segments[0].as_str();
            if to != from && layer_of(to).is_some() {
                edges.push((from.to_string(), to.to_string(), at(s, p.line)));
            }
        }
        for (line, doc) in &s.facts.docs {
            for to in LAYERS.iter().flat_map(|l| l.iter()).filter(|&&to| to != from) {
                if doc.contains(&format!("crate::{to}::")) || doc.contains(&format!("crate::{to}`")) {
                    edges.push((from.to_string(), to.to_string(), at(s, *line)));
                }
            }
        }
    }
    edges
}

#[test]
fn every_module_is_in_a_layer() {
    let mut missing: Vec<String> =
        sources().iter().filter_map(|s| top_module(&s.file)).filter(|m| layer_of(m).is_none()).map(str::to_string).collect();
    missing.dedup();
    assert!(missing.is_empty(), "top-level modules in no layer of LAYERS (put each in a pipeline folder): {missing:?}");
}

/// References from a module to one in a layer above it.
fn upward(sources: &[Source]) -> Vec<String> {
    module_edges(sources)
        .into_iter()
        .filter(|(from, to, _)| layer_of(to) > layer_of(from))
        .map(|(from, to, at)| format!("{at} ({from} names {to}, a layer above)"))
        .collect()
}

#[test]
fn the_layers_point_down() {
    let up = upward(&sources());
    assert!(up.is_empty(), "references up the layers:\n{}", up.join("\n"));
}

/// A library file, read.
fn file(name: &str, text: &str) -> Source {
    Source { file: name.into(), text: text.into(), facts: read(name, text) }
}

#[test]
fn the_layer_check_sees_an_upward_reference() {
    let up = upward(&[file("score/x.rs", "use crate::bench::plan::Plan;"), file("report/y.rs", "fn f() { super::super::sweep::run(); }")]);
    assert_eq!(up.len(), 2, "{up:?}");
    assert!(up[0].contains("score names bench") && up[1].contains("report names sweep"), "{up:?}");
    assert!(upward(&[file("bench/x.rs", "use crate::score::align;")]).is_empty());
}

#[test]
fn no_two_modules_name_each_other() {
    // Sideways references within a layer are allowed; a circle is not: it
    // would leave neither module readable without the other.
    let circles = circles(&sources());
    assert!(circles.is_empty(), "modules in a circle:\n{}", circles.join("\n"));
}

#[test]
fn the_circle_check_sees_a_circle() {
    // corpus → targets → prompt → corpus: sideways, within one layer.
    let three = [
        file("corpus/a.rs", "use crate::targets::x;"),
        file("targets/b.rs", "use crate::prompt::y;"),
        file("prompt/c.rs", "fn f() { crate::corpus::z(); }"),
    ];
    assert_eq!(circles(&three).len(), 3, "{:?}", circles(&three));
    assert!(circles(&three[..2]).is_empty());
}

/// Every reference that closes a circle of modules.
fn circles(sources: &[Source]) -> Vec<String> {
    let edges = module_edges(sources);
    let names = |a: &str, b: &str| edges.iter().find(|(f, t, _)| f == a && t == b).map(|e| e.2.clone());
    let mut modules: Vec<&str> = LAYERS.iter().flat_map(|l| l.iter().copied()).collect();
    modules.sort();
    // A path from `to` back to `from` through the graph closes a circle.
    let reaches = |start: &str, goal: &str| {
        let mut seen = vec![start.to_string()];
        let mut todo = vec![start.to_string()];
        while let Some(m) = todo.pop() {
            for (_, t, _) in edges.iter().filter(|(f, ..)| *f == m) {
                if t == goal {
                    return true;
                }
                if !seen.contains(t) {
                    seen.push(t.clone());
                    todo.push(t.clone());
                }
            }
        }
        false
    };
    let mut circles = Vec::new();
    for a in &modules {
        for b in &modules {
            if let Some(at) = names(a, b)
                && reaches(b, a)
            {
                circles.push(format!("{a} → {b} at {at}, and {b} leads back to {a}"));
            }
        }
    }
    circles
}

#[test]
fn the_commands_score_nothing() {
    // Scoring is the library's (bench's runs, ask::score for answers made
    // elsewhere): a command that scored would be a second scorer to keep in
    // step. Commands name the options type (`score::Normalize`) at most.
    let mut found = Vec::new();
    for s in &face() {
        for p in s.facts.paths.iter().filter(|p| p.absolute && p.segments[0] == "score" && p.segments.len() > 1) {
            if p.segments[1].chars().next().is_some_and(char::is_lowercase) {
                found.push(format!("{} (crate::{})", at(s, p.line), p.segments.join("::")));
            }
        }
        for (line, name) in s.facts.calls.iter().filter(|(_, n)| ["score_raw", "parse_response", "answer_line_cap"].contains(&n.as_str())) {
            found.push(format!("{} (calls `{name}`)", at(s, *line)));
        }
    }
    assert!(found.is_empty(), "scoring in the command files:\n{}", found.join("\n"));
}

/// The error types the library defines (`#[derive(... thiserror::Error ...)]`),
/// with their file, line and doc comment.
fn library_errors() -> Vec<(String, String, usize, String)> {
    fn derives_error(attrs: &[syn::Attribute]) -> bool {
        attrs.iter().any(|a| {
            a.path().is_ident("derive")
                && a.meta.require_list().is_ok_and(|l| {
                    let t: Vec<String> = l.tokens.clone().into_iter().map(|t| t.to_string()).collect();
                    t.windows(4).any(|w| w[0] == "thiserror" && w[1] == ":" && w[2] == ":" && w[3] == "Error")
                })
        })
    }
    fn doc(attrs: &[syn::Attribute]) -> String {
        let mut out = String::new();
        for a in attrs.iter().filter(|a| a.path().is_ident("doc")) {
            if let syn::Meta::NameValue(nv) = &a.meta
                && let syn::Expr::Lit(syn::ExprLit { lit: syn::Lit::Str(s), .. }) = &nv.value
            {
                out.push_str(&s.value());
                out.push(' ');
            }
        }
        out
    }
    fn walk(items: &[syn::Item], file: &str, out: &mut Vec<(String, String, usize, String)>) {
        for item in items {
            let (attrs, ident) = match item {
                syn::Item::Enum(e) => (&e.attrs, &e.ident),
                syn::Item::Struct(s) => (&s.attrs, &s.ident),
                syn::Item::Mod(m) if !is_cfg_test(&m.attrs) => {
                    if let Some((_, items)) = &m.content {
                        walk(items, file, out);
                    }
                    continue;
                }
                _ => continue,
            };
            if derives_error(attrs) {
                out.push((ident.to_string(), file.to_string(), ident.span().start().line, doc(attrs)));
            }
        }
    }
    let mut out = Vec::new();
    for s in &sources() {
        walk(&syn::parse_file(&s.text).unwrap().items, &s.file, &mut out);
    }
    out
}

/// The marker a library error's doc carries when its message needs no
/// setting named: it names the file, server or value at fault itself.
const NO_HINT: &str = "Needs no hint:";

#[test]
fn every_library_error_is_worded_by_the_face_or_needs_none() {
    // Errors below the face name settings, not flags; every face says each
    // setting in its own words. A new error type would reach the user with
    // no setting named unless it is worded: `posrecall::explain` (lib.rs)
    // finds it and it says itself through `settings::Explain`, or the face
    // words it itself (a downcast), or its doc says why it needs no hint.
    let face = face();
    let root = std::fs::read_to_string(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("lib/src/lib.rs")).unwrap();
    let named = |ty: &str| {
        root.contains(&format!("::{ty}>"))
            || face.iter().any(|s| s.facts.paths.iter().any(|p| p.segments.last().is_some_and(|l| l == ty)))
            || face.iter().any(|s| s.text.contains(&format!("::<{ty}>")) || s.text.contains(&format!("{ty}::")))
    };
    let errors = library_errors();
    assert!(errors.len() >= 15, "found only {} library error types", errors.len());
    let unworded: Vec<String> = errors
        .iter()
        .filter(|(ty, _, _, doc)| !named(ty) && !doc.contains(NO_HINT))
        .map(|(ty, file, line, _)| format!("{file}:{line}: {ty}"))
        .collect();
    assert!(
        unworded.is_empty(),
        "library errors neither posrecall::explain nor the face words, and whose docs do not say `{NO_HINT}` why:\n{}",
        unworded.join("\n")
    );
}

/// `tests/suite.rs` names its modules by hand (one test binary, not one per
/// file): a file of tests/ it does not name would never compile or run.
#[test]
fn every_test_file_is_a_module_of_the_suite() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests");
    let suite = std::fs::read_to_string(dir.join("suite.rs")).unwrap();
    let named: Vec<&str> = suite.lines().filter_map(|l| l.trim().strip_prefix("mod ")?.strip_suffix(';')).collect();
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs") && p.file_stem().is_some_and(|s| s != "suite"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    files.push("common".into());
    files.sort();
    let mut named_sorted: Vec<String> = named.iter().map(|s| s.to_string()).collect();
    named_sorted.sort();
    assert!(files.len() > 30, "found only {} test files", files.len());
    let left_out: Vec<&String> = files.iter().filter(|f| !named.contains(&f.as_str())).collect();
    let missing: Vec<&String> = named_sorted.iter().filter(|n| !files.contains(n)).collect();
    assert!(left_out.is_empty(), "test files tests/suite.rs does not name (they never run): {left_out:?}");
    assert!(missing.is_empty(), "modules of tests/suite.rs with no file: {missing:?}");
}

/// `scripts/` is navigated through its READMEs: scripts/README.md names
/// the entry points at the top and every folder, and each folder's README
/// names every file in it, on a line that begins "- `NAME". A script nobody
/// lists is one nobody finds, and a listed one that was moved or removed
/// sends the reader nowhere.
#[test]
fn every_script_is_listed_in_its_folders_readme() {
    let scripts = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts");
    // The names a README lists: the first word of each "- `NAME ..." line.
    let listed = |dir: &Path| -> Vec<String> {
        let readme = std::fs::read_to_string(dir.join("README.md")).unwrap_or_else(|e| panic!("{}/README.md: {e}", dir.display()));
        readme.lines().filter_map(|l| l.strip_prefix("- `")).map(|l| l[..l.find([' ', '`']).unwrap_or(l.len())].to_string()).collect()
    };
    // What a folder holds, folders with a trailing `/`; Python's byte-code
    // caches (ignored by git) are no one's to list.
    let held = |dir: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_name() != "README.md" && e.file_name() != "__pycache__")
            .map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                if e.file_type().unwrap().is_dir() { format!("{name}/") } else { name }
            })
            .collect();
        names.sort();
        names
    };
    let mut unlisted = Vec::new();
    let mut missing = Vec::new();
    let mut count = 0;
    let top = held(&scripts);
    let mut dirs = vec![(scripts.clone(), top.clone())];
    for folder in top.iter().filter(|n| n.ends_with('/')) {
        let dir = scripts.join(folder.trim_end_matches('/'));
        dirs.push((dir.clone(), held(&dir)));
    }
    for (dir, names) in &dirs {
        let shown = dir.strip_prefix(scripts.parent().unwrap()).unwrap().display().to_string();
        let readme = listed(dir);
        count += names.len();
        unlisted.extend(names.iter().filter(|n| !readme.contains(n)).map(|n| format!("{shown}/{n}")));
        missing.extend(readme.iter().filter(|n| !names.contains(n)).map(|n| format!("{shown}/{n}")));
    }
    assert!(count > 50, "found only {count} scripts and folders under scripts/");
    assert!(
        unlisted.is_empty() && missing.is_empty(),
        "in scripts/ but not listed in their folder's README.md: {unlisted:?}\nlisted in a scripts/ README.md but not there: {missing:?}"
    );
}
