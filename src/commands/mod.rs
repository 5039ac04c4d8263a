//! One file per subcommand: each turns its arguments into the library's own
//! types, calls the library, and prints. The flag names live here: errors
//! from below name settings and values, and [`hint`] says which flag fixes
//! them.

/// `println!` that returns the failed write as an error instead of
/// panicking (a full disk, a closed pipe).
macro_rules! outln {
    () => {
        $crate::commands::out("\n")
    };
    ($($arg:tt)*) => {
        $crate::commands::out(&format!("{}\n", format_args!($($arg)*)))
    };
}

pub mod ask;
pub mod bench;
pub mod compare;
pub mod generate;
pub mod matrix;
pub mod options;
pub mod progress;
pub mod prompt;
pub mod report;
pub mod score;
pub mod shown;
pub mod targets;
pub mod template;

use anyhow::{Context, Result, anyhow, bail};
use posrecall::bench::{DecodeError, LadderClash, MemoryLimit, Numeric, OptionsError, PlanError, TemplateSetting};
use posrecall::corpus::{CorpusError, CorpusSpec, CorpusSpecError};
use posrecall::settings::ConfigError;
use posrecall::settings::Named;
use posrecall::targets::crop::{CropError, CropMode};
use posrecall::targets::{SpecError, TooFewTargets};
use std::path::Path;

/// Whether stdout should be coloured: a terminal, and `NO_COLOR` unset or empty.
pub fn stdout_wants_color() -> bool {
    use std::io::IsTerminal as _;
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The library's notes, on standard error: the face is the only code that
/// prints.
pub struct Stderr;

impl posrecall::support::progress::Notes for Stderr {
    fn note(&self, line: &str) {
        eprintln!("{line}");
    }
}

/// Writes `text` to standard output. A write that fails is an error (the
/// binary ends quietly with success when the reader closed the pipe, as
/// `posrecall targets x.js | head` does), where `print!` would panic.
pub fn out(text: &str) -> Result<()> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()).context("cannot write to standard output")
}

/// Checks, before any work, that the output `flag` names can be written and
/// is none of `inputs` ([`posrecall::support::fsutil::check_output`]).
pub fn check_output(flag: &str, out: &Path, inputs: &[&Path]) -> Result<()> {
    posrecall::support::fsutil::check_output(out, inputs).map_err(|e| anyhow!("{flag}: {e}"))
}

/// Checks every output against every input, every input folder (an output
/// inside one would join or replace what is read) and every other output,
/// before any work: `outputs` are (flag, path) in the order the command
/// writes them.
pub fn check_outputs(outputs: &[(&str, &Path)], inputs: &[&Path], input_dirs: &[(&str, &Path)]) -> Result<()> {
    for (i, (flag, out)) in outputs.iter().enumerate() {
        check_output(flag, out, inputs)?;
        if let Some((dir_flag, dir)) = input_dirs.iter().find(|(_, d)| posrecall::support::fsutil::is_inside(out, d)) {
            bail!("{flag}: {} is inside the {dir_flag} folder {}; writing it would change that input", out.display(), dir.display());
        }
        if let Some((other, _)) = outputs[..i].iter().find(|(_, o)| posrecall::support::fsutil::same_path(o, out)) {
            bail!("{flag}: {} is also the {other} output; one would overwrite the other", out.display());
        }
    }
    Ok(())
}

/// The corpus the flags name: the file given, the folder given, else the
/// default corpus (of `--language`, when given), which must have been fetched.
pub fn corpus_spec(given: Option<&Path>, a: &crate::cli::CorpusArgs) -> Result<CorpusSpec> {
    CorpusSpec::resolve(given, a.corpus_dir.as_deref(), a.language.as_deref(), &a.include, &a.exclude).map_err(|e| hint(e.into(), None))
}

/// What would fix too few targets, by how the kept range was chosen.
fn too_few_hint(crop: Option<CropMode>) -> &'static str {
    match crop {
        // `targets` and `score`: the range is the whole file or one given by hand.
        None => "lower --count or --lines, or choose a --crop-lines range that holds more functions",
        Some(CropMode::Densest) => {
            "use a longer-context model (or a larger --ctx), --crop-lines A:B around another region, or a smaller --count or --lines"
        }
        Some(_) => {
            "use a longer-context model (or a larger --ctx), --crop densest (the window with the most functions), or a smaller --count or --lines"
        }
    }
}

