//! Command-line definitions (clap derive) and nothing else: only `main.rs`
//! and `commands/` read them; the commands turn them into the library's
//! own types.

use clap::builder::{PossibleValue, PossibleValuesParser, RangedU64ValueParser, TypedValueParser};
use clap::{Args, Parser, Subcommand, ValueEnum};
use posrecall::ask::ApiKind;
use posrecall::ask::{MAX_CONCURRENCY, MAX_RETRIES, MAX_TIMEOUT_S};
use posrecall::bench::MAX_NEW_TOKENS;
use posrecall::prompt::Probe;
use posrecall::prompt::template::Think;
use posrecall::score::{Credit, Normalize, Policy};
use posrecall::settings::Named;
use posrecall::settings::{CtxSize, FlashAttn, KvPair, KvRotation, KvType, List};
use posrecall::targets::Anchor;
use posrecall::targets::TargetSpec;
use posrecall::targets::crop::{CropMode, LineRange};

/// A choice of the library's: its names and each one's help come from the
/// library's type ([`Named`]), so no name is written here.
fn named<T: Named + Send + Sync + std::str::FromStr>() -> impl TypedValueParser<Value = T>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    names_of(<T as strum::VariantArray>::VARIANTS)
}

/// A flag's help ending with the library's default, so that the text can
/// never state another value than the run uses (for flags whose absence
/// means something, which therefore have no clap default to show).
fn with_default(help: &str, default: impl std::fmt::Display) -> String {
    format!("{help} [default: {default}]")
}

/// The method's KV types, as `--kv` shows its default.
fn default_kv() -> KvPair {
    let (k, v) = posrecall::settings::ContextSettings::default().kv;
    KvPair { k, v }
}

/// [`named`] for some of a choice's values only.
fn names_of<T: Named + Send + Sync + std::str::FromStr>(values: &'static [T]) -> impl TypedValueParser<Value = T>
where
    T::Err: std::error::Error + Send + Sync + 'static,
{
    let possible = values.iter().map(|v| match v.get_documentation() {
        Some(doc) => PossibleValue::new(v.as_str()).help(value_help(doc)),
        None => PossibleValue::new(v.as_str()),
    });
    PossibleValuesParser::new(possible).try_map(|name| name.parse::<T>())
}

/// A value's help as clap's derive writes it from a doc comment: the first
/// paragraph on one line, without its final period.
fn value_help(doc: &str) -> String {
    let first = doc.trim().split("\n\n").next().unwrap_or_default();
    let line = first.lines().map(str::trim).collect::<Vec<_>>().join(" ");
    match line.strip_suffix('.') {
        Some(l) if !l.ends_with('.') => l.to_string(),
        _ => line,
    }
}

/// A whole number between `lo` and `hi`, checked while parsing; the error
/// names the range.
fn ranged(lo: usize, hi: usize) -> RangedU64ValueParser<usize> {
    RangedU64ValueParser::new().range(lo as u64..=hi as u64)
}

/// Seconds: a positive number up to [`MAX_TIMEOUT_S`].
fn seconds(s: &str) -> Result<f64, String> {
    let v: f64 = s.trim().parse().map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if !(v.is_finite() && v > 0.0 && v <= MAX_TIMEOUT_S) {
        return Err(format!("{s} is not between 0 and {MAX_TIMEOUT_S} seconds (a day)"));
    }
    Ok(v)
}

use std::path::PathBuf;

/// posrecall: how well does a local LLM recall long code, verbatim and by position?
///
/// It puts one large real source file into a model's context, asks for the
/// lines that follow the opening brace of functions spread through the file,
/// and scores every answer line by line.
#[derive(Debug, Parser)]
#[command(name = "posrecall", version, about, long_about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once per process: boxing the large arguments would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a GGUF model in-process on the corpus and score its answers.
    ///
    /// The corpus prefix is evaluated once and its state snapshot; every
    /// question starts from that identical state.
    Bench(BenchArgs),
    /// List the functions a run would ask about, with their ground truth.
    Targets(TargetsArgs),
    /// Score answers produced elsewhere (JSONL of {"name", "response"}).
    Score(ScoreArgs),
    /// Score the answers stored in run files again, under another policy, comparison or pass, without a model.
    ///
    /// The targets are found again in the corpus each run names (it must be the same file); the new run file
    /// records the policy and the run file it was rescored from (its sha256). Inputs are never written over.
    Rescore(RescoreArgs),
    /// Aggregate tables, per-target diffs and one HTML page from run files.
    Report(ReportArgs),
    /// Paired comparison of two runs over their shared targets, with exact tests and a verdict.
    Compare(CompareArgs),
    /// Ask an OpenAI-compatible server every target's question; writes the responses file `score` reads.
    ///
    /// Resumable: answers already in the output file are not asked again.
    Ask(AskArgs),
    /// Print exactly what the model is given for one question (the file elided unless --full),
    /// with the token counts of the shared prefix and the question's suffix.
    ///
    /// Loads only the model's vocabulary and metadata.
    Prompt(PromptArgs),
    /// Render a Jinja chat template as posrecall renders it, with no model: for checking a
    /// template (--chat-template) and comparing renderers.
    Template(TemplateCmdArgs),
    /// Run a sweep from models.toml: every model at every KV type, on the same targets.
    ///
    /// Each model is loaded once; one kept line range that fits every model is
    /// used for every run; each run file is written as soon as it is done.
    Matrix(MatrixArgs),
    /// Print a shell completion script, e.g. `posrecall completions bash > /etc/bash_completion.d/posrecall`.
    Completions(CompletionsArgs),
    /// Print the man page (roff), e.g. `posrecall man > posrecall.1`; `posrecall man bench` for one command's page.
    Man(ManArgs),
}

