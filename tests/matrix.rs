//! `posrecall matrix` end to end: a real sweep over SmolLM2 and Gemma 3 at two
//! KV types, a sweep killed part way and resumed, shards (also from Slurm and
//! Kubernetes environment variables, and ignored without `--shard`), the
//! `${POSRECALL_CACHE}` default in sweep paths, and bad sweep files.

use crate::common;

use common::*;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// Environment variables a scheduler may have set around the test itself.
const SCHEDULER_VARS: &[&str] = &["SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_COUNT", "JOB_COMPLETION_INDEX"];

fn matrix_cmd(toml: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(bin());
    cmd.arg("matrix").arg(toml).args(extra).env("NO_COLOR", "1");
    for v in SCHEDULER_VARS {
        cmd.env_remove(v);
    }
    cmd
}

/// A TOML basic string holding `p`.
fn toml_path(p: &Path) -> String {
    format!("{:?}", p.to_str().unwrap())
}

/// The sweep of the tests: two models with different contexts and
/// tokenizers, each at f16 and q8_0, on a small fixture.
fn sweep_toml(dir: &Path) -> PathBuf {
    let text = format!(
        r#"
[corpus]
path = {corpus}
crop = "densest"

[params]
count = 2
lines = 6
max_new_tokens = 16
threads = 2

[[model]]
name = "smollm2"
path = {smollm2}
build = "Q4_1"
kv = ["f16", "q8_0"]
ctx = 512

[[model]]
name = "gemma3"
path = {gemma3}
kv = ["f16", "q8_0"]
ctx = 2048
probe = "completion"
"#,
        corpus = toml_path(&fixture("dense.js")),
        smollm2 = toml_path(&smollm2()),
        gemma3 = toml_path(&gemma3()),
    );
    let p = dir.join("models.toml");
    std::fs::write(&p, text).unwrap();
    p
}

const RUNS: [&str; 4] = ["gemma3__f16-f16", "gemma3__q8_0-q8_0", "smollm2__f16-f16", "smollm2__q8_0-q8_0"];

/// The run files (names not starting with `.`) in `dir`.
fn run_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).filter(|n| !n.starts_with('.')).collect()
}

/// Every entry of `dir`, dot-files too: a temporary file a writer left
/// behind (`.NAME.json.tmp-PID-RANDOM`) is one, and `run_files` skips it.
fn all_entries(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
}

fn expected_files() -> BTreeSet<String> {
    RUNS.iter().map(|r| format!("{r}.json")).collect()
}

/// The recall columns of the aggregate table, by run: passed, matched,
/// missing, truncated, hallucinated, extra. Columns are cut where the rule
/// under the header has its dashes (cells may hold spaces).
fn recall_columns(stdout: &str) -> BTreeMap<String, Vec<String>> {
    let lines: Vec<Vec<char>> = stdout.lines().map(|l| l.chars().collect()).collect();
    let text = |l: &[char]| l.iter().collect::<String>();
    let h = lines
        .iter()
        .position(|l| text(l).starts_with("run ") && text(l).contains("passed"))
        .unwrap_or_else(|| panic!("no aggregate table in:\n{stdout}"));
    let rule = &lines[h + 1];
    let mut spans = Vec::new();
    let mut i = 0;
    while i < rule.len() {
        if rule[i] == '-' {
            let start = i;
            while i < rule.len() && rule[i] == '-' {
                i += 1;
            }
            spans.push((start, i));
        } else {
            i += 1;
        }
    }
    let cell = |l: &[char], (a, b): (usize, usize)| text(&l[a.min(l.len())..b.min(l.len())]).trim().to_string();
    let header: Vec<String> = spans.iter().map(|&s| cell(&lines[h], s)).collect();
    let wanted: Vec<(usize, usize)> = ["passed", "matched", "missing", "truncated", "hallucinated", "extra"]
        .into_iter()
        .map(|name| spans[header.iter().position(|c| c == name).unwrap_or_else(|| panic!("no column {name}: {header:?}"))])
        .collect();
    let mut out = BTreeMap::new();
    for l in &lines[h + 2..] {
        if text(l).trim().is_empty() {
            break;
        }
        out.insert(cell(l, spans[0]), wanted.iter().map(|&s| cell(l, s)).collect());
    }
    out
}