/// Rewrites an error from the library as the command line's user reads it:
/// the same facts, with the flag that sets each value and what would fix
/// it. `crop` is the bench crop mode (`None` for commands without a model).
/// Errors it does not know pass through unchanged.
/// Where `--ctx auto` was capped at the trained context, the flags that go
/// past it.
fn past_training(e: &anyhow::Error) -> String {
    match e.downcast_ref::<posrecall::bench::plan::TrainedCap>() {
        Some(t) => {
            format!("; past the model's trained context ({} tokens), set a RoPE scaling, e.g. --rope-scaling yarn --rope-scale 4", t.0)
        }
        None => String::new(),
    }
}

pub fn hint(e: anyhow::Error, crop: Option<CropMode>) -> anyhow::Error {
    if let Some(t) = e.downcast_ref::<TooFewTargets>() {
        return anyhow!("{}, but --count is {}; {}", t.what_was_found(), t.wanted, too_few_hint(crop));
    }
    if let Some(rewritten) = corpus_or_options_hint(&e) {
        return rewritten;
    }
    if let Some(posrecall::sweep::OutDirError(why)) = e.downcast_ref() {
        return anyhow!("--out-dir: {why}");
    }
    if let Some(c) = e.downcast_ref::<CorpusError>() {
        let fix = match c {
            CorpusError::UnknownExtension { .. } => "give --language NAME",
            CorpusError::UnknownLanguage(_) => "give one of them to --language",
            CorpusError::NoMatchingFile { .. } => "check --corpus-dir, --include, --exclude and --language",
            CorpusError::BadGlob { .. } => "fix --include or --exclude",
            CorpusError::Unparsable { .. } => "check the file, or give its language with --language NAME",
        };
        return anyhow!("{c}; {fix}");
    }
    if let Some(s) = e.downcast_ref::<SpecError>() {
        return match s {
            SpecError::PassAboveLines { pass, lines } => {
                anyhow!("--pass {pass} is more than --lines {lines}: nothing could pass")
            }
            _ => anyhow!("--{} {s}", s.setting()),
        };
    }
    if let Some(l) = e.downcast_ref::<posrecall::bench::ladder::LadderError>() {
        return match l {
            posrecall::bench::ladder::LadderError::TooShort { shortest, .. } => {
                anyhow!("{l}; start --lengths at {shortest} or more, or lower --count")
            }
            _ => anyhow!("{l}; lower --count, or keep more of the corpus (--crop densest, --crop-lines)"),
        };
    }
    if let Some(c) = e.downcast_ref::<CropError>() {
        return match c {
            CropError::PastTheEnd { first, last, line_count } => {
                anyhow!("--crop-lines {first}:{last} goes past the end of the corpus ({line_count} lines)")
            }
            _ => anyhow!("{c}; use --crop head or --crop densest, --crop-lines A:B, or a larger --ctx{}", past_training(&e)),
        };
    }
    if let Some(p) = e.downcast_ref::<PlanError>() {
        let fix = match p {
            PlanError::NoRoomForTheFile { .. } => "use a larger --ctx or a smaller --max-new-tokens",
            PlanError::RangeDoesNotFit { .. } => "use --crop head or --crop densest, a shorter --crop-lines range, or a larger --ctx",
            PlanError::ContextTooSmall { .. } => "use a larger --ctx or a smaller --max-new-tokens",
            PlanError::NoChatTemplate(_) => "use --probe completion (or auto)",
            PlanError::NotSampled { .. } => "--only names sampled targets; raise --count or change --seed",
            PlanError::UnknownTarget { .. } => "--only names sampled targets (`posrecall targets` lists them)",
        };
        return anyhow!("{p}; {fix}{}", past_training(&e));
    }
    if let Some(ConfigError::QuantizedVNeedsFlashAttn(t)) = e.downcast_ref::<ConfigError>() {
        return anyhow!("a quantised V cache (--kv-v {t}) needs flash attention; drop --flash-attn off or use --kv-v f16");
    }
    if let Some(t) = e.downcast_ref::<posrecall::prompt::template::TemplateError>() {
        return anyhow!("{t}; give a working template with --chat-template FILE, or fix --template-kwargs");
    }
    if let Some(d) = e.downcast_ref::<DecodeError>() {
        return anyhow!("{}", decode_message(d));
    }
    if let Some(s) = e.downcast_ref::<posrecall::sweep::ShardError>() {
        return anyhow!("{}", shard_message(s));
    }
    if let Some(d) = e.downcast_ref::<posrecall::engine::device::DeviceError>() {
        let posrecall::engine::device::DeviceError::ModelDoesNotFit { fit, .. } = d;
        return match fit {
            0 => anyhow!("{d}; run with --gpu-layers 0"),
            n => anyhow!("{d}; run with --gpu-layers {n}, or leave --gpu-layers out to offload what fits"),
        };
    }
    e
}

