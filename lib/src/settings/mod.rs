//! The context settings, as neutral data: what a context is made of, and
//! the name of every setting ([`setting`]).
//!
//! Nothing here touches llama.cpp (`engine/session.rs` turns these types into
//! its parameters, in one place), so the engine, the run file, the reference
//! file, the prefix cache and sweeps all read the same types, and the record
//! layer imports nothing from the engine. [`ContextConfig`] is the one record of a context's parameters:
//! the manifest's `context`, the prefix cache key and a sweep's resume key are
//! all made from it.

pub mod setting;

use serde::{Deserialize, Serialize};
pub use setting::{Explain, Keys, Names, Setting};

/// The names users type for the settings that are a choice (KV types,
/// modes, formats) are the variants' own, in snake case (`Q8_0` is `q8_0`,
/// `Iq4Nl` is `iq4_nl`), derived once by `strum`: parsing, printing, run
/// files, sweep files and the command line's possible values all read them
/// from there, and the command line's help for each value is the variant's
/// doc comment.
pub trait Named: Copy + 'static + Into<&'static str> + strum::VariantArray + strum::VariantNames + strum::EnumMessage {
    /// The name, as typed and as recorded.
    fn as_str(self) -> &'static str {
        self.into()
    }
}

impl<T: Copy + 'static + Into<&'static str> + strum::VariantArray + strum::VariantNames + strum::EnumMessage> Named for T {}

/// A name that is none of a choice's: the message lists the accepted ones,
/// in serde's own words for an unknown variant (run and sweep files read the
/// same as before the names were derived).
/// Needs no hint: on the command line clap refuses the value with the flag
/// named, and a file's reader puts the key in front.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", <serde::de::value::Error as serde::de::Error>::unknown_variant(value, expected))]
pub struct UnknownName {
    pub value: String,
    pub expected: &'static [&'static str],
}

/// [`UnknownName`] for `T` (the enums' `strum(parse_err_fn)`).
/// A value longer than any name is shown cut, so that the one error line
/// stays a line (a 200 KB value would otherwise be echoed whole).
pub(crate) fn unknown_name<T: strum::VariantNames>(value: &str) -> UnknownName {
    const SHOWN: usize = 64;
    let value = match value.char_indices().nth(SHOWN) {
        Some((at, _)) => format!("{}… ({} characters)", &value[..at], value.chars().count()),
        None => value.to_string(),
    };
    UnknownName { value, expected: T::VARIANTS }
}

/// A choice a user names (a flag's value, a run or sweep file's field):
/// one rule, written here once, for every such enum. Its names are its
/// variants' in snake case, read and written by strum (`FromStr`,
/// `Display`, the list of names, each variant's doc as its help) and by
/// serde through them; an unknown name is an [`UnknownName`]. The enum's
/// own attributes (docs, extra derives such as `Default`) go inside.
macro_rules! named_choice {
    ($(#[$meta:meta])* $vis:vis enum $name:ident { $($body:tt)* }) => {
        $(#[$meta])*
        #[derive(
            Debug,
            Clone,
            Copy,
            PartialEq,
            Eq,
            strum::EnumString,
            strum::IntoStaticStr,
            strum::Display,
            strum::VariantNames,
            strum::VariantArray,
            strum::EnumMessage,
            serde_with::SerializeDisplay,
            serde_with::DeserializeFromStr,
        )]
        #[strum(
            serialize_all = "snake_case",
            parse_err_ty = $crate::settings::UnknownName,
            parse_err_fn = $crate::settings::unknown_name::<Self>
        )]
        $vis enum $name { $($body)* }
    };
}
pub(crate) use named_choice;

named_choice! {
    /// KV-cache element types llama.cpp accepts.
    #[derive(Hash)]
    pub enum KvType {
        F32,
        F16,
        Bf16,
        Q8_0,
        Q5_1,
        Q5_0,
        Q4_1,
        Q4_0,
        Iq4Nl,
    }
}

impl KvType {
    pub(crate) fn is_quantized(self) -> bool {
        !matches!(self, KvType::F32 | KvType::F16 | KvType::Bf16)
    }
}

/// A K and a V cache type, written `K/V`, or one type for both (as
/// `bench --kv` and a sweep file's `kv` entries write them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvPair {
    pub k: KvType,
    pub v: KvType,
}

