//! The posrecall binary: parse the command line, run one command, and turn any
//! error into one line on stderr and a non-zero exit.

use clap::Parser;
use posrecall::cli::{Cli, Command};
use posrecall::commands;

fn main() {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Bench(a) => commands::bench::run(a),
        Command::Targets(a) => commands::targets::run(a),
        Command::Score(a) => commands::score::run(a),
    };
    if let Err(e) = result {
        // One line: the outermost context, then its causes.
        let msg: Vec<String> = e.chain().map(|c| c.to_string()).collect();
        eprintln!("posrecall: error: {}", msg.join(": "));
        std::process::exit(1);
    }
}
