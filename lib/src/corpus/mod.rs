//! Reading a source file and finding its function declarations.
//!
//! A [`Corpus`] is the file as bytes-exact text plus a line index; every later
//! stage addresses it by 0-based line numbers and byte offsets. The language
//! layer ([`Language`]) turns text into [`FunctionDecl`]s with tree-sitter; a
//! new language is one new file beside `javascript.rs` and one arm in
//! [`language_for`].

mod c_family;
pub mod classify;
mod dir;
mod go;
mod java;
mod javascript;
mod python;
pub mod rename;
mod rust;
mod typescript;
pub(crate) mod walk;

pub use c_family::{C, Cpp};
pub use go::Go;
pub use java::Java;
pub use javascript::JavaScript;
pub use python::Python;
pub use rust::Rust;
pub use typescript::{Tsx, TypeScript};

use crate::settings::{Explain, Names, Setting};
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};

/// One source file, read whole and verified to be text.
#[derive(Debug, Clone)]
pub struct Corpus {
    pub path: PathBuf,
    pub text: String,
    pub sha256: String,
    /// Byte offset where each line starts. A final newline does not open a new line.
    line_starts: Vec<usize>,
}

/// The largest corpus read, in bytes: more text than any context holds
/// (16M tokens, the longest ladder length, are about 56 MB of code), and a
/// bound on extraction's memory, which tree-sitter's syntax tree makes up to
/// [`MEMORY_PER_BYTE`] bytes per corpus byte (docs/METHOD.md §1).
pub const MAX_CORPUS_BYTES: u64 = 64 << 20;

/// The most memory target extraction takes per corpus byte, in every
/// language: tree-sitter's syntax tree, which grows with the tokens per byte.
/// Measured on generated files: ordinary code 55 (C) to 110 (Rust); code of
/// one-character tokens (`x=a+a+a…;`) 135 (C) to 221 (Rust).
pub const MEMORY_PER_BYTE: u64 = 256;

/// A corpus over [`MAX_CORPUS_BYTES`]; the message names no flag. Exact
/// byte counts: a corpus one byte over would read "64.0 MiB" in MiB.
pub(crate) fn too_large(path: &Path, bytes: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "corpus {} is {bytes} bytes; posrecall reads corpora of up to {MAX_CORPUS_BYTES} bytes ({} MiB: more than any context \
         holds; extracting targets takes up to {MEMORY_PER_BYTE} bytes of memory per byte of corpus)",
        path.display(),
        MAX_CORPUS_BYTES >> 20
    )
}

impl Corpus {
    /// Reads `path`; a missing, empty, too large or binary (NUL bytes, not
    /// UTF-8) file is an error. The size is checked before reading.
    pub fn load(path: &Path) -> Result<Corpus> {
        let bytes = match crate::support::fsutil::read_input(path, MAX_CORPUS_BYTES) {
            Err(e) if e.kind() == std::io::ErrorKind::FileTooLarge => {
                let size = std::fs::metadata(path).map(|m| m.len().to_string()).unwrap_or_default();
                return Err(too_large(path, if size.is_empty() { "over" } else { &size }));
            }
            read => read.with_context(|| format!("cannot read corpus {}", path.display()))?,
        };
        Self::from_bytes(path, bytes)
    }

