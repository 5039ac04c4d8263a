//! The run file: serde types that *are* the documented schema (docs/RUN_FORMAT.md).
//!
//! `bench` and `score` write it; `report` and `compare` read it. Fields only
//! `bench` knows (model, context, timings) are optional so that a run scored
//! from outside answers has the same shape.

use crate::decode::StepStats;
use crate::score::forced::{Forced, ForcedSummary};
use crate::score::{Normalize, Policy, Score};
use crate::settings::ContextConfig;
use crate::targets::Target;
use crate::targets::crop::Crop;
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Version of the run-file schema. 2: blank lines are credited only in
/// place (docs/METHOD.md §6); version-1 runs were scored under the old rule
/// and cannot be compared with these.
pub(crate) const FORMAT_VERSION: u32 = 2;

/// Version of the targets-file schema (it holds no score, so the scoring
/// rule does not change it).
pub(crate) const TARGETS_FORMAT_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunFile {
    pub format: u32,
    pub manifest: Manifest,
    pub targets: Vec<TargetResult>,
    pub summary: Summary,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<Timings>,
    /// Per length, with the effective length (`bench --lengths`); `targets`
    /// then holds every window's targets and `summary` sums them all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ladder: Option<LadderRecord>,
    /// Present only while a run is still going, or after it stopped before
    /// its end: `targets` then holds the targets it finished, `summary` sums
    /// them, and there are no `timings` (`bench --resume` finishes it). A
    /// finished run has no such field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unfinished: Option<Unfinished>,
}

/// What an unfinished run file says about the run it is part of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unfinished {
    /// Targets the whole run asks (more than the file holds).
    pub asked: usize,
}

impl RunFile {
    /// `unfinished: K of N targets`, for a run file that stopped before its
    /// end; `None` for a finished one.
    pub fn unfinished_label(&self) -> Option<String> {
        self.unfinished.map(|u| format!("unfinished: {} of {} targets", self.targets.len(), u.asked))
    }
}

/// A length ladder's record: docs/METHOD.md §8.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LadderRecord {
    /// The pass rate the effective length must hold at every length up to it.
    pub effective_at: f64,
    /// The longest length at which the pass rate, and the rate at every
    /// shorter length, is at least `effective_at`; `None`: not even the
    /// shortest.
    pub effective_length: Option<usize>,
    /// Why the ladder stops before the lengths asked for, when it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped: Option<String>,
    pub rungs: Vec<RungRecord>,
}

/// One length of a ladder.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RungRecord {
    /// The length asked for, in prefix tokens.
    pub length: usize,
    /// The window's prefix tokens (at most `length`, less where the ladder stops).
    pub prefix_tokens: usize,
    /// The window's lines.
    pub crop: Crop,
    /// Prefix tokens already evaluated (shared with the previous window) when
    /// this window's evaluation began.
    pub resumed_at: usize,
    /// Tokens evaluated for this window (0 when loaded from the prefix cache).
    pub prefill_tokens: usize,
    pub prefill_ms: f64,
    /// `prefill` or `cache`.
    pub prefix_source: String,
    /// This window's targets: totals, depth quarters, forced means.
    pub summary: Summary,
    /// passes / targets, with its 95% Wilson interval.
    pub pass_rate: f64,
    pub pass_low: f64,
    pub pass_high: f64,
}

/// How a ladder length is written for people: `4k` when a whole number of
/// K (1024 tokens), else the tokens.
pub fn length_label(length: usize) -> String {
    match length % 1024 {
        0 => format!("{}k", length / 1024),
        _ => length.to_string(),
    }
}

impl RungRecord {
    /// The effective length of `rungs` at threshold `at`.
    pub fn effective_length(rungs: &[RungRecord], at: f64) -> Option<usize> {
        rungs.iter().take_while(|r| r.pass_rate >= at).last().map(|r| r.length)
    }

    /// A window's summary and pass rate from its targets' results; the rest
    /// of the record (length, crop, prefill) is left empty for the caller.
    /// One rule for the ladder that asks and for `rescore`, which scores
    /// the same answers again.
    pub fn scored(results: &[TargetResult]) -> RungRecord {
        let summary = Summary::of(results);
        // A ladder always generates its answers (`--forced-only` is refused
        // with it, and in a run file with one).
        let passes = summary.total.recall.as_ref().map_or(0, |r| r.passes);
        let (k, n) = (passes as u64, summary.total.count as u64);
        let (pass_low, pass_high) = crate::score::stats::wilson95(k, n);
        RungRecord {
            length: 0,
            prefix_tokens: 0,
            crop: Crop { mode: crate::targets::crop::CropMode::Lines, first_line: 0, last_line: 0, sha256: String::new() },
            resumed_at: 0,
            prefill_tokens: 0,
            prefill_ms: 0.0,
            prefix_source: String::new(),
            pass_rate: if n == 0 { 0.0 } else { k as f64 / n as f64 },
            pass_low,
            pass_high,
            summary,
        }
    }

    /// This window's scores made again from `results` (its targets,
    /// rescored): what [`RungRecord::scored`] gives, the rest kept.
    pub fn rescore(&mut self, results: &[TargetResult]) {
        let fresh = RungRecord::scored(results);
        (self.summary, self.pass_rate, self.pass_low, self.pass_high) = (fresh.summary, fresh.pass_rate, fresh.pass_low, fresh.pass_high);
    }
}

crate::settings::named_choice! {
    /// What wrote a run file.
    pub enum MadeBy {
        /// A model run in-process.
        Bench,
        /// Answers made elsewhere, scored against a targets file.
        Score,
    }
}

