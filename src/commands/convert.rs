//! The one conversion of the command line into the library's options
//! (ripgrep's `hiargs`): every flag is read here and nowhere else, each
//! becomes exactly one field, and the defaults a flag leaves unset are the
//! library's own. The rules and ranges are the library's, checked once by
//! [`BenchOptions::validate`] (and [`posrecall::targets::TargetSpec::validate`]);
//! [`super::hint`] words their errors as the flags that set them.

use crate::cli::{BenchArgs, DecodeArgs, OnOff, PromptArgs, RopeArgs, TargetArgs, TemplateArgs};
use anyhow::{Result, anyhow};
use posrecall::bench::instances::{self, Item, ListError};
use posrecall::bench::{BenchOptions, DecodeOptions, PlanOptions, ValidOptions};
use posrecall::prompt::Probe;
use posrecall::prompt::template::{TemplateFile, TemplateVars};
use posrecall::settings::{ContextSettings, Explain, Rope, RopeInput};
use posrecall::settings::{CtxSize, Setting};
use posrecall::sweep::list::BenchList;
use posrecall::targets::TargetSpec;

/// What picks the targets and scores the answers.
pub fn target_spec(a: &TargetArgs) -> TargetSpec {
    TargetSpec {
        count: a.count,
        lines: a.lines,
        seed: a.seed,
        crop_lines: a.crop_lines,
        skip_blank: a.skip_blank,
        rename: a.rename,
        pass: a.pass,
        normalize: a.normalize,
        anchor: a.anchor,
        policy: a.policy,
        credit: a.credit,
        min_code_lines: a.min_code_lines,
    }
}

/// Context extension: `--rope-scale N` is the frequency scale 1/N.
pub fn rope(a: &RopeArgs) -> Result<Rope> {
    let input = RopeInput {
        scaling: a.rope_scaling,
        scale: a.rope_scale,
        freq_scale: a.rope_freq_scale,
        freq_base: a.rope_freq_base,
        yarn_orig_ctx: a.yarn_orig_ctx,
    };
    input.resolve().map_err(|e| anyhow!("{}", e.explain(&super::Flags)))
}

/// The template variables and the template file, checked before any model
/// work: kwargs that are not a JSON object, a template that does not parse
/// or raises, are one-line errors naming the flag.
pub fn template(a: &TemplateArgs) -> Result<(TemplateVars, Option<TemplateFile>)> {
    let vars = TemplateVars { think: a.think, kwargs: template_kwargs(a.template_kwargs.as_deref())? };
    let file = match &a.chat_template {
        Some(path) => Some(TemplateFile::load(path, &vars).map_err(|e| anyhow!("--chat-template {e}"))?),
        None => None,
    };
    Ok((vars, file))
}

/// `--template-kwargs`: a JSON object, or nothing.
pub fn template_kwargs(text: Option<&str>) -> Result<serde_json::Map<String, serde_json::Value>> {
    match text {
        None => Ok(serde_json::Map::new()),
        Some(t) => posrecall::prompt::template::parse_kwargs(t)
            .map_err(|e| anyhow!("--template-kwargs {e}, e.g. '{{\"enable_thinking\": false}}'")),
    }
}

/// The decoding asked for. `forced_only` and `no_forced` are `bench`'s;
/// `sweep_draft` is what a sweep's file says of drafts, which the flags
/// override (both unset: the library's defaults).
pub fn decode(
    a: &DecodeArgs,
    forced_only: bool,
    no_forced: bool,
    sweep_draft: (Option<posrecall::decode::draft::DraftMode>, Option<usize>),
) -> DecodeOptions {
    DecodeOptions {
        parallel: a.parallel as usize,
        check_sequential: a.check_sequential,
        fixed_tokens: a.fixed_tokens.map(|t| t as usize),
        kv_memory: a.kv_memory.map(|b| b.as_u64()),
        restore: a.restore,
        snapshot_memory: a.snapshot_memory.map(|b| b.as_u64()),
        forced_only,
        no_forced,
        check_draft: a.check_draft,
        ..DecodeOptions::default()
    }
    .drafting(a.draft.or(sweep_draft.0), a.draft_max.map(|k| k as usize).or(sweep_draft.1))
}

/// `prompt`'s flags: what `bench` plans with, checked as `bench` checks it.
pub fn prompt(a: &PromptArgs) -> Result<PlanOptions> {
    let (template, template_file) = template(&a.template)?;
    let opts = PlanOptions {
        target: target_spec(&a.targets),
        probe: a.probe,
        crop: a.crop,
        ctx: a.ctx,
        max_prefix_tokens: a.max_prefix_tokens,
        max_new_tokens: a.max_new_tokens,
        template,
        template_file,
        think_budget: a.template.think_budget,
        only: Vec::new(),
        rope: rope(&a.rope)?,
    };
    opts.target.validate().map_err(|e| anyhow!("{}", e.explain(&super::Flags)))?;
    posrecall::bench::check_plan(&opts).map_err(|e| anyhow!("{}", e.explain(&super::Flags)))?;
    Ok(opts)
}