    /// Builds a corpus from bytes already in memory (`path` is only recorded).
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<Corpus> {
        if bytes.len() as u64 > MAX_CORPUS_BYTES {
            return Err(too_large(path, &bytes.len().to_string()));
        }
        if bytes.is_empty() {
            bail!("corpus {} is empty", path.display());
        }
        if bytes.contains(&0) {
            bail!("corpus {} is a binary file, not source code", path.display());
        }
        let sha256 = crate::support::fsutil::sha256_hex(&bytes);
        let text = String::from_utf8(bytes).map_err(|e| {
            anyhow::anyhow!("corpus {} is not UTF-8 text (invalid byte at offset {})", path.display(), e.utf8_error().valid_up_to())
        })?;
        if text.trim().is_empty() {
            bail!("corpus {} holds only whitespace", path.display());
        }
        // Lines end at `\n` (docs/METHOD.md §1): a file whose lines end in
        // a lone CR would be one long line, with no function long enough.
        let lone_cr = text.matches('\r').count() - text.matches("\r\n").count();
        if lone_cr > text.matches('\n').count() {
            bail!("corpus {} ends its lines with a lone CR (classic Mac OS line endings); convert them to LF or CRLF", path.display());
        }
        let mut line_starts = vec![0];
        for (i, b) in text.bytes().enumerate() {
            if b == b'\n' && i + 1 < text.len() {
                line_starts.push(i + 1);
            }
        }
        Ok(Corpus { path: path.to_path_buf(), text, sha256, line_starts })
    }

    /// Number of lines (a final newline does not count as an extra empty line).
    pub fn line_count(&self) -> usize {
        self.line_starts.len()
    }

    /// Byte offset of the start of 0-based line `i`.
    pub fn line_start(&self, i: usize) -> usize {
        self.line_starts[i]
    }

    /// Byte offset just past line `i`, including its line ending.
    pub(crate) fn line_end(&self, i: usize) -> usize {
        self.line_starts.get(i + 1).copied().unwrap_or(self.text.len())
    }

    /// The text of 0-based line `i`, without its `\n` or `\r\n`.
    pub fn line(&self, i: usize) -> &str {
        let raw = &self.text[self.line_start(i)..self.line_end(i)];
        let raw = raw.strip_suffix('\n').unwrap_or(raw);
        raw.strip_suffix('\r').unwrap_or(raw)
    }

    /// The 0-based line that holds byte offset `byte`.
    pub(crate) fn line_of_byte(&self, byte: usize) -> usize {
        match self.line_starts.binary_search(&byte) {
            Ok(i) => i,
            Err(i) => i - 1,
        }
    }

    /// The text of 0-based lines `first..=last`, line endings included.
    pub fn slice_lines(&self, first: usize, last: usize) -> &str {
        &self.text[self.line_start(first)..self.line_end(last)]
    }
}

/// The longest qualified name a question uses, in bytes.
pub(crate) const MAX_QUALIFIED_NAME: usize = 256;

/// A named function declaration found by a language's parser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionDecl {
    /// The name as declared (`method` for a method).
    pub name: String,
    /// The name qualified by what encloses it: `Class.method`, `Type::method`,
    /// `ns::f`; the bare name where nothing qualifies it. A question uses it
    /// when the bare name is declared more than once (docs/METHOD.md §2).
    /// `None` past [`MAX_QUALIFIED_NAME`] bytes: no question names a
    /// function so, and a walk that kept every such name would grow with
    /// the square of the nesting depth.
    pub qualified: Option<String>,
    /// Byte offset where the declaration starts (`async`/`function`/`def`/`fn`
    /// keyword, or the return type in C).
    pub start_byte: usize,
    /// Byte offset just past the body's opening brace (Python: the colon
    /// that ends the `def` header).
    pub open_brace_end: usize,
    /// Byte offset just past the body's last line that can be asked for:
    /// the start of the line holding the closing brace, or (Python) the end
    /// of the line of the body's last statement.
    pub body_end: usize,
    /// Whether tree-sitter parsed the declaration without error or missing nodes.
    pub clean: bool,
}

