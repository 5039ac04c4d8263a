//! The posrecall binary, the face of posrecall: the command line ([`cli`],
//! clap's types), and one module per subcommand that turns parsed flags into
//! the library's options, calls the library and prints, with the terminal's
//! progress bars ([`commands`]). Everything else is the `posrecall` library,
//! which neither parses a flag nor draws: it is handed what it shows
//! through. Here: parse the command line, run one command, and turn any
//! error into one line on stderr and a non-zero exit.

mod cli;
mod commands;

use clap::Parser;

use cli::{Cli, Command};

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand)
            {
                e.exit();
            }
            // Usage errors as one line too: clap's message, its hints folded in.
            let text = e.to_string();
            let line: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with("For more information")).collect();
            let msg = line.join(" ");
            eprintln!("posrecall: {}", msg.strip_prefix("error: ").map(|m| format!("error: {m}")).unwrap_or(msg.clone()));
            std::process::exit(2);
        }
    };
    let result = match &cli.command {
        Command::Bench(a) => commands::bench::run(a),
        Command::Targets(a) => commands::targets::run(a),
        Command::Score(a) => commands::score::run(a),
        Command::Rescore(a) => commands::rescore::run(a),
        Command::Report(a) => commands::report::run(a),
        Command::Compare(a) => commands::compare::run(a),
        Command::Ask(a) => commands::ask::run(a),
        Command::Matrix(a) => commands::matrix::run(a),
        Command::Template(a) => commands::template::run(a),
        Command::Prompt(a) => commands::prompt::run(a),
        Command::Completions(a) => commands::generate::completions(a),
        Command::Man(a) => commands::generate::man(a),
    };
    if let Err(e) = result {
        // Like ripgrep: a reader that closed the pipe (`posrecall targets
        // x.js | head -1`) has what it wanted; end quietly, with success.
        let closed_pipe =
            e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe));
        if closed_pipe {
            std::process::exit(0);
        }
        // One line: the outermost context, then its causes.
        let msg: Vec<String> = e.chain().map(|c| c.to_string()).collect();
        eprintln!("posrecall: error: {}", msg.join(": "));
        std::process::exit(1);
    }
}
