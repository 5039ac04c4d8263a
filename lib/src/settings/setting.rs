//! One name for every setting, and the one way an error about settings is
//! worded. The library's errors name a [`Setting`]; each face says it in its
//! own words through [`Names`]: the command line as its flag (`--ctx`), a
//! sweep file as its key (`params.threads`). So a message is written once,
//! here in the library, and reads right on both.

/// Every setting a run, a sweep, a scoring or `ask` is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, strum::VariantArray, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Setting {
    // The corpus.
    Corpus,
    CorpusDir,
    Include,
    Exclude,
    Language,
    // The targets and their scoring.
    Count,
    Lines,
    Seed,
    CropLines,
    SkipBlank,
    Rename,
    Pass,
    Normalize,
    Anchor,
    /// The scoring policy (posrecall's own or codeneedle's).
    Policy,
    /// Which lines a score counts: all, or code alone.
    Credit,
    /// The fewest code lines a target's expected lines may hold.
    MinCodeLines,
    /// The sampled targets to keep.
    Only,
    // The prompt and its plan.
    Probe,
    Crop,
    Ctx,
    MaxPrefixTokens,
    MaxNewTokens,
    ChatTemplate,
    TemplateKwargs,
    Think,
    ThinkBudget,
    // The context.
    Kv,
    KvK,
    KvV,
    KvRotation,
    FlashAttn,
    SwaFull,
    Threads,
    GpuLayers,
    RopeScaling,
    RopeScale,
    RopeFreqScale,
    RopeFreqBase,
    YarnOrigCtx,
    // Decoding.
    Parallel,
    CheckSequential,
    FixedTokens,
    KvMemory,
    Restore,
    SnapshotMemory,
    ForcedOnly,
    NoForced,
    Draft,
    DraftMax,
    CheckDraft,
    // The run.
    Build,
    ClosedBook,
    PrefixCache,
    /// Finish an unfinished run file (`bench --resume`).
    Resume,
    Lengths,
    EffectiveAt,
    Reference,
    SaveReference,
    ReferenceTopK,
    // A served model (`ask`).
    Concurrency,
    Retries,
    Timeout,
    // Where runs go.
    OutDir,
    Shard,
}

/// How a face names settings: the words its user wrote.
pub trait Names {
    /// The setting alone (`--ctx`, `params.threads`).
    fn name(&self, s: Setting) -> String;

    /// The setting given `value`, as its user would write it
    /// (`--probe completion`; a file says `probe = "completion"`).
    fn set(&self, s: Setting, value: &str) -> String;
}

/// An error about settings, worded for one face: the same facts and the
/// same fix, with each setting named as that face names it.
pub trait Explain {
    fn explain(&self, n: &dyn Names) -> String;
}

/// The keys of posrecall's files: `models.toml` (`[params]` and `[corpus]`
/// keys in full, a `[[model]]`'s own keys bare, as its errors put the model
/// first: model `NAME`: ctx) and the targets file's `params`, which use the
/// same names. A setting neither file holds is named by its snake-case
/// name; `matrix` names those by its flags instead.
pub struct Keys;

impl Keys {
    /// The key `s` is read from, if a file holds it.
    pub fn key(s: Setting) -> Option<&'static str> {
        use Setting as S;
        Some(match s {
            S::Corpus => "corpus.path",
            S::CorpusDir => "corpus.dir",
            S::Include => "corpus.include",
            S::Exclude => "corpus.exclude",
            S::Language => "corpus.language",
            S::CropLines => "corpus.crop_lines",
            S::Crop => "corpus.crop",
            S::MaxPrefixTokens => "corpus.max_tokens",
            S::Count => "params.count",
            S::Lines => "params.lines",
            S::Seed => "params.seed",
            S::SkipBlank => "params.skip_blank",
            S::Rename => "params.rename",
            S::Pass => "params.pass",
            S::Normalize => "params.normalize",
            S::Anchor => "params.anchor",
            S::Policy => "params.policy",
            S::Credit => "params.credit",
            S::MinCodeLines => "params.min_code_lines",
            S::MaxNewTokens => "params.max_new_tokens",
            S::ThinkBudget => "params.think_budget",
            S::FlashAttn => "params.flash_attn",
            S::SwaFull => "params.swa_full",
            S::Threads => "params.threads",
            S::Draft => "params.draft",
            S::DraftMax => "params.draft_max",
            S::ClosedBook => "params.closed_book",
            S::Lengths => "params.lengths",
            S::EffectiveAt => "params.effective_at",
            S::Probe => "probe",
            S::Ctx => "ctx",
            S::ChatTemplate => "chat_template",
            S::TemplateKwargs => "template_kwargs",
            S::Think => "think",
            S::Kv | S::KvK | S::KvV => "kv",
            S::KvRotation => "kv_rotation",
            S::GpuLayers => "gpu_layers",
            S::RopeScaling => "rope_scaling",
            S::RopeScale => "rope_scale",
            S::RopeFreqScale => "rope_freq_scale",
            S::RopeFreqBase => "rope_freq_base",
            S::YarnOrigCtx => "yarn_orig_ctx",
            S::Build => "build",
            S::Reference => "reference_kv",
            S::Parallel
            | S::CheckSequential
            | S::FixedTokens
            | S::KvMemory
            | S::Restore
            | S::SnapshotMemory
            | S::ForcedOnly
            | S::NoForced
            | S::CheckDraft
            | S::PrefixCache
            | S::Resume
            | S::OutDir
            | S::Shard
            | S::Only
            | S::SaveReference
            | S::ReferenceTopK
            | S::Concurrency
            | S::Retries
            | S::Timeout => return None,
        })
    }

    /// `key = value` in TOML's spelling: numbers and booleans bare, names quoted.
    pub fn assignment(key: &str, value: &str) -> String {
        let bare = value.parse::<f64>().is_ok() || matches!(value, "true" | "false");
        match bare {
            true => format!("{key} = {value}"),
            false => format!("{key} = \"{value}\""),
        }
    }
}

impl Names for Keys {
    fn name(&self, s: Setting) -> String {
        Keys::key(s).map_or_else(|| <&str>::from(s).to_string(), str::to_string)
    }

    fn set(&self, s: Setting, value: &str) -> String {
        Keys::assignment(&self.name(s), value)
    }
}