/// What a language's parser found in a file.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    /// Every named declaration, in file order, clean or not.
    pub functions: Vec<FunctionDecl>,
    /// Functions a header identifies but no declaration names, in file
    /// order, clean or not: JavaScript's and TypeScript's property,
    /// assignment and object-literal method definitions with a block body
    /// (`val: function( value ) {`). Only a question that quotes the header
    /// (`--anchor header`) asks about them; they are kept apart so that
    /// nothing a question by name reads changes (docs/METHOD.md §2).
    pub definitions: Vec<FunctionDecl>,
    /// How many separate error regions tree-sitter reported.
    pub error_regions: usize,
    /// The 1-based first line of each error region, in file order.
    pub error_lines: Vec<usize>,
    /// Bytes covered by the error regions.
    pub error_bytes: usize,
    /// What an eligible function is in this language, for messages: "a
    /// unique named `function` declaration".
    pub rule: &'static str,
    /// What the lines asked for follow: "its opening brace".
    pub after: &'static str,
    /// The class of every line of the text ([`classify::line_classes`]);
    /// filled by [`Source`], empty where a parser's result is used alone.
    pub classes: Vec<classify::LineClass>,
}

/// Byte offset of the start of the line that holds `node`'s first byte,
/// from tree-sitter's column (in bytes), not a search back through the
/// text: that made every function of a one-line file cost the whole line.
pub(crate) fn line_start_of(node: tree_sitter::Node) -> usize {
    node.start_byte() - node.start_position().column
}

/// `first` followed by `then`, as one array at compile time: a language whose
/// reserved words are another's plus its own (TypeScript's are
/// JavaScript's, C++'s are C's) writes each word once and still gives
/// [`Language::reserved_words`] one `'static` slice. `N` must be the two
/// lengths' sum; any other length fails the build.
pub(crate) const fn joined<const N: usize>(first: &[&'static str], then: &[&'static str]) -> [&'static str; N] {
    assert!(first.len() + then.len() == N, "N is not the sum of the two lengths");
    let mut out = [""; N];
    let mut i = 0;
    while i < first.len() {
        out[i] = first[i];
        i += 1;
    }
    while i < N {
        out[i] = then[i - first.len()];
        i += 1;
    }
    out
}

/// Byte offset just past the line that holds `byte` (its `\n` included).
pub(crate) fn line_end_after(text: &str, byte: usize) -> usize {
    text[byte..].find('\n').map_or(text.len(), |i| byte + i + 1)
}

/// A source language that posrecall can find targets in.
pub trait Language {
    /// Short name recorded in run files, e.g. `javascript`.
    fn name(&self) -> &'static str;
    /// A line comment opener, used by the completion probe.
    fn line_comment(&self) -> &'static str;
    /// Words that cannot name a function (keywords, reserved and special
    /// names): renaming never chooses one.
    fn reserved_words(&self) -> &'static [&'static str];
    /// Parses `text` and lists its classic named function declarations.
    fn functions(&self, text: &str) -> Result<Parsed>;
    /// Byte spans, in order, of every plain identifier (a name reference or
    /// binding, not a property name or string) whose text `wanted` accepts.
    fn identifier_spans(&self, text: &str, wanted: &dyn Fn(&str) -> bool) -> Result<Vec<(usize, usize)>>;
    /// The byte spans of the comments (and Python's docstrings) in `text`.
    fn prose_spans(&self, text: &str) -> Result<Vec<classify::ProseSpan>>;
    /// What each line of `text` is made of ([`classify::LineClass`]).
    fn line_classes(&self, text: &str) -> Result<Vec<classify::LineClass>> {
        Ok(classify::line_classes(text, &self.prose_spans(text)?))
    }
}

/// A corpus read and parsed: what every command starts from.
pub struct Source {
    pub corpus: Corpus,
    pub language: Box<dyn Language>,
    pub parsed: Parsed,
    /// sha256 of the file on disk (differs from `corpus.sha256` when renamed;
    /// for a folder, of the concatenation).
    pub file_sha256: String,
    /// Set when the declared function names were renamed (`--rename`).
    pub renamed: Option<RenameInfo>,
    /// The files of a folder corpus, in the order they were concatenated.
    pub files: Vec<SourceFile>,
    /// Notes for stderr: syntax errors, skipped files.
    pub notes: Vec<String>,
    /// A folder corpus's include and exclude globs.
    pub include: Vec<String>,
    pub exclude: Vec<String>,
}

