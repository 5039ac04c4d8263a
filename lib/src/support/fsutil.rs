//! Small file-system helpers shared by every command that writes a file.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` atomically: a temporary file in the same folder,
/// flushed, then renamed over the target. A crash or an error never leaves a
/// half-written output file behind.
///
/// A symbolic link is written through: the file it points to is replaced
/// and the link stays. Anything that is not a regular file (a device such as
/// `/dev/null`, a FIFO) is written into, never replaced by a file. The
/// temporary name is `.<name>.tmp-<pid>-<random>`: unique across processes
/// and machines that share the folder (every pod of a job may be PID 1).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let target = through_links(path).with_context(|| format!("cannot write {}", path.display()))?;
    write_to(path, &target, bytes, true)
}

/// Writes `bytes` to `path` atomically, as [`write_atomic`], but onto the
/// name itself: whatever is there (a symbolic link, a FIFO) is replaced by
/// the new file, never written through or into. For the files posrecall
/// names itself inside a folder the user gave (a sweep's run files), so
/// that nothing planted in that folder can send them anywhere else.
pub(crate) fn write_atomic_here(path: &Path, bytes: &[u8]) -> Result<()> {
    write_to(path, path, bytes, false)
}

/// Writes `bytes` to `target` (the file `path` leads to), atomically; into
/// it instead when it is a FIFO or device and `into_special`.
fn write_to(path: &Path, target: &Path, bytes: &[u8], into_special: bool) -> Result<()> {
    let target = target.to_path_buf();
    if let Ok(meta) = std::fs::metadata(&target)
        && into_special
        && !meta.is_file()
        && !meta.is_dir()
    {
        let result = std::fs::OpenOptions::new().write(true).open(&target).and_then(|mut f| f.write_all(bytes));
        return result.with_context(|| format!("cannot write {}", path.display()));
    }
    let dir = match target.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let file_name = target.file_name().with_context(|| format!("{} is not a file path", path.display()))?;
    // Errors name the path the user gave, not the temporary file.
    let result = (|| -> std::io::Result<()> {
        let mut tmp = tempfile::Builder::new()
            .prefix(&format!(".{}.tmp-{}-", file_name.to_string_lossy(), std::process::id()))
            .permissions(new_file_permissions())
            .tempfile_in(dir)
            .map_err(without_temporary_path)?;
        // A file replaced keeps its mode; a new one gets what the umask allows.
        if let Ok(meta) = std::fs::symlink_metadata(&target)
            && meta.is_file()
        {
            std::fs::set_permissions(tmp.path(), meta.permissions()).map_err(without_temporary_path)?;
        }
        tmp.write_all(bytes)?;
        tmp.as_file().sync_all().ok();
        tmp.persist(&target).map(|_| ()).map_err(|e| without_temporary_path(e.error))
    })();
    result.with_context(|| format!("cannot write {}", path.display()))
}