crate::settings::named_choice! {
    /// How a run's answers were generated (`params.decode_mode`): runs are
    /// compared like with like.
    pub enum DecodeMode {
        /// One question after another.
        Sequential,
        /// Several questions at once, in one batch.
        Parallel,
        /// No answers: the teacher-forced pass only.
        #[strum(serialize = "forced-only")]
        ForcedOnly,
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Manifest {
    pub command: MadeBy,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelInfo>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextConfig>,
    pub corpus: CorpusInfo,
    pub params: Params,
    pub runtime: Runtime,
    /// Where answers scored by `score` came from (`score --url`, `--model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external: Option<External>,
    /// The reference the forced pass was measured against (`bench --reference`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference: Option<ReferenceInfo>,
    /// The run file this one was rescored from (`posrecall rescore`): its
    /// answers, scored again under `params`, without a model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rescored_from: Option<RescoredFrom>,
}

/// The run file a rescored run's answers came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RescoredFrom {
    /// As given to `rescore`.
    pub path: String,
    /// Of the file's bytes as read.
    pub sha256: String,
}

/// The reference run behind `forced.kld`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReferenceInfo {
    pub path: String,
    /// sha256 of the reference file.
    pub sha256: String,
    /// The reference run's build label and model file sha256.
    pub build: String,
    pub model_sha256: String,
    /// Its KV-cache types.
    pub type_k: crate::settings::KvType,
    pub type_v: crate::settings::KvType,
    /// What llama.cpp did about rotating its KV cache (absent in references
    /// made before rotation was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv_rotation: Option<crate::settings::Rotation>,
    /// Tokens it stored per forced position.
    pub top_k: usize,
}

/// The server and model behind a `score` run's answers (`posrecall ask`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct External {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
}