/// How a corpus was renamed: recorded in `manifest.corpus.rename`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RenameInfo {
    pub seed: u64,
    /// sha256 of the renamed text the model is given.
    pub sha256: String,
    /// Old name → new name.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub mapping: std::collections::BTreeMap<String, String>,
}

/// Where a corpus comes from: one file, or the matching files of a folder.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CorpusSpec {
    /// The file, or the folder when `dir` is set.
    pub path: PathBuf,
    pub dir: bool,
    /// Globs over the folder's relative paths (`/`-separated); none: every
    /// file whose extension names a language (of `language`, when given).
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    /// The language of every file, whatever its extension (a name
    /// [`language_named`] knows).
    pub language: Option<String>,
}

/// A corpus that cannot be found from what was given; the messages name no
/// flag (the command adds them).
#[derive(Debug, thiserror::Error)]
pub enum CorpusSpecError {
    #[error("no corpus is given and {0} has no default corpus")]
    NoDefault(String),
    #[error("no corpus is given and the default {} corpus is not at {}; fetch it first", .language.as_deref().unwrap_or("JavaScript"), .path.display())]
    DefaultMissing { language: Option<String>, path: PathBuf },
    #[error("include and exclude globs choose files in a folder, but {} is one file", .0.display())]
    GlobsOnFile(PathBuf),
}

impl CorpusSpec {
    /// The corpus named by a file, a folder (with its globs), or neither:
    /// then the default corpus of `language` (JavaScript's when `None`),
    /// which must have been fetched.
    pub fn resolve(
        file: Option<&Path>,
        dir: Option<&Path>,
        language: Option<&str>,
        include: &[String],
        exclude: &[String],
    ) -> Result<CorpusSpec, CorpusSpecError> {
        let mut spec = match (dir, file) {
            (Some(dir), _) => CorpusSpec { path: dir.to_path_buf(), dir: true, ..CorpusSpec::default() },
            (None, Some(p)) => CorpusSpec::file(p),
            (None, None) => {
                let path = match language {
                    Some(l) => crate::support::fsutil::default_corpus_for(l).ok_or_else(|| CorpusSpecError::NoDefault(l.to_string()))?,
                    None => crate::support::fsutil::default_corpus_path(),
                };
                if !path.exists() {
                    return Err(CorpusSpecError::DefaultMissing { language: language.map(str::to_string), path });
                }
                CorpusSpec { dir: path.is_dir(), ..CorpusSpec::file(&path) }
            }
        };
        // Globs choose among a folder's files; on one file they would be ignored.
        if !spec.dir && (!include.is_empty() || !exclude.is_empty()) {
            return Err(CorpusSpecError::GlobsOnFile(spec.path));
        }
        spec.include = include.to_vec();
        spec.exclude = exclude.to_vec();
        spec.language = language.map(str::to_string);
        Ok(spec)
    }

    /// One file, its language from its extension.
    pub fn file(path: &Path) -> CorpusSpec {
        CorpusSpec { path: path.to_path_buf(), ..CorpusSpec::default() }
    }
}

/// One file of a folder corpus, as recorded in `manifest.corpus.files`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SourceFile {
    /// Relative to the folder, `/`-separated.
    pub path: String,
    /// sha256 of the file as read.
    pub sha256: String,
    pub language: String,
    /// 1-based line of the concatenation where the file's first line is
    /// (the path comment is the line before).
    pub first_line: usize,
}

/// What is wrong with a corpus; the command adds the flag that fixes it.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CorpusError {
    #[error("cannot tell the language of {path} from its extension (known: {known})")]
    UnknownExtension { path: String, known: String },
    #[error("unknown language `{0}` (known: {known})", known = language_names().join(", "))]
    UnknownLanguage(String),
    #[error("{dir} holds no file to use{what}")]
    NoMatchingFile { dir: String, what: String },
    #[error("`{glob}` is not a glob: {reason}")]
    BadGlob { glob: String, reason: String },
    #[error("{path} does not parse as {language}: {regions} syntax error region(s) cover {percent}% of it (first at line(s) {lines})")]
    Unparsable { path: String, language: String, regions: usize, percent: usize, lines: String },
}