/// Name, line and expected lines of every target of a run file.
fn target_list(run: &Value) -> Vec<(String, u64, Value)> {
    run["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["name"].as_str().unwrap().to_string(), t["line"].as_u64().unwrap(), t["expected"].clone()))
        .collect()
}

fn answers(run: &Value) -> Vec<(Value, Value)> {
    run["targets"].as_array().unwrap().iter().map(|t| (t["response"].clone(), t["matched"].clone())).collect()
}

fn stamp(p: &Path) -> (Vec<u8>, SystemTime) {
    (std::fs::read(p).unwrap(), std::fs::metadata(p).unwrap().modified().unwrap())
}

/// Every run of the uninterrupted sweep in `full` was asked about the same
/// targets at its own KV types, although the models' contexts and
/// tokenizers differ. Returns the run files by run.
fn assert_every_run_shares_the_targets(full: &Path) -> BTreeMap<&'static str, Value> {
    assert_eq!(all_entries(full), expected_files(), "the run files and nothing else (no temporary file)");
    let runs: BTreeMap<&str, Value> = RUNS.iter().map(|r| (*r, read(&full.join(format!("{r}.json"))))).collect();
    let first = &runs[RUNS[0]];
    assert_eq!(target_list(first).len(), 2);
    for (name, r) in &runs {
        assert_eq!(target_list(r), target_list(first), "{name}");
        assert_eq!(r["manifest"]["corpus"]["crop"], first["manifest"]["corpus"]["crop"], "{name}");
        let (k, v) = name.split_once("__").unwrap().1.split_once('-').unwrap();
        assert_eq!(r["manifest"]["context"]["type_k"], k);
        assert_eq!(r["manifest"]["context"]["type_v"], v);
        assert_eq!(r["targets"].as_array().unwrap().len(), 2);
    }
    let (s, g) = (&runs["smollm2__f16-f16"], &runs["gemma3__f16-f16"]);
    assert_eq!(s["manifest"]["context"]["n_ctx"], 512);
    assert_eq!(g["manifest"]["context"]["n_ctx"], 2048);
    assert_ne!(s["manifest"]["model"]["sha256"], g["manifest"]["model"]["sha256"]);
    assert_ne!(s["manifest"]["runtime"]["prefix_sha256"], g["manifest"]["runtime"]["prefix_sha256"]);
    assert_eq!(s["manifest"]["model"]["build"], "Q4_1");
    assert_eq!(g["manifest"]["params"]["probe"], "completion");
    assert_eq!(s["manifest"]["corpus"]["crop"]["mode"], "lines");
    runs
}