impl External {
    /// How reports name the model: `MODEL @ URL`, `MODEL`, `external @ URL`;
    /// `None` when neither is known.
    pub fn label(&self) -> Option<String> {
        let nonempty = |s: &Option<String>| s.as_deref().map(str::trim).filter(|s| !s.is_empty()).map(String::from);
        match (nonempty(&self.model), nonempty(&self.url)) {
            (Some(m), Some(u)) => Some(format!("{m} @ {u}")),
            (Some(m), None) => Some(m),
            (None, Some(u)) => Some(format!("external @ {u}")),
            (None, None) => None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModelInfo {
    /// The file given: the model, or the first part of a split model.
    pub path: String,
    /// The file's sha256; for a split model, the sha256 of `split:` and its
    /// parts' sha256s, one per line (`parts` has them).
    pub sha256: String,
    /// Bytes of every file of the model.
    pub size_bytes: u64,
    /// A split model's parts, in order; absent for a model in one file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<ModelPart>,
    pub architecture: Option<String>,
    pub name: Option<String>,
    /// The quantisation, e.g. `Q4_K_M`.
    pub file_type: Option<String>,
    pub build: String,
    pub n_params: u64,
    pub n_ctx_train: u32,
    pub chat_template: bool,
    /// The hub reference the model was given as: the reference, the commit
    /// its revision resolved to, and the file(s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hub: Option<crate::support::hub::Origin>,
    /// Which layers keep a KV cache and which a sliding window or a
    /// recurrent state, so that a hybrid, a sliding-window and a dense model
    /// are not compared as alike; absent in files made before it was
    /// recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers: Option<Layers>,
}

/// A model's layers by what they keep, from its GGUF metadata as llama.cpp
/// lays them out (the bench layer fills it from the engine's state shape).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layers {
    /// Every layer.
    pub total: u64,
    /// Layers whose KV cache holds every position.
    pub full_attention: u64,
    /// Layers whose KV cache holds the last `window` positions (all of
    /// them with `swa_full`).
    pub sliding_window: u64,
    /// The sliding window in tokens; 0 for a model without one.
    pub window: u64,
    /// Layers that keep a recurrent state and no KV cache (a hybrid's).
    pub recurrent: u64,
}

impl Layers {
    /// Layers that hold a KV cache.
    pub fn with_kv(&self) -> u64 {
        self.full_attention + self.sliding_window
    }
}

impl ModelInfo {
    /// Bits per weight: every byte of the model's files × 8 over its
    /// parameters, as llama-bench's size and parameter columns give it;
    /// `None` where the parameters are unknown.
    pub fn bits_per_weight(&self) -> Option<f64> {
        (self.n_params > 0).then(|| self.size_bytes as f64 * 8.0 / self.n_params as f64)
    }
}

/// One file of a split model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelPart {
    pub path: String,
    pub size_bytes: u64,
    pub sha256: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CorpusInfo {
    pub path: String,
    pub sha256: String,
    pub language: String,
    pub crop: Crop,
    /// Tokens of the evaluated prefix (bench only).
    #[serde(default)]
    pub prefix_tokens: Option<usize>,
    /// Set when the function names were renamed (`--rename`); the mapping is
    /// kept in targets files only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rename: Option<crate::corpus::RenameInfo>,
    /// A folder corpus (`path` is the folder): its files in the order they
    /// were concatenated, each with its sha256.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<crate::corpus::SourceFile>,
    /// A folder corpus's include and exclude globs, as given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub include: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// The functions of the kept lines that no question could point at:
    /// neither their name nor their header is unique (`--anchor header`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ambiguous: Vec<crate::targets::Ambiguous>,
    /// `--min-code-lines`: how many eligible functions of the kept lines
    /// were left out of the draw for holding fewer code lines; else absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub few_code_lines: Option<usize>,
}

impl CorpusInfo {
    /// The corpus this records, read again from `path` (the recorded one,
    /// or where it is now): a folder with the same globs, or one file, in
    /// the language recorded.
    pub fn spec(&self, path: &Path) -> crate::corpus::CorpusSpec {
        use crate::corpus::CorpusSpec;
        let language = (self.language != "mixed").then(|| self.language.clone());
        if self.files.is_empty() {
            return CorpusSpec { language, ..CorpusSpec::file(path) };
        }
        CorpusSpec { path: path.to_path_buf(), dir: true, include: self.include.clone(), exclude: self.exclude.clone(), language }
    }

    /// `manifest.corpus` / the targets file's `corpus` for a source and its crop.
    pub fn of(src: &crate::corpus::Source, crop: Crop, prefix_tokens: Option<usize>) -> CorpusInfo {
        CorpusInfo {
            path: src.corpus.path.display().to_string(),
            // The file on disk; a renamed text's own sha256 is in `rename`.
            sha256: src.file_sha256.clone(),
            language: src.language.name().to_string(),
            crop,
            prefix_tokens,
            rename: src.renamed.as_ref().map(|r| crate::corpus::RenameInfo { mapping: Default::default(), ..r.clone() }),
            files: src.files.clone(),
            include: src.include.clone(),
            exclude: src.exclude.clone(),
            ambiguous: Vec::new(),
            few_code_lines: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Params {
    pub count: usize,
    pub lines: usize,
    pub pass: usize,
    pub seed: u64,
    pub normalize: Normalize,
    pub skip_blank: bool,
    /// How the questions pointed at their function (`--anchor`); absent
    /// for `name`, as in runs made before it could be chosen.
    #[serde(default, skip_serializing_if = "crate::targets::Anchor::is_default")]
    pub anchor: crate::targets::Anchor,
    #[serde(default)]
    pub probe: Option<crate::prompt::ProbeKind>,
    #[serde(default)]
    pub max_new_tokens: Option<usize>,
    #[serde(default)]
    pub decode_mode: Option<DecodeMode>,
    /// Where draft tokens came from (`--draft`: none, lookup or truth; the
    /// mode that ran, none where drafts could not be exact); absent in
    /// runs that generated nothing, at a fixed length, and in older runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft: Option<crate::decode::draft::DraftMode>,
    /// The most draft tokens verified in one step (`--draft-max`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_max: Option<usize>,
    /// Sequences decoded at once (`bench --parallel N`; at most the target count).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel: Option<usize>,
    /// Every answer was exactly this many tokens (`--fixed-tokens`): a throughput run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixed_tokens: Option<usize>,
    /// The teacher-forced pass was skipped (`--no-forced`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_forced: bool,
    /// Only these of the sampled targets were asked (`--only`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only: Option<Vec<String>>,
    /// Whether a thinking model was let think (`--think`; chat probe only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think: Option<crate::prompt::template::Think>,
    /// Reasoning tokens allowed before the answer budget (`--think on`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub think_budget: Option<usize>,
    /// The scoring policy (`--policy`); absent for posrecall's own, so that
    /// a run scored as before is the same file as before.
    #[serde(default, skip_serializing_if = "Policy::is_default")]
    pub policy: Policy,
    /// Which lines counted (`--credit`); absent for all, the default.
    #[serde(default, skip_serializing_if = "crate::score::Credit::is_default")]
    pub credit: crate::score::Credit,
    /// The fewest code lines a target's expected lines held to be drawn
    /// (`--min-code-lines`); absent for 0, the default (off).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub min_code_lines: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Params {
    /// How this run's answers were scored, as the scorer takes it.
    pub fn score_options(&self) -> crate::score::ScoreOptions {
        crate::score::ScoreOptions {
            lines: self.lines,
            pass: self.pass,
            normalize: self.normalize,
            skip_blank: self.skip_blank,
            policy: self.policy,
            credit: self.credit,
        }
    }

    /// The parameters of `spec`, before any model is involved.
    pub fn of(spec: &crate::targets::TargetSpec) -> Params {
        Params {
            count: spec.count,
            lines: spec.lines,
            pass: spec.pass(),
            seed: spec.seed,
            normalize: spec.normalize(),
            skip_blank: spec.skip_blank,
            anchor: spec.anchor,
            probe: None,
            max_new_tokens: None,
            decode_mode: None,
            draft: None,
            draft_max: None,
            parallel: None,
            fixed_tokens: None,
            no_forced: false,
            only: None,
            think: None,
            think_budget: None,
            policy: spec.policy,
            credit: spec.credit,
            min_code_lines: spec.min_code_lines,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Runtime {
    pub posrecall: String,
    #[serde(default)]
    pub llama_cpp_2: Option<String>,
    #[serde(default)]
    pub llama_cpp_sys_2: Option<String>,
    /// What computed, as llama.cpp registered it at run time (not the
    /// features the binary was built with): `cpu`, `cuda`, `vulkan`, `metal`.
    #[serde(default)]
    pub backend: Option<String>,
    /// The GPU that computed, as llama.cpp names and describes it
    /// (`CUDA0 (NVIDIA H100 80GB HBM3)`): the one the offloaded layers ran
    /// on, and with none offloaded the one llama.cpp sent the prefill's
    /// large batches to. Absent when llama.cpp found no GPU, and in older
    /// runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<String>,
    /// The CPU kernels that ran, as ggml names the CPU backend's features
    /// (`engine::device::cpu_features`): `["SSE3", …, "AVX2", "AVX512",
    /// …, "REPACK"]`. Absent in older runs and where no model ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_features: Option<Vec<String>>,
    #[serde(default)]
    pub chat_renderer: Option<String>,
    #[serde(default)]
    pub prefix_sha256: Option<String>,
    /// Whether the prefix tokens followed by each question's tokens equal the
    /// tokenization of the whole prompt (bench only).
    #[serde(default)]
    pub prompt_boundary_exact: Option<bool>,
    /// Why `--parallel` fell back to answering one question at a time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_fallback: Option<String>,
    /// Why drafts were asked for and answers were decoded without them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_fallback: Option<String>,
    /// How each question's changes to the prefix state were undone: `lean`
    /// or `full` (bench only; absent in older runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restore: Option<String>,
    /// The chat template: its source and sha256, the thinking switches it
    /// has and the variables it was rendered with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<crate::prompt::template::TemplateRecord>,
}

impl Runtime {
    /// What is known without a model: posrecall's own version and the linked crates.
    pub fn current() -> Runtime {
        Runtime {
            posrecall: env!("CARGO_PKG_VERSION").to_string(),
            llama_cpp_2: Some(env!("POSRECALL_LLAMA_CPP_2_VERSION").to_string()),
            llama_cpp_sys_2: Some(env!("POSRECALL_LLAMA_CPP_SYS_2_VERSION").to_string()),
            backend: None,
            device: None,
            cpu_features: None,
            chat_renderer: None,
            prefix_sha256: None,
            prompt_boundary_exact: None,
            parallel_fallback: None,
            draft_fallback: None,
            restore: None,
            template: None,
        }
    }
}

/// One target's question, answer and score.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TargetResult {
    pub name: String,
    pub line: usize,
    pub byte_offset: usize,
    pub token_offset: Option<usize>,
    pub depth: f64,
    /// The length of the ladder window this target was asked in
    /// (`bench --lengths`); its depth is within that window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub length: Option<usize>,
    pub expected: Vec<String>,
    /// The answer; absent where none was generated (`bench --forced-only`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    /// The answer's diff view and counts, in the run file as fields of the
    /// target (`lines` … `pass`; docs/METHOD.md §6 for the blank lines);
    /// absent, not zero, where no answer was generated.
    #[serde(flatten)]
    pub score: Option<Score>,
    /// Tokens generated for this answer (bench only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated_tokens: Option<usize>,
    /// The reasoning split off the answer before it was parsed (a thinking
    /// model's `<think>` block, gpt-oss's analysis channel): never scored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<String>,
    /// Tokens of the reasoning, markers included (bench: the generated
    /// tokens before the answer; ask: the server's count when it gave one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<usize>,
    /// The generated bytes were not valid UTF-8: `response` holds U+FFFD
    /// where they were not (bench and ask; absent when false).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub invalid_utf8: bool,
    /// Teacher-forced metrics (bench only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forced: Option<Forced>,
    /// The same question with no file in the context (`bench --closed-book`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_book: Option<ClosedBook>,
    /// matched − closed_book.matched: the recall only the context explains.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_matched: Option<i64>,
    /// The same question answered one at a time (`bench --parallel N --check-sequential`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequential: Option<SequentialCheck>,
    /// The drafts of a drafted answer: tokens proposed and kept, decode
    /// steps, per source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft: Option<crate::decode::draft::DraftStats>,
    /// The same question answered without drafts (`--check-draft`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undrafted: Option<SequentialCheck>,
}

/// A parallel answer beside the sequential answer to the same question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SequentialCheck {
    /// The two answers are the same token sequence.
    pub identical: bool,
    /// Tokens the two answers share from their start.
    pub common_tokens: usize,
    pub sequential_tokens: usize,
    /// The sequential answer's score.
    pub matched: usize,
    pub pass: bool,
    /// Where the answers part: the gap between the two best logits for the
    /// sequential answer's token there (a near tie when small).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parting_gap: Option<f32>,
    /// The sequential answer, when it differs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
}

/// How parallel answers compare with sequential ones (`summary.sequential`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EquivalenceSummary {
    pub targets: usize,
    pub identical: usize,
    pub differing: usize,
    /// Sum over targets of parallel matched − sequential matched.
    pub matched_difference: i64,
    /// The largest |parallel matched − sequential matched| of one target.
    pub max_abs_matched_difference: usize,
    /// Passes that differ between the two.
    pub pass_changes: usize,
    /// Among differing answers, the mean fraction of the parallel answer's
    /// tokens before the first difference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_common_fraction: Option<f64>,
    /// Among differing answers, the largest logit gap where they part.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_parting_gap: Option<f32>,
}

/// Drafting over a run's answers (`summary.draft`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DraftSummary {
    #[serde(flatten)]
    pub stats: crate::decode::draft::DraftStats,
    /// Tokens generated in the drafted answers.
    pub generated_tokens: usize,
    /// Generated tokens per decode step after the questions (1 without
    /// drafts; more where drafts were kept).
    pub tokens_per_step: f64,
}

impl DraftSummary {
    /// `None` when no answer was drafted.
    pub fn of(results: &[TargetResult]) -> Option<DraftSummary> {
        let mut d = DraftSummary::default();
        let mut any = false;
        for r in results {
            let Some(stats) = &r.draft else { continue };
            any = true;
            d.stats.merge(stats);
            d.generated_tokens += r.generated_tokens.unwrap_or(0);
        }
        d.tokens_per_step = d.generated_tokens as f64 / d.stats.steps.max(1) as f64;
        any.then_some(d)
    }
}

/// A closed-book answer: the question asked with no file in the context.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClosedBook {
    pub response: String,
    /// Tokens evaluated before generating (the question alone).
    pub prompt_tokens: usize,
    pub generated_tokens: usize,
    pub matched: usize,
    pub missing: usize,
    pub hallucinated: usize,
    pub extra: usize,
    pub pass: bool,
}

/// Closed-book totals (`summary.closed_book`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClosedBookSummary {
    pub passes: usize,
    pub matched: usize,
    /// Total matched with the file minus matched without it.
    pub context_matched: i64,
}

impl TargetResult {
    /// A target answered with `response`, scored as `score`.
    pub fn new(target: &Target, response: String, score: Score) -> TargetResult {
        TargetResult { response: Some(response), score: Some(score), ..TargetResult::unanswered(target) }
    }

    /// A target asked with no answer generated (`bench --forced-only`): its
    /// recall is not measured, so it has no response and no score.
    pub fn unanswered(target: &Target) -> TargetResult {
        TargetResult {
            name: target.name.clone(),
            line: target.line,
            byte_offset: target.byte_offset,
            token_offset: target.token_offset,
            depth: target.depth,
            length: None,
            expected: target.expected.clone(),
            response: None,
            score: None,
            generated_tokens: None,
            reasoning: None,
            reasoning_tokens: None,
            invalid_utf8: false,
            forced: None,
            closed_book: None,
            context_matched: None,
            sequential: None,
            draft: None,
            undrafted: None,
        }
    }
}

/// Totals over a set of targets: how many, and their recall where answers
/// were generated (absent, not zero, in a `--forced-only` run).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    pub count: usize,
    #[serde(flatten)]
    pub recall: Option<Recall>,
}

/// The recall counts of [`Totals`]: sums of the targets' scores.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Recall {
    pub passes: usize,
    pub matched: usize,
    pub missing: usize,
    pub truncated: usize,
    pub hallucinated: usize,
    pub extra: usize,
    /// Under the codeneedle policy: the scored (non-blank) lines, which its
    /// matched are a share of, and the re-indented answer lines (absent
    /// under posrecall).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scored: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reindented: Option<usize>,
    /// The targets' compositions summed; absent where a target has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub composition: Option<crate::score::Composition>,
}