/// Removes what an earlier writer of `path` left behind when it was killed
/// between creating its temporary file and renaming it ([`write_atomic`]'s
/// `.<name>.tmp-*` beside `path`): regular files of that name last written
/// before `before` (the start of the run now finishing `path`, so
/// that a temporary file of a writer still at work is never taken).
/// Links and anything else of that name are left alone, and a folder that
/// cannot be read is left as it is.
pub(crate) fn remove_stale_temporaries(path: &Path, before: std::time::SystemTime) {
    let (Some(name), dir) = (path.file_name(), path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."))) else {
        return;
    };
    let prefix = format!(".{}.tmp-", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for e in entries.flatten() {
        let stale = e.file_name().to_string_lossy().starts_with(&prefix)
            && std::fs::symlink_metadata(e.path()).is_ok_and(|m| m.is_file() && m.modified().is_ok_and(|t| t < before));
        if stale {
            // One that cannot be removed is left: it hides nothing.
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// The mode a new output file is created with: read and write for all, less
/// the umask, as any program's `open(O_CREAT, 0666)` gives (temporary files
/// are otherwise private to their owner, and an output renamed from one
/// would be unreadable to the group a shared results folder serves).
pub(crate) fn new_file_permissions() -> std::fs::Permissions {
    use std::os::unix::fs::PermissionsExt;
    std::fs::Permissions::from_mode(0o666)
}

/// An error about the temporary file, as one about the output: the user
/// gave the output's path, not the temporary one (`tempfile` appends it).
fn without_temporary_path(e: std::io::Error) -> std::io::Error {
    let text = e.to_string();
    match text.split_once(" at path ") {
        Some((why, _)) => std::io::Error::new(e.kind(), why.to_string()),
        None => e,
    }
}

/// The path a write to `path` lands on: `path` itself, or, when it is a
/// symbolic link, the file the links lead to (which may not exist yet).
fn through_links(path: &Path) -> std::io::Result<PathBuf> {
    let mut p = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                let link = std::fs::read_link(&p)?;
                p = match p.parent() {
                    Some(dir) if link.is_relative() => dir.join(link),
                    _ => link,
                };
            }
            _ => return Ok(p),
        }
    }
    Err(std::io::Error::other("too many levels of symbolic links"))
}

/// The most bytes read from one text input: a run file, a targets file, a
/// responses file, a sweep file, a template. The largest run files the
/// tests write are a few MB; a corpus, the largest text in any of them, is
/// at most 64 MiB (the corpus reader's own limit).
pub(crate) const MAX_TEXT_BYTES: u64 = 256 << 20;

/// Reads the input file `path` whole: a regular file of at most `limit`
/// bytes. Anything else is refused before a byte is read: a FIFO, socket or
/// device (`/dev/zero` never ends; a FIFO may never be written, or be fed
/// without end), and a file over the limit, so that no input grows memory
/// past a stated bound. The bytes read are held to the limit too, in case
/// the file grows meanwhile. The errors name no path (the caller does).
pub fn read_input(path: &Path, limit: u64) -> std::io::Result<Vec<u8>> {
    use std::io::Read as _;
    let over = |size: String| {
        std::io::Error::new(
            std::io::ErrorKind::FileTooLarge,
            format!(
                "{size} bytes, over the limit of {limit} bytes ({}) posrecall reads from one such file",
                bytesize::ByteSize(limit).display().iec()
            ),
        )
    };
    let not_a_file =
        || std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file (a FIFO, socket or device): posrecall reads files");
    // Opening a FIFO waits for a writer: look before opening.
    let meta = std::fs::metadata(path)?;
    if meta.is_dir() {
        return Err(std::io::Error::new(std::io::ErrorKind::IsADirectory, "a folder, not a file"));
    }
    if !meta.is_file() {
        return Err(not_a_file());
    }
    if meta.len() > limit {
        return Err(over(meta.len().to_string()));
    }
    let file = std::fs::File::open(path)?;
    if !file.metadata()?.is_file() {
        return Err(not_a_file());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(limit + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(over(format!("more than {limit}")));
    }
    Ok(bytes)
}

/// A text input ([`read_input`], at most [`MAX_TEXT_BYTES`]), with a UTF-8
/// byte-order mark (which some editors write) dropped, so that JSON and TOML
/// readers see the text itself.
pub(crate) fn read_text(path: &Path) -> std::io::Result<String> {
    let text = String::from_utf8(read_input(path, MAX_TEXT_BYTES)?).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("not UTF-8 text (invalid byte at offset {})", e.utf8_error().valid_up_to()),
        )
    })?;
    Ok(match text.strip_prefix('\u{feff}') {
        Some(rest) => rest.to_string(),
        None => text,
    })
}

/// Where an output file will be written, and what it must not overwrite.
/// Needs no hint: the face's `check_output` puts the flag of the
/// output in front of every one.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("{0} is a folder; give a file name")]
    IsAFolder(PathBuf),

    #[error("the folder of {0} does not exist")]
    NoFolder(PathBuf),
    #[error("{path} cannot be written ({why})")]
    NotWritable { path: PathBuf, why: String },
    #[error("{out} is also an input ({input}); writing it would destroy that input")]
    IsAnInput { out: PathBuf, input: PathBuf },
    #[error("{} is inside the {folder_label} folder {}; writing it would change that input", .out.display(), .folder.display())]
    InsideInputFolder { out: PathBuf, folder_label: String, folder: PathBuf },
    #[error("{} is also the {other} output; one would overwrite the other", .out.display())]
    AlsoAnOutput { out: PathBuf, other: String },
}

