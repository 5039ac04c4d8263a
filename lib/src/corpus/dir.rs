//! A folder as one corpus: its matching files concatenated in sorted path
//! order, each after a one-line comment naming its relative path (as
//! repository-packing tools do), with targets found per file in the
//! concatenation's coordinates.

use super::{
    Corpus, CorpusError, CorpusSpec, FunctionDecl, Language, Parsed, SourceFile, error_lines, language_named, language_names,
    language_of_extension, unparsable,
};
use anyhow::{Context, Result};
use globset::{Glob, GlobSet, GlobSetBuilder};
use std::path::Path;
use std::sync::OnceLock;

/// A folder read and concatenated.
pub(crate) struct Folder {
    pub corpus: Corpus,
    pub language: Box<dyn Language>,
    pub files: Vec<SourceFile>,
    pub notes: Vec<String>,
}

fn globs(patterns: &[String]) -> Result<Option<GlobSet>> {
    if patterns.is_empty() {
        return Ok(None);
    }
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        let glob = Glob::new(p).map_err(|e| CorpusError::BadGlob { glob: p.clone(), reason: e.kind().to_string() })?;
        b.add(glob);
    }
    Ok(Some(b.build().map_err(|e| CorpusError::BadGlob { glob: patterns.join(" "), reason: e.to_string() })?))
}

/// The relative paths under `root`, `/`-separated, sorted. Hidden files and
/// folders are left out; symbolic links (not followed, so that a link
/// cannot pull in a file twice or from outside the folder) and names that
/// are not UTF-8 (they cannot be written in the path comment) each leave a
/// note in `notes`.
fn relative_paths(root: &Path, notes: &mut Vec<String>) -> Result<Vec<String>> {
    let mut out = Vec::new();
    let walk = walkdir::WalkDir::new(root)
        .follow_links(false)
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'));
    for entry in walk {
        let entry = entry.with_context(|| format!("cannot read the folder {}", root.display()))?;
        let rel = entry.path().strip_prefix(root).unwrap_or(entry.path());
        if entry.path_is_symlink() && entry.depth() > 0 {
            notes.push(format!("note: skipped {}: a symbolic link (links are not followed)", rel.display()));
            continue;
        }
        if !entry.file_type().is_file() {
            continue;
        }
        let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
        match parts {
            Some(parts) => out.push(parts.join("/")),
            None => notes.push(format!("note: skipped {}: its name is not UTF-8", rel.display())),
        }
    }
    out.sort();
    Ok(out)
}

/// A file's text, or the note saying why it is skipped: a NUL byte marks a
/// binary file; other text must be UTF-8 (a Latin-1 source file is not
/// binary, and the note says so).
fn file_text(rel: &str, bytes: Vec<u8>) -> Result<String, String> {
    if bytes.contains(&0) {
        return Err(format!("note: skipped {rel}: a binary file (it holds NUL bytes)"));
    }
    String::from_utf8(bytes)
        .map_err(|e| format!("note: skipped {rel}: not UTF-8 text (invalid byte at offset {})", e.utf8_error().valid_up_to()))
}

/// Reads the files of `spec.path` that `spec` selects and concatenates them.
/// Reads `rel` under `root`, first checking that it keeps the concatenation
/// (`so_far` bytes now) within the one-file limit.
fn read_within_limit(root: &Path, rel: &str, so_far: usize) -> Result<Vec<u8>> {
    let size = std::fs::metadata(root.join(rel)).map(|m| m.len()).unwrap_or(0);
    if so_far as u64 + size > super::MAX_CORPUS_BYTES {
        return Err(super::too_large(root, &(so_far as u64 + size).to_string()));
    }
    let room = super::MAX_CORPUS_BYTES - so_far as u64;
    crate::support::fsutil::read_input(&root.join(rel), room).with_context(|| format!("cannot read {}/{rel}", root.display()))
}