impl Totals {
    /// Empty totals, with recall counts to add to when `measured`.
    fn new(measured: bool) -> Totals {
        Totals { count: 0, recall: measured.then(Recall::default) }
    }

    pub fn add(&mut self, t: &TargetResult) {
        self.count += 1;
        if let (Some(r), Some(s)) = (self.recall.as_mut(), t.score.as_ref()) {
            r.passes += s.pass as usize;
            r.matched += s.matched;
            r.missing += s.missing;
            r.truncated += s.truncated;
            r.hallucinated += s.hallucinated;
            r.extra += s.extra;
            let add = |total: &mut Option<usize>, n: Option<usize>| {
                if let Some(n) = n {
                    *total.get_or_insert(0) += n;
                }
            };
            add(&mut r.scored, s.scored);
            add(&mut r.reindented, s.reindented);
            // One target without a composition leaves the sum unknown (and
            // no target, none: an empty quarter of an older file has none).
            r.composition = match (self.count, r.composition, &s.composition) {
                (1, _, c) => *c,
                (_, Some(mut total), Some(c)) => {
                    total.add(c);
                    Some(total)
                }
                _ => None,
            };
        }
    }

    /// "passes/count", or "not measured" where no answer was generated.
    pub fn pass_rate(&self) -> String {
        match &self.recall {
            Some(r) => format!("{}/{}", r.passes, self.count),
            None => NOT_MEASURED.into(),
        }
    }
}

