//! The `models.toml` file: read through serde, checked, and turned into the
//! runs it defines, each with the [`BenchOptions`](crate::bench::BenchOptions)
//! `bench` would be given. Nothing here touches a model; [`super::run`] runs
//! what this module describes. The schema is documented in docs/GUIDE.md,
//! "Sweeps".

use super::shard::Shard;
use crate::bench::instances::Item;
use crate::prompt::Probe;
use crate::prompt::template::{TemplateFile, TemplateVars, Think};
use crate::score::Normalize;
use crate::settings::{CtxSize, FlashAttn, KvRotation, KvType, RopeScaling};
use crate::settings::{Explain as _, Keys, Named};
use crate::targets::TargetSpec;
use crate::targets::crop::{CropMode, LineRange};
use anyhow::{Result, anyhow, bail};
use serde::{Deserialize, Deserializer};
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------
// The file as written: every named value is read into its enum here, with the
// enum's own serde spelling (the one run files use), so a bad value is refused
// by serde with the accepted values and its key path.

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    corpus: RawCorpus,
    #[serde(default)]
    params: RawParams,
    #[serde(default)]
    model: Vec<RawModel>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCorpus {
    path: Option<String>,
    dir: Option<String>,
    #[serde(default)]
    include: Vec<String>,
    #[serde(default)]
    exclude: Vec<String>,
    language: Option<String>,
    #[serde(default, deserialize_with = "chosen_crop")]
    crop: Option<CropMode>,
    crop_lines: Option<String>,
    max_tokens: Option<usize>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawParams {
    count: Option<usize>,
    lines: Option<usize>,
    pass: Option<usize>,
    seed: Option<u64>,
    normalize: Option<Normalize>,
    policy: Option<crate::score::Policy>,
    skip_blank: Option<bool>,
    rename: Option<bool>,
    anchor: Option<crate::targets::Anchor>,
    credit: Option<crate::score::Credit>,
    min_code_lines: Option<usize>,
    max_new_tokens: Option<usize>,
    threads: Option<i32>,
    flash_attn: Option<OneOrMany<FlashAttn>>,
    swa_full: Option<bool>,
    closed_book: Option<bool>,
    think: Option<Think>,
    think_budget: Option<usize>,
    template_kwargs: Option<toml::Table>,
    lengths: Option<String>,
    effective_at: Option<f64>,
    draft: Option<crate::decode::draft::DraftMode>,
    draft_max: Option<usize>,
    kv_rotation: Option<OneOrMany<KvRotation>>,
}

/// A value or a list of them: `kv_rotation = "off"` or `["auto", "off"]`.
#[derive(Debug, Clone)]
enum OneOrMany<T> {
    One(T),
    Many(Vec<T>),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for OneOrMany<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<OneOrMany<T>, D::Error> {
        // A visitor, not serde's untagged enum, so that a bad value is
        // refused in the value's own words (an unknown name lists the
        // accepted ones) instead of "did not match any variant".
        struct V<T>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for V<T> {
            type Value = OneOrMany<T>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a value or a list of values")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<OneOrMany<T>, E> {
                T::deserialize(serde::de::IntoDeserializer::<E>::into_deserializer(v)).map(OneOrMany::One)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, seq: A) -> Result<OneOrMany<T>, A::Error> {
                Vec::<T>::deserialize(serde::de::value::SeqAccessDeserializer::new(seq)).map(OneOrMany::Many)
            }
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

impl<T: Clone> OneOrMany<T> {
    fn to_vec(&self) -> Vec<T> {
        match self {
            OneOrMany::One(x) => vec![x.clone()],
            OneOrMany::Many(v) => v.clone(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModel {
    name: String,
    path: String,
    build: Option<String>,
    kv: Vec<KvPair>,
    gpu_layers: Option<u32>,
    /// A context size or a list of them, each an entry of its own.
    ctx: Option<toml::Value>,
    /// One probe or a list of them, each an entry of its own.
    probe: Option<OneOrMany<Probe>>,
    /// The KV configuration whose run is the model's reference.
    reference_kv: Option<KvPair>,
    /// `reference_kv`'s old name, still read (on `bench` a reference is a
    /// file); messages name the key the file wrote.
    reference: Option<KvPair>,
    think: Option<Think>,
    template_kwargs: Option<toml::Table>,
    chat_template: Option<String>,
    rope_scaling: Option<RopeScaling>,
    rope_scale: Option<f64>,
    rope_freq_base: Option<f64>,
    rope_freq_scale: Option<f64>,
    yarn_orig_ctx: Option<u32>,
    /// Rotation modes, crossed with `kv` (default: `[params]`'s, else auto).
    kv_rotation: Option<OneOrMany<KvRotation>>,
}

/// A `kv` entry: `"q8_0"` (K and V) or `"q8_0/f16"` (K/V). The text is kept
/// as written for the messages about the entry as a whole (listed twice, not
/// one of the model's).
#[derive(Debug)]
struct KvPair {
    written: String,
    pair: (KvType, KvType),
}

impl<'de> Deserialize<'de> for KvPair {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<KvPair, D::Error> {
        // A visitor rather than reading a String first: an error raised while
        // the string is visited carries the string's place in the file.
        struct Entry;
        impl serde::de::Visitor<'_> for Entry {
            type Value = KvPair;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a KV type, or K/V")
            }
            fn visit_str<E: serde::de::Error>(self, written: &str) -> Result<KvPair, E> {
                // The spelling `bench --kv` reads too; a bad half is worded
                // as serde words an unknown name.
                let p: crate::settings::KvPair = written.parse().map_err(E::custom)?;
                Ok(KvPair { written: written.to_string(), pair: (p.k, p.v) })
            }
        }
        d.deserialize_str(Entry)
    }
}

/// `corpus.crop`: one of the modes a user chooses. `lines` is what a sweep
/// records when it keeps a range given by `crop_lines` (or shared by every
/// model), never a mode to ask for, so it is refused as serde refuses any
/// other unknown name.
fn chosen_crop<'de, D: Deserializer<'de>>(d: D) -> Result<Option<CropMode>, D::Error> {
    let mode = CropMode::deserialize(d)?;
    if CropMode::CHOSEN.contains(&mode) {
        return Ok(Some(mode));
    }
    let names: Vec<String> = CropMode::CHOSEN.iter().map(|m| format!("`{}`", m.as_str())).collect();
    Err(serde::de::Error::custom(format!("unknown variant `{}`, expected one of {}", mode.as_str(), names.join(", "))))
}

// ---------------------------------------------------------------------------
// The sweep, checked.

/// One entry of a sweep: a `[[model]]` at one of its context sizes and
/// probes (or a `bench` list's model at one of the list's), checked and with
/// its path expanded. It holds only what an entry may set over the sweep's
/// [`Sweep::base`] options, and the lists its runs cross.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelEntry {
    /// The run files' name: the model's, with `-ctx_N` and `-probe_P` where
    /// its `ctx` or `probe` list has more than one.
    pub name: String,
    pub path: PathBuf,
    /// `path` as the file wrote it, its variables unexpanded: what messages
    /// show (a variable's value, a token say, is never printed).
    pub path_as_written: String,
    /// The build label; `None`: the base's (a sweep's is the file name, as `bench`).
    pub build: Option<String>,
    /// (K, V) per KV configuration, in the order given.
    pub kv: Vec<(KvType, KvType)>,
    /// Rotation modes, each crossed with every KV entry; the first is the
    /// reference run's.
    pub kv_rotation: Vec<KvRotation>,
    /// Flash attention settings, each crossed with every KV entry and
    /// rotation mode.
    pub flash_attn: Vec<FlashAttn>,
    /// `None`: the base's (all layers when the build has a GPU backend, as `bench`).
    pub gpu_layers: Option<u32>,
    pub ctx: CtxSize,
    pub probe: Probe,
    /// The KV configuration (one of `kv`) whose run is the reference of the
    /// entry's other runs (`reference_kv = "f16"`): it saves its forced
    /// distributions and they are measured against them.
    pub reference_kv: Option<(KvType, KvType)>,
    /// The model's own `think`, over the base's.
    pub think: Option<Think>,
    /// The model's own `template_kwargs`, added to the base's.
    pub template_kwargs: serde_json::Map<String, serde_json::Value>,
    /// A Jinja template file to render instead of the GGUF's (`chat_template`).
    pub chat_template: Option<PathBuf>,
    /// Context extension (`rope_scaling`, `rope_scale`, `rope_freq_base`,
    /// `rope_freq_scale`, `yarn_orig_ctx`, as `bench`'s flags); `None`: the base's.
    pub rope: Option<crate::settings::Rope>,
}

impl ModelEntry {
    /// The model's runs, in the order they run: each KV entry with each
    /// rotation mode with each flash attention setting, by the one engine
    /// of lists ([`crate::bench::instances::cross`]).
    pub fn items(&self) -> Vec<Item> {
        crate::bench::instances::cross(&self.kv, &self.kv_rotation, &self.flash_attn)
    }
}

/// The entries of one model: each context size with each probe, context
/// sizes slower (the order of `bench`'s lists, docs/GUIDE.md "Lists"),
/// named `NAME-ctx_N` and `-probe_P` where that list has more than one.
fn crossed(name: &str, ctx: &[CtxSize], probe: &[Probe]) -> Vec<(String, CtxSize, Probe)> {
    let mut out = Vec::with_capacity(ctx.len() * probe.len());
    for &c in ctx {
        for &p in probe {
            let mut entry = name.to_string();
            if ctx.len() > 1 {
                entry.push_str(&format!("-ctx_{c}"));
            }
            if probe.len() > 1 {
                entry.push_str(&format!("-probe_{}", p.as_str()));
            }
            out.push((entry, c, p));
        }
    }
    out
}

/// A whole sweep, checked: one set of options every run starts from, and
/// the entries that each set some of them.
#[derive(Debug, Clone)]
pub struct Sweep {
    /// The file it was read from (as given), for messages.
    pub file: PathBuf,
    /// `None`: the default corpus.
    pub corpus: Option<PathBuf>,
    /// `corpus` as the file wrote it, for messages (as [`ModelEntry::path_as_written`]).
    pub corpus_as_written: Option<String>,
    /// `[corpus] dir`, `include`, `exclude` and `language`: a folder as the
    /// corpus, and the language of its files (`None`: by extension).
    pub corpus_dir: Option<PathBuf>,
    pub include: Vec<String>,
    pub exclude: Vec<String>,
    pub language: Option<String>,
    /// Every run's options before its entry's and its item's: `[corpus]` and
    /// `[params]` (a `bench` list: its flags). `matrix`'s flags set its
    /// decoding and prefix cache.
    pub base: crate::bench::BenchOptions,
    pub models: Vec<ModelEntry>,
    /// The first run of the first entry is every entry's reference (a
    /// `bench` list), not each entry's own `reference_kv` run (`models.toml`).
    pub first_is_reference: bool,
}

/// One (model × KV) combination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SweepRun {
    /// `<model name>__<kv_k>-<kv_v>`: the run file's stem and the shard key.
    pub id: String,
    /// Index into [`Sweep::models`].
    pub model: usize,
    pub kv_k: KvType,
    pub kv_v: KvType,
    pub rotation: KvRotation,
    pub flash_attn: FlashAttn,
}

impl SweepRun {
    /// Run `item` of model `model` named `name`; `name_flash`: its model
    /// lists more than one flash attention setting, so the id says which.
    fn new(model: usize, name: &str, item: Item, name_flash: bool) -> SweepRun {
        // Rotation `off` is named; `auto` is not, so that files named before
        // rotation could be chosen keep their names; flash attention only
        // where the model's runs differ by it, for the same reason.
        let rot = match item.rotation {
            KvRotation::Auto => String::new(),
            other => format!("-rot_{other}"),
        };
        let fa = if name_flash { format!("-fa_{}", item.flash_attn) } else { String::new() };
        SweepRun {
            id: format!("{name}__{}-{}{rot}{fa}", item.k.as_str(), item.v.as_str()),
            model,
            kv_k: item.k,
            kv_v: item.v,
            rotation: item.rotation,
            flash_attn: item.flash_attn,
        }
    }

    /// The run's item of its model.
    pub fn item(&self) -> Item {
        Item { k: self.kv_k, v: self.kv_v, rotation: self.rotation, flash_attn: self.flash_attn }
    }

    /// The run file in `dir`.
    pub fn file(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.json", self.id))
    }

    /// The reference file this run writes when it is its model's reference run.
    pub(crate) fn reference_file(&self, dir: &Path) -> PathBuf {
        dir.join(format!("{}.ref", self.id))
    }
}

/// What a run of a model with a reference does with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReferenceRole {
    /// This run is the reference: it saves its distributions.
    Saves,
    /// This run is measured against the reference run with this id.
    MeasuredAgainst(String),
}

/// How variables in paths are looked up: the process environment, with
/// `POSRECALL_CACHE` defaulting to [`crate::support::fsutil::cache_dir`].
pub fn process_env(name: &str) -> Option<String> {
    if name == "POSRECALL_CACHE" {
        return Some(crate::support::fsutil::cache_dir().to_string_lossy().into_owned());
    }
    std::env::var(name).ok()
}

/// Expands `${VAR}` and `$VAR` (and `$$` to `$`); an unset variable is an
/// error that names it.
///
/// Hand-written rather than `shellexpand::env_with_context` (3.1), which
/// agrees on `$VAR`, `${VAR}`, `$$` and unset names but not on the rest of
/// what this accepts: it keeps an unclosed `${` as text (a typo in a model
/// path would surface as a missing file, not at the `${`), reads `$1A` and
/// any Unicode letters as a name (here a name is `[A-Za-z_][A-Za-z0-9_]*`,
/// and `$1` stays text), and adds `${VAR:-default}`, which the sweep file
/// does not document.
pub fn expand_vars(s: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, tail) = if let Some(braced) = after.strip_prefix('{') {
            let end = braced.find('}').ok_or_else(|| format!("`${{` without a closing `}}` in `{s}`"))?;
            (&braced[..end], &braced[end + 1..])
        } else if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
            continue;
        } else {
            let end = after
                .char_indices()
                .find(|&(i, c)| !(c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit())))
                .map(|(i, _)| i)
                .unwrap_or(after.len());
            if end == 0 {
                // A `$` that starts no name is itself.
                out.push('$');
                rest = after;
                continue;
            }
            (&after[..end], &after[end..])
        };
        let valid =
            !name.is_empty() && name.chars().enumerate().all(|(i, c)| c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit()));
        if !valid {
            return Err(format!("`${{{name}}}` is not a variable name"));
        }
        let value = env(name).ok_or_else(|| format!("environment variable {name} is not set"))?;
        out.push_str(&value);
        rest = tail;
    }
    out.push_str(rest);
    Ok(out)
}

