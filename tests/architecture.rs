//! The layering rules of ARCHITECTURE (README, "Layout"), checked on the
//! source tree: the layers point one way, only the engine touches llama.cpp,
//! and the messages below the commands name no command-line flag.

use std::path::{Path, PathBuf};

/// Every `.rs` file under `src/`, relative to it, with its text.
fn sources() -> Vec<(String, String)> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/");
                out.push((rel, std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = Vec::new();
    walk(&root, &root, &mut out);
    assert!(out.len() > 30, "found only {} source files", out.len());
    out
}

/// The command-line face: the only files that may know clap's argument
/// types, the commands, and flag names.
fn is_face(file: &str) -> bool {
    file == "main.rs" || file == "cli.rs" || file.starts_with("commands/")
}

/// The lines that are code, not comments.
fn code_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    text.lines().enumerate().filter(|(_, l)| !l.trim_start().starts_with("//")).map(|(i, l)| (i + 1, l))
}

#[test]
fn nothing_below_the_commands_refers_to_them() {
    let mut found = Vec::new();
    for (file, text) in sources().iter().filter(|(f, _)| !is_face(f)) {
        // Doc links count too: a link up is a dependency up.
        for (n, line) in text.lines().enumerate() {
            if line.contains("crate::cli") || line.contains("crate::commands") {
                found.push(format!("{file}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "the library refers to the command line:\n{}", found.join("\n"));
}

#[test]
fn only_the_engine_touches_llama_cpp() {
    let mut found = Vec::new();
    for (file, text) in sources().iter().filter(|(f, _)| !f.starts_with("engine/")) {
        for (n, line) in code_lines(text) {
            if line.contains("llama_cpp_2::") || line.contains("llama_cpp_sys_2::") || line.contains("use llama_cpp") {
                found.push(format!("{file}:{n}: {}", line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "llama.cpp outside src/engine/:\n{}", found.join("\n"));
}

#[test]
fn the_engine_does_not_reach_into_the_metrics() {
    let mut found = Vec::new();
    for (file, text) in sources().iter().filter(|(f, _)| f.starts_with("engine/")) {
        // Doc links count too, as above.
        for (n, line) in text.lines().enumerate() {
            if line.contains("crate::forced") || line.contains("crate::kld") {
                found.push(format!("{file}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "the engine refers to the metrics built on it:\n{}", found.join("\n"));
}

#[test]
fn messages_below_the_commands_name_no_flag() {
    let mut found = Vec::new();
    for (file, text) in sources().iter().filter(|(f, _)| !is_face(f)) {
        // Unit tests may pass flags to the binary.
        let code = text.split("#[cfg(test)]").next().unwrap_or(text);
        for (n, line) in code_lines(code) {
            let mut in_string = false;
            let mut literal = String::new();
            for c in line.chars() {
                match (c, in_string) {
                    ('"', false) => in_string = true,
                    ('"', true) => {
                        if has_flag(&literal) {
                            found.push(format!("{file}:{n}: {}", line.trim()));
                        }
                        literal.clear();
                        in_string = false;
                    }
                    (c, true) => literal.push(c),
                    _ => {}
                }
            }
        }
    }
    found.dedup();
    assert!(found.is_empty(), "flag names in library messages (the command adds them):\n{}", found.join("\n"));
}

/// `--name` with a letter after the dashes.
fn has_flag(s: &str) -> bool {
    s.match_indices("--").any(|(i, _)| {
        let before_ok = i == 0 || !s[..i].ends_with(|c: char| c.is_alphanumeric() || c == '-');
        before_ok && s[i + 2..].starts_with(|c: char| c.is_ascii_lowercase())
    })
}

#[test]
fn the_flag_check_sees_flags() {
    assert!(has_flag("use --crop head"));
    assert!(has_flag("--count is 5"));
    assert!(!has_flag("a -- b"));
    assert!(!has_flag("x--y"));
}

#[test]
fn no_function_is_long_without_a_reason() {
    const LIMIT: usize = 90;
    let mut found = Vec::new();
    for (file, text) in sources() {
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let t = line.trim_start();
            let is_fn = ["fn ", "pub fn ", "pub(crate) fn ", "pub(super) fn "].iter().any(|p| t.starts_with(p));
            if !is_fn || line.trim_end().ends_with(';') {
                continue;
            }
            let indent = &line[..line.len() - t.len()];
            let close = format!("{indent}}}");
            let end = lines[i + 1..].iter().position(|l| l.trim_end() == close).map_or(lines.len(), |p| i + 1 + p);
            let reason = i > 0 && lines[i - 1].contains("long because");
            if end - i + 1 > LIMIT && !reason {
                found.push(format!("{file}:{}: {} lines", i + 1, end - i + 1));
            }
        }
    }
    assert!(found.is_empty(), "functions over {LIMIT} lines:\n{}", found.join("\n"));
}

#[test]
fn the_record_and_report_layers_import_no_engine() {
    // The run file, the reference file, the neutral settings, the keys and
    // the reports read data; only the bench layer and the engine run models.
    let record = |f: &str| ["run.rs", "reference.rs", "settings.rs", "keys.rs"].contains(&f) || f.starts_with("report/");
    let mut found = Vec::new();
    for (file, text) in sources().iter().filter(|(f, _)| record(f)) {
        for (n, line) in text.lines().enumerate() {
            if line.contains("crate::engine") || line.contains("crate::bench") {
                found.push(format!("{file}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(found.is_empty(), "the record layer reaches into the engine or the run sequence:\n{}", found.join("\n"));
}

#[test]
fn the_engine_imports_nothing_from_the_method() {
    // The engine is below the method: it may read the neutral settings and
    // the logits helpers, and files, nothing that plans, scores or records.
    let allowed = ["crate::engine", "crate::settings", "crate::logits", "crate::fsutil", "crate::draft"];
    let mut found = Vec::new();
    for (file, text) in sources().iter().filter(|(f, _)| f.starts_with("engine/")) {
        for (n, line) in code_lines(text) {
            for (at, _) in line.match_indices("crate::") {
                let path: String = line[at..].chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
                if !allowed.iter().any(|a| path.starts_with(a)) {
                    found.push(format!("{file}:{n}: {}", line.trim()));
                }
            }
        }
    }
    assert!(found.is_empty(), "the engine reaches up into the method:\n{}", found.join("\n"));
}

#[test]
fn the_bench_and_matrix_commands_hold_no_run_sequence() {
    // They turn flags (or a sweep) into options, call the library's one run
    // (or sweep) and print: no engine call, no pass of their own.
    let steps = ["engine::", "execute(", "execute_ladder", "plan_shared", "plan_ladder", "check_reference", "save_reference("];
    let mut found = Vec::new();
    for (file, text) in sources().iter().filter(|(f, _)| *f == "commands/bench.rs" || *f == "commands/matrix.rs") {
        for (n, line) in code_lines(text) {
            if let Some(step) = steps.iter().find(|s| line.contains(*s)) {
                found.push(format!("{file}:{n}: `{step}` in {}", line.trim()));
            }
        }
        let lines = text.lines().count();
        assert!(lines <= 150, "{file} has {lines} lines: a command file only converts, calls and prints");
    }
    assert!(found.is_empty(), "run steps in the command files:\n{}", found.join("\n"));
}