/// [`hint`] for the corpus the flags name and for options that do not go
/// together.
fn corpus_or_options_hint(e: &anyhow::Error) -> Option<anyhow::Error> {
    if let Some(c) = e.downcast_ref::<CorpusSpecError>() {
        return Some(match c {
            CorpusSpecError::NoDefault(l) => {
                anyhow!("no --corpus given and {l} has no default corpus; give --corpus FILE or --corpus-dir DIR")
            }
            CorpusSpecError::DefaultMissing { language: Some(l), path } => anyhow!(
                "no --corpus given and the default {l} corpus is not at {}; run scripts/env/fetch-corpus --language {l} first",
                path.display()
            ),
            CorpusSpecError::DefaultMissing { language: None, path } => {
                anyhow!("no --corpus given and the default corpus is not at {}; run scripts/env/fetch-corpus first", path.display())
            }
            CorpusSpecError::GlobsOnFile(path) => anyhow!(
                "--include and --exclude choose files in a folder, but {} is one file; give the folder with --corpus-dir DIR",
                path.display()
            ),
        });
    }
    if let Some(o) = e.downcast_ref::<OptionsError>() {
        return Some(anyhow!("{}", options_message(o)));
    }
    if let Some(r) = e.downcast_ref::<posrecall::bench::ReferenceMismatch>() {
        return Some(anyhow!("--reference {}: {}", r.path.display(), r.mismatch));
    }
    None
}

/// A byte count as people read it (`1.5 GiB`).
fn size(b: u64) -> String {
    bytesize::ByteSize(b).display().iec().to_string()
}

/// The memory a check measured against: what `flag` allowed, or the share
/// of a device's free memory the checks use.
fn limit_text(limit: &MemoryLimit, flag: &str) -> String {
    match limit {
        MemoryLimit::Given(b) => format!("{} {flag} allows", size(*b)),
        MemoryLimit::Free(free, device) => free_text(*free, device),
    }
}

fn free_text(free: u64, device: &str) -> String {
    format!("90% of the {} free in {device}", size(free))
}

fn options_message(o: &OptionsError) -> String {
    match o {
        OptionsError::FixedAndMaxNew => "--fixed-tokens sets the answer length; drop --max-new-tokens".into(),
        OptionsError::EffectiveAt(rate) => format!("--effective-at {rate}: {o}"),
        OptionsError::OutOfRange { setting, value, .. } => {
            let flag = match setting {
                Numeric::Threads => "--threads",
                Numeric::MaxNewTokens => "--max-new-tokens",
                Numeric::FixedTokens => "--fixed-tokens",
                Numeric::ThinkBudget => "--think-budget",
                Numeric::ReferenceTopK => "--reference-top-k",
                Numeric::MaxPrefixTokens => "--max-prefix-tokens",
            };
            format!("{flag} {value}: {o}")
        }
        OptionsError::ReferenceWithoutForced => "--reference and --save-reference work on the teacher-forced pass; drop --no-forced".into(),
        OptionsError::Ladder(clash) => {
            let flag = match clash {
                LadderClash::ClosedBook => "--closed-book (recall without the file does not depend on its length)",
                LadderClash::CheckSequential => "--check-sequential",
                LadderClash::Reference => "--reference",
                LadderClash::SaveReference => "--save-reference",
                LadderClash::Only => "--only (each length samples its own targets)",
                LadderClash::ForcedOnly => "--forced-only (a window's pass rate needs answers)",
            };
            format!("--lengths runs a ladder of windows; it does not combine with {flag}")
        }
        OptionsError::EmptyOnly => "--only takes function names separated by commas; one of them is empty".into(),
        OptionsError::DuplicateOnly(name) => format!("--only names `{name}` twice"),
        OptionsError::BudgetWithoutThinking => "--think-budget is spent only with --think on; add --think on or drop --think-budget".into(),
        OptionsError::TemplateWithCompletion(setting) => {
            let flag = match setting {
                TemplateSetting::File => "--chat-template",
                TemplateSetting::Kwargs => "--template-kwargs",
                TemplateSetting::ThinkOn => "--think on",
            };
            format!("{flag} sets the chat template, and --probe completion renders none; drop {flag} or use --probe chat")
        }
        OptionsError::TopKWithoutSave => {
            "--reference-top-k sets what --save-reference keeps; add --save-reference FILE or drop --reference-top-k".into()
        }
    }
}

