//! Everything one run is given, and the one place that says which settings
//! may go together.
//!
//! `bench`'s flags and each run of a sweep become one [`BenchOptions`];
//! [`BenchOptions::validate`] holds every rule that makes a set of options
//! valid, once, before any model is loaded. The errors name settings, not
//! flags or sweep keys: the command or the sweep reader says which of its
//! own words set each one.

use super::decoding::DecodeOptions;
use super::ladder::Lengths;
use super::plan::PlanOptions;
use crate::settings::{ContextSettings, Explain, Names, Setting};
use std::path::PathBuf;

/// Everything one benchmark run reads besides the model and the corpus.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub plan: PlanOptions,
    pub context: ContextSettings,
    pub decode: DecodeOptions,
    /// The build label in reports; `None`: the model file's name.
    pub build: Option<String>,
    /// Also ask every question with no file in the context.
    pub closed_book: bool,
    /// Keep the evaluated prefix state in this folder.
    pub prefix_cache: Option<PathBuf>,
    /// Ask at each of these lengths, from one evaluation of the file.
    pub lengths: Option<Lengths>,
    /// The pass rate the effective length keeps at every length up to it.
    pub effective_at: f64,
    /// Measure the teacher-forced pass against this reference file.
    pub reference: Option<PathBuf>,
    /// Save the teacher-forced distributions as a reference file here.
    pub save_reference: Option<PathBuf>,
    /// `save_reference` is a name posrecall made in a folder the user gave
    /// (a sweep's `.ref`): written onto that name, never through a link
    /// planted there; `false`, the path the user gave.
    pub save_reference_made: bool,
    /// Tokens of each forced position's distribution a saved reference
    /// keeps; `None`: [`crate::record::reference::DEFAULT_TOP_K`]. Given, it needs a
    /// reference to save.
    pub reference_top_k: Option<usize>,
    /// Finish the unfinished run file the run writes: keep its targets and
    /// ask only the rest ([`super::RunOut::resumed`]).
    pub resume: bool,
}

impl Default for BenchOptions {
    /// What a run is given when nothing is said: each part's own defaults.
    fn default() -> Self {
        BenchOptions {
            plan: PlanOptions::default(),
            context: ContextSettings::default(),
            decode: DecodeOptions::default(),
            build: None,
            closed_book: false,
            prefix_cache: None,
            lengths: None,
            effective_at: super::ladder::DEFAULT_EFFECTIVE_AT,
            reference: None,
            save_reference: None,
            save_reference_made: false,
            reference_top_k: None,
            resume: false,
        }
    }
}

/// A set of options that cannot run. The messages name settings; the
/// command (or the sweep reader) says each in its own words ([`Explain`]).
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum OptionsError {
    #[error("a fixed answer length and an answer budget are both given")]
    FixedAndMaxNew,
    /// The pass rate the effective length must keep.
    #[error("must be between 0 and 1")]
    EffectiveAt(f64),
    /// A number out of its range: the one check of each, for the command
    /// line and the sweep file alike.
    #[error("must be between 1 and {max}")]
    OutOfRange { setting: Setting, value: i64, max: usize },
    #[error("a reference is read and written by the teacher-forced pass, which is off")]
    ReferenceWithoutForced,
    /// A ladder of windows with a setting that replaces or compares the one
    /// growing prefix a ladder measures.
    #[error("a ladder of windows does not combine with {0:?}")]
    Ladder(Setting),
    #[error("one of the target names to keep is empty")]
    EmptyOnly,
    #[error("the target `{0}` is named twice among those to keep")]
    DuplicateOnly(String),
    // Settings that would change nothing are refused rather than ignored: a
    // user who gives one expects it to matter.
    #[error("a reasoning budget is given, but thinking is off")]
    BudgetWithoutThinking,
    /// A chat-template setting (a template file, template variables, or
    /// thinking on) with the completion probe.
    #[error("the completion probe renders no chat template, so {0:?} would change nothing")]
    TemplateWithCompletion(Setting),
    #[error("a reference's kept tokens are given, but no reference is saved")]
    TopKWithoutSave,
    /// Finishing a run target by target with a setting whose pass or file
    /// is made once over every target.
    #[error("a resumed run does not combine with {0:?}")]
    Resume(Setting),
}

