//! `posrecall completions SHELL` and `posrecall man [COMMAND]`: documents
//! generated from the command-line definitions, so they always list the
//! flags this build has (hidden developer switches left out).

use crate::cli::{Cli, CompletionsArgs, ManArgs};
use anyhow::{Context, Result, bail};
use clap::CommandFactory;

pub fn completions(args: &CompletionsArgs) -> Result<()> {
    let mut cmd = Cli::command();
    let mut text = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "posrecall", &mut text);
    super::out(&String::from_utf8(text).context("the completion script is not UTF-8")?)
}

pub fn man(args: &ManArgs) -> Result<()> {
    let mut cmd = Cli::command();
    cmd.build();
    let page = match &args.command {
        None => cmd,
        Some(name) => match cmd.find_subcommand(name) {
            // Its page is posrecall-NAME(1), as git and cargo name theirs.
            Some(sub) => sub.clone().name(format!("posrecall-{name}")).version(env!("CARGO_PKG_VERSION")),
            None => {
                let names: Vec<&str> = cmd.get_subcommands().map(|c| c.get_name()).filter(|n| *n != "help").collect();
                bail!("`{name}` is not a posrecall command (one of {})", names.join(", "))
            }
        },
    };
    let mut roff = Vec::new();
    clap_mangen::Man::new(page).render(&mut roff).context("cannot render the man page")?;
    super::out(&String::from_utf8(roff).context("the man page is not UTF-8")?)
}