#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Args)]
pub struct ManArgs {
    /// A command whose own page to print (posrecall-COMMAND(1)) [default: posrecall(1)].
    #[arg(value_name = "COMMAND")]
    pub command: Option<String>,
}

#[derive(Debug, Args)]
pub struct MatrixArgs {
    /// The sweep definition (docs/GUIDE.md, "Sweeps").
    #[arg(value_name = "models.toml")]
    pub file: PathBuf,
    /// Write one run file per run here: MODEL__KVK-KVV.json.
    #[arg(long, value_name = "DIR", default_value = posrecall::sweep::DEFAULT_OUT_DIR)]
    pub out_dir: PathBuf,
    /// Skip runs whose file in --out-dir is a finished run of the same configuration (manifest key).
    #[arg(long)]
    pub resume: bool,
    /// Run one slice of the runs: K/N (1-based), N (K from JOB_COMPLETION_INDEX or a Slurm array), or auto (K and N from a Slurm array).
    #[arg(long, value_name = "K/N|N|auto")]
    pub shard: Option<posrecall::sweep::ShardArg>,
    /// Keep the evaluated prefix states in this folder and load them on later runs with the same key.
    #[arg(long, value_name = "DIR")]
    pub prefix_cache: Option<PathBuf>,
    #[command(flatten)]
    pub decode: DecodeArgs,
    /// Print the runs (of this shard) and their run files, and exit without loading a model.
    #[arg(long, visible_alias = "dry-run")]
    pub list: bool,
    /// Print only the aggregate table.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct PromptArgs {
    /// The model file (GGUF): its chat template and tokenizer.
    pub model: PathBuf,
    /// The source file (default: the corpus `scripts/env/fetch-corpus` fetched).
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    #[command(flatten)]
    pub source: CorpusArgs,
    /// The function whose question is shown (one of the run's targets).
    #[arg(long, value_name = "NAME")]
    pub target: String,
    #[command(flatten)]
    pub targets: TargetArgs,
    #[command(flatten)]
    pub template: TemplateArgs,
    /// Print the whole file, not its first and last lines.
    #[arg(long)]
    pub full: bool,
    /// As `bench --crop`.
    #[arg(long, value_parser = names_of(&CropMode::CHOSEN), default_value_t = CropMode::default())]
    pub crop: CropMode,
    /// As `bench --ctx`.
    #[arg(long, default_value_t = CtxSize::default())]
    pub ctx: CtxSize,
    #[command(flatten)]
    pub rope: RopeArgs,
    /// As `bench --max-prefix-tokens`.
    #[arg(long, visible_alias = "max-tokens", value_name = "N")]
    pub max_prefix_tokens: Option<usize>,
    /// As `bench --max-new-tokens` (it decides how much of the file fits).
    #[arg(long, value_name = "N")]
    pub max_new_tokens: Option<usize>,
    /// As `bench --probe`.
    #[arg(long, value_parser = named::<Probe>(), default_value_t = Probe::default())]
    pub probe: Probe,
}