/// The longest model name.
const MAX_NAME: usize = 128;

/// Model names become file names and shard keys.
fn valid_name(name: &str) -> bool {
    // Short enough that NAME__KVK-KVV.json.tmp.PID stays within a file name's 255 bytes.
    name.len() <= MAX_NAME
        && !name.is_empty()
        && !name.starts_with('.')
        && !name.contains("__")
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

impl Sweep {
    /// Reads and checks `path`: every model file must exist (a hub
    /// reference is resolved, from the cache or the hub, when its runs
    /// start). Errors are one line that names the file and the key.
    pub fn load(path: &Path) -> Result<Sweep> {
        let text = crate::support::fsutil::read_text(path).map_err(|e| anyhow!("cannot read sweep file {}: {e}", path.display()))?;
        let sweep = Sweep::parse(&text, path, &process_env)?;
        let missing = |p: &Path| match std::fs::metadata(p) {
            Ok(m) if m.is_dir() => "is a folder, not a file",
            Ok(_) => "is not a regular file (a FIFO, socket or device): posrecall reads files",
            Err(_) => "does not exist",
        };
        for m in &sweep.models {
            if !m.path.is_file() && !crate::support::hub::is_reference(&m.path.to_string_lossy()) {
                bail!("{}: model `{}`: path: {} {}", path.display(), m.name, m.path_as_written, missing(&m.path));
            }
        }
        if let Some(c) = &sweep.corpus
            && !c.is_file()
        {
            let shown = sweep.corpus_as_written.clone().unwrap_or_else(|| c.display().to_string());
            bail!("{}: corpus.path: {shown} {}", path.display(), missing(c));
        }
        if let Some(d) = &sweep.corpus_dir
            && !d.is_dir()
        {
            bail!("{}: corpus.dir: {} is not a folder", path.display(), d.display());
        }
        Ok(sweep)
    }

    /// Parses and checks the text of a sweep file (no file-system checks).
    /// Relative paths are taken from `path`'s folder.
    pub fn parse(text: &str, path: &Path, env: &dyn Fn(&str) -> Option<String>) -> Result<Sweep> {
        let file = path.display().to_string();
        let document = toml::Deserializer::parse(text).map_err(|e| toml_error(text, &file, &e))?;
        let raw: RawFile = serde_path_to_error::deserialize(document).map_err(|e| value_error(text, &file, &e))?;
        let r = Reader { file: &file, base: path.parent().unwrap_or(Path::new("")), env };
        let c = &raw.corpus;
        let corpus = c.path.as_deref().map(|p| r.resolve(p, "corpus.path")).transpose()?;
        let corpus_dir = c.dir.as_deref().map(|p| r.resolve(p, "corpus.dir")).transpose()?;
        if corpus.is_some() && corpus_dir.is_some() {
            bail!("{file}: corpus: give path or dir, not both");
        }
        if corpus_dir.is_none() && !(c.include.is_empty() && c.exclude.is_empty()) {
            bail!("{file}: corpus.include and corpus.exclude select files of corpus.dir, which is not set");
        }
        let language = r.language(c.language.as_deref())?;
        let p = &raw.params;
        let flash_attn = match &p.flash_attn {
            Some(list) => r.listed(crate::settings::Setting::FlashAttn, list, "params.flash_attn")?,
            None => vec![FlashAttn::default()],
        };
        let rotation = match &p.kv_rotation {
            Some(list) => r.listed(crate::settings::Setting::KvRotation, list, "params.kv_rotation")?,
            None => vec![KvRotation::Auto],
        };
        if raw.model.is_empty() {
            bail!("{file}: no [[model]] entries");
        }
        let base = r.base(c, p)?;
        let mut models: Vec<ModelEntry> = Vec::new();
        // The `[[model]]` each entry came from (a ctx or probe list makes
        // several of one), for messages.
        let mut from: Vec<usize> = Vec::new();
        for (i, m) in raw.model.iter().enumerate() {
            for entry in r.model_entries(i, m, &rotation, &flash_attn)? {
                if models.iter().any(|o| o.name == entry.name) {
                    bail!("{file}: model[{i}].name: `{}` is used twice", entry.name);
                }
                // Run files are named by the model (`NAME__K-V.json`): on a
                // case-insensitive file system (macOS, Windows) `Qwen` and
                // `qwen` would write one file, the second replacing the first.
                if let Some((k, o)) = models.iter().enumerate().find(|(_, o)| o.name.to_lowercase() == entry.name.to_lowercase()) {
                    let j = from[k];
                    bail!(
                        "{file}: model[{i}].name: `{}` and model[{j}]'s `{}` differ only in case, and their run files would be one \
                         file where case is not told apart; rename one",
                        entry.name,
                        o.name
                    );
                }
                models.push(entry);
                from.push(i);
            }
        }
        let sweep = Sweep {
            file: path.to_path_buf(),
            corpus,
            corpus_as_written: c.path.clone(),
            corpus_dir,
            include: c.include.clone(),
            exclude: c.exclude.clone(),
            language,
            base,
            models,
            first_is_reference: false,
        };
        sweep.validate(&Keys)?;
        Ok(sweep)
    }

    /// Checks every run's options by [`crate::bench::BenchOptions::validate`],
    /// the rules `bench` checks too, as `names` words them: first what the
    /// base sets (an error names the file and the key), then each run (it
    /// names the model too). `matrix` checks again once its flags are in.
    pub fn validate(&self, names: &dyn crate::settings::Names) -> Result<()> {
        let file = self.file.display();
        // The base alone, for an error in `[params]` or `[corpus]` to be told
        // as such. Its reasoning budget is for the thinking entries alone:
        // its range is checked here whether or not one thinks, and with
        // thinking by each thinking entry's run below.
        let mut base = self.base.clone();
        let budget = base.plan.think_budget.take();
        let checked = crate::bench::Numeric::ThinkBudget.check(budget.map(|n| n as i64)).map_err(crate::bench::Invalid::from);
        if let Err(e) = checked.and_then(|()| base.validate().map(drop)) {
            bail!("{file}: {}", e.explain(names));
        }
        for run in self.runs() {
            let m = &self.models[run.model];
            // The file is read later ([`Sweep::templates`]); the rules ask
            // only whether one is given.
            let template = m.chat_template.as_ref().map(|p| TemplateFile { path: p.clone(), text: String::new() });
            if let Err(e) = self.options(&run, template.as_ref(), Path::new("")).validate() {
                bail!("{file}: model `{}`: {}", m.name, e.explain(names));
            }
        }
        Ok(())
    }

    /// The sweep a `bench` list asks for ([`crate::bench::instances`]): an
    /// entry per model (`models`: its file and its run files' name), per
    /// context size in `ctx` and per probe in `probe` (named `-ctx_N`,
    /// `-probe_P` where the list has more than one), each running every
    /// item; the first run of the first entry is every run's reference
    /// unless `base` names a reference file or measures no forced pass.
    /// Every run's options are `base`'s with its entry's and item's
    /// settings. `corpus` is what the run reads (file or folder), so that no
    /// output lands on it.
    pub(crate) fn of_bench(
        models: &[(PathBuf, String)],
        base: crate::bench::BenchOptions,
        ctx: &[CtxSize],
        probe: &[Probe],
        items: &[Item],
        corpus: &crate::corpus::CorpusSpec,
    ) -> Sweep {
        fn distinct<T: PartialEq + Copy>(all: impl Iterator<Item = T>) -> Vec<T> {
            let mut out: Vec<T> = Vec::new();
            for x in all {
                if !out.contains(&x) {
                    out.push(x);
                }
            }
            out
        }
        let kv = distinct(items.iter().map(|i| (i.k, i.v)));
        let kv_rotation = distinct(items.iter().map(|i| i.rotation));
        let flash_attn = distinct(items.iter().map(|i| i.flash_attn));
        // The first item is the others' reference, unless one is given, or
        // no item has a forced pass to measure (`--no-forced`: recall only).
        let reference_kv = match (&base.reference, items.first()) {
            (None, Some(first)) if !base.decode.no_forced => Some((first.k, first.v)),
            _ => None,
        };
        let mut entries = Vec::with_capacity(models.len() * ctx.len() * probe.len());
        for (path, name) in models {
            for (entry_name, c, pr) in crossed(name, ctx, probe) {
                entries.push(ModelEntry {
                    name: entry_name,
                    path: path.clone(),
                    path_as_written: path.display().to_string(),
                    build: None,
                    kv: kv.clone(),
                    kv_rotation: kv_rotation.clone(),
                    flash_attn: flash_attn.clone(),
                    gpu_layers: None,
                    ctx: c,
                    probe: pr,
                    reference_kv: if entries.is_empty() { reference_kv } else { None },
                    think: None,
                    template_kwargs: Default::default(),
                    chat_template: None,
                    rope: None,
                });
            }
        }
        Sweep {
            file: models.first().map(|(p, _)| p.clone()).unwrap_or_default(),
            corpus: (!corpus.dir).then(|| corpus.path.clone()),
            corpus_as_written: (!corpus.dir).then(|| corpus.path.display().to_string()),
            corpus_dir: corpus.dir.then(|| corpus.path.clone()),
            include: Vec::new(),
            exclude: Vec::new(),
            language: None,
            base,
            models: entries,
            first_is_reference: true,
        }
    }

    /// Entry `i`'s template variables: the base's (which a completion-probe
    /// entry, rendering no template, does not take: they are for the
    /// sweep's chat models), with the entry's own `think` and
    /// `template_kwargs` over them.
    pub fn template_vars(&self, i: usize) -> TemplateVars {
        let m = &self.models[i];
        let mut t = match m.probe {
            Probe::Completion => TemplateVars::default(),
            _ => self.base.plan.template.clone(),
        };
        if let Some(think) = m.think {
            t.think = think;
        }
        t.kwargs.extend(m.template_kwargs.clone());
        t
    }

    /// Every model's `chat_template` file, read and checked, in model order.
    pub fn templates(&self) -> Result<Vec<Option<TemplateFile>>> {
        let mut templates = Vec::with_capacity(self.models.len());
        for (i, e) in self.models.iter().enumerate() {
            let file = match &e.chat_template {
                Some(path) => Some(
                    TemplateFile::load(path, &self.template_vars(i))
                        .map_err(|err| anyhow!("{}: model `{}`: chat_template: {err}", self.file.display(), e.name))?,
                ),
                None => None,
            };
            templates.push(file);
        }
        Ok(templates)
    }

    /// The corpus the sweep names: `[corpus] path` or `dir` with its globs
    /// and language, else the default corpus (of the language, when given).
    pub fn corpus_spec(&self) -> Result<crate::corpus::CorpusSpec, crate::corpus::CorpusSpecError> {
        crate::corpus::CorpusSpec::resolve(
            self.corpus.as_deref(),
            self.corpus_dir.as_deref(),
            self.language.as_deref(),
            &self.include,
            &self.exclude,
        )
    }

    /// One run's options, as `bench` would be given them: the base's, with
    /// what the run's entry and item set, and its part in the reference.
    /// `template` is the entry's checked template file ([`Sweep::templates`]),
    /// `out_dir` where the run's reference file is saved or read.
    pub fn options(&self, run: &SweepRun, template: Option<&TemplateFile>, out_dir: &Path) -> crate::bench::BenchOptions {
        let m = &self.models[run.model];
        let mut o = self.base.clone();
        o.plan.ctx = m.ctx;
        o.plan.probe = m.probe;
        o.plan.template = self.template_vars(run.model);
        if let Some(t) = template {
            o.plan.template_file = Some(t.clone());
        }
        // A sweep's reasoning budget is for its thinking models.
        if o.plan.template.think != Think::On {
            o.plan.think_budget = None;
        }
        o.context.kv = (run.kv_k, run.kv_v);
        o.context.kv_rotation = run.rotation;
        o.context.flash_attn = run.flash_attn;
        if let Some(layers) = m.gpu_layers {
            o.context.gpu_layers = layers;
        }
        if let Some(rope) = m.rope {
            o.context.rope = rope;
        }
        if m.build.is_some() {
            o.build = m.build.clone();
        }
        // A reference file named on the command line measures every run.
        if o.reference.is_none() {
            let role = self.reference_role(run);
            o.reference = match &role {
                Some(ReferenceRole::MeasuredAgainst(id)) => Some(out_dir.join(format!("{id}.ref"))),
                _ => None,
            };
            o.save_reference = (role == Some(ReferenceRole::Saves)).then(|| run.reference_file(out_dir));
            o.save_reference_made = o.save_reference.is_some();
        }
        o
    }

    /// Shard `shard`'s runs (every run without one), and how to say so:
    /// "shard K/N: x of the y runs" or "y runs".
    pub fn shard_runs(&self, shard: Option<Shard>) -> (Vec<SweepRun>, String) {
        let all = self.runs();
        match shard {
            Some(s) => {
                let mine = s.select(&all);
                let note = format!("shard {s}: {} of the {} runs", mine.len(), all.len());
                (mine, note)
            }
            None => {
                let note = format!("{} runs", all.len());
                (all, note)
            }
        }
    }

    /// The run's part in its model's reference, if the model has one.
    pub(crate) fn reference_role(&self, run: &SweepRun) -> Option<ReferenceRole> {
        let maker = self.reference_maker(run.model)?;
        Some(match maker == *run {
            true => ReferenceRole::Saves,
            false => ReferenceRole::MeasuredAgainst(maker.id),
        })
    }

    /// The run of model `i` that saves its reference: its `reference_kv`
    /// with its first rotation mode.
    fn reference_maker(&self, i: usize) -> Option<SweepRun> {
        let i = if self.first_is_reference { 0 } else { i };
        let m = &self.models[i];
        let (k, v) = m.reference_kv?;
        let item = Item { k, v, rotation: *m.kv_rotation.first()?, flash_attn: *m.flash_attn.first()? };
        Some(SweepRun::new(i, &m.name, item, m.flash_attn.len() > 1))
    }

    /// The reference run that `run` is measured against, if it is measured.
    pub(crate) fn reference_run_of(&self, run: &SweepRun) -> Option<SweepRun> {
        let ReferenceRole::MeasuredAgainst(_) = self.reference_role(run)? else { return None };
        self.reference_maker(run.model)
    }

    /// Every (model × KV) run, sorted by id (the order shards are cut in).
    pub fn runs(&self) -> Vec<SweepRun> {
        let mut runs: Vec<SweepRun> = self
            .models
            .iter()
            .enumerate()
            .flat_map(|(i, m)| m.items().into_iter().map(move |item| SweepRun::new(i, &m.name, item, m.flash_attn.len() > 1)))
            .collect();
        runs.sort_by(|a, b| a.id.cmp(&b.id));
        runs
    }
}

/// A TOML error as one line: the file, line and column, the table it is in
/// (as the file writes its header: `[[model]] #2` is the second model,
/// unless the error is on a header line itself), and toml's message.
fn toml_error(text: &str, file: &str, e: &toml::de::Error) -> anyhow::Error {
    one_line(text, file, e, None)
}

/// A value serde refused (an unknown name, a wrong type, a missing or unknown
/// key), as one line: the file, line and column, the key as the checks after
/// reading name it (`params.normalize`, `corpus.crop`; a model's keys after
/// its name: model `NAME`: kv[1]), and serde's message, which lists the
/// accepted names of an unknown one.
fn value_error(text: &str, file: &str, e: &serde_path_to_error::Error<toml::de::Error>) -> anyhow::Error {
    use serde_path_to_error::Segment;
    let dotted = |segments: &[&Segment]| {
        let mut key = String::new();
        for s in segments {
            match s {
                Segment::Seq { index } => key.push_str(&format!("[{index}]")),
                Segment::Map { key: k } | Segment::Enum { variant: k } => {
                    if !key.is_empty() {
                        key.push('.');
                    }
                    key.push_str(k);
                }
                Segment::Unknown => key.push_str(".?"),
            }
        }
        key
    };
    let segments: Vec<&Segment> = e.path().iter().collect();
    let key = match segments.as_slice() {
        [] => None,
        [Segment::Map { key }, Segment::Seq { index }, rest @ ..] if key == "model" => {
            // The model by its name, as every later message names it, where
            // the entry has one.
            let name = text
                .parse::<toml::Table>()
                .ok()
                .and_then(|t| t.get("model")?.as_array()?.get(*index)?.get("name")?.as_str().map(str::to_string));
            let who = name.map(|n| format!("model `{n}`")).unwrap_or_else(|| format!("model[{index}]"));
            Some(if rest.is_empty() { who } else { format!("{who}: {}", dotted(rest)) })
        }
        all => Some(dotted(all)),
    };
    one_line(text, file, e.inner(), key.as_deref())
}

/// `file:LINE:COL: ` then `key` (or else the table the error is in), then
/// toml's message joined into one line.
fn one_line(text: &str, file: &str, e: &toml::de::Error, key: Option<&str>) -> anyhow::Error {
    let at = e
        .span()
        .map(|s| {
            let before = &text[..s.start.min(text.len())];
            let line = before.matches('\n').count() + 1;
            let col = before.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
            let header = |l: &str| l.trim().split('#').next().unwrap_or("").trim().to_string();
            let on_header = text.lines().nth(line - 1).is_some_and(|l| l.trim_start().starts_with('['));
            let table = before
                .lines()
                .rev()
                .skip(1)
                .map(header)
                .find(|l| l.starts_with('['))
                .filter(|_| !on_header && key.is_none())
                .map(|t| {
                    let nth = before.lines().filter(|l| header(l) == t).count();
                    if t.starts_with("[[") { format!(" in {t} #{nth}") } else { format!(" in {t}") }
                })
                .unwrap_or_default();
            format!(":{line}:{col}{table}")
        })
        .unwrap_or_default();
    let key = key.map(|k| format!(" {k}:")).unwrap_or_default();
    let msg: Vec<&str> = e.message().lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    anyhow!("{file}{at}:{key} {}", msg.join(" "))
}

/// What checking a sweep file's values needs: its name for messages, its
/// folder for relative paths, and the environment for `$VAR`s.
struct Reader<'a> {
    file: &'a str,
    base: &'a Path,
    env: &'a dyn Fn(&str) -> Option<String>,
}