/// The languages, their names and the extensions that select them.
const LANGUAGES: &[(&str, &[&str], &[&str])] = &[
    ("javascript", &["js"], &["js", "mjs", "cjs", "jsx"]),
    ("typescript", &["ts"], &["ts", "mts", "cts"]),
    ("tsx", &[], &["tsx"]),
    ("python", &["py"], &["py", "pyw"]),
    ("rust", &["rs"], &["rs"]),
    ("go", &["golang"], &["go"]),
    ("c", &[], &["c", "h"]),
    ("cpp", &["c++", "cxx"], &["cc", "cpp", "cxx", "c++", "hpp", "hh", "hxx", "h++", "ipp", "tpp"]),
    ("java", &[], &["java"]),
];

/// The language names `language_named` accepts (without aliases).
pub fn language_names() -> Vec<&'static str> {
    LANGUAGES.iter().map(|l| l.0).collect()
}

/// The language called `name` (or one of its aliases: `js`, `ts`, `py`,
/// `rs`, `golang`, `c++`, `cxx`), case-insensitive.
pub fn language_named(name: &str) -> Option<Box<dyn Language>> {
    let name = name.trim().to_ascii_lowercase();
    let (canonical, _, _) = LANGUAGES.iter().find(|(n, aliases, _)| *n == name || aliases.contains(&name.as_str()))?;
    Some(match *canonical {
        "javascript" => Box::new(JavaScript),
        "typescript" => Box::new(TypeScript),
        "tsx" => Box::new(Tsx),
        "python" => Box::new(Python),
        "rust" => Box::new(Rust),
        "go" => Box::new(Go),
        "c" => Box::new(C),
        "cpp" => Box::new(Cpp),
        _ => Box::new(Java),
    })
}

/// The extensions that select a language, without dots.
pub(crate) fn extensions_of(name: &str) -> &'static [&'static str] {
    LANGUAGES.iter().find(|l| l.0 == name).map_or(&[], |l| l.2)
}

/// The language an extension selects.
fn language_of_extension(path: &Path) -> Option<Box<dyn Language>> {
    let ext = path.extension().and_then(|e| e.to_str())?.to_ascii_lowercase();
    let (name, _, _) = LANGUAGES.iter().find(|l| l.2.contains(&ext.as_str()))?;
    language_named(name)
}

fn known_extensions() -> String {
    LANGUAGES.iter().flat_map(|l| l.2.iter().map(|e| format!(".{e}"))).collect::<Vec<_>>().join(", ")
}

/// The named language, or an error listing the names.
fn named(name: &str) -> Result<Box<dyn Language>> {
    language_named(name).ok_or_else(|| CorpusError::UnknownLanguage(name.to_string()).into())
}

/// More than this share of a file in error regions, and it is not taken as
/// source code in that language.
const MAX_ERROR_SHARE: f64 = 0.5;

/// The first error lines a message shows.
const SHOWN_ERROR_LINES: usize = 5;

fn error_lines(parsed: &Parsed, offset: usize) -> String {
    let mut shown: Vec<String> = parsed.error_lines.iter().take(SHOWN_ERROR_LINES).map(|l| (l + offset).to_string()).collect();
    if parsed.error_lines.len() > SHOWN_ERROR_LINES {
        shown.push("...".into());
    }
    shown.join(", ")
}

/// Whether so much of `text` is in error regions that it is not source in
/// this language: the error naming where.
fn unparsable(path: &str, language: &dyn Language, text: &str, parsed: &Parsed) -> Option<CorpusError> {
    let share = parsed.error_bytes as f64 / text.len().max(1) as f64;
    (share > MAX_ERROR_SHARE).then(|| CorpusError::Unparsable {
        path: path.to_string(),
        language: language.name().to_string(),
        regions: parsed.error_regions,
        percent: (share * 100.0).round() as usize,
        lines: error_lines(parsed, 0),
    })
}