/// Runs the sweep into `out` and kills it with SIGTERM once its first run
/// file is written; returns the run files it finished. Anything else it left
/// can only be the temporary file of a run it was writing.
fn sweep_killed_after_its_first_run(toml: &Path, out: &Path) -> BTreeSet<String> {
    let mut child =
        matrix_cmd(toml, &["--out-dir", out.to_str().unwrap(), "--quiet"]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    // A run's file is written after each target, marked unfinished, until
    // the run ends: the first finished one is the first run done.
    let finished_files = || -> BTreeSet<String> {
        run_files(out).into_iter().filter(|f| !f.ends_with(".json") || read(&out.join(f)).get("unfinished").is_none()).collect()
    };
    while finished_files().is_empty() {
        assert!(child.try_wait().unwrap().is_none(), "the sweep ended before its first run file appeared");
        assert!(Instant::now() < deadline, "no run file after 300 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    let kill = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(15), "{status:?}");
    let finished = finished_files();
    assert!(!finished.is_empty() && finished.len() < RUNS.len(), "{finished:?}");
    assert!(run_files(out).is_subset(&expected_files()), "{finished:?}");
    // The run it was killed in may have left its unfinished file.
    for name in all_entries(out).difference(&run_files(out)) {
        let temp = RUNS.iter().any(|r| name.starts_with(&format!(".{r}.json.tmp-{}-", child.id())));
        assert!(temp, "the killed sweep left {name}, which is neither a run file nor its temporary file");
    }
    finished
}

#[test]
fn a_sweep_runs_every_combination_on_the_same_targets_and_resumes_after_a_kill() {
    let _g = serial();
    let t0 = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let toml = sweep_toml(dir.path());

    // An uninterrupted sweep.
    let full = dir.path().join("full");
    let stdout = ok(&matrix_cmd(&toml, &["--out-dir", full.to_str().unwrap()]).output().unwrap());
    let runs = assert_every_run_shares_the_targets(&full);
    let first = &runs[RUNS[0]];
    // The aggregate table has every run.
    let baseline = recall_columns(&stdout);
    assert_eq!(baseline.keys().map(String::as_str).collect::<Vec<_>>(), RUNS);
    eprintln!("uninterrupted sweep: {:.1} s", t0.elapsed().as_secs_f64());

    // The same sweep, killed with SIGTERM once its first run file is written.
    let out = dir.path().join("resumed");
    std::fs::create_dir(&out).unwrap();
    let finished = sweep_killed_after_its_first_run(&toml, &out);
    let before: BTreeMap<String, (Vec<u8>, SystemTime)> = finished.iter().map(|f| (f.clone(), stamp(&out.join(f)))).collect();
    // A temporary file an earlier kill left mid-write (whatever its pid) is
    // this shard's to remove; a dot-file of someone else is not.
    std::fs::write(out.join(format!(".{}.json.tmp-4194000-x1Yz9q", RUNS[3])), "{\"half\": ").unwrap();
    std::fs::write(out.join(".notes"), "kept").unwrap();

    // Resumed: the finished runs are skipped and their files untouched; the
    // rest are run; nothing is lost or duplicated.
    let stdout = ok(&matrix_cmd(&toml, &["--out-dir", out.to_str().unwrap(), "--resume"]).output().unwrap());
    for f in &finished {
        let id = f.trim_end_matches(".json");
        assert!(stdout.contains(&format!("{id}: finished before, skipped")), "{id} not skipped:\n{stdout}");
        assert_eq!(stamp(&out.join(f)), before[f], "{f} was rewritten");
    }
    let skipped = stdout.matches("finished before, skipped").count();
    assert_eq!(skipped, finished.len(), "{stdout}");
    let mut left = expected_files();
    left.insert(".notes".into());
    assert_eq!(all_entries(&out), left, "the run files, the foreign dot-file, and no temporary file");
    for r in RUNS {
        let resumed = read(&out.join(format!("{r}.json")));
        assert_eq!(target_list(&resumed), target_list(first), "{r}");
        assert_eq!(answers(&resumed), answers(&runs[r]), "{r}: answers differ from the uninterrupted sweep");
    }
    assert_eq!(recall_columns(&stdout), baseline, "{stdout}");

    // A second --resume has nothing left to do.
    let stdout = ok(&matrix_cmd(&toml, &["--out-dir", out.to_str().unwrap(), "--resume"]).output().unwrap());
    assert_eq!(stdout.matches("finished before, skipped").count(), RUNS.len(), "{stdout}");
    assert_eq!(recall_columns(&stdout), baseline);
    eprintln!("whole test: {:.1} s", t0.elapsed().as_secs_f64());
}

/// `matrix --list` with `env` set: its command.
fn list_cmd(toml: &Path, extra: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = matrix_cmd(toml, &[&["--list"][..], extra].concat());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// `--list` output of a sweep: the run ids, one per line.
fn list(toml: &Path, extra: &[&str], env: &[(&str, &str)]) -> Vec<String> {
    let stdout = ok(&list_cmd(toml, extra, env).output().unwrap());
    stdout.lines().map(|l| l.split('\t').next().unwrap().to_string()).collect()
}

/// Three models, one with three KV configurations: a sweep of seven runs.
fn seven_runs_toml(dir: &Path) -> PathBuf {
    let text = format!(
        r#"
[corpus]
path = {corpus}
[[model]]
name = "a"
path = "${{POSRECALL_CACHE}}/models/{smol}"
kv = ["f16", "q8_0", "q8_0/f16"]
[[model]]
name = "b"
path = {gemma}
kv = ["f16", "q4_0"]
[[model]]
name = "c"
path = {gemma}
kv = ["q8_0", "f32"]
"#,
        corpus = toml_path(&fixture("dense.js")),
        smol = smollm2().file_name().unwrap().to_str().unwrap(),
        gemma = toml_path(&gemma3()),
    );
    let toml = dir.join("models.toml");
    std::fs::write(&toml, text).unwrap();
    toml
}

const SEVEN_RUNS: [&str; 7] = ["a__f16-f16", "a__q8_0-f16", "a__q8_0-q8_0", "b__f16-f16", "b__q4_0-q4_0", "c__f32-f32", "c__q8_0-q8_0"];

#[test]
fn shards_cover_every_run_exactly_once_and_scheduler_variables_pick_the_same_slices() {
    let dir = tempfile::tempdir().unwrap();
    let toml = seven_runs_toml(dir.path());
    let all = list(&toml, &[], &[]);
    assert_eq!(all, SEVEN_RUNS);
    for n in 1..=4usize {
        let mut seen: Vec<String> = Vec::new();
        for k in 1..=n {
            let part = list(&toml, &["--shard", &format!("{k}/{n}")], &[]);
            // Slurm: --array=3-(3+n-1), K and N from the environment.
            let id = (3 + k - 1).to_string();
            let count = n.to_string();
            let slurm = [("SLURM_ARRAY_TASK_ID", id.as_str()), ("SLURM_ARRAY_TASK_MIN", "3"), ("SLURM_ARRAY_TASK_COUNT", count.as_str())];
            assert_eq!(list(&toml, &["--shard", "auto"], &slurm), part, "slurm {k}/{n}");
            assert_eq!(list(&toml, &["--shard", &count], &slurm), part, "slurm --shard N {k}/{n}");
            // Kubernetes Indexed Job: JOB_COMPLETION_INDEX is K - 1.
            let index = (k - 1).to_string();
            assert_eq!(list(&toml, &["--shard", &count], &[("JOB_COMPLETION_INDEX", index.as_str())]), part, "indexed job {k}/{n}");
            seen.extend(part);
        }
        seen.sort();
        assert_eq!(seen, all, "shards of {n} do not cover every run exactly once");
    }

    // A shard number that does not match the environment is refused.
    let mut cmd = matrix_cmd(&toml, &["--list", "--shard", "3"]);
    cmd.env("JOB_COMPLETION_INDEX", "3");
    assert_one_error_line(&cmd.output().unwrap(), "JOB_COMPLETION_INDEX");
    assert_one_error_line(&matrix_cmd(&toml, &["--list", "--shard", "auto"]).output().unwrap(), "Slurm");
    assert_one_error_line(&matrix_cmd(&toml, &["--list", "--shard", "3/2"]).output().unwrap(), "3/2");
}

/// docs/GUIDE.md, "Sharding over a scheduler": "Without `--shard` the
/// environment is ignored", and a Slurm
/// array's task count must be the N of `--shard N`.
#[test]
fn without_shard_the_environment_is_ignored_and_a_slurm_count_must_be_n() {
    let dir = tempfile::tempdir().unwrap();
    let toml = seven_runs_toml(dir.path());
    let slurm = [("SLURM_ARRAY_TASK_ID", "1"), ("SLURM_ARRAY_TASK_MIN", "0"), ("SLURM_ARRAY_TASK_COUNT", "4")];
    let k8s = [("JOB_COMPLETION_INDEX", "2")];
    // Values --shard would refuse are not even read without it.
    let broken = [("JOB_COMPLETION_INDEX", "banana"), ("SLURM_ARRAY_TASK_ID", "7"), ("SLURM_ARRAY_TASK_COUNT", "0")];
    for env in [&slurm[..], &k8s[..], &broken[..]] {
        assert_eq!(list(&toml, &[], env), SEVEN_RUNS, "{env:?}");
    }
    // The same environments do pick a slice with --shard.
    assert_eq!(list(&toml, &["--shard", "4"], &slurm), ["a__q8_0-f16", "c__f32-f32"]);
    assert_eq!(list(&toml, &["--shard", "4"], &k8s), ["a__q8_0-q8_0", "c__q8_0-q8_0"]);

    // Four array tasks cannot be three shards: some run would be run twice
    // or never. One error line naming the variable, its value and N.
    let o = list_cmd(&toml, &["--shard", "3"], &slurm).output().unwrap();
    assert_one_error_line(&o, "--shard 3: the Slurm array has 4 tasks (SLURM_ARRAY_TASK_COUNT), not 3");
    assert!(o.stdout.is_empty(), "no run is listed: {}", String::from_utf8_lossy(&o.stdout));
}

/// `${POSRECALL_CACHE}` in a sweep path is the variable when it is set, and
/// the cache folder when it is unset or empty (here `$XDG_CACHE_HOME/posrecall`).
#[test]
fn posrecall_cache_in_a_path_is_the_variable_else_the_cache_folder() {
    let dir = tempfile::tempdir().unwrap();
    let model = smollm2();
    let file = model.file_name().unwrap();
    let given = dir.path().join("given");
    let xdg = dir.path().join("xdg");
    for models in [given.join("models"), xdg.join("posrecall").join("models")] {
        std::fs::create_dir_all(&models).unwrap();
        std::os::unix::fs::symlink(&model, models.join(file)).unwrap();
    }
    let toml = dir.path().join("models.toml");
    let text = format!(
        "[corpus]\npath = {}\n[[model]]\nname = \"m\"\npath = \"${{POSRECALL_CACHE}}/models/{}\"\nkv = [\"f16\"]\n",
        toml_path(&fixture("dense.js")),
        file.to_str().unwrap()
    );
    std::fs::write(&toml, text).unwrap();
    // The model path `--list` prints (its fourth column).
    let listed = |cache: Option<&Path>| -> PathBuf {
        let mut cmd = matrix_cmd(&toml, &["--list"]);
        cmd.env("XDG_CACHE_HOME", &xdg);
        match cache {
            Some(c) => cmd.env("POSRECALL_CACHE", c),
            None => cmd.env_remove("POSRECALL_CACHE"),
        };
        let stdout = ok(&cmd.output().unwrap());
        let line: Vec<&str> = stdout.trim_end().split('\t').collect();
        assert_eq!(line.len(), 4, "one run: {stdout}");
        PathBuf::from(line[3])
    };
    assert_eq!(listed(Some(&given)), given.join("models").join(file));
    let default = xdg.join("posrecall").join("models").join(file);
    assert_eq!(listed(None), default, "unset: the cache folder");
    assert_eq!(listed(Some(Path::new(""))), default, "empty: the cache folder");
}

#[test]
fn the_repository_models_toml_is_a_working_sweep_definition() {
    let toml = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models.toml");
    let text = std::fs::read_to_string(&toml).unwrap();
    // Every model and KV type, each model's f16 run its reference.
    let sweep = posrecall::sweep::Sweep::parse(&text, &toml, &posrecall::sweep::process_env).unwrap();
    let names: Vec<&str> = sweep.models.iter().map(|m| m.name.as_str()).collect();
    assert_eq!(names, ["SmolLM2-135M-Instruct", "Gemma-3-270M", "Qwen2.5-Coder-0.5B", "Qwen2.5-Coder-1.5B"]);
    assert_eq!(sweep.runs().len(), 10);
    use posrecall::settings::KvType;
    assert!(sweep.models.iter().all(|m| m.reference_kv == Some((KvType::F16, KvType::F16))), "{:?}", sweep.models);
    // `matrix --list` on it as the test suite's set-up leaves the cache: the
    // 1.5B model is fetched only on request (scripts/env/fetch-models --with-1.5b).
    let cut = text.find("[[model]]\nname = \"Qwen2.5-Coder-1.5B\"").expect("the 1.5B entry");
    let dir = tempfile::tempdir().unwrap();
    let fetched = dir.path().join("models.toml");
    std::fs::write(&fetched, &text[..cut]).unwrap();
    let runs = list(&fetched, &[], &[]);
    assert_eq!(runs.len(), 8, "{runs:?}");
    for model in ["SmolLM2-135M-Instruct__", "Gemma-3-270M__", "Qwen2.5-Coder-0.5B__"] {
        assert!(runs.iter().any(|r| r.starts_with(model)), "{model}: {runs:?}");
    }
}

fn assert_one_error_line(o: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "expected failure, got success: {err}");
    assert!(!err.contains("panicked"), "panic: {err}");
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "expected one line, got: {err}");
    assert!(lines[0].starts_with("posrecall: error:"), "{err}");
    assert!(lines[0].contains(needle), "`{needle}` not in: {err}");
}

#[test]
fn bad_sweep_files_fail_with_one_error_line() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let good = format!(
        "[corpus]\npath = {}\n[params]\ncount = 2\n[[model]]\nname = \"m\"\npath = {}\nkv = [\"f16\"]\n",
        toml_path(&fixture("dense.js")),
        toml_path(&smollm2())
    );
    let run = |name: &str, text: &str, env: &[(&str, &str)]| -> Output {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        let mut cmd = matrix_cmd(&p, &["--out-dir", out.to_str().unwrap()]);
        cmd.env_remove("POSRECALL_TEST_UNSET_VARIABLE");
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().unwrap()
    };

    let o = run("unknown.toml", &good.replace("count = 2", "count = 2\ncoutn = 3"), &[]);
    assert_one_error_line(&o, "coutn");
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown.toml:5"), "{o:?}");

    let o = run("unknown-model-key.toml", &good.replace("kv = ", "gpu_layer = 1\nkv = "), &[]);
    assert_one_error_line(&o, "gpu_layer");

    let missing = dir.path().join("nowhere").join("model.gguf");
    let o = run("missing.toml", &good.replace(&toml_path(&smollm2()), &toml_path(&missing)), &[]);
    assert_one_error_line(&o, "does not exist");
    assert!(String::from_utf8_lossy(&o.stderr).contains("model `m`"), "{o:?}");

    let o = run("unset.toml", &good.replace(&toml_path(&smollm2()), "\"${POSRECALL_TEST_UNSET_VARIABLE}/m.gguf\""), &[]);
    assert_one_error_line(&o, "POSRECALL_TEST_UNSET_VARIABLE");

    // A variable's value is never shown: the path is shown as written.
    let secret = [("POSRECALL_TEST_SECRET", "hf_not_to_be_shown")];
    let o = run("secret.toml", &good.replace(&toml_path(&smollm2()), "\"${POSRECALL_TEST_SECRET}\""), &secret);
    assert_one_error_line(&o, "model `m`: path: ${POSRECALL_TEST_SECRET} does not exist");
    assert!(!String::from_utf8_lossy(&o.stderr).contains("hf_not_to_be_shown"), "{o:?}");
    let o = run("secret-corpus.toml", &good.replace(&toml_path(&fixture("dense.js")), "\"${POSRECALL_TEST_SECRET}.js\""), &secret);
    assert_one_error_line(&o, "corpus.path: ${POSRECALL_TEST_SECRET}.js does not exist");
    assert!(!String::from_utf8_lossy(&o.stderr).contains("hf_not_to_be_shown"), "{o:?}");

    let o = run("kv.toml", &good.replace("[\"f16\"]", "[\"q7\"]"), &[]);
    assert_one_error_line(&o, "q7");

    let o = run("syntax.toml", &good.replace("count = 2", "count = "), &[]);
    assert_one_error_line(&o, "syntax.toml:");

    // Nothing was written for any of them.
    assert!(!out.exists(), "an output folder was created despite the errors");

    // A run's file that is a folder, and a sweep file among the outputs,
    // are refused before any model is loaded (they failed after the work):
    // with a model llama.cpp cannot load, the refusal is theirs.
    let good = good.replace(&toml_path(&smollm2()), &toml_path(&unloadable_model(dir.path())));
    std::fs::create_dir_all(out.join("m__f16-f16.json")).unwrap();
    let o = run("good.toml", &good, &[]);
    assert_one_error_line(&o, "m__f16-f16.json is a folder");
    std::fs::remove_dir(out.join("m__f16-f16.json")).unwrap();
    let named = dir.path().join("m__f16-f16.json");
    std::fs::write(&named, &good).unwrap();
    let o = matrix_cmd(&named, &["--out-dir", dir.path().to_str().unwrap()]).output().unwrap();
    assert_one_error_line(&o, "is also an input");
    assert_eq!(std::fs::read_to_string(&named).unwrap(), good, "the sweep file was overwritten");
}

/// An error found while a sweep runs (here planning: the model's `ctx`
/// holds too little of the file for the targets asked) is one line that
/// names the sweep file, the model and the file's keys; the same error in a
/// `bench` list names the model and the flags.
#[test]
fn an_error_while_a_sweep_runs_names_the_model_and_its_keys_and_bench_its_flags() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("small.toml");
    std::fs::write(
        &toml,
        format!(
            "[corpus]\npath = {}\n[params]\ncount = 3\nlines = 5\nmax_new_tokens = 50\nthreads = 2\n\
             [[model]]\nname = \"smol\"\npath = {}\nkv = [\"f16\"]\nctx = 200\n",
            toml_path(&fixture("dense.js")),
            toml_path(&smollm2())
        ),
    )
    .unwrap();
    let out = dir.path().join("out");
    let o = matrix_cmd(&toml, &["--out-dir", s(&out), "--quiet"]).output().unwrap();
    let prefix = format!("posrecall: error: {}: model `smol`: only 0 eligible function(s)", toml.display());
    assert_one_error_line(&o, &prefix);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with(&prefix), "the file and the model first: {err}");
    assert!(err.contains("params.count is 3") && err.contains("a larger ctx)"), "the keys: {err}");
    assert!(!err.contains("--"), "no flag: {err}");
    assert!(!out.join("smol__f16-f16.json").exists(), "no run file");

    let bench_out = dir.path().join("bench");
    let o = posrecall(&[
        "bench",
        s(&smollm2()),
        "--corpus",
        s(&fixture("dense.js")),
        "--count",
        "3",
        "--lines",
        "5",
        "--max-new-tokens",
        "50",
        "--threads",
        "2",
        "--ctx",
        "200",
        "--kv",
        "f16,q8_0",
        "--out-dir",
        s(&bench_out),
        "--quiet",
    ]);
    assert_one_error_line(&o, "model `SmolLM2-135M-Instruct.Q4_1`: only 0 eligible function(s)");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--count is 3") && err.contains("a larger --ctx)"), "the flags: {err}");
    assert!(!err.contains("params.") && !err.contains("small.toml"), "no key: {err}");
}