impl Explain for OptionsError {
    fn explain(&self, n: &dyn Names) -> String {
        let name = |s| n.name(s);
        match self {
            OptionsError::FixedAndMaxNew => {
                format!("{} sets the answer length; drop {}", name(Setting::FixedTokens), name(Setting::MaxNewTokens))
            }
            OptionsError::EffectiveAt(rate) => format!("{}: {self}", n.set(Setting::EffectiveAt, &rate.to_string())),
            OptionsError::OutOfRange { setting, value, .. } => format!("{}: {self}", n.set(*setting, &value.to_string())),
            OptionsError::ReferenceWithoutForced => format!(
                "{} and {} work on the teacher-forced pass; drop {}",
                name(Setting::Reference),
                name(Setting::SaveReference),
                name(Setting::NoForced)
            ),
            OptionsError::Ladder(with) => {
                let why = match with {
                    Setting::ClosedBook => " (recall without the file does not depend on its length)",
                    Setting::Only => " (each length samples its own targets)",
                    Setting::ForcedOnly => " (a window's pass rate needs answers)",
                    _ => "",
                };
                format!("{} runs a ladder of windows; it does not combine with {}{why}", name(Setting::Lengths), name(*with))
            }
            OptionsError::EmptyOnly => format!("{} takes function names separated by commas; one of them is empty", name(Setting::Only)),
            OptionsError::DuplicateOnly(target) => format!("{} names `{target}` twice", name(Setting::Only)),
            OptionsError::BudgetWithoutThinking => {
                let (budget, on) = (name(Setting::ThinkBudget), n.set(Setting::Think, "on"));
                format!("{budget} is spent only with {on}; add {on} or drop {budget}")
            }
            OptionsError::TemplateWithCompletion(setting) => {
                let given = match setting {
                    Setting::Think => n.set(Setting::Think, "on"),
                    s => name(*s),
                };
                format!(
                    "{given} sets the chat template, and {} renders none; drop {given} or use {}",
                    n.set(Setting::Probe, "completion"),
                    n.set(Setting::Probe, "chat")
                )
            }
            OptionsError::TopKWithoutSave => {
                let (top_k, save) = (name(Setting::ReferenceTopK), name(Setting::SaveReference));
                format!("{top_k} sets what {save} keeps; add {} or drop {top_k}", n.set(Setting::SaveReference, "FILE"))
            }
            OptionsError::Resume(with) => {
                let why = match with {
                    Setting::Lengths => "a ladder's windows are recorded as a whole",
                    Setting::SaveReference => "the reference file holds every target's distributions, written once at the end",
                    _ => "its pass runs over every target after the last one",
                };
                format!(
                    "{resume} keeps an unfinished run's targets and asks the rest; it does not combine with {with} ({why}): drop {with}, or run the whole run again without {resume}",
                    resume = name(Setting::Resume),
                    with = name(*with),
                )
            }
        }
    }
}

/// A numeric setting of a run with a range, for [`OptionsError::OutOfRange`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Numeric {
    Threads,
    MaxNewTokens,
    /// The exact answer length of a throughput run.
    FixedTokens,
    ThinkBudget,
    ReferenceTopK,
    MaxPrefixTokens,
}

impl Numeric {
    /// The largest value accepted (the smallest is 1 for every one).
    pub fn max(self) -> usize {
        match self {
            Numeric::Threads => super::MAX_THREADS,
            Numeric::MaxNewTokens | Numeric::FixedTokens => super::MAX_NEW_TOKENS,
            Numeric::ThinkBudget => crate::prompt::template::MAX_THINK_BUDGET,
            Numeric::ReferenceTopK => crate::record::reference::MAX_TOP_K,
            Numeric::MaxPrefixTokens => crate::settings::CtxSize::MAX as usize,
        }
    }

    /// The setting this range is of.
    pub fn setting(self) -> Setting {
        match self {
            Numeric::Threads => Setting::Threads,
            Numeric::MaxNewTokens => Setting::MaxNewTokens,
            Numeric::FixedTokens => Setting::FixedTokens,
            Numeric::ThinkBudget => Setting::ThinkBudget,
            Numeric::ReferenceTopK => Setting::ReferenceTopK,
            Numeric::MaxPrefixTokens => Setting::MaxPrefixTokens,
        }
    }

    /// `Ok` when `value` is in range.
    pub fn check(self, value: Option<i64>) -> Result<(), OptionsError> {
        match value {
            Some(v) if !(1..=self.max() as i64).contains(&v) => {
                Err(OptionsError::OutOfRange { setting: self.setting(), value: v, max: self.max() })
            }
            _ => Ok(()),
        }
    }
}

/// The first chat-template setting `p` gives beyond the defaults: what a
/// completion probe, which renders no template, cannot honour.
fn template_setting(p: &PlanOptions) -> Option<Setting> {
    [
        (p.template_file.is_some(), Setting::ChatTemplate),
        (!p.template.kwargs.is_empty(), Setting::TemplateKwargs),
        (p.template.think == crate::prompt::template::Think::On, Setting::Think),
    ]
    .into_iter()
    .find_map(|(given, s)| given.then_some(s))
}

/// The rules on a plan's own settings: the ranges of its numbers, and
/// template settings that would change nothing (any with the completion
/// probe, a reasoning budget with thinking off). `bench` checks it in
/// [`BenchOptions::validate`], `prompt` on its own.
pub fn check_plan(p: &PlanOptions) -> Result<(), OptionsError> {
    Numeric::MaxNewTokens.check(p.max_new_tokens.map(|n| n as i64))?;
    Numeric::MaxPrefixTokens.check(p.max_prefix_tokens.map(|n| n as i64))?;
    Numeric::ThinkBudget.check(p.think_budget.map(|n| n as i64))?;
    if p.probe == crate::prompt::Probe::Completion
        && let Some(s) = template_setting(p)
    {
        return Err(OptionsError::TemplateWithCompletion(s));
    }
    if p.think_budget.is_some() && p.template.think != crate::prompt::template::Think::On {
        return Err(OptionsError::BudgetWithoutThinking);
    }
    Ok(())
}