pub(crate) fn concatenate(spec: &CorpusSpec, forced: Option<Box<dyn Language>>) -> Result<Folder> {
    let root = &spec.path;
    if !root.exists() {
        anyhow::bail!("folder {} does not exist", root.display());
    }
    if !root.is_dir() {
        anyhow::bail!("{} is not a folder", root.display());
    }
    let include = globs(&spec.include)?;
    let exclude = globs(&spec.exclude)?;
    let mut text = String::new();
    let mut parts: Vec<(usize, usize, Box<dyn Language>)> = Vec::new();
    let mut files = Vec::new();
    let mut notes = Vec::new();
    let mut line = 1;
    let mut excluded = 0;
    for rel in relative_paths(root, &mut notes)? {
        if exclude.as_ref().is_some_and(|g| g.is_match(&rel)) {
            excluded += 1;
            continue;
        }
        let by_extension = language_of_extension(Path::new(&rel));
        let wanted = match &include {
            Some(g) => g.is_match(&rel),
            // No --include: the files of a known language (the one forced, if any).
            None => match (&forced, &by_extension) {
                (Some(f), Some(e)) => f.name() == e.name(),
                (None, Some(_)) => true,
                _ => false,
            },
        };
        if !wanted {
            continue;
        }
        let language = match (&forced, by_extension) {
            (Some(f), _) => language_named(f.name()).expect("a known name"),
            (None, Some(l)) => l,
            (None, None) => {
                notes.push(format!("note: skipped {rel}: its extension names no known language"));
                continue;
            }
        };
        let bytes = read_within_limit(root, &rel, text.len())?;
        let sha256 = crate::support::fsutil::sha256_hex(&bytes);
        let body = match file_text(&rel, bytes) {
            Ok(body) => body,
            Err(note) => {
                notes.push(note);
                continue;
            }
        };
        if rel.contains(['\n', '\r']) {
            notes.push(format!("note: skipped {rel:?}: a line break in its name"));
            continue;
        }
        let body = body.strip_prefix('\u{feff}').unwrap_or(&body);
        text.push_str(&format!("{} {rel}\n", language.line_comment()));
        line += 1;
        let start = text.len();
        text.push_str(body);
        if !body.is_empty() && !body.ends_with('\n') {
            text.push('\n');
        }
        files.push(SourceFile { path: rel, sha256, language: language.name().to_string(), first_line: line });
        line += body.matches('\n').count() + usize::from(!body.is_empty() && !body.ends_with('\n'));
        parts.push((start, text.len(), language));
    }
    if files.is_empty() {
        let mut what = match (&spec.include.is_empty(), &forced) {
            // What --exclude left out is the reason, not the extensions.
            _ if excluded > 0 => format!(" that the include and exclude globs select (the exclude globs left out {excluded} files)"),
            (true, None) => format!(" (no file with a known extension: {})", super::known_extensions()),
            (true, Some(f)) => {
                let exts: Vec<String> = super::extensions_of(f.name()).iter().map(|e| format!(".{e}")).collect();
                format!(" (no {} file: {})", f.name(), exts.join(", "))
            }
            (false, _) => " that the include and exclude globs select".to_string(),
        };
        for n in &notes {
            what.push_str("; ");
            what.push_str(n.strip_prefix("note: ").unwrap_or(n));
        }
        return Err(CorpusError::NoMatchingFile { dir: root.display().to_string(), what }.into());
    }
    let corpus = Corpus::from_bytes(root, text.into_bytes())?;
    let mixed = Mixed { parts };
    notes.extend(syntax_notes(&corpus, &mixed, &files)?);
    Ok(Folder { corpus, language: Box::new(mixed), files, notes })
}

/// A note per file with syntax errors: how many and where (a file more than
/// half in error regions keeps its text but gives no targets).
fn syntax_notes(corpus: &Corpus, mixed: &Mixed, files: &[SourceFile]) -> Result<Vec<String>> {
    let mut notes = Vec::new();
    for (f, (start, end, language)) in files.iter().zip(&mixed.parts) {
        let piece = &corpus.text[*start..*end];
        if piece.trim().is_empty() {
            continue;
        }
        let parsed = language.functions(piece)?;
        if let Some(e) = unparsable(&f.path, language.as_ref(), piece, &parsed) {
            notes.push(format!("note: {e}; no targets are taken from it"));
        } else if parsed.error_regions > 0 {
            notes.push(format!(
                "note: {} has {} syntax error region(s) (first at line(s) {} of the corpus); functions in them are skipped",
                f.path,
                parsed.error_regions,
                error_lines(&parsed, f.first_line - 1)
            ));
        }
    }
    Ok(notes)
}