#[test]
fn a_parallel_sweep_records_its_decoding_and_resumes_only_like_with_like() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("models.toml");
    let text = std::fs::read_to_string(sweep_toml(dir.path())).unwrap().replace(r#"kv = ["f16", "q8_0"]"#, r#"kv = ["q8_0"]"#);
    std::fs::write(&toml, text).unwrap();
    let out = dir.path().join("runs");
    let matrix = |extra: &[&str]| {
        let o = Command::new(bin())
            .arg("matrix")
            .arg(&toml)
            .arg("--out-dir")
            .arg(&out)
            .args(["--quiet"])
            .args(extra)
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        assert!(o.status.success(), "matrix failed: {}", String::from_utf8_lossy(&o.stderr));
        o
    };
    matrix(&["--parallel", "2"]);
    let files = ["gemma3__q8_0-q8_0.json", "smollm2__q8_0-q8_0.json"];
    let mut stamps = Vec::new();
    for f in files {
        let run = read(&out.join(f));
        let m = &run["manifest"];
        assert_eq!(m["params"]["decode_mode"], "parallel", "{f}");
        assert_eq!(m["params"]["parallel"], 2, "{f}");
        assert_eq!(m["context"]["kv_unified"], true, "{f}");
        for t in run["targets"].as_array().unwrap() {
            assert_eq!(t["matched"].as_u64().unwrap() + t["missing"].as_u64().unwrap(), 6, "{f}");
        }
        stamps.push(stamp(&out.join(f)));
    }
    // The same decoding resumes; sequential decoding is another run.
    matrix(&["--parallel", "2", "--resume"]);
    for (f, s) in files.iter().zip(&stamps) {
        assert_eq!(&stamp(&out.join(f)), s, "{f} was redone");
    }
    matrix(&["--resume"]);
    for f in files {
        assert_eq!(read(&out.join(f))["manifest"]["params"]["decode_mode"], "sequential", "{f}");
    }
}