/// What a report prints for recall a run did not measure (`--forced-only`).
pub(crate) const NOT_MEASURED: &str = "not measured";

/// docs/METHOD.md §7 (Aggregate): the totals, and the same per depth quarter of the kept text.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    #[serde(flatten)]
    pub total: Totals,
    /// Quarters by depth: [0, .25), [.25, .5), [.5, .75), [.75, 1].
    pub by_quarter: [Totals; 4],
    /// Means of the teacher-forced metrics (bench only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forced: Option<ForcedSummary>,
    /// Closed-book totals (`bench --closed-book`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub closed_book: Option<ClosedBookSummary>,
    /// Parallel against sequential answers (`bench --check-sequential`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequential: Option<EquivalenceSummary>,
    /// Drafted against undrafted answers (`bench --check-draft`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undrafted: Option<EquivalenceSummary>,
    /// Drafting over all answers: decode steps and tokens per step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft: Option<DraftSummary>,
    /// Reasoning tokens over all answers, where any answer reasoned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<usize>,
}

impl Summary {
    pub fn of(results: &[TargetResult]) -> Summary {
        // A run measures recall where its answers were generated: all of
        // them or none (`RunFile::check`).
        let measured = results.iter().all(|r| r.score.is_some());
        let mut s =
            Summary { total: Totals::new(measured), by_quarter: std::array::from_fn(|_| Totals::new(measured)), ..Summary::default() };
        for r in results {
            s.total.add(r);
            let q = ((r.depth * 4.0) as usize).min(3);
            s.by_quarter[q].add(r);
        }
        s.forced = ForcedSummary::of(results.iter().filter_map(|r| r.forced.as_ref()));
        if let Some(f) = s.forced.as_mut().filter(|f| f.kld.is_some()) {
            let quarter = |q: usize| {
                let in_q = results.iter().filter(|r| ((r.depth * 4.0) as usize).min(3) == q);
                crate::score::kld::KldSummary::of(in_q.filter_map(|r| r.forced.as_ref()?.kld.as_ref()))
            };
            f.kld_by_quarter = Some([quarter(0), quarter(1), quarter(2), quarter(3)]);
        }
        if results.iter().any(|r| r.closed_book.is_some()) {
            let mut c = ClosedBookSummary::default();
            for r in results {
                if let (Some(cb), Some(score)) = (&r.closed_book, &r.score) {
                    c.passes += usize::from(cb.pass);
                    c.matched += cb.matched;
                    c.context_matched += score.matched as i64 - cb.matched as i64;
                }
            }
            s.closed_book = Some(c);
        }
        s.sequential = EquivalenceSummary::of(results, |r| r.sequential.as_ref());
        s.undrafted = EquivalenceSummary::of(results, |r| r.undrafted.as_ref());
        s.draft = DraftSummary::of(results);
        if results.iter().any(|r| r.reasoning.is_some() || r.reasoning_tokens.is_some()) {
            s.reasoning_tokens = Some(results.iter().filter_map(|r| r.reasoning_tokens).sum());
        }
        s
    }
}

impl EquivalenceSummary {
    /// The check `check` picks out of each result (`sequential` or
    /// `undrafted`); `None` when no target was checked.
    pub fn of(results: &[TargetResult], check: impl Fn(&TargetResult) -> Option<&SequentialCheck>) -> Option<EquivalenceSummary> {
        let mut e = EquivalenceSummary::default();
        let mut fractions = Vec::new();
        for r in results {
            let (Some(c), Some(score)) = (check(r), &r.score) else { continue };
            e.targets += 1;
            let diff = score.matched as i64 - c.matched as i64;
            e.matched_difference += diff;
            e.max_abs_matched_difference = e.max_abs_matched_difference.max(diff.unsigned_abs() as usize);
            e.pass_changes += usize::from(score.pass != c.pass);
            if c.identical {
                e.identical += 1;
            } else {
                e.differing += 1;
                if let Some(g) = c.parting_gap {
                    e.max_parting_gap = Some(e.max_parting_gap.map_or(g, |m: f32| m.max(g)));
                }
                let n = r.generated_tokens.unwrap_or(0).max(1);
                fractions.push(c.common_tokens as f64 / n as f64);
            }
        }
        if e.targets == 0 {
            return None;
        }
        if !fractions.is_empty() {
            e.mean_common_fraction = Some(fractions.iter().sum::<f64>() / fractions.len() as f64);
        }
        Some(e)
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Timings {
    /// Model load, with the sha256 (when it was not cached) included.
    pub load_ms: f64,
    /// Model load alone.
    pub load_ms_without_hash: f64,
    pub hash_ms: f64,
    pub prefix_source: String,
    pub prefill_ms: f64,
    pub prefill_tokens: usize,
    /// Writing the prefix state to the prefix cache, when it was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_save_ms: Option<f64>,
    pub snapshot_ms: f64,
    pub snapshot_bytes: usize,
    /// The whole context's state once the prefix is evaluated, as llama.cpp
    /// counts it: every layer's cache cells in use (a window-only cache's
    /// sliding-window layers hold their window alone; `--swa-full on` keeps
    /// every position), recurrent state and the last logits. The largest
    /// over a ladder's windows.
    #[serde(default)]
    pub context_bytes: usize,
    pub restore_ms: Vec<f64>,
    pub query_ms: Vec<f64>,
    /// Per query: restore plus the teacher-forced pass.
    #[serde(default)]
    pub forced_ms: Vec<f64>,
    /// Wall time of answering every question (all of `query_ms` with
    /// `--parallel`, where they overlap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation_ms: Option<f64>,
    /// Where answering's decode steps spent their time: steps with generated
    /// tokens only, apart from steps that also evaluated a question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decode_steps: Option<StepStats>,
    /// Answering every question again one at a time (`--check-sequential`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check_ms: Option<f64>,
    /// Of `forced_ms`, the time spent keeping the top K of each distribution
    /// (`--save-reference`) or comparing with the reference's (`--reference`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reference_ms: Option<f64>,
    pub generated_tokens: usize,
    pub total_ms: f64,
    /// Targets kept from the unfinished run file this run finished
    /// (`bench --resume`): every other timing is of this process alone,
    /// which asked only the rest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resumed_targets: Option<usize>,
}

/// A run file scored under the rule before blank lines were credited only
/// in place: its totals cannot stand beside this version's.
/// Needs no hint: it says what to do (score the answers again, or rerun).
#[derive(Debug, thiserror::Error)]
#[error(
    "{0} was scored under run-file format 1, whose scoring let blank lines anchor the alignment; \
     this posrecall credits blank lines only in place (format 2), so the two cannot be compared: \
     score its answers again (posrecall score) or rerun it"
)]
pub(crate) struct OldScoring(pub String);