/// The files of a folder in more than one language: each part of the text
/// parsed by its own grammar.
pub(crate) struct Mixed {
    /// Byte range of each file's text in the concatenation, and its language.
    parts: Vec<(usize, usize, Box<dyn Language>)>,
}

impl Mixed {
    /// The one language every part has, if they share one.
    fn single(&self) -> Option<&'static str> {
        let first = self.parts.first()?.2.name();
        self.parts.iter().all(|p| p.2.name() == first).then_some(first)
    }

    /// The language holding the most bytes.
    fn main(&self) -> &dyn Language {
        let mut bytes: Vec<(&'static str, usize)> = Vec::new();
        for (s, e, l) in &self.parts {
            match bytes.iter_mut().find(|b| b.0 == l.name()) {
                Some(b) => b.1 += e - s,
                None => bytes.push((l.name(), e - s)),
            }
        }
        let name = bytes.iter().max_by_key(|b| b.1).map_or("javascript", |b| b.0);
        self.parts.iter().find(|p| p.2.name() == name).map(|p| p.2.as_ref()).expect("a part")
    }
}

impl Language for Mixed {
    /// The files' language, or `mixed`.
    fn name(&self) -> &'static str {
        self.single().unwrap_or("mixed")
    }

    /// The comment of the language that holds the most text.
    fn line_comment(&self) -> &'static str {
        self.main().line_comment()
    }

    fn reserved_words(&self) -> &'static [&'static str] {
        static ALL: OnceLock<Vec<&'static str>> = OnceLock::new();
        ALL.get_or_init(|| language_names().iter().filter_map(|n| language_named(n)).flat_map(|l| l.reserved_words().to_vec()).collect())
    }

    fn functions(&self, text: &str) -> Result<Parsed> {
        let mut out = Parsed {
            rule: "a function eligible in its file's language",
            after: "its opening brace (Python: its header)",
            ..Parsed::default()
        };
        let (mut lines_before, mut counted) = (0, 0);
        for (start, end, language) in &self.parts {
            let piece = &text[*start..*end];
            let mut parsed = language.functions(piece)?;
            // Counted on from the previous file, not from the start (that
            // made a folder of many files quadratic).
            lines_before += text[counted..*start].matches('\n').count();
            counted = *start;
            // A file more than half in error regions gives no targets.
            let usable = unparsable("", language.as_ref(), piece, &parsed).is_none();
            out.error_regions += parsed.error_regions;
            out.error_bytes += parsed.error_bytes;
            out.error_lines.extend(parsed.error_lines.iter().map(|l| l + lines_before));
            let moved = |f: FunctionDecl| FunctionDecl {
                start_byte: f.start_byte + start,
                open_brace_end: f.open_brace_end + start,
                body_end: f.body_end + start,
                clean: f.clean && usable,
                ..f
            };
            out.functions.extend(parsed.functions.drain(..).map(moved));
            out.definitions.extend(parsed.definitions.drain(..).map(moved));
        }
        Ok(out)
    }

    /// Each file's own, and the path comment lines between files.
    fn prose_spans(&self, text: &str) -> Result<Vec<super::classify::ProseSpan>> {
        let mut out = Vec::new();
        let mut between = 0;
        for (start, end, language) in &self.parts {
            out.push((between, *start, super::classify::LineClass::Comment));
            let spans = language.prose_spans(&text[*start..*end])?;
            out.extend(spans.into_iter().map(|(s, e, c)| (s + start, e + start, c)));
            between = *end;
        }
        out.push((between, text.len(), super::classify::LineClass::Comment));
        Ok(out)
    }

    fn identifier_spans(&self, text: &str, wanted: &dyn Fn(&str) -> bool) -> Result<Vec<(usize, usize)>> {
        let mut out = Vec::new();
        for (start, end, language) in &self.parts {
            let spans = language.identifier_spans(&text[*start..*end], wanted)?;
            out.extend(spans.into_iter().map(|(s, e)| (s + start, e + start)));
        }
        Ok(out)
    }
}