#[derive(Debug, Args)]
pub struct TemplateCmdArgs {
    /// The Jinja chat template.
    #[arg(value_name = "FILE.jinja")]
    pub file: PathBuf,
    /// off: set the template's thinking switch to answer at once; on: let the model think.
    #[arg(long, value_parser = named::<Think>(), default_value_t = Think::default())]
    pub think: Think,
    /// A JSON object of template variables, over those --think sets.
    #[arg(long, value_name = "JSON")]
    pub template_kwargs: Option<String>,
    /// The user message rendered [default: a file and a question, as posrecall asks them].
    #[arg(long, value_name = "TEXT")]
    pub content: Option<String>,
    /// The text of bos_token.
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub bos_token: String,
    /// The text of eos_token.
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub eos_token: String,
    /// Print JSON: the rendering, the variables, the thinking switches, and whether the
    /// template splits cleanly into a prefix (before the question) and a suffix.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct AskArgs {
    /// A targets file written by `posrecall targets --json`.
    #[arg(value_name = "TARGETS.json")]
    pub targets: PathBuf,
    /// The server's base URL, e.g. http://127.0.0.1:8080 (a trailing /v1 is accepted).
    #[arg(long)]
    pub url: String,
    /// The model name sent with every request (a server that holds one model may ignore it).
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// Append the answers here, one JSON line each, as they arrive; answers already in it are not asked again.
    #[arg(long, short, default_value = posrecall::ask::DEFAULT_RESPONSES)]
    pub out: PathBuf,
    /// The endpoint: chat (instruction models) or completion (base models, the completion probe's text).
    #[arg(long, value_parser = named::<ApiKind>(), default_value_t = ApiKind::default())]
    pub api: ApiKind,
    /// Requests in flight at once (at most 256).
    #[arg(long, default_value_t = posrecall::ask::DEFAULT_CONCURRENCY, value_parser = ranged(1, MAX_CONCURRENCY))]
    pub concurrency: usize,
    /// Generation cap per answer (default: 20 tokens per line of the expected window, as `bench`). Sent as the
    /// request's max_tokens; posrecall's own --max-tokens caps the kept file (bench, prompt).
    #[arg(long, value_name = "N", value_parser = ranged(1, MAX_NEW_TOKENS))]
    pub max_new_tokens: Option<usize>,
    /// Seconds one request may take, answer included; a request still unanswered then stops the run (a rerun resumes).
    #[arg(long, value_name = "S", default_value_t = posrecall::ask::DEFAULT_TIMEOUT_S, value_parser = seconds)]
    pub timeout: f64,
    /// Retries of a request after a connection error, a 5xx, a 408 or a 429, with exponential backoff from 0.5 s (a Retry-After in seconds is honoured).
    #[arg(long, default_value_t = posrecall::ask::DEFAULT_RETRIES, value_parser = clap::value_parser!(u32).range(0..=MAX_RETRIES as i64))]
    pub retries: u32,
    /// Send the API key in this environment variable as `Authorization: Bearer` (it is never printed or written).
    #[arg(long, value_name = "NAME")]
    pub api_key_env: Option<String>,
    /// The corpus, when it is no longer where the targets file says (its sha256 must match).
    #[arg(long, value_name = "FILE")]
    pub corpus: Option<PathBuf>,
    /// off: ask the server to answer without reasoning (chat_template_kwargs enable_thinking false,
    /// reasoning_effort low); on: let it reason. A server's reasoning_content is recorded, not scored.
    #[arg(long, value_parser = named::<Think>(), default_value_t = Think::default())]
    pub think: Think,
    /// A JSON object sent as the request's chat_template_kwargs (over those --think sets).
    #[arg(long, value_name = "JSON")]
    pub template_kwargs: Option<String>,
    /// A JSON object merged into every request body, e.g. '{"cache_prompt": false}' or
    /// '{"ignore_eos": true}' for llama-server; its fields replace posrecall's.
    #[arg(long, value_name = "JSON")]
    pub extra: Option<String>,
}