impl RunFile {
    /// A ladder's window at `length` as a run of its own: its targets, its
    /// summary and its lines; the whole run when it is not a ladder.
    /// A ladder cut to the rungs of `lengths` and their targets; its
    /// corpus crop is the longest kept window's. Its summary stays the
    /// whole run's.
    pub(crate) fn at_lengths(&self, lengths: &[usize]) -> RunFile {
        let mut run = self.clone();
        let Some(ladder) = run.ladder.as_mut() else { return run };
        ladder.rungs.retain(|g| lengths.contains(&g.length));
        run.targets.retain(|t| t.length.is_some_and(|l| lengths.contains(&l)));
        if let Some(top) = ladder.rungs.last() {
            run.manifest.corpus.crop = top.crop.clone();
            run.manifest.corpus.prefix_tokens = Some(top.prefix_tokens);
        }
        run
    }

    pub fn at_length(&self, length: usize) -> RunFile {
        let mut run = self.clone();
        let Some(ladder) = run.ladder.take() else { return run };
        run.targets.retain(|t| t.length == Some(length));
        if let Some(g) = ladder.rungs.iter().find(|g| g.length == length) {
            run.summary = g.summary.clone();
            run.manifest.corpus.crop = g.crop.clone();
            run.manifest.corpus.prefix_tokens = Some(g.prefix_tokens);
        }
        run
    }

    /// Reads a run file and checks its format version; anything else is a
    /// one-line error.
    pub fn load(path: &Path) -> Result<RunFile> {
        let text = crate::support::fsutil::read_text(path).with_context(|| format!("cannot read run file {}", path.display()))?;
        let run: RunFile = serde_json::from_str(&text).with_context(|| format!("{} is not a posrecall run file", path.display()))?;
        if run.format == 1 {
            return Err(OldScoring(path.display().to_string()).into());
        }
        if run.format != FORMAT_VERSION {
            anyhow::bail!("{} has run-file format {}, this posrecall reads {}", path.display(), run.format, FORMAT_VERSION);
        }
        run.check().map_err(|why| anyhow::anyhow!("{} is not a run file posrecall wrote: {why}", path.display()))?;
        Ok(run)
    }

    /// What a hand-edited or damaged run file may get wrong and reports would
    /// trust: no targets, a target twice, a depth outside [0, 1], a score the
    /// scorer cannot give, totals that are not its targets' sums, a ladder
    /// with no lengths.
    fn check(&self) -> std::result::Result<(), String> {
        if self.targets.is_empty() {
            return Err("it holds no target".into());
        }
        let mut seen = std::collections::HashSet::new();
        for t in &self.targets {
            if !seen.insert((t.name.as_str(), t.length)) {
                return Err(format!("target `{}` is listed twice", t.name));
            }
            if !(t.depth.is_finite() && (0.0..=1.0).contains(&t.depth)) {
                return Err(format!("target `{}` has depth {}, outside [0, 1]", t.name, t.depth));
            }
        }
        // Answers are generated, and scored, in every run but a forced-only
        // one (a score that does not parse reads as absent, so this is also
        // where a damaged score is found).
        let forced_only = self.manifest.params.decode_mode == Some(DecodeMode::ForcedOnly);
        if let Some(t) = self.targets.iter().find(|t| t.score.is_some() == forced_only) {
            return Err(match forced_only {
                true => format!("target `{}` of a forced-only run has a score, though no answer was generated", t.name),
                false => format!("target `{}` has no score (its `lines` … `pass` fields are missing or malformed)", t.name),
            });
        }
        // Each score as the scorer makes it: every one of the LINES expected
        // lines matched or missing, the truncated among the missing, a pass
        // exactly when PASS lines match.
        let (lines, pass) = (self.manifest.params.lines, self.manifest.params.pass);
        let codeneedle = self.manifest.params.policy == Policy::Codeneedle;
        let code_only = self.manifest.params.credit == crate::score::Credit::Code;
        for t in &self.targets {
            let Some(sc) = &t.score else { continue };
            // Under codeneedle the blank lines are in neither count, and the
            // re-indented are apart: matched and missing stay within the
            // scored lines, and a pass is 40% of them.
            let why = if code_only {
                match code_only_problem(sc, lines, pass, codeneedle) {
                    Some(why) => why,
                    None => continue,
                }
            } else if codeneedle {
                let scored = sc.scored.unwrap_or(0);
                let ratio_pass = crate::score::codeneedle::passes(sc.matched, scored);
                if sc.scored.is_none() || sc.reindented.is_none() {
                    "no scored or reindented count, which the codeneedle policy records".to_string()
                } else if sc.matched + sc.missing > scored || scored > lines {
                    format!("{} matched and {} missing of {scored} scored lines in {lines}", sc.matched, sc.missing)
                } else if sc.pass != ratio_pass {
                    let percent = crate::score::PASS_PERCENT;
                    format!("pass {} with {} matched of {scored} scored, where a pass is {percent}% of them", sc.pass, sc.matched)
                } else {
                    continue;
                }
            } else if sc.matched + sc.missing != lines {
                format!("{} matched and {} missing, where every one of its {lines} lines is one or the other", sc.matched, sc.missing)
            } else if sc.truncated > sc.missing {
                format!("{} truncated of {} missing, where the truncated are among the missing", sc.truncated, sc.missing)
            } else if sc.pass != (sc.matched >= pass) {
                format!("pass {} with {} matched, where a pass is {pass} or more", sc.pass, sc.matched)
            } else {
                continue;
            };
            return Err(format!("target `{}` has {why}", t.name));
        }
        self.check_shared_starts()?;
        let sums = Summary::of(&self.targets);
        if sums.total != self.summary.total || sums.by_quarter != self.summary.by_quarter {
            let text = |t: &Totals| match &t.recall {
                Some(r) => format!(
                    "{}/{} passed, {} matched, {} missing, {} truncated, {} hallucinated, {} extra",
                    r.passes, t.count, r.matched, r.missing, r.truncated, r.hallucinated, r.extra
                ),
                None => format!("{} targets, recall {NOT_MEASURED}", t.count),
            };
            let what = match sums.total == self.summary.total {
                true => "its depth quarters are not the sums of their targets".to_string(),
                false => format!("its summary ({}) is not the sum of its targets ({})", text(&self.summary.total), text(&sums.total)),
            };
            return Err(what);
        }
        if self.ladder.as_ref().is_some_and(|l| l.rungs.is_empty()) {
            return Err("its ladder has no lengths".into());
        }
        if self.ladder.is_some() && forced_only {
            return Err("it has a ladder of windows, whose pass rates need answers, and generated none (forced-only)".into());
        }
        self.check_unfinished()?;
        Ok(())
    }

