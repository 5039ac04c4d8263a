//! Renaming a corpus's declared function names, to tell recall from memory.
//!
//! A model may have memorised a famous library during training and answer
//! without reading the context. Renaming every declared function (and every
//! use of those names as plain identifiers) to fresh, seeded identifiers makes
//! the file unlike its training copy while the code keeps its structure: only
//! identifiers change, so every line keeps its line number and indentation.

use crate::corpus::Language;
use anyhow::{Result, bail};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{BTreeMap, HashSet};

/// The renamed text and the mapping old name → new name (sorted by old name).
#[derive(Debug, Clone)]
pub struct Renamed {
    pub text: String,
    pub mapping: BTreeMap<String, String>,
}

/// Renames every name declared by a function declaration in `text`, and every
/// identifier that refers to one by name, to fresh identifiers of the same
/// length drawn with a ChaCha8 RNG seeded with `seed`. Property names (`obj.name`) and strings
/// are left alone: they are not references to the declaration.
pub fn rename(text: &str, language: &dyn Language, seed: u64) -> Result<Renamed> {
    let parsed = language.functions(text)?;
    let declared: HashSet<&str> = parsed.functions.iter().map(|f| f.name.as_str()).collect();
    let mut names: Vec<&str> = declared.iter().copied().collect();
    names.sort_unstable();

    // Fresh names: never an identifier-like word already in the file, nor a
    // word of the language (`do`, `in`, `let` are short enough to be drawn).
    let taken: HashSet<&str> = text
        .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '$'))
        .filter(|w| !w.is_empty())
        .chain(language.reserved_words().iter().copied())
        .collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut used = HashSet::new();
    let mut mapping = BTreeMap::new();
    for name in names {
        // Same byte length as the old name whenever possible: byte offsets,
        // and with them depths and the sampled targets, stay the same as in
        // the original file, so original and renamed runs ask about the same
        // functions.
        let mut len = name.len().max(1);
        let mut tries = 0;
        let fresh = loop {
            let candidate = fresh_name(&mut rng, len);
            if !taken.contains(candidate.as_str()) && used.insert(candidate.clone()) {
                break candidate;
            }
            tries += 1;
            if tries % 1000 == 0 {
                len += 1;
            }
        };
        mapping.insert(name.to_string(), fresh);
    }

    let spans = language.identifier_spans(text, &|s| mapping.contains_key(s))?;
    let mut out = String::with_capacity(text.len() + text.len() / 16);
    let mut at = 0;
    for (start, end) in spans {
        if start < at || end > text.len() {
            bail!("overlapping identifiers at byte {start}");
        }
        out.push_str(&text[at..start]);
        out.push_str(&mapping[&text[start..end]]);
        at = end;
    }
    out.push_str(&text[at..]);
    Ok(Renamed { text: out, mapping })
}

/// A pronounceable identifier of `len` ASCII letters: consonants and vowels
/// in turn, e.g. `tavoriq`.
fn fresh_name(rng: &mut ChaCha8Rng, len: usize) -> String {
    const C: &[u8] = b"bdfgklmnprstvz";
    const V: &[u8] = b"aeiou";
    (0..len)
        .map(|i| {
            let set = if i % 2 == 0 { C } else { V };
            set[rng.random_range(0..set.len())] as char
        })
        .collect()
}