#[derive(Debug, Args)]
pub struct RescoreArgs {
    /// Run files written by bench, score, matrix or rescore.
    #[arg(required = true, value_name = "RUN.json")]
    pub runs: Vec<PathBuf>,
    /// The policy to score under.
    #[arg(long, value_parser = named::<Policy>())]
    pub policy: Policy,
    /// How lines are compared (as bench's --normalize). Left out: the run's own when the policy is
    /// the run's, else the policy's.
    #[arg(long, value_parser = named::<Normalize>())]
    pub normalize: Option<Normalize>,
    /// A target passes when at least this many lines match (posrecall's policy only). Left out: the
    /// run's own when the policy is the run's, else 40% of LINES, rounded up.
    #[arg(long)]
    pub pass: Option<usize>,
    /// Which lines a score counts: all, or code alone (as bench's --credit). Left out: the run's own.
    #[arg(long, value_parser = named::<Credit>())]
    pub credit: Option<Credit>,
    /// The runs' corpus (file or folder), where it is now: for runs made on another machine. Left
    /// out: the path each manifest names. Either way it must be the file the run was made from
    /// (its sha256).
    #[arg(long, value_name = "PATH")]
    pub corpus: Option<PathBuf>,
    /// Write the one rescored run here.
    #[arg(long, short, required_unless_present = "out_dir", conflicts_with = "out_dir")]
    pub out: Option<PathBuf>,
    /// Write each rescored run into this folder, under its input's file name.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Print only the aggregate, not the per-target diffs.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct CompareArgs {
    /// The first run file (A).
    #[arg(value_name = "A.json")]
    pub a: PathBuf,
    /// The second run file (B); differences are B − A.
    #[arg(value_name = "B.json")]
    pub b: PathBuf,
    /// Print the comparison as JSON (shape: docs/RUN_FORMAT.md, "Compare JSON").
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// Run files (bench/score --out), or folders: a folder stands for every run file (*.json) in it, by file name.
    #[arg(required = true, value_name = "RUN.json|DIR")]
    pub inputs: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_parser = named::<posrecall::report::export::Format>(), default_value_t = posrecall::report::export::Format::default())]
    pub format: posrecall::report::export::Format,
    /// Write the report here (atomically) instead of to stdout.
    #[arg(long, short, value_name = "FILE", visible_alias = "output")]
    pub out: Option<PathBuf>,
    /// Also show every run's per-target diff (table and md; the HTML page always has them).
    #[arg(long)]
    pub diff: bool,
}

/// What picks the targets and how answers are scored; shared by every command.
#[derive(Debug, Args, Clone)]
pub struct TargetArgs {
    /// How many functions to ask about, spread over the file by depth.
    #[arg(long, default_value_t = TargetSpec::default().count)]
    pub count: usize,
    /// How many lines after the opening brace each answer should reproduce.
    #[arg(long, default_value_t = TargetSpec::default().lines)]
    pub lines: usize,
    /// Seed of the target sampler: the same seed always picks the same targets.
    #[arg(long, default_value_t = TargetSpec::default().seed)]
    pub seed: u64,
    /// Keep exactly the 1-based lines A..B (inclusive) of the corpus.
    #[arg(long, value_name = "A:B")]
    pub crop_lines: Option<LineRange>,
    /// Do not count blank lines anywhere (eligibility, ground truth, answers).
    #[arg(long)]
    pub skip_blank: bool,
    /// Rename every declared function (and its uses) to fresh seeded names (--seed), so a
    /// memorised library no longer matches its training copy.
    #[arg(long)]
    pub rename: bool,
    #[arg(long, help = with_default(
        "A target passes when at least this many lines match (posrecall's policy only)",
        default_pass_words(),
    ))]
    pub pass: Option<usize>,
    #[arg(long, value_parser = named::<Normalize>(), help = with_default(
        "How lines are compared: trim (ignore leading/trailing space), exact, squash (every space run is one), \
         trim_end (ignore trailing space only); under codeneedle, trim is its relax-indent option",
        default_normalize_words(),
    ))]
    pub normalize: Option<Normalize>,
    /// How a question points at its function: name (`function NAME`), or header (its header
    /// quoted verbatim; property, assignment and object-literal definitions become targets too).
    #[arg(long, value_parser = named::<Anchor>(), default_value_t = TargetSpec::default().anchor)]
    pub anchor: Anchor,
    /// Which scoring rule counts the lines: posrecall (every line, blank ones credited in place),
    /// or codeneedle (the corrected policy of the plan author's benchmark: blank lines not counted,
    /// a pass at 40% of the scored lines, re-indented lines apart).
    #[arg(long, value_parser = named::<Policy>(), default_value_t = Policy::default())]
    pub policy: Policy,
    /// Which lines a score counts: all (every line the policy counts), or code (comments,
    /// docstrings and blank lines aligned but neither credited nor counted; the pass is a share
    /// of the code lines).
    #[arg(long, value_parser = named::<Credit>(), default_value_t = TargetSpec::default().credit)]
    pub credit: Credit,
    /// Leave out of the draw every function whose LINES expected lines hold fewer code lines
    /// than this (0: none left out); how many were left out is recorded.
    #[arg(long, value_name = "N", default_value_t = TargetSpec::default().min_code_lines)]
    pub min_code_lines: usize,
}