/// `bench`'s flags as the instances of its list (one run without a list):
/// the first instance's options and the list, every instance's options
/// checked before any model work.
pub fn bench(a: &BenchArgs) -> Result<(ValidOptions, BenchList)> {
    let named = |e: ListError| anyhow!("{}", e.explain(&super::Flags));
    let items = instances::items(
        a.kv.as_ref().map_or(&[][..], |l| &l.0),
        a.kv_k.as_ref().map_or(&[][..], |l| &l.0),
        a.kv_v.as_ref().map_or(&[][..], |l| &l.0),
        &a.kv_rotation.0,
        &a.flash_attn.0,
        ContextSettings::default().kv,
    )
    .map_err(named)?;
    instances::once(Setting::Ctx, &a.ctx.0).map_err(named)?;
    instances::once(Setting::Probe, &a.probe.0).map_err(named)?;
    let list = BenchList { models: a.model.clone(), ctx: a.ctx.0.clone(), probe: a.probe.0.clone(), items };
    list_flags(a, &list)?;
    // A list resumes run by run (the sweep keeps each finished run file in
    // --out-dir), not inside one run's file: its runs are not told to.
    let resume = a.resume && list.len() == 1;
    let opts = bench_run(a, list.items[0], list.ctx[0], list.probe[0], resume)?;
    for &ctx in &list.ctx {
        for &probe in &list.probe {
            for &item in &list.items {
                let mut o = (*opts).clone();
                o.plan.ctx = ctx;
                o.plan.probe = probe;
                o.context.kv = (item.k, item.v);
                o.context.kv_rotation = item.rotation;
                o.context.flash_attn = item.flash_attn;
                o.validate().map_err(|e| anyhow!("{}", e.explain(&super::Flags)))?;
            }
        }
    }
    Ok((opts, list))
}

/// The flags that belong to one run or to a list.
fn list_flags(a: &BenchArgs, list: &BenchList) -> Result<()> {
    let n = list.len();
    if n == 1 {
        for (given, flag) in [(a.out_dir.is_some(), "--out-dir"), (a.format != posrecall::report::export::Format::Table, "--format")] {
            if given {
                return Err(anyhow!("{flag} is for a list (several models, or --kv A,B,…); one run writes --out"));
            }
        }
        if a.resume && a.out.is_none() {
            return Err(anyhow!("--resume finishes the unfinished run file --out names; give --out FILE"));
        }
        return Ok(());
    }
    let refused = [
        (a.out.is_some(), "--out", "names one run's file; give --out-dir DIR for the list's"),
        (
            a.save_reference.is_some(),
            "--save-reference",
            "names one run's reference; the first instance's is saved in --out-dir as its .ref",
        ),
        (a.html.is_some(), "--html", "is one run's page; `posrecall report --format html DIR` makes the list's"),
        (a.lengths.is_some() && list.models.len() > 1, "--lengths", "is one model's ladder of windows; give each model its own run"),
    ];
    if let Some((_, flag, why)) = refused.iter().find(|r| r.0) {
        return Err(anyhow!("{flag} with a list of {n} runs: {flag} {why}"));
    }
    match a.out_dir {
        Some(_) => Ok(()),
        None => Err(anyhow!("a list of {n} runs writes one run file each: give --out-dir DIR")),
    }
}

/// One run's options: `bench`'s flags with the context size, probe and the
/// KV types, rotation and flash attention of `item`; `resume` finishes the
/// run's own file.
fn bench_run(a: &BenchArgs, item: Item, ctx: CtxSize, probe: Probe, resume: bool) -> Result<ValidOptions> {
    let (template, template_file) = template(&a.template)?;
    let opts = BenchOptions {
        plan: PlanOptions {
            target: target_spec(&a.target),
            probe,
            crop: a.crop,
            ctx,
            max_prefix_tokens: a.max_prefix_tokens,
            max_new_tokens: a.max_new_tokens,
            // `--only 'a, b'`: the names, not the spaces around them.
            only: a.only.iter().map(|n| n.trim().to_string()).collect(),
            template,
            template_file,
            think_budget: a.template.think_budget,
            // The run's RoPE is its context's; the planner reads it from there.
            rope: Rope::default(),
        },
        context: ContextSettings {
            kv: (item.k, item.v),
            kv_rotation: item.rotation,
            flash_attn: item.flash_attn,
            swa_full: a.swa_full == OnOff::On,
            threads: a.threads,
            gpu_layers: a.gpu_layers.unwrap_or_else(posrecall::bench::default_gpu_layers),
            rope: rope(&a.rope)?,
        },
        decode: decode(&a.decode, a.forced_only, a.no_forced, (None, None)),
        build: a.build.clone(),
        closed_book: a.closed_book,
        prefix_cache: a.prefix_cache.clone(),
        lengths: a.lengths.clone(),
        effective_at: a.effective_at,
        reference: a.reference.clone(),
        save_reference: a.save_reference.clone(),
        save_reference_made: false,
        reference_top_k: a.reference_top_k,
        resume,
    };
    opts.validate().map_err(|e| anyhow!("{}", e.explain(&super::Flags)))
}