impl Reader<'_> {
    /// An error about `key`.
    fn err(&self, key: &str, e: String) -> anyhow::Error {
        anyhow!("{}: {key}: {e}", self.file)
    }

    /// A path with its variables expanded, relative to the file's folder.
    fn resolve(&self, s: &str, key: &str) -> Result<PathBuf> {
        let expanded = expand_vars(s, self.env).map_err(|e| self.err(key, e))?;
        let p = PathBuf::from(expanded);
        Ok(if p.is_relative() { self.base.join(p) } else { p })
    }

    /// A model's `path`: a file (relative to this file's folder), or a hub
    /// reference (`ORG/REPO[:QUANT]`, kept as written, resolved when the
    /// sweep runs) where no such file exists.
    fn model_path(&self, s: &str, key: &str) -> Result<PathBuf> {
        let path = self.resolve(s, key)?;
        let expanded = expand_vars(s, self.env).map_err(|e| self.err(key, e))?;
        Ok(match !path.exists() && crate::support::hub::is_reference(&expanded) {
            true => PathBuf::from(expanded),
            false => path,
        })
    }

    /// corpus.language, checked against the languages posrecall knows.
    fn language(&self, l: Option<&str>) -> Result<Option<String>> {
        let Some(l) = l else { return Ok(None) };
        match crate::corpus::language_named(l) {
            Some(l) => Ok(Some(l.name().to_string())),
            None => bail!("{}: corpus.language: unknown language `{l}` (known: {})", self.file, crate::corpus::language_names().join(", ")),
        }
    }

    /// `[corpus]` and `[params]` as the options every run starts from, by
    /// the one conversion of the file's keys; their rules are checked with
    /// the runs' ([`Sweep::validate`]).
    fn base(&self, c: &RawCorpus, p: &RawParams) -> Result<crate::bench::BenchOptions> {
        let crop_lines =
            c.crop_lines.as_deref().map(|s| s.parse::<LineRange>().map_err(|e| self.err("corpus.crop_lines", e))).transpose()?;
        let defaults = TargetSpec::default();
        let mut o = crate::bench::BenchOptions::default();
        o.plan.target = TargetSpec {
            count: p.count.unwrap_or(defaults.count),
            lines: p.lines.unwrap_or(defaults.lines),
            seed: p.seed.unwrap_or(defaults.seed),
            crop_lines,
            skip_blank: p.skip_blank.unwrap_or(defaults.skip_blank),
            rename: p.rename.unwrap_or(defaults.rename),
            pass: p.pass,
            normalize: p.normalize.or(defaults.normalize),
            policy: p.policy.unwrap_or(defaults.policy),
            anchor: p.anchor.unwrap_or(defaults.anchor),
            credit: p.credit.unwrap_or(defaults.credit),
            min_code_lines: p.min_code_lines.unwrap_or(defaults.min_code_lines),
        };
        o.plan.crop = c.crop.unwrap_or(CropMode::Head);
        o.plan.max_prefix_tokens = c.max_tokens;
        o.plan.max_new_tokens = p.max_new_tokens;
        o.plan.template =
            TemplateVars { think: p.think.unwrap_or_default(), kwargs: self.kwargs(p.template_kwargs.as_ref(), "params.template_kwargs")? };
        o.plan.think_budget = p.think_budget;
        o.context.threads = p.threads;
        o.context.swa_full = p.swa_full.unwrap_or(false);
        o.context.gpu_layers = crate::bench::default_gpu_layers();
        o.closed_book = p.closed_book.unwrap_or(false);
        o.lengths = p
            .lengths
            .as_deref()
            .map(|l| l.parse::<crate::bench::ladder::Lengths>().map_err(|e| anyhow!("{}: params.lengths: {e}", self.file)))
            .transpose()?;
        o.effective_at = p.effective_at.unwrap_or(crate::bench::ladder::DEFAULT_EFFECTIVE_AT);
        o.decode = crate::bench::DecodeOptions::default().drafting(p.draft, p.draft_max);
        Ok(o)
    }

    /// A TOML table of template variables as the JSON object they render as.
    fn kwargs(&self, t: Option<&toml::Table>, key: &str) -> Result<serde_json::Map<String, serde_json::Value>> {
        let Some(t) = t else { return Ok(Default::default()) };
        match serde_json::to_value(t) {
            Ok(serde_json::Value::Object(m)) => Ok(m),
            _ => Err(self.err(key, "not a table of values".into())),
        }
    }

    /// The `i`-th `[[model]]`, checked: one entry per context size and probe
    /// it lists.
    fn model_entries(&self, i: usize, m: &RawModel, rotation: &[KvRotation], flash_attn: &[FlashAttn]) -> Result<Vec<ModelEntry>> {
        use crate::settings::Setting;
        let file = self.file;
        let who = format!("model `{}`", m.name);
        if !valid_name(&m.name) {
            bail!(
                "{file}: model[{i}].name: `{}` is not a usable name (letters, digits, `.`, `_`, `-`; no `__`; at most {MAX_NAME} characters; it names the run files)",
                m.name
            );
        }
        let path = self.model_path(&m.path, &format!("{who}: path"))?;
        if m.kv.is_empty() {
            bail!("{file}: {who}: kv: empty; list at least one KV type, e.g. kv = [\"q8_0\"]");
        }
        let mut kv = Vec::new();
        for entry in &m.kv {
            if kv.contains(&entry.pair) {
                bail!("{file}: {who}: kv: `{}` is listed twice", entry.written);
            }
            kv.push(entry.pair);
        }
        let ctx = self.ctx(m.ctx.as_ref(), &format!("{who}: ctx"))?;
        let probe = match &m.probe {
            Some(list) => self.listed(Setting::Probe, list, &format!("{who}: probe"))?,
            None => vec![Probe::Auto],
        };
        let written = match (&m.reference_kv, &m.reference) {
            (Some(_), Some(_)) => bail!("{file}: {who}: reference_kv and reference (its old name) are both given; keep reference_kv"),
            (Some(s), None) => Some((s, "reference_kv")),
            (None, Some(s)) => Some((s, "reference")),
            (None, None) => None,
        };
        let reference_kv = match written {
            None => None,
            Some((r, key)) => {
                if !kv.contains(&r.pair) {
                    bail!(
                        "{file}: {who}: {key}: `{}` is not one of its kv entries; the reference is one of the model's own runs",
                        r.written
                    );
                }
                Some(r.pair)
            }
        };
        let template_kwargs = self.kwargs(m.template_kwargs.as_ref(), &format!("{who}: template_kwargs"))?;
        let chat_template = m.chat_template.as_deref().map(|p| self.resolve(p, &format!("{who}: chat_template"))).transpose()?;
        let rope = self.rope(m, &who)?;
        let kv_rotation = match &m.kv_rotation {
            Some(list) => self.listed(Setting::KvRotation, list, &format!("{who}: kv_rotation"))?,
            None => rotation.to_vec(),
        };
        let entry = |(name, ctx, probe)| ModelEntry {
            name,
            path: path.clone(),
            path_as_written: m.path.clone(),
            build: m.build.clone(),
            kv: kv.clone(),
            kv_rotation: kv_rotation.clone(),
            flash_attn: flash_attn.to_vec(),
            gpu_layers: m.gpu_layers,
            ctx,
            probe,
            reference_kv,
            think: m.think,
            template_kwargs: template_kwargs.clone(),
            chat_template: chat_template.clone(),
            rope,
        };
        Ok(crossed(&m.name, &ctx, &probe).into_iter().map(entry).collect())
    }

    /// A model's `ctx`: a size (`"auto"` or a token count) or a list of them.
    fn ctx(&self, v: Option<&toml::Value>, key: &str) -> Result<Vec<CtxSize>> {
        let one = |v: &toml::Value, key: &str| match v {
            toml::Value::Integer(n) => n.to_string().parse::<CtxSize>().map_err(|e| self.err(key, e)),
            toml::Value::String(s) => s.parse::<CtxSize>().map_err(|e| self.err(key, e)),
            other => Err(self.err(key, format!("expected \"auto\" or a token count, got {other}"))),
        };
        let sizes = match v {
            None => return Ok(vec![CtxSize::Auto]),
            Some(toml::Value::Array(list)) => {
                list.iter().enumerate().map(|(j, x)| one(x, &format!("{key}[{j}]"))).collect::<Result<Vec<CtxSize>>>()?
            }
            Some(size) => vec![one(size, key)?],
        };
        self.checked_list(crate::settings::Setting::Ctx, sizes, key)
    }

    /// A key that takes a value or a list of them (`flash_attn`,
    /// `kv_rotation`, `probe`), as the list of its values.
    fn listed<T: Clone + PartialEq + std::fmt::Display>(
        &self,
        setting: crate::settings::Setting,
        list: &OneOrMany<T>,
        key: &str,
    ) -> Result<Vec<T>> {
        self.checked_list(setting, list.to_vec(), key)
    }

    /// A list of values: not empty, and no value twice, by the rule
    /// `bench`'s lists go through ([`crate::bench::instances::once`]).
    fn checked_list<T: PartialEq + std::fmt::Display>(
        &self,
        setting: crate::settings::Setting,
        values: Vec<T>,
        key: &str,
    ) -> Result<Vec<T>> {
        if values.is_empty() {
            bail!("{}: {key}: empty; give a value or a list of them", self.file);
        }
        crate::bench::instances::once(setting, &values).map_err(|e| self.err(key, e.to_string()))?;
        Ok(values)
    }

    /// A model's context extension, checked by the rule `bench`'s flags go
    /// through ([`crate::settings::RopeInput::resolve`]), worded as keys.
    fn rope(&self, m: &RawModel, who: &str) -> Result<Option<crate::settings::Rope>> {
        use crate::settings::{Explain, RopeInput};
        let input = RopeInput {
            scaling: m.rope_scaling,
            scale: m.rope_scale.map(|x| x as f32),
            freq_scale: m.rope_freq_scale.map(|x| x as f32),
            freq_base: m.rope_freq_base.map(|x| x as f32),
            yarn_orig_ctx: m.yarn_orig_ctx.map(|n| n as usize),
        };
        let file = self.file;
        input.resolve().map(Some).map_err(|e| anyhow::anyhow!("{file}: {who}: {}", e.explain(&Keys)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        move |k: &str| map.get(k).cloned()
    }

    const GOOD: &str = r#"
[corpus]
crop = "densest"
[params]
count = 4
lines = 6
[[model]]
name = "small"
path = "${CACHE}/a.gguf"
kv = ["f16", "q8_0/f16"]
ctx = 1024
[[model]]
name = "base"
path = "$CACHE/b.gguf"
build = "Q4_K_M"
kv = ["q4_0"]
probe = "completion"
gpu_layers = 0
"#;

    /// The sweep's name of each setting it reads is a key of the file: a
    /// message never points at a key `models.toml` does not have.
    #[test]
    fn every_setting_a_sweep_reads_is_named_by_a_key_of_the_file() {
        use crate::settings::Setting;
        use strum::VariantArray;
        for &s in Setting::VARIANTS {
            let Some(key) = Keys::key(s) else { continue };
            // A value no key takes: serde names an unknown key as such first.
            let text = match key.split_once('.') {
                Some((table, k)) => GOOD.replace(&format!("[{table}]\n"), &format!("[{table}]\n{k} = [[]]\n")),
                None => GOOD.replace("gpu_layers = 0\n", &format!("gpu_layers = 0\n{key} = [[]]\n")),
            };
            let e = Sweep::parse(&text, Path::new("m.toml"), &env_of(&[("CACHE", "/c")])).unwrap_err().to_string();
            assert!(!e.contains("unknown field"), "{s:?} is named `{key}`, which models.toml does not have: {e}");
        }
    }

    #[test]
    fn parses_a_sweep() {
        let s = Sweep::parse(GOOD, Path::new("/x/models.toml"), &env_of(&[("CACHE", "/c")])).unwrap();
        assert_eq!(s.base.plan.crop, CropMode::Densest);
        // No pass given: 40% of 6 lines, rounded up.
        let target = &s.base.plan.target;
        assert_eq!((target.count, target.lines, target.pass()), (4, 6, 3));
        assert_eq!(s.models[0].path, PathBuf::from("/c/a.gguf"));
        assert_eq!(s.models[1].path, PathBuf::from("/c/b.gguf"));
        assert_eq!(s.models[0].kv, vec![(KvType::F16, KvType::F16), (KvType::Q8_0, KvType::F16)]);
        assert_eq!(s.models[0].ctx, CtxSize::Fixed(1024));
        assert_eq!(s.models[1].probe, Probe::Completion);
        let ids: Vec<String> = s.runs().into_iter().map(|r| r.id).collect();
        assert_eq!(ids, ["base__q4_0-q4_0", "small__f16-f16", "small__q8_0-f16"]);
    }

    #[test]
    fn the_reference_kv_type_has_one_name_and_reads_the_old_one() {
        let env = env_of(&[("CACHE", "/c")]);
        let with = |line: &str| GOOD.replace("ctx = 1024\n", &format!("ctx = 1024\n{line}\n"));
        let new = Sweep::parse(&with("reference_kv = \"f16\""), Path::new("m.toml"), &env).unwrap();
        let old = Sweep::parse(&with("reference = \"f16\""), Path::new("m.toml"), &env).unwrap();
        assert_eq!(new.models[0].reference_kv, Some((KvType::F16, KvType::F16)));
        assert_eq!(old.models, new.models);
        // The reference run saves its .ref under a name the sweep made: onto
        // the name, never through a link planted in the output folder.
        let saver = new.runs().into_iter().find(|r| new.reference_role(r) == Some(ReferenceRole::Saves)).unwrap();
        let o = new.options(&saver, None, Path::new("out"));
        assert_eq!((o.save_reference, o.save_reference_made), (Some(saver.reference_file(Path::new("out"))), true));
        let both = with("reference_kv = \"f16\"\nreference = \"f16\"");
        let e = Sweep::parse(&both, Path::new("m.toml"), &env).unwrap_err().to_string();
        assert!(e.contains("model `small`: reference_kv and reference (its old name) are both given"), "{e}");
        let e = Sweep::parse(&with("reference = \"q4_0\""), Path::new("m.toml"), &env).unwrap_err().to_string();
        assert!(e.contains("model `small`: reference: `q4_0` is not one"), "{e}");
        let e = Sweep::parse(&with("reference_kv = \"q4_0\""), Path::new("m.toml"), &env).unwrap_err().to_string();
        assert!(e.contains("model `small`: reference_kv: `q4_0` is not one of its kv entries"), "{e}");
    }

    /// `ctx` and `probe` lists are entries as `bench --ctx A,B --probe P,Q`
    /// makes them: context sizes slower, each entry named by the lists with
    /// more than one value, each with the model's own reference run.
    #[test]
    fn ctx_and_probe_lists_are_entries_as_a_bench_list_makes_them() {
        let env = env_of(&[("CACHE", "/c")]);
        let with = |lines: &str| GOOD.replace("ctx = 1024\n", &format!("{lines}\n"));
        let s = Sweep::parse(
            &with("ctx = [1024, \"auto\"]\nprobe = [\"chat\", \"completion\"]\nreference_kv = \"f16\""),
            Path::new("m.toml"),
            &env,
        )
        .unwrap();
        let entries: Vec<(&str, CtxSize, Probe)> = s.models.iter().map(|m| (m.name.as_str(), m.ctx, m.probe)).collect();
        assert_eq!(
            entries,
            [
                ("small-ctx_1024-probe_chat", CtxSize::Fixed(1024), Probe::Chat),
                ("small-ctx_1024-probe_completion", CtxSize::Fixed(1024), Probe::Completion),
                ("small-ctx_auto-probe_chat", CtxSize::Auto, Probe::Chat),
                ("small-ctx_auto-probe_completion", CtxSize::Auto, Probe::Completion),
                ("base", CtxSize::Auto, Probe::Completion),
            ]
        );
        let measured = s.runs().into_iter().find(|r| r.id == "small-ctx_auto-probe_chat__q8_0-f16").unwrap();
        assert_eq!(s.reference_role(&measured), Some(ReferenceRole::MeasuredAgainst("small-ctx_auto-probe_chat__f16-f16".into())));
        // One value, in a list or not, names nothing more.
        let one = Sweep::parse(&with("ctx = [2048]\nprobe = \"chat\""), Path::new("m.toml"), &env).unwrap();
        assert_eq!((one.models[0].name.as_str(), one.models[0].ctx, one.models[0].probe), ("small", CtxSize::Fixed(2048), Probe::Chat));
        for (lines, needle) in [
            ("ctx = []", "m.toml: model `small`: ctx: empty"),
            ("ctx = [1024, 1024]", "m.toml: model `small`: ctx: `1024` is listed twice"),
            ("ctx = [1024, true]", "m.toml: model `small`: ctx[1]: expected \"auto\" or a token count, got true"),
            ("ctx = [1024, 10]", "m.toml: model `small`: ctx[1]: "),
            ("probe = []", "m.toml: model `small`: probe: empty"),
            ("probe = [\"chat\", \"chat\"]", "m.toml: model `small`: probe: `chat` is listed twice"),
            ("probe = [\"chat\", \"gossip\"]", "model `small`: probe[1]: unknown variant `gossip`"),
        ] {
            let e = Sweep::parse(&with(lines), Path::new("m.toml"), &env).unwrap_err().to_string();
            assert!(e.contains(needle) && !e.contains('\n'), "{lines}: {e}");
        }
    }

    #[test]
    fn corpus_folder_globs_and_language() {
        let env = env_of(&[("CACHE", "/c")]);
        let parse = |corpus: &str| {
            let text = GOOD.replace("crop = \"densest\"\n", &format!("crop = \"densest\"\n{corpus}\n"));
            Sweep::parse(&text, Path::new("/x/models.toml"), &env).map_err(|e| e.to_string())
        };
        let s = parse("dir = \"src\"\ninclude = [\"*.py\"]\nexclude = [\"vendor/**\"]\nlanguage = \"py\"").unwrap();
        assert_eq!(s.corpus_dir, Some(PathBuf::from("/x/src")));
        assert_eq!((s.include.clone(), s.exclude.clone()), (vec!["*.py".to_string()], vec!["vendor/**".to_string()]));
        assert_eq!(s.language.as_deref(), Some("python"));
        let e = parse("dir = \"src\"\npath = \"a.js\"").unwrap_err();
        assert!(e.contains("path or dir"), "{e}");
        let e = parse("include = [\"*.py\"]").unwrap_err();
        assert!(e.contains("corpus.dir"), "{e}");
        let e = parse("language = \"cobol\"").unwrap_err();
        assert!(e.contains("corpus.language: unknown language `cobol`"), "{e}");
    }

    #[test]
    fn kv_rotation_crosses_with_kv_per_sweep_and_per_model() {
        let env = env_of(&[("CACHE", "/c")]);
        let text = GOOD
            .replace("lines = 6\n", "lines = 6\nkv_rotation = [\"auto\", \"off\"]\n")
            .replace("probe = \"completion\"\n", "probe = \"completion\"\nkv_rotation = \"off\"\n")
            .replace("ctx = 1024\n", "ctx = 1024\nreference_kv = \"f16\"\n");
        let s = Sweep::parse(&text, Path::new("m.toml"), &env).unwrap();
        assert_eq!(s.models[0].kv_rotation, [KvRotation::Auto, KvRotation::Off], "[params]'s");
        assert_eq!(s.models[1].kv_rotation, [KvRotation::Off], "the model's own");
        let ids: Vec<String> = s.runs().into_iter().map(|r| r.id).collect();
        assert_eq!(
            ids,
            ["base__q4_0-q4_0-rot_off", "small__f16-f16", "small__f16-f16-rot_off", "small__q8_0-f16", "small__q8_0-f16-rot_off"],
            "auto keeps the names files had before rotation was chosen"
        );
        // The reference is the reference_kv entry with the first rotation mode.
        let runs = s.runs();
        let o = s.options(&runs[4], None, Path::new("d"));
        assert_eq!((o.context.kv, o.context.kv_rotation), ((KvType::Q8_0, KvType::F16), KvRotation::Off));
        assert_eq!(o.reference, Some(PathBuf::from("d/small__f16-f16.ref")));
        assert_eq!(s.reference_role(&runs[1]), Some(ReferenceRole::Saves));
        assert_eq!(s.reference_role(&runs[2]), Some(ReferenceRole::MeasuredAgainst("small__f16-f16".into())));
        for (bad, needle) in [
            ("kv_rotation = [\"off\", \"off\"]", "m.toml: model `base`: kv_rotation: `off` is listed twice"),
            ("kv_rotation = []", "m.toml: model `base`: kv_rotation: empty"),
            ("kv_rotation = \"sideways\"", "model `base`: kv_rotation: unknown variant `sideways`, expected `auto` or `off`"),
            (
                "kv_rotation = [\"auto\", \"sideways\"]",
                "model `base`: kv_rotation[1]: unknown variant `sideways`, expected `auto` or `off`",
            ),
        ] {
            let text = GOOD.replace("gpu_layers = 0\n", &format!("gpu_layers = 0\n{bad}\n"));
            let e = format!("{:#}", Sweep::parse(&text, Path::new("m.toml"), &env).unwrap_err());
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn thinking_is_set_per_sweep_and_per_model() {
        let text = GOOD
            .replace("lines = 6\n", "lines = 6\nthink = \"on\"\nthink_budget = 512\ntemplate_kwargs = { a = 1 }\n")
            .replace("ctx = 1024\n", "ctx = 1024\nthink = \"off\"\ntemplate_kwargs = { b = true }\nchat_template = \"t/q.jinja\"\n");
        let s = Sweep::parse(&text, Path::new("/x/models.toml"), &env_of(&[("CACHE", "/c")])).unwrap();
        assert_eq!(s.base.plan.think_budget, Some(512));
        let (small, base) = (s.template_vars(0), s.template_vars(1));
        assert_eq!(small.think, Think::Off);
        assert_eq!(serde_json::Value::Object(small.kwargs.clone()), serde_json::json!({"a": 1, "b": true}));
        assert_eq!(s.models[0].chat_template, Some(PathBuf::from("/x/t/q.jinja")));
        // `base` has the completion probe: [params]'s thinking and variables
        // are for the chat models, and would change nothing for it.
        assert_eq!((base.think, base.kwargs.is_empty(), s.models[1].chat_template.as_ref()), (Think::Off, true, None));
        let budgets: Vec<Option<usize>> = s.runs().iter().map(|r| s.options(r, None, Path::new("")).plan.think_budget).collect();
        assert_eq!(budgets, [None, None, None], "small thinks off, base renders no template");
        let thinking =
            Sweep::parse(&text.replace("think = \"off\"\n", ""), Path::new("/x/models.toml"), &env_of(&[("CACHE", "/c")])).unwrap();
        let budgets: Vec<Option<usize>> =
            thinking.runs().iter().map(|r| thinking.options(r, None, Path::new("")).plan.think_budget).collect();
        assert_eq!(budgets, [None, Some(512), Some(512)]);
        for (key, named) in [
            ("think = \"on\"", "think = \"on\""),
            ("template_kwargs = { c = 1 }", "template_kwargs"),
            ("chat_template = \"t/q.jinja\"", "chat_template"),
        ] {
            let text = GOOD.replace("gpu_layers = 0\n", &format!("gpu_layers = 0\n{key}\n"));
            let err = Sweep::parse(&text, Path::new("m.toml"), &env_of(&[("CACHE", "/c")])).unwrap_err().to_string();
            let needle = format!("m.toml: model `base`: {named} sets the chat template, and probe = \"completion\" renders none");
            assert!(err.contains(&needle), "{err}");
        }
        let defaults = Sweep::parse(GOOD, Path::new("/x/models.toml"), &env_of(&[("CACHE", "/c")])).unwrap();
        assert_eq!(defaults.template_vars(0).think, Think::Off);
        // No budget given: the planner's default is the run's.
        assert_eq!(defaults.base.plan.think_budget, None);
        let e =
            Sweep::parse(&GOOD.replace("lines = 6\n", "lines = 6\nthink_budget = 0\n"), Path::new("m.toml"), &env_of(&[("CACHE", "/c")]))
                .unwrap_err()
                .to_string();
        assert!(e.starts_with("m.toml: params.think_budget = 0: must be between 1 and"), "in range though no model thinks: {e}");
        let err =
            Sweep::parse(&GOOD.replace("lines = 6\n", "lines = 6\nthink = \"maybe\"\n"), Path::new("m.toml"), &env_of(&[("CACHE", "/c")]))
                .unwrap_err()
                .to_string();
        assert!(err.contains("params.think"), "{err}");
    }

    #[test]
    fn a_model_may_be_a_hub_reference_and_have_its_own_rope() {
        let text = "[[model]]\nname = \"m\"\npath = \"unsloth/Qwen3-GGUF:Q4_K_M\"\nkv = [\"f16\"]\n\
                    rope_scaling = \"yarn\"\nrope_scale = 4\nyarn_orig_ctx = 32768\n";
        let s = Sweep::parse(text, Path::new("/etc/sweeps/models.toml"), &env_of(&[])).unwrap();
        assert_eq!(s.models[0].path, PathBuf::from("unsloth/Qwen3-GGUF:Q4_K_M"));
        let rope = s.models[0].rope.unwrap();
        assert_eq!(
            (rope.scaling, rope.freq_scale, rope.yarn_orig_ctx),
            (Some(crate::settings::RopeScaling::Yarn), Some(0.25), Some(32768))
        );
        for (line, needle) in [
            ("rope_scaling = \"ntk\"", "rope_scaling: unknown variant `ntk`, expected one of `none`, `linear`, `yarn`"),
            ("rope_scale = 0", "rope_scale: 0 is not from 1/1024"),
            ("rope_freq_scale = 1e-300", "rope_freq_scale: 0 is not from 1/1024"),
            ("rope_scaling = \"none\"\nrope_scale = 4", "rope_scale: 4 with RoPE scaling none changes nothing"),
            ("rope_scale = 2\nrope_freq_scale = 0.5", "rope_scale and rope_freq_scale are both given"),
            ("yarn_orig_ctx = 0", "yarn_orig_ctx: 0 is not a token count"),
        ] {
            let text = format!("[[model]]\nname = \"m\"\npath = \"m.gguf\"\nkv = [\"f16\"]\n{line}\n");
            let e = Sweep::parse(&text, Path::new("models.toml"), &env_of(&[])).unwrap_err().to_string();
            assert!(e.contains(needle), "{line}: {e}");
        }
    }

    #[test]
    fn relative_paths_are_from_the_file() {
        let text = "[[model]]\nname = \"m\"\npath = \"models/m.gguf\"\nkv = [\"f16\"]\n";
        let s = Sweep::parse(text, Path::new("/etc/sweeps/models.toml"), &env_of(&[])).unwrap();
        assert_eq!(s.models[0].path, PathBuf::from("/etc/sweeps/models/m.gguf"));
    }

    #[test]
    fn errors_are_one_line_and_name_the_key() {
        let env = env_of(&[("CACHE", "/c")]);
        let err = |text: &str| {
            let e = Sweep::parse(text, Path::new("m.toml"), &env).unwrap_err().to_string();
            assert!(!e.contains('\n'), "{e}");
            assert!(e.starts_with("m.toml"), "{e}");
            e
        };
        let e = err(&GOOD.replace("gpu_layers = 0", "gpu_layer = 0"));
        assert!(e.contains("gpu_layer") && e.contains("m.toml:"), "{e}");
        let e = err(&GOOD.replace("${CACHE}", "${NOPE_NOT_SET}"));
        assert!(e.contains("NOPE_NOT_SET") && e.contains("model `small`: path"), "{e}");
        let e = err(&GOOD.replace("\"q4_0\"", "\"q7\""));
        assert!(e.contains("model `base`: kv") && e.contains("q7"), "{e}");
        let e = err(&GOOD.replace("crop = \"densest\"", "crop = \"lines\""));
        assert!(e.contains("corpus.crop"), "{e}");
        let e = err(&GOOD.replace("name = \"base\"", "name = \"small\""));
        assert!(e.contains("twice"), "{e}");
        let e = err(&GOOD.replace("name = \"base\"", "name = \"SMALL\""));
        assert!(e.contains("model[1].name: `SMALL` and model[0]'s `small` differ only in case") && !e.contains('\n'), "{e}");
        // The other model is named by its place, even where one name starts another's.
        let three = format!("{GOOD}\n[[model]]\nname = \"BASE\"\npath = \"${{CACHE}}/b.gguf\"\nkv = [\"f16\"]\n");
        let e = err(&three.replace("name = \"small\"", "name = \"b\""));
        assert!(e.contains("model[2].name: `BASE` and model[1]'s `base` differ only in case"), "{e}");
        let e = err(&GOOD.replace("ctx = 1024", "ctx = 10"));
        assert!(e.contains("ctx"), "{e}");
        let e = err(&GOOD.replace("lines = 6", "lines = 6\npass = 9"));
        assert!(e.contains("pass"), "{e}");
        let e = err("[params]\ncount = 3\n");
        assert!(e.contains("[[model]]"), "{e}");
        let e = err("[[model]]\nname = \"m\"\nkv = [\"f16\"]\n");
        assert!(e.contains("path"), "{e}");
    }

    /// Every named value is read with its enum's own serde spelling: each
    /// name the file documents reads as its value (K/V halves trimmed), and
    /// a bad one is one line with the line, column and key, and the names
    /// accepted.
    #[test]
    fn named_values_read_as_their_enums_and_a_bad_one_names_its_key() {
        use crate::decode::draft::DraftMode;
        let env = env_of(&[("CACHE", "/c")]);
        let parse = |text: &str| Sweep::parse(text, Path::new("m.toml"), &env).map_err(|e| e.to_string());
        // GOOD with `line` after `after`; `ctx = 1024` ends model `small`.
        // Model `base` at f16, which flash attention off allows too.
        let good = GOOD.replace("kv = [\"q4_0\"]", "kv = [\"f16\"]");
        let with = |after: &str, line: &str| good.replacen(after, &format!("{after}{line}\n"), 1);
        let params = |line: &str| parse(&with("lines = 6\n", line)).unwrap();
        let small = |line: &str| parse(&with("ctx = 1024\n", line)).unwrap().models.remove(0);
        for &n in <Normalize as strum::VariantArray>::VARIANTS {
            assert_eq!(params(&format!("normalize = \"{}\"", n.as_str())).base.plan.target.normalize(), n);
        }
        for &f in <FlashAttn as strum::VariantArray>::VARIANTS {
            assert_eq!(params(&format!("flash_attn = \"{}\"", f.as_str())).models[0].flash_attn, [f]);
        }
        for &d in <DraftMode as strum::VariantArray>::VARIANTS {
            let decode = params(&format!("draft = \"{}\"", d.as_str())).base.decode;
            assert_eq!((decode.draft, decode.draft_asked), (d, true));
        }
        for t in [Think::Off, Think::On] {
            assert_eq!(params(&format!("think = \"{}\"", t.as_str())).template_vars(0).think, t);
            assert_eq!(small(&format!("think = \"{}\"", t.as_str())).think, Some(t));
        }
        for c in CropMode::CHOSEN {
            assert_eq!(parse(&GOOD.replace("\"densest\"", &format!("\"{}\"", c.as_str()))).unwrap().base.plan.crop, c);
        }
        for &p in <Probe as strum::VariantArray>::VARIANTS {
            assert_eq!(small(&format!("probe = \"{}\"", p.as_str())).probe, p);
        }
        for r in [RopeScaling::None, RopeScaling::Linear, RopeScaling::Yarn] {
            assert_eq!(small(&format!("rope_scaling = \"{}\"", r.as_str())).rope.unwrap().scaling, Some(r));
        }
        for &k in <KvType as strum::VariantArray>::VARIANTS {
            let kv = format!("kv = [\" {k} / f16 \"]\nreference_kv = \"{k}/f16\"");
            let s = parse(&GOOD.replace("kv = [\"f16\", \"q8_0/f16\"]", &kv)).unwrap();
            assert_eq!((s.models[0].kv.clone(), s.models[0].reference_kv), (vec![(k, KvType::F16)], Some((k, KvType::F16))));
        }
        for (text, needle) in [
            (
                with("lines = 6\n", "normalize = \"loose\""),
                "m.toml:7:13: params.normalize: unknown variant `loose`, expected one of `trim`, `exact`, `squash`, `trim_end`",
            ),
            (
                with("lines = 6\n", "flash_attn = \"maybe\""),
                "m.toml:7:14: params.flash_attn: unknown variant `maybe`, expected one of `auto`, `on`, `off`",
            ),
            (with("lines = 6\n", "think = \"maybe\""), "m.toml:7:9: params.think: unknown variant `maybe`, expected `off` or `on`"),
            (
                with("lines = 6\n", "draft = \"sometimes\""),
                "m.toml:7:9: params.draft: unknown variant `sometimes`, expected one of `none`, `lookup`, `truth`",
            ),
            (with("lines = 6\n", "seed = \"one\""), "m.toml:7:8: params.seed: invalid type: string \"one\", expected u64"),
            (
                GOOD.replace("\"densest\"", "\"lines\""),
                "m.toml:3:8: corpus.crop: unknown variant `lines`, expected one of `head`, `densest`, `none`",
            ),
            (
                with("ctx = 1024\n", "probe = \"gossip\""),
                "m.toml:12:9: model `small`: probe: unknown variant `gossip`, expected one of `auto`, `chat`, `completion`",
            ),
            (with("ctx = 1024\n", "think = \"yes\""), "m.toml:12:9: model `small`: think: unknown variant `yes`, expected `off` or `on`"),
            (
                GOOD.replace("\"q8_0/f16\"", "\"q8_0/q7\""),
                "m.toml:10:14: model `small`: kv[1]: unknown variant `q7`, expected one of `f32`, `f16`, `bf16`, `q8_0`, `q5_1`, `q5_0`, `q4_1`, `q4_0`, `iq4_nl`",
            ),
            (
                with("ctx = 1024\n", "reference_kv = \"f17\""),
                "m.toml:12:16: model `small`: reference_kv: unknown variant `f17`, expected one of `f32`, `f16`, `bf16`, `q8_0`, `q5_1`, `q5_0`, `q4_1`, `q4_0`, `iq4_nl`",
            ),
            (with("ctx = 1024\n", "reference = \"f17\""), "m.toml:12:13: model `small`: reference: unknown variant `f17`"),
            // A model without a usable name is named by its place.
            (GOOD.replace("name = \"base\"", "name = 2"), "m.toml:13:8: model[1]: name: invalid type: integer `2`, expected a string"),
        ] {
            let e = parse(&text).unwrap_err();
            assert!(!e.contains('\n') && e.starts_with(needle), "{needle}\n{e}");
        }
    }

    #[test]
    fn expands_variables() {
        let env = env_of(&[("A", "x"), ("B_2", "y")]);
        assert_eq!(expand_vars("${A}/$B_2/z", &env).unwrap(), "x/y/z");
        assert_eq!(expand_vars("$A-$$-$", &env).unwrap(), "x-$-$");
        assert_eq!(expand_vars("a$/b", &env).unwrap(), "a$/b");
        assert!(expand_vars("$C", &env).unwrap_err().contains("C is not set"));
        assert!(expand_vars("${A", &env).unwrap_err().contains("`${` without a closing `}` in `${A`"));
        assert!(expand_vars("${1A}", &env).unwrap_err().contains("`${1A}` is not a variable name"));
    }

    /// `process_env` answers `POSRECALL_CACHE` with the cache folder (which is
    /// `$POSRECALL_CACHE` when that is set, else the XDG or home default), so
    /// a sweep file may name it with the variable unset; every other name is
    /// the process environment as it is. (tests/matrix.rs runs the binary
    /// with the variable set, empty and unset.)
    #[test]
    fn posrecall_cache_is_the_cache_folder_and_other_names_the_environment() {
        let cache = crate::support::fsutil::cache_dir().to_string_lossy().into_owned();
        assert_eq!(process_env("POSRECALL_CACHE").as_deref(), Some(cache.as_str()));
        assert_eq!(expand_vars("${POSRECALL_CACHE}/models/m.gguf", &process_env).unwrap(), format!("{cache}/models/m.gguf"));
        let text = "[[model]]\nname = \"m\"\npath = \"$POSRECALL_CACHE/models/m.gguf\"\nkv = [\"f16\"]\n";
        let s = Sweep::parse(text, Path::new("/elsewhere/models.toml"), &process_env).unwrap();
        assert_eq!(s.models[0].path, crate::support::fsutil::cache_dir().join("models").join("m.gguf"));
        // No other variable has a default.
        assert_eq!(process_env("PATH"), std::env::var("PATH").ok());
        assert_eq!(process_env("POSRECALL_TEST_SURELY_UNSET_7f3a"), None);
        let e = expand_vars("${POSRECALL_TEST_SURELY_UNSET_7f3a}/m.gguf", &process_env).unwrap_err();
        assert!(e.contains("POSRECALL_TEST_SURELY_UNSET_7f3a is not set"), "{e}");
    }

    #[test]
    fn shards_cover_every_run_once() {
        for n in 1..=7 {
            for len in 0..20 {
                let runs: Vec<usize> = (0..len).collect();
                let mut seen = vec![0; len];
                for k in 1..=n {
                    let part = Shard { k, n }.select(&runs);
                    assert!(part.len() <= len / n + 1);
                    for r in part {
                        seen[r] += 1;
                    }
                }
                assert!(seen.iter().all(|&c| c == 1), "n={n} len={len}: {seen:?}");
            }
        }
    }
}
