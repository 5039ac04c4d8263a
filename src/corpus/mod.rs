//! Reading a source file and finding its function declarations.
//!
//! A [`Corpus`] is the file as bytes-exact text plus a line index; every later
//! stage addresses it by 0-based line numbers and byte offsets. The language
//! layer ([`Language`]) turns text into [`FunctionDecl`]s with tree-sitter; a
//! new language is one new file beside `javascript.rs` and one arm in
//! [`language_for`].

mod javascript;

pub use javascript::JavaScript;

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

impl Corpus {
    /// Reads `path`; a missing, empty or binary (NUL bytes, not UTF-8) file is an error.
    pub fn load(path: &Path) -> Result<Corpus> {
        let bytes = std::fs::read(path)
            .with_context(|| format!("cannot read corpus {}", path.display()))?;
        Self::from_bytes(path, bytes)
    }

    /// Builds a corpus from bytes already in memory (`path` is only recorded).
    pub fn from_bytes(path: &Path, bytes: Vec<u8>) -> Result<Corpus> {
        if bytes.is_empty() {
            bail!("corpus {} is empty", path.display());
        }
        if bytes.contains(&0) {
            bail!("corpus {} is a binary file, not source code", path.display());
        }
        let sha256 = crate::fsutil::sha256_hex(&bytes);
        let text = String::from_utf8(bytes).map_err(|e| {
            anyhow::anyhow!(
                "corpus {} is not UTF-8 text (invalid byte at offset {})",
                path.display(),
                e.utf8_error().valid_up_to()
            )
        })?;
        if text.trim().is_empty() {
            bail!("corpus {} holds only whitespace", path.display());
        }
        let mut line_starts = vec![0];
        for (i, b) in text.bytes().enumerate() {
            if b == b'\n' && i + 1 < text.len() {
                line_starts.push(i + 1);
            }
        }
        Ok(Corpus {
            path: path.to_path_buf(),
            text,
            sha256,
            line_starts,
        })
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
    pub fn line_end(&self, i: usize) -> usize {
        self.line_starts.get(i + 1).copied().unwrap_or(self.text.len())
    }

    /// The text of 0-based line `i`, without its `\n` or `\r\n`.
    pub fn line(&self, i: usize) -> &str {
        let raw = &self.text[self.line_start(i)..self.line_end(i)];
        let raw = raw.strip_suffix('\n').unwrap_or(raw);
        raw.strip_suffix('\r').unwrap_or(raw)
    }

    /// The 0-based line that holds byte offset `byte`.
    pub fn line_of_byte(&self, byte: usize) -> usize {
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

/// A named function declaration found by a language's parser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionDecl {
    pub name: String,
    /// Byte offset where the declaration starts (`async`/`function` keyword).
    pub start_byte: usize,
    /// Byte offset just past the body's opening brace.
    pub open_brace_end: usize,
    /// Byte offset of the body's closing brace.
    pub close_brace: usize,
    /// Whether tree-sitter parsed the declaration without error or missing nodes.
    pub clean: bool,
}

/// What a language's parser found in a file.
#[derive(Debug, Clone, Default)]
pub struct Parsed {
    /// Every named declaration, in file order, clean or not.
    pub functions: Vec<FunctionDecl>,
    /// How many separate error regions tree-sitter reported.
    pub error_regions: usize,
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
}

/// A corpus read and parsed: what every command starts from.
pub struct Source {
    pub corpus: Corpus,
    pub language: Box<dyn Language>,
    pub parsed: Parsed,
    /// sha256 of the file on disk (differs from `corpus.sha256` when renamed).
    pub file_sha256: String,
    /// Set when the declared function names were renamed (`--rename`).
    pub renamed: Option<RenameInfo>,
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

impl Source {
    /// Reads `path`, picks its language and parses it. Syntax errors are not
    /// fatal: their regions are counted in `parsed.error_regions` and the
    /// declarations inside them are never targets.
    pub fn open(path: &Path) -> Result<Source> {
        Self::open_with(path, None)
    }

    /// Like [`Source::open`]; with `rename = Some(seed)` every declared
    /// function name is first renamed (see [`crate::rename`]), and the
    /// renamed text is what every later stage sees.
    pub fn open_with(path: &Path, rename: Option<u64>) -> Result<Source> {
        let language = language_for(path)?;
        let mut corpus = Corpus::load(path)?;
        let file_sha256 = corpus.sha256.clone();
        let mut renamed = None;
        if let Some(seed) = rename {
            let before = language.functions(&corpus.text)?.error_regions;
            let r = crate::rename::rename(&corpus.text, language.as_ref(), seed)?;
            corpus = Corpus::from_bytes(path, r.text.into_bytes())?;
            let after = language.functions(&corpus.text)?.error_regions;
            if after > before {
                bail!("renaming {} introduced syntax errors ({before} error regions before, {after} after)", path.display());
            }
            renamed = Some(RenameInfo {
                seed,
                sha256: corpus.sha256.clone(),
                mapping: r.mapping,
            });
        }
        let parsed = language.functions(&corpus.text)?;
        Ok(Source {
            corpus,
            language,
            parsed,
            file_sha256,
            renamed,
        })
    }

    /// A one-line note for stderr when tree-sitter skipped error regions.
    pub fn error_note(&self) -> Option<String> {
        (self.parsed.error_regions > 0).then(|| {
            format!(
                "note: {} has {} syntax error region(s); functions in them are skipped",
                self.corpus.path.display(),
                self.parsed.error_regions
            )
        })
    }
}

/// Picks the language by file extension.
pub fn language_for(path: &Path) -> Result<Box<dyn Language>> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "js" | "mjs" | "cjs" | "jsx" => Ok(Box::new(JavaScript)),
        _ => bail!(
            "cannot tell the language of {} (supported: .js, .mjs, .cjs, .jsx)",
            path.display()
        ),
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
    fn rejects_bad_files() {
        assert!(Corpus::from_bytes(Path::new("a.js"), vec![]).is_err());
        assert!(Corpus::from_bytes(Path::new("a.js"), b"a\0b".to_vec()).is_err());
        assert!(Corpus::from_bytes(Path::new("a.js"), vec![0xff, 0xfe, 0x41]).is_err());
    }
}