impl std::str::FromStr for KvPair {
    type Err = UnknownName;
    fn from_str(s: &str) -> Result<KvPair, UnknownName> {
        let (k, v) = s.split_once('/').unwrap_or((s, s));
        Ok(KvPair { k: k.trim().parse()?, v: v.trim().parse()? })
    }
}

impl std::fmt::Display for KvPair {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        match self.k == self.v {
            true => write!(f, "{}", self.k),
            false => write!(f, "{}/{}", self.k, self.v),
        }
    }
}

/// A comma list of values, as llama-bench's sweep flags take them
/// (`--kv f16,q8_0`): every item read by the value's own `FromStr`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct List<T>(pub Vec<T>);

/// An item of a comma list that is empty or not a value.
/// Needs no hint: clap puts the flag in front.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListError {
    #[error("an empty item (two commas in a row, or one at an end)")]
    Empty,
    #[error("{0}")]
    Item(String),
}

impl<T: std::str::FromStr> std::str::FromStr for List<T>
where
    T::Err: std::fmt::Display,
{
    type Err = ListError;
    fn from_str(s: &str) -> Result<List<T>, ListError> {
        s.split(',')
            .map(|item| match item.trim() {
                "" => Err(ListError::Empty),
                t => t.parse().map_err(|e: T::Err| ListError::Item(e.to_string())),
            })
            .collect::<Result<Vec<T>, ListError>>()
            .map(List)
    }
}

impl<T: std::fmt::Display> std::fmt::Display for List<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let items: Vec<String> = self.0.iter().map(T::to_string).collect();
        f.write_str(&items.join(","))
    }
}

named_choice! {
    /// llama.cpp's Hadamard rotation of quantised K and V rows (its
    /// `llama-kv-cache.cpp`): `auto` is llama.cpp's own rule, which rotates a
    /// quantised cache whose head size is a multiple of 64; `off` keeps the rows
    /// as they are, as older llama.cpp builds and the runtimes that embed them do.
    #[derive(Hash, Default)]
    pub enum KvRotation {
        /// llama.cpp's rule: quantised K or V with a head size that is a multiple of 64.
        #[default]
        Auto,
        /// Never (llama.cpp's `LLAMA_ATTN_ROT_DISABLE=1`).
        Off,
    }
}

/// What a context did about rotation (`manifest.context.kv_rotation`): the
/// mode that took effect (`off` as well when the environment turned it off)
/// and whether the K and the V rows were rotated, as llama.cpp decided for
/// this model and these types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Rotation {
    pub mode: KvRotation,
    pub k: bool,
    pub v: bool,
}

impl std::fmt::Display for Rotation {
    /// As reports show it: `off`, or `auto` and which rows llama.cpp
    /// rotated (`k+v`, `k`, `v`, or `none` for types it never rotates).
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let which = match (self.k, self.v) {
            (true, true) => "k+v",
            (true, false) => "k",
            (false, true) => "v",
            (false, false) => "none",
        };
        match self.mode {
            KvRotation::Auto => write!(f, "auto ({which})"),
            mode => write!(f, "{mode}"),
        }
    }
}

named_choice! {
    /// Flash attention: llama.cpp's choice, forced on, or off.
    #[derive(Default)]
    pub enum FlashAttn {
        #[default]
        Auto,
        On,
        Off,
    }
}

named_choice! {
    /// How each question's changes to the prefix state are undone.
    #[derive(Default)]
    pub enum RestoreMode {
        /// Only what a question can change: the full-attention cells after the
        /// prefix are removed, and the sliding-window and recurrent parts (which
        /// cannot be rolled back) are written back from a partial snapshot.
        #[default]
        Lean,
        /// The whole sequence state is written back for every question.
        Full,
    }
}

/// The context size asked for: `auto` (what the run needs, capped at the
/// trained context) or a fixed token count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CtxSize {
    #[default]
    Auto,
    Fixed(u32),
}

impl CtxSize {
    /// The smallest context llama.cpp is asked for.
    pub(crate) const MIN: u32 = 64;
    /// The largest (16M tokens: more than any GGUF model is trained for).
    pub const MAX: u32 = 1 << 24;
}