    /// A check's shared start is a prefix of both answers: no longer than
    /// either, the whole of both when they are identical, and short of one
    /// of them when they are not (a report's common fraction and its
    /// parting point are read from it).
    fn check_shared_starts(&self) -> std::result::Result<(), String> {
        for t in &self.targets {
            for (what, c) in [("sequential", &t.sequential), ("undrafted", &t.undrafted)] {
                let Some(c) = c else { continue };
                let why = match t.generated_tokens {
                    None => format!("a {what} check but no generated token count to compare it with"),
                    Some(n) if c.common_tokens > n.min(c.sequential_tokens) => {
                        format!("a {what} check sharing {} tokens of answers of {n} and {}", c.common_tokens, c.sequential_tokens)
                    }
                    Some(n) if c.identical != (c.common_tokens == n && n == c.sequential_tokens) => format!(
                        "a {what} check that says the answers are {} where they share {} tokens of {n} and {}",
                        if c.identical { "identical" } else { "different" },
                        c.common_tokens,
                        c.sequential_tokens
                    ),
                    Some(_) => continue,
                };
                return Err(format!("target `{}` has {why}", t.name));
            }
        }
        Ok(())
    }

    /// An unfinished run holds fewer targets than it asks, and nothing a
    /// finished run alone has (timings, a ladder).
    fn check_unfinished(&self) -> std::result::Result<(), String> {
        let Some(u) = self.unfinished else { return Ok(()) };
        let (held, asked) = (self.targets.len(), u.asked);
        if held >= asked {
            return Err(format!("it says it is unfinished, with {asked} targets asked, but holds {held}"));
        }
        if self.ladder.is_some() || self.timings.is_some() {
            return Err("it says it is unfinished, but holds a finished run's ladder or timings".into());
        }
        Ok(())
    }

    /// Writes the run file atomically (temp file, then rename). A run that
    /// posrecall could not read back is refused, not written: JSON has no
    /// NaN or infinity (serde writes them as `null`, which no reader takes).
    pub fn save(&self, path: &Path) -> Result<()> {
        crate::support::fsutil::write_atomic(path, self.checked_json(path)?.as_bytes())
    }

    /// [`RunFile::save`] onto the name itself, never through a link
    /// ([`crate::support::fsutil::write_atomic_here`]): for run files named by
    /// posrecall inside an output folder.
    pub(crate) fn save_here(&self, path: &Path) -> Result<()> {
        crate::support::fsutil::write_atomic_here(path, self.checked_json(path)?.as_bytes())
    }

    /// The file's text, refused when it would not read back.
    fn checked_json(&self, path: &Path) -> Result<String> {
        let mut json = serde_json::to_string_pretty(self)?;
        json.push('\n');
        let back = &mut serde_json::Deserializer::from_str(&json);
        if let Err(e) = serde_path_to_error::deserialize::<_, RunFile>(back) {
            anyhow::bail!(
                "not writing {}: its `{}` would not read back ({}): a number that is not finite (NaN or \
                 infinite), which JSON cannot hold",
                path.display(),
                e.path(),
                e.inner()
            );
        }
        Ok(json)
    }
}

/// What is wrong with a score made with code alone credited, if anything:
/// matched and missing stay within the code lines (`scored`), and a pass is
/// the policy's share of them.
fn code_only_problem(sc: &crate::score::Score, lines: usize, pass: usize, codeneedle: bool) -> Option<String> {
    let scored = sc.scored.unwrap_or(0);
    let share_pass = match codeneedle {
        true => crate::score::codeneedle::passes(sc.matched, scored),
        false => scored > 0 && sc.matched * lines >= pass * scored,
    };
    if sc.scored.is_none() {
        Some("no scored count, which crediting code alone records".to_string())
    } else if sc.matched + sc.missing > scored || scored > lines {
        Some(format!("{} matched and {} missing of {scored} code lines in {lines}", sc.matched, sc.missing))
    } else if sc.pass != share_pass {
        Some(format!("pass {} with {} matched of {scored} code lines", sc.pass, sc.matched))
    } else {
        None
    }
}