/// `--pass`'s default, in words, from the library's constant.
pub fn default_pass_words() -> String {
    format!("{}% of LINES, rounded up", posrecall::score::PASS_PERCENT)
}

/// `--normalize`'s default, which is the policy's.
pub fn default_normalize_words() -> String {
    format!("{}; {} under --policy {}", Policy::Posrecall.default_normalize(), Policy::Codeneedle.default_normalize(), Policy::Codeneedle)
}

/// `--language`: a name the corpus layer knows.
fn language_name(s: &str) -> Result<String, String> {
    match posrecall::corpus::language_named(s) {
        Some(l) => Ok(l.name().to_string()),
        None => Err(format!("unknown language (known: {})", posrecall::corpus::language_names().join(", "))),
    }
}

/// Which files make the corpus and their language; shared by `bench`, `targets` and `prompt`.
#[derive(Debug, Clone, Default, Args)]
pub struct CorpusArgs {
    /// The language of the corpus, whatever the file extension says: javascript, typescript, tsx,
    /// python, rust, go, c, cpp or java. Without a corpus: that language's default corpus.
    #[arg(long, value_name = "NAME", value_parser = language_name)]
    pub language: Option<String>,
    /// Use a whole folder as the corpus: its source files concatenated in sorted path order,
    /// each after a comment line naming its relative path.
    #[arg(long, value_name = "DIR", conflicts_with = "corpus")]
    pub corpus_dir: Option<PathBuf>,
    /// With --corpus-dir: use only files whose relative path matches GLOB (repeatable)
    /// [default: every file whose extension names a language, or --language's].
    #[arg(long, value_name = "GLOB", requires = "corpus_dir")]
    pub include: Vec<String>,
    /// With --corpus-dir: leave out files whose relative path matches GLOB (repeatable).
    #[arg(long, value_name = "GLOB", requires = "corpus_dir")]
    pub exclude: Vec<String>,
}

#[derive(Debug, Args)]
pub struct TargetsArgs {
    /// The source file (its language from the extension: .js .ts .tsx .py .rs .go .c .h .cpp .java ...);
    /// with --language and no file, that language's default corpus.
    #[arg(required_unless_present_any = ["corpus_dir", "language"])]
    pub corpus: Option<PathBuf>,
    #[command(flatten)]
    pub source: CorpusArgs,
    #[command(flatten)]
    pub target: TargetArgs,
    /// Print the self-contained targets file (JSON) that `score` reads.
    #[arg(long)]
    pub json: bool,
    /// Also write JSONL {"name", "prompt", "chat_template_kwargs"}: the complete prompt (file, then
    /// question) per target, with the template variables a server needs for --think.
    #[arg(long, value_name = "FILE")]
    pub emit_prompts: Option<PathBuf>,
    /// With --emit-prompts: off writes chat_template_kwargs that turn thinking off; on lets the model think.
    #[arg(long, value_parser = named::<Think>(), default_value_t = Think::default(), requires = "emit_prompts")]
    pub think: Think,
    /// With --emit-prompts: template variables written over those --think sets (a JSON object).
    #[arg(long, value_name = "JSON", requires = "emit_prompts")]
    pub template_kwargs: Option<String>,
}