impl std::fmt::Display for CtxSize {
    /// As it is typed: `auto` or the token count.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CtxSize::Auto => f.write_str("auto"),
            CtxSize::Fixed(n) => write!(f, "{n}"),
        }
    }
}

impl std::str::FromStr for CtxSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "auto" {
            return Ok(CtxSize::Auto);
        }
        s.parse::<u32>()
            .ok()
            .filter(|n| (CtxSize::MIN..=CtxSize::MAX).contains(n))
            .map(CtxSize::Fixed)
            .ok_or_else(|| format!("expected `auto` or a token count from {} to {}, got `{s}`", CtxSize::MIN, CtxSize::MAX))
    }
}

named_choice! {
    /// RoPE scaling, named as llama-server names it.
    #[derive(Hash)]
    pub enum RopeScaling {
        None,
        Linear,
        Yarn,
    }
}

/// Context extension: the RoPE settings that replace the GGUF's, as
/// llama-server's flags set them. `None` everywhere is the model's own, and
/// then nothing is written (old run files and keys stay as they were).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Rope {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scaling: Option<RopeScaling>,
    /// The base frequency (llama.cpp's `rope_freq_base`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freq_base: Option<f32>,
    /// The frequency scale: `--rope-scale N` is 1/N (llama.cpp's `rope_freq_scale`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freq_scale: Option<f32>,
    /// The context YaRN extends from (default: the trained context).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub yarn_orig_ctx: Option<u32>,
}

impl Rope {
    pub(crate) fn is_default(&self) -> bool {
        *self == Rope::default()
    }

    /// How many times the trained context this scaling stretches positions
    /// over: 1 unless a frequency scale below 1 is set (and scaling is not
    /// `none`). `--ctx auto` sizes up to the trained context times this.
    pub fn extension(&self) -> f64 {
        // llama.cpp scales nothing with scaling `none`; with none given it
        // takes the model's, which is linear when the GGUF names none.
        match (self.scaling, self.freq_scale) {
            (Some(RopeScaling::None), _) => 1.0,
            (_, Some(s)) if s > 0.0 && s < 1.0 => 1.0 / s as f64,
            _ => 1.0,
        }
    }

    /// The context `--ctx auto` may use for a model trained on `n_ctx_train`
    /// tokens: YaRN's original context (when given) or the trained one, times
    /// the extension.
    pub(crate) fn auto_cap(&self, n_ctx_train: u32) -> u32 {
        let base = match self.scaling {
            Some(RopeScaling::Yarn) => self.yarn_orig_ctx.filter(|n| *n > 0).unwrap_or(n_ctx_train),
            _ => n_ctx_train,
        };
        (base as f64 * self.extension()).min(CtxSize::MAX as f64) as u32
    }
}