/// The self-contained targets file `posrecall targets --json` prints and
/// `posrecall score` reads: everything needed to score answers to the targets.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TargetsFile {
    pub format: u32,
    pub corpus: CorpusInfo,
    pub params: Params,
    /// Syntax error regions tree-sitter skipped in the corpus.
    pub error_regions: usize,
    pub targets: Vec<Target>,
}

impl TargetsFile {
    /// The targets `spec` picks in `src` (its crop lines, else the whole
    /// file): what `posrecall targets --json` writes.
    pub fn select(src: &crate::corpus::Source, spec: &crate::targets::TargetSpec) -> Result<TargetsFile> {
        use crate::targets::crop::CropMode;
        let corpus = &src.corpus;
        let (mode, (first, last)) = match spec.crop_lines {
            Some(r) => (CropMode::Lines, r.to_zero_based(corpus.line_count())?),
            None => (CropMode::None, (0, corpus.line_count() - 1)),
        };
        let selected = crate::targets::select(corpus, &src.parsed, first, last, &spec.options())?;
        let ambiguous = crate::targets::ambiguous(corpus, &src.parsed, first, last, &spec.options());
        let few_code_lines = crate::targets::few_code_lines(corpus, &src.parsed, first, last, &spec.options());
        Ok(TargetsFile {
            format: TARGETS_FORMAT_VERSION,
            corpus: CorpusInfo { ambiguous, few_code_lines, ..CorpusInfo::of(src, Crop::of(corpus, mode, first, last), None) },
            params: Params::of(spec),
            error_regions: src.parsed.error_regions,
            targets: selected,
        })
    }

    /// The file as JSON, with the whole renaming (old name → new name) of
    /// `src` when its names were renamed: a run file keeps only the seed,
    /// the targets file carries the mapping.
    pub fn to_json(&self, src: &crate::corpus::Source) -> Result<serde_json::Value> {
        let mut json = serde_json::to_value(self)?;
        if let Some(r) = &src.renamed {
            json["corpus"]["rename"] = serde_json::to_value(r)?;
        }
        Ok(json)
    }

    /// The questions as a served model is asked them (`targets
    /// --emit-prompts`): one JSON object per line, with the target's
    /// `name`, the whole `prompt` (the kept file, then the question) and the
    /// `chat_template_kwargs` to send with it.
    pub fn prompt_lines(&self, src: &crate::corpus::Source, kwargs: &serde_json::Value) -> String {
        let kept = src.corpus.slice_lines(self.corpus.crop.first_line - 1, self.corpus.crop.last_line - 1);
        let mut jsonl = String::new();
        for t in &self.targets {
            let q = crate::prompt::question(t, self.params.lines, self.params.skip_blank, self.params.anchor);
            let line = serde_json::json!({
                "name": t.name,
                "prompt": crate::prompt::instruction_prompt(kept, &q),
                "chat_template_kwargs": kwargs,
            });
            jsonl.push_str(&line.to_string());
            jsonl.push('\n');
        }
        jsonl
    }

    pub fn load(path: &Path) -> Result<TargetsFile> {
        let text = crate::support::fsutil::read_text(path).with_context(|| format!("cannot read targets file {}", path.display()))?;
        let file: TargetsFile = serde_json::from_str(&text)
            .with_context(|| format!("{} is not a posrecall targets file (the JSON `posrecall targets` prints)", path.display()))?;
        if file.format != TARGETS_FORMAT_VERSION {
            anyhow::bail!("{} has format {}, this posrecall reads {}", path.display(), file.format, TARGETS_FORMAT_VERSION);
        }
        for t in &file.targets {
            if t.expected.len() != file.params.lines {
                anyhow::bail!(
                    "{}: target {} has {} expected lines, the file says lines = {}",
                    path.display(),
                    t.name,
                    t.expected.len(),
                    file.params.lines
                );
            }
        }
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> RunFile {
        RunFile::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/compare/a.json")).unwrap()
    }

    #[test]
    fn a_run_that_would_not_read_back_is_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.json");
        let mut run = fixture();
        run.save(&path).unwrap();
        assert_eq!(RunFile::load(&path).unwrap().targets.len(), run.targets.len());
        let before = std::fs::read(&path).unwrap();
        let forced = run.targets[2].forced.as_mut().expect("the fixture has forced readings");
        forced.top1_share = f64::NAN;
        let err = format!("{:#}", run.save(&path).unwrap_err());
        assert!(err.contains("targets[2].forced.top1_share") && err.contains("not finite"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), before, "the earlier file was touched");
        let fresh = dir.path().join("new.json");
        run.targets[2].forced.as_mut().unwrap().top1_share = f64::INFINITY;
        assert!(run.save(&fresh).is_err());
        assert!(!fresh.exists(), "a file posrecall cannot read was written");
    }

    /// The recorded shared start of a checked answer is checked on load:
    /// longer than an answer, or at odds with `identical`, is refused.
    #[test]
    fn a_checks_shared_start_is_a_prefix_of_both_answers() {
        let mut run = fixture();
        let n = run.targets[0].generated_tokens.expect("the fixture records generated tokens");
        let check = |identical, common, sequential| {
            Some(SequentialCheck {
                identical,
                common_tokens: common,
                sequential_tokens: sequential,
                matched: 0,
                pass: false,
                parting_gap: None,
                response: None,
            })
        };
        for (c, ok) in [
            (check(true, n, n), true),
            (check(false, 0, n + 3), true),
            (check(false, n, n + 3), true),
            (check(false, n + 1, n + 3), false),
            (check(false, n, n - 1), false),
            (check(true, n - 1, n), false),
            (check(false, n, n), false),
        ] {
            run.targets[0].sequential = c.clone();
            assert_eq!(run.check().is_ok(), ok, "{c:?}: {:?}", run.check());
            run.targets[0].sequential = None;
            run.targets[0].undrafted = c.clone();
            assert_eq!(run.check().is_ok(), ok, "undrafted {c:?}");
            run.targets[0].undrafted = None;
        }
        run.targets[0].generated_tokens = None;
        run.targets[0].sequential = check(true, n, n);
        assert!(run.check().unwrap_err().contains("no generated token count"));
    }
}
