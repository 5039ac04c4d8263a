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
pub mod convert;
pub mod generate;
pub mod matrix;
pub mod progress;
pub mod prompt;
pub mod report;
pub mod rescore;
pub mod score;
pub mod shown;
pub mod targets;
pub mod template;

use anyhow::{Context, Result, anyhow};
use posrecall::corpus::CorpusSpec;
use posrecall::settings::{Keys, Names, Setting};
use posrecall::targets::crop::CropMode;
use std::path::Path;

/// What a sweep or a list says of a run `--resume` keeps.
pub const SKIPPED: &str = "finished before, skipped";

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

/// Checks every output against every input, every input folder and every
/// other output, before any work ([`posrecall::support::fsutil::check_outputs`]):
/// `outputs` are (flag, path) in the order the command writes them.
pub fn check_outputs(outputs: &[(&str, &Path)], inputs: &[&Path], input_dirs: &[(&str, &Path)]) -> Result<()> {
    posrecall::support::fsutil::check_outputs(outputs, inputs, input_dirs).map_err(|(flag, e)| anyhow!("{flag}: {e}"))
}

/// The corpus the flags name: the file given, the folder given, else the
/// default corpus (of `--language`, when given), which must have been fetched.
pub fn corpus_spec(given: Option<&Path>, a: &crate::cli::CorpusArgs) -> Result<CorpusSpec> {
    CorpusSpec::resolve(given, a.corpus_dir.as_deref(), a.language.as_deref(), &a.include, &a.exclude).map_err(|e| hint(e.into(), None))
}

/// The command line's names for the library's settings: each setting's
/// flag. (A sweep names them by its keys, [`posrecall::settings::Keys`].)
pub struct Flags;

impl Flags {
    fn flag(s: Setting) -> &'static str {
        use Setting as S;
        match s {
            S::Corpus => "--corpus",
            S::CorpusDir => "--corpus-dir",
            S::Include => "--include",
            S::Exclude => "--exclude",
            S::Language => "--language",
            S::Count => "--count",
            S::Lines => "--lines",
            S::Seed => "--seed",
            S::CropLines => "--crop-lines",
            S::SkipBlank => "--skip-blank",
            S::Rename => "--rename",
            S::Pass => "--pass",
            S::Normalize => "--normalize",
            S::Anchor => "--anchor",
            S::Policy => "--policy",
            S::Credit => "--credit",
            S::MinCodeLines => "--min-code-lines",
            S::Only => "--only",
            S::Probe => "--probe",
            S::Crop => "--crop",
            S::Ctx => "--ctx",
            S::MaxPrefixTokens => "--max-prefix-tokens",
            S::MaxNewTokens => "--max-new-tokens",
            S::ChatTemplate => "--chat-template",
            S::TemplateKwargs => "--template-kwargs",
            S::Think => "--think",
            S::ThinkBudget => "--think-budget",
            S::Kv => "--kv",
            S::KvK => "--kv-k",
            S::KvV => "--kv-v",
            S::KvRotation => "--kv-rotation",
            S::FlashAttn => "--flash-attn",
            S::SwaFull => "--swa-full",
            S::Threads => "--threads",
            S::GpuLayers => "--gpu-layers",
            S::RopeScaling => "--rope-scaling",
            S::RopeScale => "--rope-scale",
            S::RopeFreqScale => "--rope-freq-scale",
            S::RopeFreqBase => "--rope-freq-base",
            S::YarnOrigCtx => "--yarn-orig-ctx",
            S::Parallel => "--parallel",
            S::CheckSequential => "--check-sequential",
            S::FixedTokens => "--fixed-tokens",
            S::KvMemory => "--kv-memory",
            S::Restore => "--restore",
            S::SnapshotMemory => "--snapshot-memory",
            S::ForcedOnly => "--forced-only",
            S::NoForced => "--no-forced",
            S::Draft => "--draft",
            S::DraftMax => "--draft-max",
            S::CheckDraft => "--check-draft",
            S::Build => "--build",
            S::ClosedBook => "--closed-book",
            S::PrefixCache => "--prefix-cache",
            S::Resume => "--resume",
            S::Lengths => "--lengths",
            S::EffectiveAt => "--effective-at",
            S::Reference => "--reference",
            S::SaveReference => "--save-reference",
            S::ReferenceTopK => "--reference-top-k",
            S::Concurrency => "--concurrency",
            S::Retries => "--retries",
            S::Timeout => "--timeout",
            S::OutDir => "--out-dir",
            S::Shard => "--shard",
        }
    }
}

impl Names for Flags {
    fn name(&self, s: Setting) -> String {
        Flags::flag(s).to_string()
    }

    fn set(&self, s: Setting, value: &str) -> String {
        format!("{} {value}", Flags::flag(s))
    }
}

/// A sweep's names for the settings: the `models.toml` key that sets each,
/// and for what the file does not hold, `matrix`'s flag.
pub struct SweepWords;

impl Names for SweepWords {
    fn name(&self, s: Setting) -> String {
        Keys::key(s).map_or_else(|| Flags.name(s), str::to_string)
    }

    fn set(&self, s: Setting, value: &str) -> String {
        match Keys::key(s) {
            Some(key) => Keys::assignment(key, value),
            None => Flags.set(s, value),
        }
    }
}

/// [`hint`] for `matrix`: the settings named as its user set them.
pub fn sweep_hint(e: anyhow::Error, crop: Option<CropMode>) -> anyhow::Error {
    match posrecall::explain(&e, &SweepWords, crop) {
        Some(message) => anyhow!("{message}"),
        None => e,
    }
}

/// Rewrites an error from the library as the command line's user reads it:
/// the same facts, with the flag that sets each value and what would fix
/// it. `crop` is the bench crop mode (`None` for commands without a model).
/// Errors that name no setting pass through unchanged.
pub fn hint(e: anyhow::Error, crop: Option<CropMode>) -> anyhow::Error {
    match posrecall::explain(&e, &Flags, crop) {
        Some(message) => anyhow!("{message}"),
        None => e,
    }
}

#[cfg(test)]
mod tests {
    use super::{Flags, Names};
    use clap::CommandFactory;
    use posrecall::settings::Setting;
    use strum::VariantArray;

    /// Every long flag of every command, `--` included.
    fn flags(cmd: &clap::Command, out: &mut Vec<String>) {
        out.extend(cmd.get_arguments().filter_map(|a| a.get_long()).map(|l| format!("--{l}")));
        cmd.get_subcommands().for_each(|c| flags(c, out));
    }

    /// The face's name of each setting is a flag the command line has: a
    /// message never tells a user to type a flag that does not exist.
    #[test]
    fn every_setting_is_named_by_a_real_flag() {
        let mut all = Vec::new();
        flags(&crate::cli::Cli::command(), &mut all);
        let missing: Vec<String> = Setting::VARIANTS.iter().map(|&s| Flags.name(s)).filter(|f| !all.contains(f)).collect();
        assert!(missing.is_empty(), "settings named by flags the command line lacks: {missing:?}");
    }
}