impl Source {
    /// Reads `path`, picks its language and parses it. Syntax errors are not
    /// fatal: their regions are counted in `parsed.error_regions` and the
    /// declarations inside them are never targets.
    pub fn open(path: &Path) -> Result<Source> {
        Self::open_with(path, None)
    }

    /// Like [`Source::open`]; with `rename = Some(seed)` every declared
    /// function name is first renamed (see [`crate::corpus::rename`]), and the
    /// renamed text is what every later stage sees.
    pub(crate) fn open_with(path: &Path, rename: Option<u64>) -> Result<Source> {
        Self::open_spec(&CorpusSpec::file(path), rename)
    }

    /// Reads the file or the folder `spec` names, as [`Source::open_with`].
    /// A file more than half in syntax error regions is an error (a folder
    /// keeps its text and takes no target from it, with a note).
    pub fn open_spec(spec: &CorpusSpec, rename: Option<u64>) -> Result<Source> {
        let forced = spec.language.as_deref().map(named).transpose()?;
        let (corpus, language, files, mut notes) = if spec.dir {
            let folder = dir::concatenate(spec, forced)?;
            (folder.corpus, folder.language, folder.files, folder.notes)
        } else {
            let language = match forced {
                Some(l) => l,
                None => language_of_extension(&spec.path)
                    .ok_or_else(|| CorpusError::UnknownExtension { path: spec.path.display().to_string(), known: known_extensions() })?,
            };
            (Corpus::load(&spec.path)?, language, Vec::new(), Vec::new())
        };
        let mut corpus = corpus;
        let file_sha256 = corpus.sha256.clone();
        let path = corpus.path.clone();
        let mut renamed = None;
        if let Some(seed) = rename {
            let before = language.functions(&corpus.text)?.error_regions;
            let r = crate::corpus::rename::rename(&corpus.text, language.as_ref(), seed)?;
            if spec.dir && r.text.len() != corpus.text.len() {
                // The files' byte ranges would move.
                bail!("renaming {} would change its length; choose another seed", path.display());
            }
            corpus = Corpus::from_bytes(&path, r.text.into_bytes())?;
            let after = language.functions(&corpus.text)?.error_regions;
            if after > before {
                bail!("renaming {} introduced syntax errors ({before} error regions before, {after} after)", path.display());
            }
            renamed = Some(RenameInfo { seed, sha256: corpus.sha256.clone(), mapping: r.mapping });
        }
        let mut parsed = language.functions(&corpus.text)?;
        parsed.classes = language.line_classes(&corpus.text)?;
        if !spec.dir {
            if let Some(e) = unparsable(&path.display().to_string(), language.as_ref(), &corpus.text, &parsed) {
                return Err(e.into());
            }
            if parsed.error_regions > 0 {
                notes.push(format!(
                    "note: {} has {} syntax error region(s) (first at line(s) {}); functions in them are skipped",
                    path.display(),
                    parsed.error_regions,
                    error_lines(&parsed, 0)
                ));
            }
        }
        let (include, exclude) = (spec.include.clone(), spec.exclude.clone());
        Ok(Source { corpus, language, parsed, file_sha256, renamed, files, notes, include, exclude })
    }

    /// The notes for stderr (syntax error regions, skipped files), one per line.
    pub fn error_note(&self) -> Option<String> {
        (!self.notes.is_empty()).then(|| self.notes.join("\n"))
    }
}

/// Picks the language by file extension.
pub fn language_for(path: &Path) -> Result<Box<dyn Language>> {
    language_of_extension(path)
        .ok_or_else(|| CorpusError::UnknownExtension { path: path.display().to_string(), known: known_extensions() }.into())
}

