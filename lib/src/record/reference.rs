//! Reference files: a run's next-token distributions on the forced tokens,
//! kept so that later runs can be measured against them (`bench
//! --save-reference FILE`, `bench --reference FILE`; docs/METHOD.md §4d).
//!
//! A reference file is `POSRECALL-REFERENCE\n`, the header's length as a
//! little-endian u64, the header (JSON), then per target and per scored forced
//! token the reference's top K: K token ids (u32), their K log-probabilities
//! (f32), the mass of every other token (f32), and the log-probability of
//! the forced token itself (f32), all little-endian. A
//! sidecar `FILE.sha256` holds the file's sha256, as for the prefix cache:
//! both are written atomically and the file is verified before it is read.

use crate::score::kld::TopK;
use crate::settings::ContextConfig;
use crate::support::fsutil::{sha256_hex, write_atomic};
use crate::targets::crop::Crop;
use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

const MAGIC: &[u8] = b"POSRECALL-REFERENCE\n";
/// The format written; others are refused. Format 2 added the forced
/// token's own log-probability to each record (llama-perplexity's Δp).
pub(crate) const FORMAT: u32 = 2;
/// Tokens kept per forced position unless asked otherwise: on SmolLM2 the
/// divergence over the top 256 came within 2% of the whole vocabulary's
/// (docs/METHOD.md §4d has the measurement).
pub const DEFAULT_TOP_K: usize = 256;
/// The most tokens kept per position (the largest vocabularies are ~260K).
pub(crate) const MAX_TOP_K: usize = 1 << 20;
/// The largest reference file read: it is read whole. At the default top K
/// a forced token takes about 2 KB, so 16 questions of 20 lines take tens
/// of MB; this is room for long ladders and large K, and a bound.
pub(crate) const MAX_REFERENCE_BYTES: u64 = 4 << 30;

/// Everything that must be the same for two runs' forced tokens to be the
/// same tokens after the same text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Identity {
    pub n_vocab: usize,
    /// sha256 over every token's text, in id order.
    pub vocab_sha256: String,
    pub corpus_sha256: String,
    pub crop: Crop,
    /// sha256 of the evaluated prefix text (template, file, boundary).
    pub prefix_sha256: String,
    pub probe: String,
    pub lines: usize,
    /// How the questions pointed at their functions (the chat probe's
    /// question differs, and the forced lines follow it); absent for
    /// `name`, as in references made before it could be chosen.
    #[serde(default, skip_serializing_if = "crate::targets::Anchor::is_default")]
    pub anchor: crate::targets::Anchor,
}

/// The reference run's model and context, for the record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Origin {
    pub model_sha256: String,
    /// The build label (file name unless `--build`).
    pub build: String,
    pub context: ContextConfig,
    /// The CPU kernels that computed it (`runtime.cpu_features` of its run;
    /// absent in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_features: Option<Vec<String>>,
}

/// One target's forced text as the reference fed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RefTarget {
    pub name: String,
    /// The code-fence line the forced text opened with (may be empty); a
    /// compared run feeds the same, whatever its own answer opened with.
    pub scaffold: String,
    /// Every forced token id, scaffold included.
    pub tokens: Vec<i32>,
    /// How many of them are scored (and have a stored distribution).
    pub scored: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub format: u32,
    /// Tokens stored per position (at most the vocabulary).
    pub top_k: usize,
    pub identity: Identity,
    pub source: Origin,
    pub targets: Vec<RefTarget>,
}

/// A reference: the header and, per target, the stored distributions.
#[derive(Debug, Clone)]
pub struct Reference {
    pub header: Header,
    pub path: PathBuf,
    pub sha256: String,
    pub entries: Vec<Vec<TopK>>,
}

/// Why a reference cannot measure this run. The messages name no flag.
/// Needs no hint: it reaches the user inside `bench::ReferenceMismatch`,
/// which the face words with the flag that named the reference.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Mismatch {
    #[error("it was made with another vocabulary ({theirs} tokens, against {ours} here): another model family")]
    Vocabulary { theirs: usize, ours: usize },
    #[error("it was made with another vocabulary of the same size (the token texts differ)")]
    VocabularyText,
    #[error("it was made on another corpus (sha256 {theirs}…, this run's is {ours}…)")]
    Corpus { theirs: String, ours: String },
    #[error("it kept other lines of the corpus ({theirs}, this run keeps {ours})")]
    Crop { theirs: String, ours: String },
    #[error("it used the {theirs} probe, this run the {ours} probe")]
    Probe { theirs: String, ours: String },
    #[error("its prompt prefix differs (another chat template, renaming or prompt boundary)")]
    Prefix,
    #[error("it asked for {theirs} lines per target, this run for {ours}")]
    Lines { theirs: usize, ours: usize },
    #[error("it asked about each function by its {theirs}, this run by its {ours}")]
    Anchor { theirs: crate::targets::Anchor, ours: crate::targets::Anchor },
    #[error("it has no target named `{0}` (another target set or seed)")]
    MissingTarget(String),
    #[error("the forced text of `{0}` tokenizes differently here")]
    Tokens(String),
    #[error("it scores {theirs} tokens of `{name}`, this run {ours}")]
    Scored { name: String, theirs: usize, ours: usize },
}

