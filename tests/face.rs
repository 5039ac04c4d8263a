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

/// Every default `--help` states, by command and flag: what clap shows for
/// a flag with a default value, and what the help text states for a flag
/// whose absence means something (`[default: …]` in its text).
fn stated_defaults() -> Vec<(String, String, String)> {
    fn walk(cmd: &clap::Command, path: &str, out: &mut Vec<(String, String, String)>) {
        for arg in cmd.get_arguments() {
            let Some(long) = arg.get_long() else { continue };
            let values: Vec<String> = arg.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
            let help = [arg.get_help(), arg.get_long_help()].iter().flatten().map(|h| h.to_string()).collect::<Vec<_>>().join(" ");
            let stated = help.split_once("[default: ").and_then(|(_, rest)| rest.split_once(']')).map(|(d, _)| d.to_string());
            let flat = |t: String| t.split_whitespace().collect::<Vec<_>>().join(" ");
            match (values.is_empty(), stated) {
                (false, _) => out.push((path.to_string(), long.to_string(), values.join(","))),
                (true, Some(d)) => out.push((path.to_string(), long.to_string(), flat(d))),
                (true, None) => {}
            }
        }
        for sub in cmd.get_subcommands() {
            walk(sub, &format!("{path} {}", sub.get_name()), out);
        }
    }
    let mut out = Vec::new();
    walk(&Cli::command(), "posrecall", &mut out);
    out
}

/// The library's value of each default the help states, worked out from
/// the library's own constants and `Default`s; `None` for a flag the test
/// does not know (a new default must be added here, with its source).
fn library_default(flag: &str) -> Option<String> {
    use posrecall::bench::{DecodeOptions, PlanOptions};
    use posrecall::settings::ContextSettings;
    use posrecall::targets::TargetSpec;
    let target = TargetSpec::default();
    let context = ContextSettings::default();
    let decode = DecodeOptions::default();
    let plan = PlanOptions::default();
    let on_off = |b: bool| if b { "on" } else { "off" }.to_string();
    let kv = match context.kv {
        (k, v) if k == v => k.to_string(),
        (k, v) => format!("{k}/{v}"),
    };
    Some(match flag {
        "count" => target.count.to_string(),
        "lines" => target.lines.to_string(),
        "seed" => target.seed.to_string(),
        "pass" => format!("{}% of LINES, rounded up", posrecall::score::PASS_PERCENT),
        "normalize" => format!(
            "{}; {} under --policy codeneedle",
            posrecall::score::Policy::Posrecall.default_normalize(),
            posrecall::score::Policy::Codeneedle.default_normalize()
        ),
        "policy" => target.policy.to_string(),
        "anchor" => target.anchor.to_string(),
        "credit" => target.credit.to_string(),
        "min-code-lines" => target.min_code_lines.to_string(),
        "kv" => kv,
        "kv-rotation" => context.kv_rotation.to_string(),
        "flash-attn" => context.flash_attn.to_string(),
        "swa-full" => on_off(context.swa_full),
        "ctx" => plan.ctx.to_string(),
        "crop" => plan.crop.to_string(),
        "probe" => plan.probe.to_string(),
        "think" => plan.template.think.to_string(),
        "think-budget" => posrecall::prompt::template::DEFAULT_THINK_BUDGET.to_string(),
        "parallel" => decode.parallel.to_string(),
        "restore" => decode.restore.to_string(),
        "draft" => format!("{}; in a sweep, models.toml's draft", decode.draft),
        "draft-max" => format!("{}; in a sweep, models.toml's draft_max", decode.draft_max),
        "reference-top-k" => posrecall::record::reference::DEFAULT_TOP_K.to_string(),
        "effective-at" => posrecall::bench::ladder::DEFAULT_EFFECTIVE_AT.to_string(),
        "format" => posrecall::report::export::Format::default().to_string(),
        "api" => posrecall::ask::ApiKind::default().to_string(),
        "concurrency" => posrecall::ask::DEFAULT_CONCURRENCY.to_string(),
        "retries" => posrecall::ask::DEFAULT_RETRIES.to_string(),
        "timeout" => posrecall::ask::DEFAULT_TIMEOUT_S.to_string(),
        "out-dir" => posrecall::sweep::DEFAULT_OUT_DIR.to_string(),
        "out" => posrecall::ask::DEFAULT_RESPONSES.to_string(),
        _ => return None,
    })
}

/// Defaults that are words, not values: what happens when the flag is
/// left out (the model's own setting, every file, ...).
const DESCRIBED: [(&str, &str); 11] = [
    ("include", "every file whose extension names a language, or --language's"),
    ("gpu-layers", "on a build with a GPU backend, as many as fit in 90% of its free memory; else none"),
    ("rope-scaling", "the model's"),
    ("rope-freq-base", "the model's"),
    ("rope-freq-scale", "the model's"),
    ("yarn-orig-ctx", "the trained context"),
    ("content", "a file and a question, as posrecall asks them"),
    ("kv-memory", "90% of the free memory where the cache lives"),
    ("snapshot-memory", "90% of the free main memory"),
    ("bos-token", ""),
    ("eos-token", ""),
];

#[test]
fn every_default_in_help_is_the_librarys_value() {
    let stated = stated_defaults();
    assert!(stated.len() > 40, "too few defaults found: {stated:?}");
    let mut wrong = Vec::new();
    for (cmd, flag, shown) in &stated {
        let want = library_default(flag).or_else(|| DESCRIBED.iter().find(|(f, _)| f == flag).map(|(_, d)| d.to_string()));
        match want {
            Some(w) if w == *shown => {}
            Some(w) => wrong.push(format!("{cmd} --{flag}: help says [default: {shown}], the library's is {w}")),
            None => wrong.push(format!("{cmd} --{flag}: [default: {shown}] has no known source in the library")),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