#[derive(Debug, Args)]
pub struct ScoreArgs {
    /// A targets file written by `posrecall targets --json`.
    pub targets: PathBuf,
    /// Answers, one JSON object per line: {"name": ..., "response": ...}.
    pub responses: PathBuf,
    /// Write the run file (JSON) here.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// Check that the targets file was made for exactly these lines A:B (as a bench run's crop).
    #[arg(long, value_name = "A:B")]
    pub crop_lines: Option<LineRange>,
    /// Override the pass threshold recorded in the targets file.
    #[arg(long)]
    pub pass: Option<usize>,
    /// Override the normalisation recorded in the targets file.
    #[arg(long, value_parser = named::<Normalize>())]
    pub normalize: Option<Normalize>,
    /// Score under this policy; the targets file must have been made under it (its extra window
    /// is the policy's). Left out: the targets file's.
    #[arg(long, value_parser = named::<Policy>())]
    pub policy: Option<Policy>,
    /// Which lines a score counts: all, or code alone (as bench's --credit). Left out: the targets
    /// file's.
    #[arg(long, value_parser = named::<Credit>())]
    pub credit: Option<Credit>,
    /// Print only the aggregate, not the per-target diffs.
    #[arg(long, short)]
    pub quiet: bool,
    /// The server the answers came from (`ask --url`), recorded in the run file; reports name the run by it.
    #[arg(long)]
    pub url: Option<String>,
    /// The model that gave the answers (`ask --model`), recorded in the run file; reports name the run by it.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
}

/// How a thinking model's chat template is rendered; shared by `bench`, `targets` and `prompt`.
#[derive(Debug, Clone, Default, Args)]
pub struct TemplateArgs {
    /// off: render the chat template with its switch set to answer at once (the benchmark measures
    /// recall); on: let the model reason first, within --think-budget.
    #[arg(long, value_parser = named::<Think>(), default_value_t = Think::default())]
    pub think: Think,
    #[arg(long, value_name = "N", help = with_default(
        "With --think on: reasoning tokens allowed on top of the answer budget; when they are spent the \
         reasoning is closed as the model's family closes it and the answer follows",
        posrecall::prompt::template::DEFAULT_THINK_BUDGET,
    ))]
    pub think_budget: Option<usize>,
    /// A JSON object of chat template variables, as llama-server's chat_template_kwargs, e.g.
    /// '{"reasoning_effort": "low"}'; they replace those --think sets.
    #[arg(long, value_name = "JSON")]
    pub template_kwargs: Option<String>,
    /// Render this Jinja chat template instead of the GGUF's own.
    #[arg(long, value_name = "FILE")]
    pub chat_template: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OnOff {
    On,
    Off,
}

/// How answers are decoded; shared by `bench` and `matrix`. The developer
/// switches (checks of the method against itself, memory bounds, the restore
/// mode) are hidden from `--help` and documented in docs/DEVELOPMENT.md.
#[derive(Debug, Clone, Default, Args)]
pub struct DecodeArgs {
    /// Answer up to N questions at once, as sequences sharing the evaluated prefix in one
    /// KV cache (1: one at a time). Falls back to one at a time where the model's memory
    /// cannot share a prefix; the run file's decode_mode says which ran.
    #[arg(long, value_name = "N", default_value_t = posrecall::bench::DecodeOptions::default().parallel as u32)]
    pub parallel: u32,
    /// With --parallel: answer every question one at a time as well, and record how many
    /// answers differ and by how much (run file: summary.sequential).
    #[arg(long, hide = true)]
    pub check_sequential: bool,
    /// Generate exactly T tokens per question, ignoring end-of-generation and the line
    /// limit: equal work for throughput measurement (answers are still scored).
    #[arg(long, value_name = "T", value_parser = clap::value_parser!(u64).range(1..=MAX_NEW_TOKENS as u64))]
    pub fixed_tokens: Option<u64>,
    /// With --parallel: the most memory its KV cache may take, e.g. 6GiB [default: 90% of the
    /// free memory where the cache lives]. A larger N is refused, naming the largest that fits.
    #[arg(long, value_name = "SIZE", hide = true)]
    pub kv_memory: Option<bytesize::ByteSize>,
    /// How each question's changes to the prefix state are undone: lean removes the
    /// question's cells and writes back only the sliding-window and recurrent state;
    /// full writes the whole saved state back (both exact; run file: runtime.restore).
    #[arg(long, value_name = "HOW", default_value_t = posrecall::settings::RestoreMode::default(), hide = true, value_parser = named::<posrecall::settings::RestoreMode>())]
    pub restore: posrecall::settings::RestoreMode,
    /// The most host memory the prefix snapshot may take, e.g. 2GiB [default: 90% of the
    /// free main memory]. A run whose snapshot would not fit is refused before the prefill.
    #[arg(long, value_name = "SIZE", hide = true)]
    pub snapshot_memory: Option<bytesize::ByteSize>,
    #[arg(long, value_name = "MODE", value_parser = named::<posrecall::decode::draft::DraftMode>(), help = with_default(
        "Where draft tokens come from: truth (the target's own lines, then the file), lookup \
         (n-grams of the answer found in the file) or none (one token per step). Drafts are \
         verified in one batch against the model's greedy choices, so answers stay greedy",
        format!("{}; in a sweep, models.toml's draft", posrecall::decode::draft::DraftMode::default()),
    ))]
    pub draft: Option<posrecall::decode::draft::DraftMode>,
    #[arg(long, value_name = "K", help = with_default(
        "The most draft tokens verified in one step",
        format!("{}; in a sweep, models.toml's draft_max", posrecall::decode::draft::DEFAULT_MAX),
    ))]
    pub draft_max: Option<u32>,
    /// Answer every question again without drafts and record whether and where the
    /// answers part, and how close the call was there (run file: summary.undrafted).
    #[arg(long, hide = true)]
    pub check_draft: bool,
}