#[test]
fn a_model_reference_run_measures_its_other_kv_types() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    // The reference is listed last: it still runs first.
    let text = format!(
        "[corpus]\npath = {}\ncrop = \"densest\"\n[params]\ncount = 2\nlines = 6\nmax_new_tokens = 16\nthreads = 2\n\
         [[model]]\nname = \"smollm2\"\npath = {}\nkv = [\"q8_0\", \"f16\"]\nreference = \"f16\"\nctx = 512\n",
        toml_path(&fixture("dense.js")),
        toml_path(&smollm2()),
    );
    let toml = dir.path().join("models.toml");
    std::fs::write(&toml, &text).unwrap();
    let out = dir.path().join("out");
    let o = out.to_str().unwrap();

    // Alone, the shard that owns only the q8_0 run has no reference to read.
    let shard = matrix_cmd(&toml, &["--out-dir", o, "--shard", "2/2"]).output().unwrap();
    assert_one_error_line(&shard, "run smollm2__q8_0-q8_0: its reference run smollm2__f16-f16 has not written");

    let stdout = ok(&matrix_cmd(&toml, &["--out-dir", o]).output().unwrap());
    let reference = read(&out.join("smollm2__f16-f16.json"));
    let measured = read(&out.join("smollm2__q8_0-q8_0.json"));
    assert!(out.join("smollm2__f16-f16.ref").exists() && out.join("smollm2__f16-f16.ref.sha256").exists());
    assert!(reference["manifest"].get("reference").is_none());
    assert_eq!(measured["manifest"]["reference"]["type_k"], "f16");
    assert_eq!(measured["manifest"]["reference"]["path"], out.join("smollm2__f16-f16.ref").to_str().unwrap());
    for t in measured["targets"].as_array().unwrap() {
        let k = &t["forced"]["kld"];
        let tokens: Vec<f64> = k["tokens"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        let (mean, max) = (k["mean"].as_f64().unwrap(), k["max"].as_f64().unwrap());
        // q8_0 is not f16: a divergence of exactly 0 would mean the run was
        // compared with itself or not at all. The summary is its tokens'.
        assert!(tokens.len() > 10 && mean > 0.0 && mean < 0.5, "{k}");
        let recomputed = tokens.iter().sum::<f64>() / tokens.len() as f64;
        assert!((mean - recomputed).abs() < 1e-6, "mean {mean}, its tokens' mean {recomputed}");
        assert!((max - tokens.iter().copied().fold(0.0, f64::max)).abs() < 1e-6, "{k}");
        assert_eq!(t["expected"].as_array().unwrap().len(), 6);
        assert_line_means(t, &smollm2());
    }
    assert!(stdout.contains("KLD mean") && stdout.contains("Q4_1.gguf f16/f16"), "{stdout}");

    // A reference run without its reference file is not finished: --resume reruns it.
    std::fs::remove_file(out.join("smollm2__f16-f16.ref")).unwrap();
    let stdout = ok(&matrix_cmd(&toml, &["--out-dir", o, "--resume"]).output().unwrap());
    assert!(stdout.contains("smollm2__q8_0-q8_0: finished before, skipped"), "{stdout}");
    assert!(!stdout.contains("smollm2__f16-f16: finished before"), "{stdout}");
    assert!(out.join("smollm2__f16-f16.ref").exists());

    // A reference file replaced by another run's (here the q8_0 run's, made
    // by a sweep whose reference is q8_0) is not trusted: a shard that reads
    // it refuses it, and --resume redoes the reference run, then keeps the
    // measured run, whose recorded reference is again the file in place.
    let other = dir.path().join("other");
    let toml_q8 = dir.path().join("q8.toml");
    std::fs::write(&toml_q8, text.replace("reference = \"f16\"", "reference = \"q8_0\"")).unwrap();
    ok(&matrix_cmd(&toml_q8, &["--out-dir", other.to_str().unwrap()]).output().unwrap());
    let (good, foreign) = (std::fs::read(out.join("smollm2__f16-f16.ref")).unwrap(), other.join("smollm2__q8_0-q8_0.ref"));
    let replace = || {
        std::fs::copy(&foreign, out.join("smollm2__f16-f16.ref")).unwrap();
        std::fs::copy(foreign.with_extension("ref.sha256"), out.join("smollm2__f16-f16.ref.sha256")).unwrap();
    };
    replace();
    let shard = matrix_cmd(&toml, &["--out-dir", o, "--shard", "2/2"]).output().unwrap();
    assert_one_error_line(&shard, "is not the reference run smollm2__f16-f16 writes: it was made with KV q8_0/q8_0");
    replace();
    let resumed = matrix_cmd(&toml, &["--out-dir", o, "--resume"]).output().unwrap();
    let (stdout, stderr) = (ok(&resumed), String::from_utf8_lossy(&resumed.stderr));
    assert!(stderr.contains("smollm2__f16-f16.ref is not the reference run smollm2__f16-f16 writes"), "{stderr}");
    assert!(!stdout.contains("smollm2__f16-f16: finished before"), "{stdout}");
    assert!(stdout.contains("smollm2__q8_0-q8_0: finished before, skipped"), "{stdout}");
    assert_eq!(std::fs::read(out.join("smollm2__f16-f16.ref")).unwrap(), good, "the redone reference differs");

    // Nor is a reference computed by other CPU kernels (a portable build's
    // file in a native build's sweep): its distributions would carry the
    // other kernels' rounding into every divergence measured against it.
    // The file keeps its format and a true sidecar; only the kernels differ.
    let magic = b"POSRECALL-REFERENCE\n".len();
    let len = u64::from_le_bytes(good[magic..magic + 8].try_into().unwrap()) as usize;
    let mut header: Value = serde_json::from_slice(&good[magic + 8..magic + 8 + len]).unwrap();
    assert!(header["source"]["cpu_features"].as_array().is_some_and(|f| !f.is_empty()), "{}", header["source"]);
    header["source"]["cpu_features"] = serde_json::json!(["SSE3", "AVX", "AVX2"]);
    let json = serde_json::to_vec(&header).unwrap();
    let other_kernels = [&good[..magic], &(json.len() as u64).to_le_bytes(), &json, &good[magic + 8 + len..]].concat();
    std::fs::write(out.join("smollm2__f16-f16.ref"), &other_kernels).unwrap();
    let sidecar = format!("{}\n", posrecall::support::fsutil::sha256_hex(&other_kernels));
    std::fs::write(out.join("smollm2__f16-f16.ref.sha256"), sidecar).unwrap();
    let shard = matrix_cmd(&toml, &["--out-dir", o, "--shard", "2/2"]).output().unwrap();
    assert_one_error_line(
        &shard,
        "is not the reference run smollm2__f16-f16 writes: it was made by other CPU kernels (SSE3 AVX AVX2; these are ",
    );

    // The reference must be one of the model's own runs.
    std::fs::write(&toml, text.replace("reference = \"f16\"", "reference = \"q4_0\"")).unwrap();
    let bad = matrix_cmd(&toml, &["--out-dir", o]).output().unwrap();
    assert_one_error_line(&bad, "model `smollm2`: reference: `q4_0` is not one of its kv entries");
}

