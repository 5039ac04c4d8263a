//! The command line's own documents: shell completions and man pages
//! generated from the clap definitions, the developer switches hidden from
//! `--help` but still accepted, and every option documented where a user
//! (docs/GUIDE.md) or a developer (docs/DEVELOPMENT.md) looks for it.

use clap::CommandFactory;
use cli::Cli;

/// The command line's definitions, read from the binary's own source: every
/// option and whether it is hidden (a binary has no library to import).
#[allow(dead_code)]
#[path = "../src/cli.rs"]
mod cli;
use std::process::{Command, Output};

fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_posrecall")).args(args).output().expect("cannot run the posrecall binary")
}

fn stdout(o: &Output) -> String {
    assert!(o.status.success(), "{:?}: {}", o.status, String::from_utf8_lossy(&o.stderr));
    String::from_utf8(o.stdout.clone()).expect("stdout is UTF-8")
}

/// The developer switches: accepted, absent from `--help` and the
/// generated documents, documented in docs/DEVELOPMENT.md.
const HIDDEN: [&str; 5] = ["check-sequential", "check-draft", "restore", "kv-memory", "snapshot-memory"];

#[test]
fn completions_know_every_command_and_option() {
    let bash = stdout(&run(&["completions", "bash"]));
    for word in ["bench", "matrix", "completions", "--kv-k", "--lengths", "--shard", "--reference-top-k"] {
        assert!(bash.contains(word), "bash completions lack {word}");
    }
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let text = stdout(&run(&["completions", shell]));
        // fish writes `-l draft-max`, the others `--draft-max`.
        assert!(text.contains("draft-max") && text.contains("matrix"), "{shell}: {text}");
    }
    let bad = run(&["completions", "tcsh"]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
}

#[test]
fn man_pages_for_the_program_and_each_command() {
    let page = stdout(&run(&["man"]));
    assert!(page.contains(".TH posrecall 1"), "{page}");
    assert!(page.contains("posrecall\\-bench(1)") || page.contains("bench"), "{page}");
    let bench = stdout(&run(&["man", "bench"]));
    assert!(bench.contains(".TH posrecall-bench 1") && bench.contains(env!("CARGO_PKG_VERSION")), "{bench}");
    for flag in ["\\-\\-lengths", "\\-\\-kv\\-k", "\\-\\-reference"] {
        assert!(bench.contains(flag), "man bench lacks {flag}");
    }
    for flag in HIDDEN {
        assert!(!bench.contains(&format!("\\-\\-{}", flag.replace('-', "\\-"))), "man bench shows the developer switch --{flag}");
    }
    let bad = run(&["man", "nope"]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_eq!(bad.status.code(), Some(1), "{bad:?}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("`nope` is not a posrecall command") && err.contains("matrix"), "{err}");
}

#[test]
fn developer_switches_are_hidden_but_accepted() {
    let help = stdout(&run(&["bench", "--help"]));
    for flag in HIDDEN {
        assert!(!help.contains(&format!("--{flag}")), "bench --help shows --{flag}");
    }
    // Still parsed: the command goes on to the next check (a missing model,
    // exit 1) instead of refusing an unknown flag (exit 2).
    for args in [
        vec!["--check-sequential", "--parallel", "2"],
        vec!["--check-draft"],
        vec!["--restore", "full"],
        vec!["--kv-memory", "1GiB", "--parallel", "2"],
        vec!["--snapshot-memory", "1GiB"],
    ] {
        let mut all = vec!["bench", "no-such-model.gguf"];
        all.extend(args.iter());
        let o = run(&all);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{all:?}: {err}");
        assert!(err.contains("no-such-model.gguf"), "{all:?}: {err}");
    }
}

/// Every long option of every command, with whether it is hidden.
fn options() -> Vec<(String, String, bool)> {
    let cmd = Cli::command();
    let mut out = Vec::new();
    for sub in cmd.get_subcommands() {
        for arg in sub.get_arguments() {
            if let Some(long) = arg.get_long()
                && !["help", "version"].contains(&long)
            {
                out.push((sub.get_name().to_string(), long.to_string(), arg.is_hide_set()));
            }
        }
    }
    assert!(out.len() > 80, "found only {} options", out.len());
    out
}

#[test]
fn the_guide_documents_every_option_and_development_every_switch() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let guide = std::fs::read_to_string(root.join("docs/GUIDE.md")).expect("docs/GUIDE.md");
    let development = std::fs::read_to_string(root.join("docs/DEVELOPMENT.md")).expect("docs/DEVELOPMENT.md");
    // A flag counts as documented where it is written whole: `--kv` is not
    // documented by `--kv-k`.
    let names = |text: &str, flag: &str| {
        let f = format!("--{flag}");
        text.match_indices(&f).any(|(i, _)| !text[i + f.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '-'))
    };
    let mut missing = Vec::new();
    for (command, flag, hidden) in options() {
        let (doc, name) = if hidden { (&development, "docs/DEVELOPMENT.md") } else { (&guide, "docs/GUIDE.md") };
        if !names(doc, &flag) {
            missing.push(format!("{command} --{flag} (in {name})"));
        }
    }
    missing.dedup();
    assert!(missing.is_empty(), "options nobody documents:\n{}", missing.join("\n"));
    let hidden: Vec<String> = options().into_iter().filter(|o| o.2).map(|o| o.1).collect();
    for flag in HIDDEN {
        assert!(hidden.iter().any(|h| h == flag), "--{flag} is not hidden");
    }
}

/// The README's demo command is the one `scripts/demo` runs: read from the
/// script (its `bench` line and the line it continues onto), with the
/// script's variables as the README names them.
#[test]
fn the_readme_shows_the_command_the_demo_runs() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let script = std::fs::read_to_string(root.join("scripts/demo")).unwrap();
    let at = script.find("\"$posrecall\" bench ").expect("scripts/demo runs no bench");
    let mut lines = script[at..].lines();
    let mut command = String::new();
    for line in lines.by_ref() {
        command.push_str(line);
        command.push('\n');
        if !line.ends_with('\\') {
            break;
        }
    }
    let shown = command.replace("\"$posrecall\"", "posrecall").replace("\"$model\"", "MODEL").replace(" \"$@\"", "");
    assert!(shown.contains("--kv f16,q8_0") && shown.contains("--out-dir runs/demo"), "{shown}");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(readme.contains(&format!("```sh\n{shown}```")), "README.md does not show the demo's command as scripts/demo runs it:\n{shown}");
}