/// The one check of where a command writes, before any work: every output
/// by [`check_output`] against every input, then against every input folder
/// (an output inside one would join or replace what is read) and every
/// earlier output. `outputs` are (label, path) in the order they are
/// written, the label being how the caller's user names each (a flag, a
/// run); an error comes with the label of the output at fault.
pub fn check_outputs<'a>(
    outputs: &[(&'a str, &Path)],
    inputs: &[&Path],
    input_folders: &[(&str, &Path)],
) -> Result<(), (&'a str, OutputError)> {
    for (i, &(label, out)) in outputs.iter().enumerate() {
        check_output(out, inputs).map_err(|e| (label, e))?;
        if let Some((folder_label, folder)) = input_folders.iter().find(|(_, f)| is_inside(out, f)) {
            let e = OutputError::InsideInputFolder {
                out: out.to_path_buf(),
                folder_label: folder_label.to_string(),
                folder: folder.to_path_buf(),
            };
            return Err((label, e));
        }
        if let Some((other, _)) = outputs[..i].iter().find(|(_, o)| same_path(o, out)) {
            return Err((label, OutputError::AlsoAnOutput { out: out.to_path_buf(), other: other.to_string() }));
        }
    }
    Ok(())
}

/// Checks, before any work, that `out` can be written and is none of
/// `inputs` (compared as canonical paths, so `./a.json` and `a.json` are one
/// file): its folder exists and takes a new file, and it is not a folder.
pub fn check_output(out: &Path, inputs: &[&Path]) -> Result<(), OutputError> {
    if out.is_dir() {
        return Err(OutputError::IsAFolder(out.to_path_buf()));
    }
    let dir = match out.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(OutputError::NoFolder(out.to_path_buf()));
    }
    let target = canonical_output(out, dir);
    for input in inputs {
        if let Ok(i) = input.canonicalize()
            && Some(&i) == target.as_ref()
        {
            return Err(OutputError::IsAnInput { out: out.to_path_buf(), input: input.to_path_buf() });
        }
    }
    // A probe file shows that the folder takes a new file (the atomic write
    // needs one beside the output).
    let probe = dir.join(format!(".posrecall-write-probe-{}", std::process::id()));
    match std::fs::File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(OutputError::NotWritable { path: out.to_path_buf(), why: e.to_string() }),
    }
}

/// Whether `a` and `b` name one file, compared as the canonical paths they
/// have or will have (either may not exist yet).
pub(crate) fn same_path(a: &Path, b: &Path) -> bool {
    let canonical = |p: &Path| {
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        canonical_output(p, dir)
    };
    match (canonical(a), canonical(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Whether writing `out` would put a file inside the folder `dir` (or below it).
pub(crate) fn is_inside(out: &Path, dir: &Path) -> bool {
    let parent = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    match (canonical_output(out, parent), dir.canonicalize()) {
        (Some(o), Ok(d)) => o.starts_with(&d),
        _ => false,
    }
}

/// The canonical path `out` will have: itself when it exists, else its
/// canonical folder joined with its name.
fn canonical_output(out: &Path, dir: &Path) -> Option<PathBuf> {
    out.canonicalize().ok().or_else(|| Some(dir.canonicalize().ok()?.join(out.file_name()?)))
}

/// Lower-case hex sha256 of a file, read in 1 MiB blocks (models are large).
pub fn file_sha256(path: &Path) -> Result<String> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let mut f = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher.finalize().iter().map(|b| format!("{b:02x}")).collect())
}

/// Lower-case hex sha256 of some bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(bytes);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// Where posrecall keeps caches: `$POSRECALL_CACHE`, else `$XDG_CACHE_HOME/posrecall`,
/// else `~/.cache/posrecall`.
pub fn cache_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("POSRECALL_CACHE").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    if let Some(p) = std::env::var_os("XDG_CACHE_HOME").filter(|p| !p.is_empty()) {
        return PathBuf::from(p).join("posrecall");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| ".".into());
    PathBuf::from(home).join(".cache").join("posrecall")
}

/// The default corpus, where `scripts/env/fetch-corpus` puts it: lodash 4.17.21's
/// `lodash.js` (17K lines, hundreds of classic function declarations).
pub fn default_corpus_path() -> PathBuf {
    cache_dir().join("corpus").join("lodash-4.17.21.js")
}