impl Explain for CorpusSpecError {
    fn explain(&self, n: &dyn Names) -> String {
        let corpus = n.name(Setting::Corpus);
        match self {
            CorpusSpecError::NoDefault(l) => {
                format!(
                    "no {corpus} given and {l} has no default corpus; give {} or {}",
                    n.set(Setting::Corpus, "FILE"),
                    n.set(Setting::CorpusDir, "DIR")
                )
            }
            CorpusSpecError::DefaultMissing { language: Some(l), path } => format!(
                "no {corpus} given and the default {l} corpus is not at {}; run scripts/env/fetch-corpus --language {l} first",
                path.display()
            ),
            CorpusSpecError::DefaultMissing { language: None, path } => {
                format!("no {corpus} given and the default corpus is not at {}; run scripts/env/fetch-corpus first", path.display())
            }
            CorpusSpecError::GlobsOnFile(path) => format!(
                "{} and {} choose files in a folder, but {} is one file; give the folder with {}",
                n.name(Setting::Include),
                n.name(Setting::Exclude),
                path.display(),
                n.set(Setting::CorpusDir, "DIR")
            ),
        }
    }
}

impl Explain for CorpusError {
    fn explain(&self, n: &dyn Names) -> String {
        let fix = match self {
            CorpusError::UnknownExtension { .. } => format!("give {}", n.set(Setting::Language, "NAME")),
            CorpusError::UnknownLanguage(_) => format!("give one of them to {}", n.name(Setting::Language)),
            CorpusError::NoMatchingFile { .. } => format!(
                "check {}, {}, {} and {}",
                n.name(Setting::CorpusDir),
                n.name(Setting::Include),
                n.name(Setting::Exclude),
                n.name(Setting::Language)
            ),
            CorpusError::BadGlob { .. } => format!("fix {} or {}", n.name(Setting::Include), n.name(Setting::Exclude)),
            CorpusError::Unparsable { .. } => format!("check the file, or give its language with {}", n.set(Setting::Language, "NAME")),
        };
        format!("{self}; {fix}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_crlf() {
        let c = Corpus::from_bytes(Path::new("a.js"), b"a\r\nbb\n\nc".to_vec()).unwrap();
        assert_eq!(c.line_count(), 4);
        assert_eq!(c.line(0), "a");
        assert_eq!(c.line(1), "bb");
        assert_eq!(c.line(2), "");
        assert_eq!(c.line(3), "c");
        assert_eq!(c.line_of_byte(4), 1);
        assert_eq!(c.slice_lines(1, 2), "bb\n\n");
    }

    #[test]
    fn final_newline_is_not_a_line() {
        let c = Corpus::from_bytes(Path::new("a.js"), b"a\nb\n".to_vec()).unwrap();
        assert_eq!(c.line_count(), 2);
    }

    #[test]
    fn reserved_words_extend_the_language_they_build_on_each_written_once() {
        let words = |name: &str| language_named(name).unwrap().reserved_words();
        for (base, extended) in [("javascript", "typescript"), ("javascript", "tsx"), ("c", "cpp")] {
            assert!(words(extended).starts_with(words(base)), "{extended} does not start with {base}'s words");
        }
        for name in language_names() {
            let mut seen = std::collections::HashSet::new();
            let twice: Vec<&str> = words(name).iter().copied().filter(|w| !seen.insert(*w)).collect();
            assert!(twice.is_empty(), "{name} lists {twice:?} twice");
        }
        assert_eq!(joined::<3>(&["a"], &["b", "c"]), ["a", "b", "c"]);
    }

    #[test]
    fn rejects_bad_files() {
        assert!(Corpus::from_bytes(Path::new("a.js"), vec![]).is_err());
        assert!(Corpus::from_bytes(Path::new("a.js"), b"a\0b".to_vec()).is_err());
        assert!(Corpus::from_bytes(Path::new("a.js"), vec![0xff, 0xfe, 0x41]).is_err());
    }
}