/// Context extension, as llama-server spells it; shared by `bench` and
/// `prompt`. Each setting not given is the model's own. Their ranges are
/// checked once, by the library ([`posrecall::settings::RopeInput::resolve`]).
#[derive(Debug, Args, Clone, Default)]
pub struct RopeArgs {
    /// RoPE scaling: none, linear or yarn [default: the model's].
    #[arg(long, value_parser = named::<posrecall::settings::RopeScaling>())]
    pub rope_scaling: Option<posrecall::settings::RopeScaling>,
    /// Stretch the context N times (the frequency scale 1/N); with linear or yarn scaling, `--ctx auto` may then go N times past the trained context.
    #[arg(long, value_name = "N")]
    pub rope_scale: Option<f32>,
    /// RoPE base frequency [default: the model's].
    #[arg(long, value_name = "F")]
    pub rope_freq_base: Option<f32>,
    /// RoPE frequency scale, the inverse of --rope-scale [default: the model's].
    #[arg(long, value_name = "S")]
    pub rope_freq_scale: Option<f32>,
    /// The context YaRN extends from [default: the trained context].
    #[arg(long, value_name = "N")]
    pub yarn_orig_ctx: Option<usize>,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The model file(s) (GGUF, a split model's first part, or a hub reference); more than one runs each over the same targets, the first the others' reference (needs --out-dir).
    #[arg(required = true, value_name = "MODEL")]
    pub model: Vec<PathBuf>,
    /// The source file to recall from (default: the corpus `scripts/env/fetch-corpus` fetched).
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    #[command(flatten)]
    pub source: CorpusArgs,
    #[command(flatten)]
    pub target: TargetArgs,
    // No clap default: --kv given with --kv-k or --kv-v is refused, so its
    // absence must be seen.
    #[arg(long, value_name = "KV,...", help = with_default(
        "KV-cache types: a type for K and V, or K/V; a comma list runs each in turn over the same targets, the first as the \
         others' reference (needs --out-dir)",
        default_kv(),
    ))]
    pub kv: Option<List<KvPair>>,
    /// KV-cache types for K, with V from --kv-v or the default (not with --kv, which names K/V itself; a list pairs item by item with --kv-v).
    #[arg(long, value_name = "TYPE,...")]
    pub kv_k: Option<List<KvType>>,
    /// KV-cache types for V, with K from --kv-k or the default (not with --kv; a quantised V needs flash attention).
    #[arg(long, value_name = "TYPE,...")]
    pub kv_v: Option<List<KvType>>,
    /// llama.cpp's rotation of a quantised KV cache: auto (llama.cpp's rule: rotate when the head size is a multiple of 64) or off; a comma list crosses with the KV list.
    #[arg(long, value_name = "MODE,...", default_value_t = List(vec![KvRotation::default()]))]
    pub kv_rotation: List<KvRotation>,
    /// Layers to offload to the GPU [default: on a build with a GPU backend, as many as fit in 90% of its free memory; else none].
    #[arg(long)]
    pub gpu_layers: Option<u32>,
    /// Context size in tokens, or `auto`: prefix + question + answer budget, capped at the trained context (times --rope-scale with a scaling); a comma list runs each (the kept file fits the smallest).
    #[arg(long, value_name = "N,...", default_value_t = List(vec![CtxSize::default()]))]
    pub ctx: List<CtxSize>,
    #[command(flatten)]
    pub rope: RopeArgs,
    /// When the corpus does not fit: keep the first lines (head), the densest window (densest), or fail (none).
    #[arg(long, value_parser = names_of(&CropMode::CHOSEN), default_value_t = CropMode::default())]
    pub crop: CropMode,
    /// Cap the kept file (the prefix) at this many tokens.
    #[arg(long, visible_alias = "max-tokens", value_name = "N")]
    pub max_prefix_tokens: Option<usize>,
    /// CPU threads (default: all cores; at most 1024).
    #[arg(long, allow_negative_numbers = true)]
    pub threads: Option<i32>,
    /// Flash attention: auto, on or off; a comma list runs each.
    #[arg(long, value_name = "MODE,...", default_value_t = List(vec![FlashAttn::default()]))]
    pub flash_attn: List<FlashAttn>,
    /// Keep the whole sequence in a sliding-window model's cache (off keeps only the window, as llama-server does).
    #[arg(long, value_enum, default_value_t = OnOff::Off)]
    pub swa_full: OnOff,
    /// How the question is put to the model: auto, chat or completion; a comma list runs each.
    #[arg(long, value_name = "PROBE,...", default_value_t = List(vec![Probe::default()]))]
    pub probe: List<Probe>,
    /// A label for this model build in reports (default: the file name).
    #[arg(long)]
    pub build: Option<String>,
    /// Generation cap per answer (default: 20 tokens per line of the expected window).
    #[arg(long, value_name = "N")]
    pub max_new_tokens: Option<usize>,
    /// Skip generation: run only the teacher-forced pass (fast screening of many builds).
    #[arg(long, conflicts_with = "no_forced")]
    pub forced_only: bool,
    /// Skip the teacher-forced pass: only greedy answers (for timing against servers that only generate).
    #[arg(long)]
    pub no_forced: bool,
    #[command(flatten)]
    pub template: TemplateArgs,
    #[command(flatten)]
    pub decode: DecodeArgs,
    /// Keep the evaluated prefix state in this folder and load it on later runs with the same key.
    #[arg(long, value_name = "DIR")]
    pub prefix_cache: Option<PathBuf>,
    /// Also ask every question with no file in the context: what the model recalls from memory.
    #[arg(long)]
    pub closed_book: bool,
    /// Keep this run's next-token distributions on the forced tokens in FILE (and FILE.sha256), as a reference for later runs.
    #[arg(long, value_name = "FILE")]
    pub save_reference: Option<PathBuf>,
    #[arg(long, value_name = "K", help = with_default(
        "Tokens kept per forced position by --save-reference (the rest is kept as one mass)",
        posrecall::record::reference::DEFAULT_TOP_K,
    ))]
    pub reference_top_k: Option<usize>,
    /// Measure the forced pass against a reference file: KL divergence, same top-1, Δp per token.
    #[arg(long, value_name = "FILE")]
    pub reference: Option<PathBuf>,
    /// Ask only these of the sampled targets (comma-separated names); each answer is the one a full run gives.
    #[arg(long, value_name = "NAME,...", value_delimiter = ',')]
    pub only: Vec<String>,
    /// A length ladder: ask COUNT targets at each of these prefix lengths (e.g. 2k,4k,8k, or auto), evaluating the file once.
    #[arg(long, value_name = "L,...|auto")]
    pub lengths: Option<posrecall::bench::ladder::Lengths>,
    /// The pass rate the effective length must keep at every length up to it.
    #[arg(long, value_name = "RATE", default_value_t = posrecall::bench::ladder::DEFAULT_EFFECTIVE_AT, requires = "lengths", allow_negative_numbers = true)]
    pub effective_at: f64,
    /// Write the run file (JSON) here; it is written again as each target finishes, marked unfinished until the run ends.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// Finish the unfinished run file at --out: keep its targets and ask only the rest (the same configuration; a finished file is left as it is). With a list: keep each run whose file in --out-dir is a finished run of the same configuration, and run the rest.
    #[arg(long)]
    pub resume: bool,
    /// With a list (models, --kv, --ctx, --probe, --flash-attn, --kv-rotation): write each run's file (MODEL__K-V.json) and the reference (.ref) into this folder.
    #[arg(long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// With a list: the format of its table, one row per instance.
    #[arg(long, value_parser = names_of(&posrecall::report::list_table::FORMATS), default_value_t = posrecall::report::export::Format::default())]
    pub format: posrecall::report::export::Format,
    /// Also write the HTML report of this run here (as `posrecall report --format html`).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Print only the aggregate, not the per-target diffs.
    #[arg(long, short)]
    pub quiet: bool,
}