/// Where `scripts/env/fetch-corpus --language LANGUAGE` puts that language's
/// default corpus (`language` as the corpus stage names languages: `javascript`, `python`, …).
pub fn default_corpus_for(language: &str) -> Option<PathBuf> {
    let file = match language {
        "javascript" => return Some(default_corpus_path()),
        _ => DEFAULT_CORPORA.iter().find(|(l, _)| *l == language)?.1,
    };
    Some(cache_dir().join("corpus").join(file))
}

/// The default corpus file of each language but JavaScript, as
/// `scripts/env/fetch-corpus` names them.
/// TypeScript's and Java's are folders (a package's sources), used as
/// folder corpora.
pub const DEFAULT_CORPORA: &[(&str, &str)] = &[
    ("python", "docutils-0.21.2-states.py"),
    ("rust", "regex-syntax-0.8.12-parse.rs"),
    ("go", "go-1.21.13-parser.go"),
    ("c", "llama-cpp-sys-2-0.1.161-ggml.c"),
    ("cpp", "llama-cpp-sys-2-0.1.161-llama-vocab.cpp"),
    ("typescript", "mobx-6.13.5-src"),
    ("java", "capacitor-android-5.7.0-src"),
];

#[derive(Serialize, Deserialize, Default)]
struct HashCache {
    files: BTreeMap<String, HashEntry>,
}

#[derive(Serialize, Deserialize, Clone, PartialEq)]
struct HashEntry {
    size: u64,
    mtime_ns: u128,
    sha256: String,
}

/// The file's sha256, computed once and cached by (path, size, mtime): hashing
/// a 20 GB model on every run would cost a minute.
pub(crate) fn cached_sha256(path: &Path) -> Result<String> {
    let canonical = std::fs::canonicalize(path)?;
    let meta = std::fs::metadata(&canonical)?;
    let mtime_ns = meta.modified().ok().and_then(|m| m.duration_since(std::time::UNIX_EPOCH).ok()).map(|d| d.as_nanos()).unwrap_or(0);
    let key = canonical.display().to_string();
    let cache_path = cache_dir().join("sha256-cache.json");
    let mut cache: HashCache = std::fs::read_to_string(&cache_path).ok().and_then(|s| serde_json::from_str(&s).ok()).unwrap_or_default();
    if let Some(e) = cache.files.get(&key)
        && e.size == meta.len()
        && e.mtime_ns == mtime_ns
    {
        return Ok(e.sha256.clone());
    }
    let sha256 = file_sha256(&canonical)?;
    // Forget files that are gone (temporary copies, deleted downloads), so
    // that the cache holds only what can be asked for again.
    cache.files.retain(|k, _| Path::new(k).exists());
    cache.files.insert(key, HashEntry { size: meta.len(), mtime_ns, sha256: sha256.clone() });
    // A cache that cannot be written only costs time on the next run.
    if std::fs::create_dir_all(cache_dir()).is_ok()
        && let Ok(json) = serde_json::to_string_pretty(&cache)
    {
        let _ = write_atomic(&cache_path, json.as_bytes());
    }
    Ok(sha256)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_are_read_to_their_limit_and_no_further() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"12345").unwrap();
        assert_eq!(read_input(&file, 5).unwrap(), b"12345");
        let e = read_input(&file, 4).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::FileTooLarge);
        assert_eq!(e.to_string(), "5 bytes, over the limit of 4 bytes (4 B) posrecall reads from one such file");
        assert_eq!(read_input(dir.path(), 5).unwrap_err().kind(), std::io::ErrorKind::IsADirectory);
        // A device reports a size of 0 and never ends: refused unread.
        let e = read_input(Path::new("/dev/zero"), 5).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{e}");
        assert!(e.to_string().starts_with("not a regular file"), "{e}");
        assert_eq!(read_input(&dir.path().join("missing"), 5).unwrap_err().kind(), std::io::ErrorKind::NotFound);
    }

    #[test]
    fn text_inputs_drop_a_byte_order_mark_and_refuse_other_encodings() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("t");
        std::fs::write(&file, "\u{feff}{}").unwrap();
        assert_eq!(read_text(&file).unwrap(), "{}");
        std::fs::write(&file, b"ab\xff").unwrap();
        assert_eq!(read_text(&file).unwrap_err().to_string(), "not UTF-8 text (invalid byte at offset 2)");
    }
}
