//! `posrecall ask`: put every target's question to an OpenAI-compatible
//! server and append the answers to the responses file ([`posrecall::ask`]).

use crate::cli::AskArgs;
use crate::commands::check_output;
use crate::commands::progress::Terminal;
use anyhow::{Context, Result, anyhow, bail};
use posrecall::ask::client::ServerError;
use posrecall::ask::{self, AskOptions, BadUrl};
use posrecall::record::run::TargetsFile;
use posrecall::settings::Named;
use posrecall::support::progress::{Progress as _, Unit};
use serde_json::Value;
use std::io::Write;

/// The flags as the library's options, checked before anything is asked;
/// `lines` (the targets file's LINES) sizes the default generation cap.
fn options(args: &AskArgs, lines: usize) -> Result<AskOptions> {
    let extra = match args.extra.as_deref() {
        None => serde_json::Map::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(m)) => m,
            Ok(_) => bail!("--extra must be a JSON object, e.g. '{{\"cache_prompt\": false}}'"),
            Err(e) => bail!("--extra is not JSON: {e}"),
        },
    };
    let endpoint = ask::endpoint(&args.url, args.api).map_err(|e: BadUrl| anyhow!("--url {e}"))?;
    let key = match &args.api_key_env {
        Some(name) => {
            let k = std::env::var(name)
                .ok()
                .filter(|k| !k.trim().is_empty())
                .ok_or_else(|| anyhow!("--api-key-env {name}: the environment variable {name} is not set"))?;
            if ureq::http::HeaderValue::from_str(&format!("Bearer {k}")).is_err() {
                bail!("--api-key-env {name}: the key holds characters an HTTP header cannot carry");
            }
            Some(k)
        }
        None => None,
    };
    Ok(AskOptions {
        endpoint,
        model: args.model.clone(),
        api: args.api,
        max_tokens: ask::answer_budget(args.max_new_tokens, lines),
        extra,
        template_kwargs: ask::chat_template_kwargs(
            args.think,
            &crate::commands::convert::template_kwargs(args.template_kwargs.as_deref())?,
        ),
        key,
        retries: args.retries,
        timeout: args.timeout,
        concurrency: args.concurrency,
    })
}

/// A server failure as the command line's user reads it: which flag to check.
fn server_message(e: &ServerError, api: ask::ApiKind) -> String {
    match e {
        ServerError::Refused { .. } => format!("{e} (an API key goes in an environment variable named by --api-key-env)"),
        ServerError::NotFound { .. } => {
            format!("{e}: is --url the server's base URL, and does it serve --api {}?", api.as_str())
        }
        ServerError::Timeout { .. } => {
            format!("{e} (--timeout): is the server stuck, or does it need a longer --timeout?")
        }
        ServerError::Redirected { .. } => format!("{e}: if that is the server, give its address to --url"),
        _ => e.to_string(),
    }
}

pub fn run(args: &AskArgs) -> Result<()> {
    let file = TargetsFile::load(&args.targets)?;
    let opts = options(args, file.params.lines)?;
    let recorded = std::path::PathBuf::from(&file.corpus.path);
    let corpus = args.corpus.as_deref().unwrap_or(&recorded);
    check_output("--out", &args.out, &[&args.targets, corpus])?;
    let prompts = ask::prompts(&file, args.corpus.as_deref(), args.api).map_err(|e| match args.corpus {
        Some(_) => e.context("--corpus"),
        None => anyhow!("{e:#}; pass --corpus with the file the targets were made from"),
    })?;
    let mut out = ask::open_responses(&args.out).map_err(|e| match e.downcast_ref::<ask::Busy>() {
        Some(b) => anyhow!("{b}, or give another --out"),
        None => e,
    })?;
    let (answered, needs_newline) =
        ask::read_answered(&args.out, &file, &super::Stderr).map_err(|e| anyhow!("{e:#}; give another --out"))?;
    let todo: Vec<&(String, String)> = prompts.iter().filter(|(name, _)| !answered.contains(name)).collect();
    if todo.is_empty() {
        eprintln!("all {} targets are answered in {}", prompts.len(), args.out.display());
        return Ok(());
    }
    if !answered.is_empty() {
        eprintln!(
            "{} of {} targets are answered in {}; asking the other {}",
            answered.len(),
            prompts.len(),
            args.out.display(),
            todo.len()
        );
    }
    if needs_newline {
        out.write_all(b"\n").with_context(|| format!("cannot write {}", args.out.display()))?;
    }
    let term = Terminal::new(false);
    let bar = term.bar(todo.len() as u64, "ask", Unit::Questions);
    let tally = ask::ask_all(&opts, &todo, &mut out, &args.out, bar.as_ref(), &term)?;
    drop(bar);
    conclude(args, &tally, answered.len(), prompts.len(), todo.len())
}

/// Says what was written and ends the run as its failures ask.
fn conclude(args: &AskArgs, tally: &ask::Tally, before: usize, total: usize, asked: usize) -> Result<()> {
    let have = before + tally.written;
    eprintln!("{} new answer(s) written to {} ({have} of {total} targets answered there)", tally.written, args.out.display());
    let failures = match tally.failed {
        0 => String::new(),
        n => format!("; {n} target(s) failed (see above)"),
    };
    if let Some(e) = &tally.fatal {
        bail!(
            "{}{failures}; stopped with {have} of {total} targets answered: rerun the same command to ask the rest",
            server_message(e, args.api)
        );
    }
    if tally.failed > 0 {
        bail!("{} of {asked} target(s) asked failed (see above); rerun the same command to ask them again", tally.failed);
    }
    eprintln!(
        "score them: posrecall score {} {} --url {}{}",
        args.targets.display(),
        args.out.display(),
        posrecall::support::shown::shown_url(&args.url),
        args.model.as_deref().map(|m| format!(" --model {m}")).unwrap_or_default()
    );
    Ok(())
}