impl Identity {
    /// The first way `self` (the reference's) differs from `ours`.
    pub fn check(&self, ours: &Identity) -> Result<(), Mismatch> {
        if self.n_vocab != ours.n_vocab {
            return Err(Mismatch::Vocabulary { theirs: self.n_vocab, ours: ours.n_vocab });
        }
        if self.vocab_sha256 != ours.vocab_sha256 {
            return Err(Mismatch::VocabularyText);
        }
        if self.corpus_sha256 != ours.corpus_sha256 {
            let short = |s: &str| s.chars().take(12).collect::<String>();
            return Err(Mismatch::Corpus { theirs: short(&self.corpus_sha256), ours: short(&ours.corpus_sha256) });
        }
        let lines = |c: &Crop| format!("lines {}..{}", c.first_line, c.last_line);
        if (self.crop.first_line, self.crop.last_line, &self.crop.sha256) != (ours.crop.first_line, ours.crop.last_line, &ours.crop.sha256)
        {
            // The same lines with other text: renamed identifiers (--rename)
            // or an edited range; "lines 1..306, this run keeps lines 1..306"
            // said nothing.
            let theirs = match (self.crop.first_line, self.crop.last_line) == (ours.crop.first_line, ours.crop.last_line) {
                true => format!("{} with other text: renamed identifiers or another file", lines(&self.crop)),
                false => lines(&self.crop),
            };
            return Err(Mismatch::Crop { theirs, ours: lines(&ours.crop) });
        }
        if self.probe != ours.probe {
            return Err(Mismatch::Probe { theirs: self.probe.clone(), ours: ours.probe.clone() });
        }
        if self.lines != ours.lines {
            return Err(Mismatch::Lines { theirs: self.lines, ours: ours.lines });
        }
        if self.anchor != ours.anchor {
            return Err(Mismatch::Anchor { theirs: self.anchor, ours: ours.anchor });
        }
        if self.prefix_sha256 != ours.prefix_sha256 {
            return Err(Mismatch::Prefix);
        }
        Ok(())
    }
}

/// A reference file that is not one, or not whole.
/// Needs no hint: it names the file that is not a whole reference, which
/// is what the user gave.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    #[error("reference {0}: no checksum file {0}.sha256 beside it")]
    NoSidecar(String),
    #[error("reference {0}: its sha256 does not match {0}.sha256 (corrupt or truncated)")]
    Checksum(String),
    #[error("reference {path}: {why}")]
    Malformed { path: String, why: String },
}

impl Reference {
    /// Reads and verifies `path` (its sidecar, its header, its size).
    pub fn load(path: &Path) -> Result<Reference> {
        let shown = path.display().to_string();
        let bytes =
            crate::support::fsutil::read_input(path, MAX_REFERENCE_BYTES).with_context(|| format!("cannot read reference {shown}"))?;
        let want = crate::support::fsutil::read_text(&sidecar(path)).map_err(|_| ReadError::NoSidecar(shown.clone()))?;
        let sha256 = sha256_hex(&bytes);
        if want.trim() != sha256 {
            return Err(ReadError::Checksum(shown).into());
        }
        let malformed = |why: &str| ReadError::Malformed { path: shown.clone(), why: why.to_string() };
        let rest = bytes.strip_prefix(MAGIC).ok_or_else(|| malformed("not a posrecall reference file"))?;
        let (len, rest) = rest.split_first_chunk::<8>().ok_or_else(|| malformed("no header"))?;
        let len = usize::try_from(u64::from_le_bytes(*len)).map_err(|_| malformed("header too long"))?;
        if len > rest.len() {
            return Err(malformed("the header is cut short").into());
        }
        let header: Header = serde_json::from_slice(&rest[..len]).map_err(|e| malformed(&format!("bad header ({e})")))?;
        if header.format == 1 {
            return Err(malformed(
                "format 1, made by an older posrecall before references kept the forced token's probability (this posrecall \
                 reads format 2): save the reference again with this posrecall",
            )
            .into());
        }
        if header.format != FORMAT {
            return Err(malformed(&format!("format {} (this posrecall reads format {FORMAT})", header.format)).into());
        }
        let k = header.top_k;
        let record = k.checked_mul(8).and_then(|b| b.checked_add(8)).ok_or_else(|| malformed("bad top_k"))?;
        let scored: usize = header.targets.iter().map(|t| t.scored).sum();
        let body = &rest[len..];
        if k == 0 || scored.checked_mul(record) != Some(body.len()) {
            return Err(malformed("its size does not match its header").into());
        }
        if header.targets.iter().any(|t| t.scored > t.tokens.len()) {
            return Err(malformed("a target scores more tokens than it forces").into());
        }
        let mut records = body.chunks_exact(record).map(|r| decode(r, k));
        let entries: Vec<Vec<TopK>> = header.targets.iter().map(|t| records.by_ref().take(t.scored).collect()).collect();
        for (t, e) in header.targets.iter().zip(&entries) {
            if let Some((i, why)) = e.iter().enumerate().find_map(|(i, r)| check_record(r, header.identity.n_vocab).err().map(|w| (i, w))) {
                return Err(malformed(&format!("the distribution at forced token {} of `{}` {why}", i + 1, t.name)).into());
            }
        }
        Ok(Reference { header, path: path.to_path_buf(), sha256, entries })
    }