fn shard_message(e: &posrecall::sweep::ShardError) -> String {
    use posrecall::sweep::ShardError as S;
    match e {
        S::NoSlurmArray => format!("--shard auto: {e}; for a Kubernetes Indexed Job give the number of shards: --shard N"),
        S::NoScheduler { n } | S::BothSchedulers { n } => format!("--shard {n}: {e}; give --shard K/{n}"),
        S::IndexOutOfRange { n, .. } | S::ArraySize { n, .. } => format!("--shard {n}: {e}"),
        _ => format!("--shard: {e}"),
    }
}

fn decode_message(d: &DecodeError) -> String {
    match d {
        DecodeError::ForcedOnlyGeneratesNothing => {
            "--forced-only generates nothing; drop --parallel, --fixed-tokens, --check-sequential, --draft and --draft-max".into()
        }
        DecodeError::DraftMaxWithoutDrafts => format!("--draft-max with --draft none: {d}; drop one of them"),
        DecodeError::DraftsAtFixedLength => format!("--draft with --fixed-tokens: {d}; drop --draft and --draft-max"),
        DecodeError::CheckNeedsParallel => {
            "--check-sequential compares a --parallel run with sequential answers; add --parallel N (N >= 2)".into()
        }
        DecodeError::KvMemoryWithoutParallel => {
            "--kv-memory bounds the KV cache of --parallel answering; add --parallel N (N >= 2) or drop --kv-memory".into()
        }
        DecodeError::TooManySequences { requested } => format!("--parallel {requested}: {d}"),
        DecodeError::ZeroParallel => format!("--parallel 0: {d}"),
        DecodeError::DraftMax(k) => format!("--draft-max {k}: {d}"),
        DecodeError::CheckNeedsDrafts => "--check-draft compares drafted answers with undrafted ones; it needs --draft truth or lookup, \
             and no --parallel, --fixed-tokens or --forced-only"
            .into(),
        DecodeError::KvDoesNotFit { slots, cells, bytes, kv, limit, largest } => {
            let largest = match largest {
                Some(n) => format!("the largest N that fits is {n}"),
                None => "not even two sequences fit; run without --parallel".into(),
            };
            format!(
                "--parallel {slots} needs a KV cache of {cells} cells ({} at K {} / V {}), more than the {}; {largest}",
                size(*bytes),
                kv.0.as_str(),
                kv.1.as_str(),
                limit_text(limit, "--kv-memory")
            )
        }
        DecodeError::ContextDoesNotFit { cells, bytes, kv, free, device, largest } => format!(
            "a context of {cells} cells needs a KV cache of {} on the GPU at K {} / V {}, more than the {}; \
             a context of at most {largest} cells fits (--ctx), or offload fewer layers (--gpu-layers){}",
            size(*bytes),
            kv.0.as_str(),
            kv.1.as_str(),
            free_text(*free, device),
            if kv.0.is_quantized() && kv.1.is_quantized() { "" } else { ", or use --kv q8_0" }
        ),
        DecodeError::SnapshotDoesNotFit { restore, bytes, limit, lean_fits, largest_prefix } => {
            let fits = match lean_fits {
                Some(lean) => format!("--restore lean ({}) fits", size(*lean)),
                None if *largest_prefix == 0 => "no prefix fits".to_string(),
                None => format!("a prefix of at most {largest_prefix} tokens fits (--max-prefix-tokens)"),
            };
            format!(
                "the prefix snapshot (--restore {restore}) would take {}, more than the {}; {fits}",
                size(*bytes),
                limit_text(limit, "--snapshot-memory")
            )
        }
    }
}