/// Why a set of options cannot run: the one error of
/// [`BenchOptions::validate`], whichever part's rule refused them.
#[derive(Debug, thiserror::Error)]
pub enum Invalid {
    #[error(transparent)]
    Options(#[from] OptionsError),
    #[error(transparent)]
    Target(#[from] crate::targets::SpecError),
    #[error(transparent)]
    Context(#[from] crate::settings::ConfigError),
    #[error(transparent)]
    Decode(#[from] super::decoding::DecodeError),
}

impl Explain for Invalid {
    fn explain(&self, n: &dyn Names) -> String {
        match self {
            Invalid::Options(e) => e.explain(n),
            Invalid::Target(e) => e.explain(n),
            Invalid::Context(e) => e.explain(n),
            Invalid::Decode(e) => e.explain(n),
        }
    }
}

/// Options [`BenchOptions::validate`] accepted: the only options a run
/// takes. What a run resolves as it goes (the layers a load offloaded, the
/// hub reference a model came from) is recorded in the run, never written
/// back here.
#[derive(Debug, Clone)]
pub struct ValidOptions(BenchOptions);

impl std::ops::Deref for ValidOptions {
    type Target = BenchOptions;

    fn deref(&self) -> &BenchOptions {
        &self.0
    }
}

impl ValidOptions {
    /// The options, to change and check again.
    pub fn into_inner(self) -> BenchOptions {
        self.0
    }
}

impl BenchOptions {
    /// Refuses settings that cannot run, before any model is loaded: every
    /// rule, in the order a user meets them. Running takes only what this
    /// returns.
    pub fn validate(self) -> Result<ValidOptions, Invalid> {
        let p = &self.plan;
        if self.decode.fixed_tokens.is_some() && p.max_new_tokens.is_some() {
            return Err(OptionsError::FixedAndMaxNew.into());
        }
        if !(0.0..=1.0).contains(&self.effective_at) {
            return Err(OptionsError::EffectiveAt(self.effective_at).into());
        }
        Numeric::Threads.check(self.context.threads.map(i64::from))?;
        Numeric::FixedTokens.check(self.decode.fixed_tokens.map(|n| n as i64))?;
        Numeric::ReferenceTopK.check(self.reference_top_k.map(|n| n as i64))?;
        if self.decode.no_forced && (self.reference.is_some() || self.save_reference.is_some()) {
            return Err(OptionsError::ReferenceWithoutForced.into());
        }
        if self.resume {
            let clash = [
                (self.lengths.is_some(), Setting::Lengths),
                (self.save_reference.is_some(), Setting::SaveReference),
                (self.closed_book, Setting::ClosedBook),
                (self.decode.check_sequential, Setting::CheckSequential),
            ];
            if let Some((_, c)) = clash.iter().find(|(on, _)| *on) {
                return Err(OptionsError::Resume(*c).into());
            }
        }
        if self.lengths.is_some() {
            let clash = [
                (self.closed_book, Setting::ClosedBook),
                (self.decode.check_sequential, Setting::CheckSequential),
                (self.reference.is_some(), Setting::Reference),
                (self.save_reference.is_some(), Setting::SaveReference),
                (!p.only.is_empty(), Setting::Only),
                (self.decode.forced_only, Setting::ForcedOnly),
            ];
            if let Some((_, c)) = clash.iter().find(|(on, _)| *on) {
                return Err(OptionsError::Ladder(*c).into());
            }
        }
        if p.only.iter().any(|n| n.trim().is_empty()) {
            return Err(OptionsError::EmptyOnly.into());
        }
        if let Some((_, name)) = p.only.iter().enumerate().find(|(i, n)| p.only[..*i].contains(n)) {
            return Err(OptionsError::DuplicateOnly(name.clone()).into());
        }
        check_plan(p)?;
        if self.reference_top_k.is_some() && self.save_reference.is_none() {
            return Err(OptionsError::TopKWithoutSave.into());
        }
        p.target.validate()?;
        self.context.config(crate::settings::CtxSize::MIN).validate()?;
        self.decode.validate()?;
        Ok(ValidOptions(self))
    }

    /// Tokens kept per forced position by a saved reference.
    pub fn top_k(&self) -> usize {
        self.reference_top_k.unwrap_or(crate::record::reference::DEFAULT_TOP_K)
    }

    /// The options the planner reads: a fixed answer length is the answer
    /// budget.
    pub(crate) fn planning(&self) -> PlanOptions {
        let mut p = self.plan.clone();
        p.max_new_tokens = self.decode.fixed_tokens.or(p.max_new_tokens);
        p.rope = self.context.rope;
        p
    }
}