    /// The forced text (scaffold and tokens) and stored distributions of
    /// target `name`; whether this run feeds the same tokens is checked by
    /// the caller (`bench::check_reference`).
    pub fn target(&self, name: &str) -> Result<(&RefTarget, &[TopK]), Mismatch> {
        let i = self.header.targets.iter().position(|t| t.name == name).ok_or_else(|| Mismatch::MissingTarget(name.to_string()))?;
        Ok((&self.header.targets[i], &self.entries[i]))
    }
}

/// Whether a stored distribution is one: finite log-probabilities of at
/// most 0, most likely first, distinct ids in the vocabulary, and a rest
/// that makes the probabilities sum to 1 (to f32 rounding). A checksum only
/// says the file is whole; this says it holds distributions.
fn check_record(r: &TopK, n_vocab: usize) -> Result<(), &'static str> {
    const EPS: f32 = 1e-3;
    if r.logprobs.iter().chain([&r.forced]).any(|l| !l.is_finite() || *l > EPS) || !r.rest.is_finite() {
        return Err("holds a log-probability that is not finite or is above 0");
    }
    if r.logprobs.windows(2).any(|w| w[1] > w[0] + EPS) {
        return Err("is not ordered most likely first");
    }
    if r.ids.iter().any(|&id| id as usize >= n_vocab) {
        return Err("names a token outside the vocabulary");
    }
    let mut ids = r.ids.clone();
    ids.sort_unstable();
    if ids.windows(2).any(|w| w[0] == w[1]) {
        return Err("names a token twice");
    }
    let mass: f64 = r.logprobs.iter().map(|l| (*l as f64).exp()).sum::<f64>() + r.rest as f64;
    if !(-(EPS as f64)..=1.0 + EPS as f64).contains(&(r.rest as f64)) || (mass - 1.0).abs() > 1e-2 {
        return Err("does not sum to 1");
    }
    Ok(())
}

fn decode(record: &[u8], k: usize) -> TopK {
    let word = |i: usize| <[u8; 4]>::try_from(&record[4 * i..4 * i + 4]).unwrap_or_default();
    TopK {
        ids: (0..k).map(|i| u32::from_le_bytes(word(i))).collect(),
        logprobs: (k..2 * k).map(|i| f32::from_le_bytes(word(i))).collect(),
        rest: f32::from_le_bytes(word(2 * k)),
        forced: f32::from_le_bytes(word(2 * k + 1)),
    }
}

/// The sidecar holding a reference's sha256.
pub fn sidecar(path: &Path) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(".sha256");
    PathBuf::from(s)
}