/// The files a sweep names itself stay in its output folder, and another
/// model's results there are not replaced: a symbolic link planted at a
/// run's name is refused before any model loads (it would send the run file
/// wherever it points), and a run file made by another model file (as two
/// models whose files share a name would write) is refused before any run,
/// both left as they were.
#[test]
fn a_sweep_never_writes_through_a_planted_link_nor_over_another_models_runs() {
    let dir = tempfile::TempDir::new().unwrap();
    let toml = dir.path().join("one.toml");
    let text = format!(
        "[corpus]\npath = {}\ncrop = \"densest\"\n[params]\ncount = 2\nlines = 6\nmax_new_tokens = 16\nthreads = 2\n\
         [[model]]\nname = \"smol\"\npath = {}\nkv = [\"f16\"]\nctx = 512\n",
        toml_path(&fixture("dense.js")),
        toml_path(&smollm2())
    );
    std::fs::write(&toml, text).unwrap();
    let out = dir.path().join("runs");
    std::fs::create_dir(&out).unwrap();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    std::os::unix::fs::symlink(&victim, out.join("smol__f16-f16.json")).unwrap();
    let o = matrix_cmd(&toml, &["--out-dir", out.to_str().unwrap(), "-q"]).output().unwrap();
    assert_one_error_line(&o, "smol__f16-f16.json is a symbolic link");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");

    std::fs::remove_file(out.join("smol__f16-f16.json")).unwrap();
    let theirs = fixture("compare/a.json");
    std::fs::copy(&theirs, out.join("smol__f16-f16.json")).unwrap();
    let o = matrix_cmd(&toml, &["--out-dir", out.to_str().unwrap(), "-q"]).output().unwrap();
    assert_one_error_line(&o, "holds the results of another model file (fixture-1b.Q4_K_M.gguf, sha256 5de3a8420644…)");
    assert_eq!(std::fs::read(out.join("smol__f16-f16.json")).unwrap(), std::fs::read(&theirs).unwrap());
}

/// A sweep's `--out-dir` that is a regular file is named as one, before any
/// model loads (it used to say only "File exists").
#[test]
fn a_sweep_out_dir_that_is_a_file_says_so() {
    let dir = tempfile::TempDir::new().unwrap();
    let toml = dir.path().join("one.toml");
    let text = format!(
        "[corpus]\npath = {}\n[params]\ncount = 2\nlines = 6\n[[model]]\nname = \"smol\"\npath = {}\nkv = [\"f16\"]\nctx = 512\n",
        toml_path(&fixture("dense.js")),
        toml_path(&smollm2())
    );
    std::fs::write(&toml, text).unwrap();
    let out = dir.path().join("runs");
    std::fs::write(&out, "keep").unwrap();
    let o = matrix_cmd(&toml, &["--out-dir", out.to_str().unwrap(), "-q"]).output().unwrap();
    assert_one_error_line(&o, &format!("--out-dir: {} is a regular file, not a folder", out.display()));
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "keep");
}