/// The RoPE values as a user gives them (a command line or a sweep file),
/// before `scale` N becomes the frequency scale 1/N: [`RopeInput::resolve`]
/// is the one place their ranges and their one exclusion are checked.
#[derive(Debug, Clone, Copy, Default)]
pub struct RopeInput {
    pub scaling: Option<RopeScaling>,
    pub scale: Option<f32>,
    pub freq_scale: Option<f32>,
    pub freq_base: Option<f32>,
    pub yarn_orig_ctx: Option<usize>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum RopeError {
    #[error("{value} is not from {min} to {max}")]
    OutOfRange { setting: Setting, value: f32, min: &'static str, max: f32 },
    /// A scale with `--rope-scaling none`: llama.cpp then ignores it.
    #[error("{value} with RoPE scaling none changes nothing (llama.cpp ignores the scale then); choose linear or yarn")]
    ScaleWithoutScaling { setting: Setting, value: f32 },
    #[error("{value} is not a token count from 1 to {max}", max = CtxSize::MAX)]
    YarnOrigCtx { value: usize },
    /// Both the scale and the frequency scale: one is the other's inverse.
    #[error("the scale and the frequency scale are both given; a scale N is a frequency scale 1/N, keep one")]
    ScaleAndFreqScale,
    /// YaRN with positions compressed instead of stretched: its corrections
    /// are defined for extending a context only.
    #[error("{value} would shrink the context, which YaRN does not do: a scale is 1 or more, a frequency scale 1 or less")]
    YarnShrinks { setting: Setting, value: f32 },
}

impl RopeError {
    /// The value at fault (both, for the exclusion: the scale is named).
    pub fn setting(&self) -> Setting {
        match self {
            RopeError::OutOfRange { setting, .. } => *setting,
            RopeError::YarnOrigCtx { .. } => Setting::YarnOrigCtx,
            RopeError::ScaleAndFreqScale => Setting::RopeScale,
            RopeError::YarnShrinks { setting, .. } | RopeError::ScaleWithoutScaling { setting, .. } => *setting,
        }
    }
}

impl Explain for RopeError {
    fn explain(&self, n: &dyn Names) -> String {
        match self {
            RopeError::ScaleAndFreqScale => {
                let (scale, freq) = (n.name(Setting::RopeScale), n.name(Setting::RopeFreqScale));
                format!("{scale} and {freq} are both given; {scale} N is {freq} 1/N, keep one")
            }
            e => format!("{}: {e}", n.name(e.setting())),
        }
    }
}

impl RopeInput {
    /// The largest scale (and frequency scale): a stretch past any model's use.
    pub(crate) const MAX_SCALE: f32 = 1024.0;
    /// The smallest scale (and frequency scale), as text for messages: a
    /// scale's inverse is the frequency scale llama.cpp is given, which must
    /// stay finite.
    pub(crate) const MIN_SCALE: (f32, &str) = (1.0 / 1024.0, "1/1024");
    /// The largest base frequency.
    pub(crate) const MAX_FREQ_BASE: f32 = 1e12;
    /// The smallest base frequency: below 1 the rotation's frequencies grow
    /// with the dimension instead of falling.
    pub(crate) const MIN_FREQ_BASE: (f32, &str) = (1.0, "1");

    /// The settings llama.cpp is given, once every value is in range.
    pub fn resolve(self) -> Result<Rope, RopeError> {
        let check = |v: Option<f32>, setting: Setting, (min, min_text): (f32, &'static str), max: f32| match v {
            Some(value) if !(value.is_finite() && value >= min && value <= max) => {
                Err(RopeError::OutOfRange { setting, value, min: min_text, max })
            }
            v => Ok(v),
        };
        let scale = check(self.scale, Setting::RopeScale, Self::MIN_SCALE, Self::MAX_SCALE)?;
        let freq_scale = check(self.freq_scale, Setting::RopeFreqScale, Self::MIN_SCALE, Self::MAX_SCALE)?;
        let freq_base = check(self.freq_base, Setting::RopeFreqBase, Self::MIN_FREQ_BASE, Self::MAX_FREQ_BASE)?;
        if scale.is_some() && freq_scale.is_some() {
            return Err(RopeError::ScaleAndFreqScale);
        }
        if self.scaling == Some(RopeScaling::None) {
            match (scale, freq_scale) {
                (Some(value), _) => return Err(RopeError::ScaleWithoutScaling { setting: Setting::RopeScale, value }),
                (_, Some(value)) => return Err(RopeError::ScaleWithoutScaling { setting: Setting::RopeFreqScale, value }),
                _ => {}
            }
        }
        if let Some(value) = self.yarn_orig_ctx.filter(|n| !(1..=CtxSize::MAX as usize).contains(n)) {
            return Err(RopeError::YarnOrigCtx { value });
        }
        if self.scaling == Some(RopeScaling::Yarn) {
            match (scale, freq_scale) {
                (Some(value), _) if value < 1.0 => return Err(RopeError::YarnShrinks { setting: Setting::RopeScale, value }),
                (_, Some(value)) if value > 1.0 => return Err(RopeError::YarnShrinks { setting: Setting::RopeFreqScale, value }),
                _ => {}
            }
        }
        Ok(Rope {
            scaling: self.scaling,
            freq_base,
            freq_scale: scale.map(|n| 1.0 / n).or(freq_scale),
            yarn_orig_ctx: self.yarn_orig_ctx.map(|n| n as u32),
        })
    }
}

/// A setting that llama.cpp would reject less clearly.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ConfigError {
    #[error("a quantised V cache ({0}) needs flash attention")]
    QuantizedVNeedsFlashAttn(&'static str),
}

impl Explain for ConfigError {
    fn explain(&self, n: &dyn Names) -> String {
        let ConfigError::QuantizedVNeedsFlashAttn(t) = self;
        format!(
            "a quantised V cache ({}) needs flash attention; drop {} or use {}",
            n.set(Setting::KvV, t),
            n.set(Setting::FlashAttn, "off"),
            n.set(Setting::KvV, "f16")
        )
    }
}

/// Every parameter of a context that a run records (`manifest.context`).
///
/// Serialised as it is, it is the manifest's `context`; [`ContextConfig::key`]
/// is the part that decides an evaluated state, shared by the prefix cache key
/// and a sweep's resume key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextConfig {
    pub n_ctx: u32,
    pub type_k: KvType,
    pub type_v: KvType,
    pub flash_attn: FlashAttn,
    pub swa_full: bool,
    /// One KV buffer shared by all sequences, so that copying the prefix
    /// into a sequence shares its cells instead of duplicating them.
    pub kv_unified: bool,
    pub n_batch: u32,
    pub n_ubatch: u32,
    pub threads: i32,
    /// Layers offloaded to a GPU when the model was loaded.
    pub gpu_layers: u32,
    /// Sequences the context holds: 1, or 1 + N for `N` parallel answers
    /// (sequence 0 keeps the prefix, the others answer). Follows from the
    /// run's decoding, which the manifest records, so it is not written.
    #[serde(skip, default = "one")]
    pub n_seq: u32,
    /// RoPE settings that replace the model's (absent: the model's own).
    #[serde(default, skip_serializing_if = "Rope::is_default")]
    pub rope: Rope,
    /// What llama.cpp does about rotating the KV cache, decided for the
    /// model (`bench::decide`); absent in files made before it was recorded
    /// (llama.cpp's `auto`, unless the environment said otherwise) and in a
    /// config built by hand, which then gets `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_rotation: Option<Rotation>,
}

fn one() -> u32 {
    1
}

/// llama.cpp's largest useful batch for one decode call here.
const MAX_BATCH: u32 = 512;

impl ContextConfig {
    /// A sequential run's context: one sequence of `n_ctx` cells, batches of
    /// up to 512 tokens; `threads` `None` is every core.
    pub fn sequential(
        n_ctx: u32,
        kv: (KvType, KvType),
        flash_attn: FlashAttn,
        swa_full: bool,
        threads: Option<i32>,
        gpu_layers: u32,
    ) -> ContextConfig {
        let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get() as i32).unwrap_or(4));
        let n_batch = MAX_BATCH.min(n_ctx);
        ContextConfig {
            n_ctx,
            type_k: kv.0,
            type_v: kv.1,
            flash_attn,
            swa_full,
            kv_unified: false,
            n_batch,
            n_ubatch: n_batch,
            threads,
            gpu_layers,
            n_seq: 1,
            rope: Rope::default(),
            kv_rotation: None,
        }
    }

    /// Refuses combinations llama.cpp would reject less clearly.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.type_v.is_quantized() && self.flash_attn == FlashAttn::Off {
            return Err(ConfigError::QuantizedVNeedsFlashAttn(self.type_v.as_str()));
        }
        Ok(())
    }
}