/// Writes a reference and its sidecar, each atomically (the file first, so a
/// crash never leaves a sidecar that vouches for a missing file). `made`: the
/// name is one posrecall made in a folder the user gave (a sweep's `.ref`),
/// so both files are written onto their names, never through a symbolic
/// link planted there while the run went on; a name the user gave is
/// written through a link, as a shell's `>` does.
pub fn save(path: &Path, header: &Header, entries: &[Vec<TopK>], made: bool) -> Result<()> {
    let json = serde_json::to_vec(header)?;
    let k = header.top_k;
    let scored: usize = entries.iter().map(Vec::len).sum();
    let mut bytes = Vec::with_capacity(MAGIC.len() + 8 + json.len() + scored * (8 * k + 8));
    bytes.extend_from_slice(MAGIC);
    bytes.extend_from_slice(&(json.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&json);
    for e in entries.iter().flatten() {
        if e.ids.len() != k || e.logprobs.len() != k {
            bail!("a stored distribution has {} tokens, not {k}", e.ids.len());
        }
        e.ids.iter().for_each(|i| bytes.extend_from_slice(&i.to_le_bytes()));
        e.logprobs.iter().for_each(|l| bytes.extend_from_slice(&l.to_le_bytes()));
        bytes.extend_from_slice(&e.rest.to_le_bytes());
        bytes.extend_from_slice(&e.forced.to_le_bytes());
    }
    let write = if made { crate::support::fsutil::write_atomic_here } else { write_atomic };
    write(path, &bytes)?;
    write(&sidecar(path), format!("{}\n", sha256_hex(&bytes)).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{CtxSize, FlashAttn, KvType};
    use crate::targets::crop::CropMode;

    fn header(k: usize, scored: &[usize]) -> Header {
        Header {
            format: FORMAT,
            top_k: k,
            identity: Identity {
                n_vocab: 10,
                vocab_sha256: "v".into(),
                corpus_sha256: "c".repeat(64),
                crop: Crop { mode: CropMode::Head, first_line: 1, last_line: 9, sha256: "k".into() },
                prefix_sha256: "p".into(),
                probe: "chat".into(),
                lines: 20,
                anchor: Default::default(),
            },
            source: Origin {
                model_sha256: "m".into(),
                build: "b".into(),
                context: ContextConfig::sequential(CtxSize::MIN, (KvType::F16, KvType::F16), FlashAttn::Auto, false, None, 0),
                cpu_features: None,
            },
            targets: scored
                .iter()
                .enumerate()
                .map(|(i, &n)| RefTarget { name: format!("t{i}"), scaffold: String::new(), tokens: vec![1; n], scored: n })
                .collect(),
        }
    }

    fn entry(x: u32) -> TopK {
        TopK { ids: vec![x, x + 1], logprobs: vec![-0.5, -1.5], rest: 1.0 - (-0.5f32).exp() - (-1.5f32).exp(), forced: -1.5 }
    }

    /// A reference posrecall names itself (a sweep's `.ref`) replaces a
    /// symbolic link planted at its name or its sidecar's, leaving what the
    /// links point at as it was; a name the user gave is written through
    /// its link.
    #[test]
    fn a_made_reference_replaces_a_planted_link_and_a_given_one_follows_it() {
        let dir = tempfile::tempdir().unwrap();
        let (victim, victim_sidecar) = (dir.path().join("victim"), dir.path().join("victim-sidecar"));
        for made in [true, false] {
            std::fs::write(&victim, "keep").unwrap();
            std::fs::write(&victim_sidecar, "keep").unwrap();
            let path = dir.path().join(format!("run-{made}.ref"));
            std::os::unix::fs::symlink(&victim, &path).unwrap();
            std::os::unix::fs::symlink(&victim_sidecar, sidecar(&path)).unwrap();
            save(&path, &header(2, &[1]), &[vec![entry(1)]], made).unwrap();
            let linked = std::fs::symlink_metadata(&path).unwrap().file_type().is_symlink();
            let kept = std::fs::read(&victim).unwrap() == b"keep" && std::fs::read(&victim_sidecar).unwrap() == b"keep";
            assert_eq!((linked, kept), (!made, made), "made {made}");
            assert!(Reference::load(&path).is_ok(), "made {made}");
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(256))]

        /// Any one byte of a reference changed, with its checksum made to
        /// match (as a hostile or careless user could), is refused or read;
        /// what is read holds only distributions and the header's counts.
        #[test]
        fn a_damaged_reference_with_a_matching_checksum_reads_only_distributions(at in 0usize..4096, byte in proptest::prelude::any::<u8>()) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("ref.bin");
            save(&path, &header(2, &[2, 1]), &[vec![entry(1), entry(3)], vec![entry(5)]], false).unwrap();
            let mut bytes = std::fs::read(&path).unwrap();
            let i = at % bytes.len();
            bytes[i] = byte;
            std::fs::write(&path, &bytes).unwrap();
            std::fs::write(sidecar(&path), format!("{}\n", crate::support::fsutil::sha256_hex(&bytes))).unwrap();
            if let Ok(r) = Reference::load(&path) {
                let n_vocab = r.header.identity.n_vocab;
                proptest::prop_assert_eq!(r.entries.len(), r.header.targets.len());
                for (t, records) in r.header.targets.iter().zip(&r.entries) {
                    proptest::prop_assert_eq!(records.len(), t.scored);
                    proptest::prop_assert!(t.scored <= t.tokens.len());
                    for rec in records {
                        proptest::prop_assert!(check_record(rec, n_vocab).is_ok(), "{:?}", rec);
                    }
                }
            }
        }
    }

    #[test]
    fn records_that_are_not_distributions_are_refused_whatever_the_checksum() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ref.bin");
        let bad = |f: &dyn Fn(&mut TopK)| {
            let mut e = entry(1);
            f(&mut e);
            e
        };
        for (record, why) in [
            (bad(&|e| e.logprobs[0] = f32::NAN), "not finite"),
            (bad(&|e| e.logprobs[0] = 50.0), "above 0"),
            (bad(&|e| e.logprobs.swap(0, 1)), "not ordered most likely first"),
            (bad(&|e| e.ids[1] = 10), "outside the vocabulary"),
            (bad(&|e| e.ids[1] = 1), "names a token twice"),
            (bad(&|e| e.rest = 0.9), "does not sum to 1"),
            (bad(&|e| e.rest = f32::INFINITY), "not finite"),
            (bad(&|e| e.forced = f32::NEG_INFINITY), "not finite"),
            (bad(&|e| e.forced = 0.5), "above 0"),
        ] {
            // save() recomputes the checksum: only the records are wrong.
            save(&path, &header(2, &[1, 1]), &[vec![entry(3)], vec![record]], false).unwrap();
            let e = Reference::load(&path).unwrap_err().to_string();
            assert!(e.contains("the distribution at forced token 1 of `t1`") && e.contains(why), "{why}: {e}");
        }
        let mut h = header(2, &[1]);
        h.targets[0].tokens.clear();
        save(&path, &h, &[vec![entry(1)]], false).unwrap();
        assert!(Reference::load(&path).unwrap_err().to_string().contains("scores more tokens than it forces"));
    }

    #[test]
    fn round_trip_and_corruption() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ref.bin");
        let h = header(2, &[2, 1]);
        let entries = vec![vec![entry(1), entry(3)], vec![entry(5)]];
        save(&path, &h, &entries, false).unwrap();
        let r = Reference::load(&path).unwrap();
        assert_eq!(r.header, h);
        assert_eq!(r.entries, entries);
        let (t, e) = r.target("t1").unwrap();
        assert_eq!((t.scored, e.len()), (1, 1));
        assert_eq!(r.target("nope").unwrap_err(), Mismatch::MissingTarget("nope".into()));

        // One flipped byte: the checksum refuses it.
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        let e = Reference::load(&path).unwrap_err().to_string();
        assert!(e.contains("does not match") && e.contains("corrupt or truncated"), "{e}");
        std::fs::remove_file(sidecar(&path)).unwrap();
        assert!(Reference::load(&path).unwrap_err().to_string().contains("no checksum file"));
    }

    /// A format-1 reference (no forced token's probability) is refused with
    /// what to do, not read with a Δp it cannot give.
    #[test]
    fn a_format_1_reference_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.ref");
        let mut h = header(2, &[1]);
        h.format = 1;
        save(&path, &h, &[vec![entry(1)]], false).unwrap();
        let e = Reference::load(&path).unwrap_err().to_string();
        assert!(e.contains("format 1, made by an older posrecall") && e.contains("save the reference again"), "{e}");
    }

    #[test]
    fn identity_names_the_first_difference() {
        let a = header(2, &[1]).identity;
        let mut b = a.clone();
        assert_eq!(a.check(&b), Ok(()));
        b.crop.last_line = 8;
        assert_eq!(a.check(&b).unwrap_err().to_string(), "it kept other lines of the corpus (lines 1..9, this run keeps lines 1..8)");
        b = a.clone();
        b.crop.sha256 = "renamed".into();
        assert_eq!(
            a.check(&b).unwrap_err().to_string(),
            "it kept other lines of the corpus (lines 1..9 with other text: renamed identifiers or another file, this run keeps lines 1..9)"
        );
        b = a.clone();
        b.n_vocab = 11;
        assert!(matches!(a.check(&b), Err(Mismatch::Vocabulary { theirs: 10, ours: 11 })));
        b = a.clone();
        b.prefix_sha256 = "q".into();
        assert_eq!(a.check(&b), Err(Mismatch::Prefix));
        // The crop mode alone does not matter: the same lines are the same text.
        b = a.clone();
        b.crop.mode = CropMode::Lines;
        assert_eq!(a.check(&b), Ok(()));
    }
}