/// The context a run asks for, before its plan sizes it.
#[derive(Debug, Clone)]
pub struct ContextSettings {
    /// (K, V) cache types.
    pub kv: (KvType, KvType),
    pub flash_attn: FlashAttn,
    pub swa_full: bool,
    /// `None`: every core.
    pub threads: Option<i32>,
    pub gpu_layers: u32,
    /// Context extension (default: the model's own RoPE).
    pub rope: Rope,
    /// llama.cpp's rotation of a quantised KV cache.
    pub kv_rotation: KvRotation,
}

impl Default for ContextSettings {
    /// The method's defaults: q8_0 K and V, nothing offloaded (the commands
    /// offload what fits on a GPU build: `bench::default_gpu_layers`).
    fn default() -> Self {
        ContextSettings {
            kv: (KvType::Q8_0, KvType::Q8_0),
            flash_attn: FlashAttn::Auto,
            swa_full: false,
            threads: None,
            gpu_layers: 0,
            rope: Rope::default(),
            kv_rotation: KvRotation::Auto,
        }
    }
}

impl ContextSettings {
    /// A sequential run's context of `n_ctx` cells.
    pub fn config(&self, n_ctx: u32) -> ContextConfig {
        ContextConfig {
            rope: self.rope,
            ..ContextConfig::sequential(n_ctx, self.kv, self.flash_attn, self.swa_full, self.threads, self.gpu_layers)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_name_is_shown_whole_when_short_and_cut_when_long() {
        let e = "q9".parse::<KvType>().unwrap_err().to_string();
        assert!(e.starts_with("unknown variant `q9`, expected one of `f32`"), "{e}");
        let long = "x".repeat(200_000);
        let e = long.parse::<KvType>().unwrap_err().to_string();
        assert!(e.len() < 600, "{} bytes", e.len());
        assert!(e.contains(&format!("`{}… (200000 characters)`", "x".repeat(64))), "{e}");
    }

    #[test]
    fn rope_values_are_ranged_once() {
        let ok = RopeInput { scale: Some(4.0), freq_base: Some(1e6), yarn_orig_ctx: Some(8192), ..RopeInput::default() };
        assert_eq!(ok.resolve(), Ok(Rope { scaling: None, freq_base: Some(1e6), freq_scale: Some(0.25), yarn_orig_ctx: Some(8192) }));
        let out = |i: RopeInput| i.resolve().unwrap_err().setting();
        assert_eq!(out(RopeInput { scale: Some(0.0), ..RopeInput::default() }), Setting::RopeScale);
        assert_eq!(out(RopeInput { scale: Some(1024.5), ..RopeInput::default() }), Setting::RopeScale);
        assert_eq!(out(RopeInput { freq_scale: Some(f32::NAN), ..RopeInput::default() }), Setting::RopeFreqScale);
        assert_eq!(out(RopeInput { freq_base: Some(2e12), ..RopeInput::default() }), Setting::RopeFreqBase);
        assert_eq!(out(RopeInput { yarn_orig_ctx: Some(0), ..RopeInput::default() }), Setting::YarnOrigCtx);
        assert_eq!(out(RopeInput { yarn_orig_ctx: Some((1 << 24) + 1), ..RopeInput::default() }), Setting::YarnOrigCtx);
        let both = RopeInput { scale: Some(2.0), freq_scale: Some(0.5), ..RopeInput::default() };
        assert_eq!(both.resolve(), Err(RopeError::ScaleAndFreqScale));
        // YaRN only stretches: a scale under 1 (a frequency scale over 1) is
        // refused with it, and accepted with linear scaling.
        let yarn = |scale, freq_scale| RopeInput { scaling: Some(RopeScaling::Yarn), scale, freq_scale, ..RopeInput::default() };
        assert_eq!(yarn(Some(0.5), None).resolve(), Err(RopeError::YarnShrinks { setting: Setting::RopeScale, value: 0.5 }));
        assert_eq!(yarn(None, Some(2.0)).resolve(), Err(RopeError::YarnShrinks { setting: Setting::RopeFreqScale, value: 2.0 }));
        assert!(yarn(Some(1.0), None).resolve().is_ok() && yarn(None, Some(1.0)).resolve().is_ok());
        let linear = RopeInput { scaling: Some(RopeScaling::Linear), scale: Some(0.5), ..RopeInput::default() };
        assert!(linear.resolve().is_ok());
        // The largest values are in range.
        let max = RopeInput { scale: Some(1024.0), freq_base: Some(1e12), yarn_orig_ctx: Some(1 << 24), ..RopeInput::default() };
        assert!(max.resolve().is_ok());
    }

    #[test]
    fn names_round_trip_through_serde() {
        for t in <KvType as strum::VariantArray>::VARIANTS {
            let json = serde_json::to_string(&t).unwrap();
            assert_eq!(json, format!("\"{}\"", t.as_str()));
            assert_eq!(serde_json::from_str::<KvType>(&json).unwrap(), *t);
        }
        for f in <FlashAttn as strum::VariantArray>::VARIANTS {
            assert_eq!(serde_json::to_string(&f).unwrap(), format!("\"{}\"", f.as_str()));
        }
    }
}
