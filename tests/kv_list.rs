//! `bench --kv A,B,…`: a KV list run as one command, and llama.cpp's KV
//! rotation as a controlled, recorded setting (`--kv-rotation`, and
//! `LLAMA_ATTN_ROT_DISABLE` in the environment), on the real SmolLM2, whose
//! 64-wide heads llama.cpp rotates when the cache is quantised.

use crate::common;

use common::*;
use serde_json::Value;
use std::process::{Command, Output};

/// 4 targets of 8 lines in lines 1..100 of dense.js (863 tokens), answers
/// capped at 48 tokens.
const SMALL: &[&str] = &["--count", "4", "--lines", "8", "--crop-lines", "1:100", "--max-new-tokens", "48"];

/// `bench` on SmolLM2 and dense.js, with the rotation variable as `env` says
/// (never inherited).
fn bench(extra: &[&str], env: Option<&str>) -> Output {
    let mut cmd = Command::new(bin());
    cmd.arg("bench")
        .arg(smollm2())
        .args(["--corpus", s(&fixture("dense.js")), "--threads", "2", "--quiet"])
        .args(extra)
        .env("NO_COLOR", "1")
        .env_remove("LLAMA_ATTN_ROT_DISABLE");
    if let Some(v) = env {
        cmd.env("LLAMA_ATTN_ROT_DISABLE", v);
    }
    cmd.output().unwrap()
}

fn forced_logprobs(run: &Value) -> Vec<f64> {
    run["targets"].as_array().unwrap().iter().map(|t| t["forced"]["mean_logprob"].as_f64().unwrap()).collect()
}

fn answers(run: &Value) -> Vec<String> {
    run["targets"].as_array().unwrap().iter().map(|t| t["response"].as_str().unwrap().to_string()).collect()
}

fn rotation(run: &Value) -> (String, bool, bool) {
    let r = &run["manifest"]["context"]["kv_rotation"];
    (r["mode"].as_str().unwrap().to_string(), r["k"].as_bool().unwrap(), r["v"].as_bool().unwrap())
}

#[test]
fn a_kv_list_is_its_runs_and_its_table_their_figures() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = d.join("runs");
    let table =
        ok(&bench(&[SMALL, &["--kv", "f16,q4_0", "--kv-rotation", "auto,off", "--out-dir", s(&out), "--format", "json"]].concat(), None));
    let table: Value = serde_json::from_str(&table).expect("--format json prints JSON");
    let rows = table["rows"].as_array().unwrap();
    let stem = "SmolLM2-135M-Instruct.Q4_1";
    let ids = ["f16-f16", "f16-f16-rot_off", "q4_0-q4_0", "q4_0-q4_0-rot_off"].map(|kv| format!("{stem}__{kv}"));
    assert_eq!(rows.iter().map(|r| r["run"].as_str().unwrap()).collect::<Vec<_>>(), ids.to_vec(), "one row per item, in order");
    let runs: Vec<Value> = ids.iter().map(|id| read(&out.join(format!("{id}.json")))).collect();
    assert!(out.join(format!("{}.ref", ids[0])).is_file(), "the first item is the reference");

    // What llama.cpp did, recorded: SmolLM2's heads are 64 wide, so only a
    // quantised cache with rotation auto is rotated.
    let recorded: Vec<_> = runs.iter().map(rotation).collect();
    let want = [("auto", false, false), ("off", false, false), ("auto", true, true), ("off", false, false)];
    assert_eq!(recorded, want.map(|(m, k, v)| (m.to_string(), k, v)).to_vec());

    // Rotation changes what a quantised cache computes, and nothing else.
    assert_eq!(forced_logprobs(&runs[0]), forced_logprobs(&runs[1]), "f16 is never rotated");
    assert_ne!(forced_logprobs(&runs[2]), forced_logprobs(&runs[3]), "q4_0 with and without rotation");

    // The table's rows are the run files' figures.
    for (row, run) in rows.iter().zip(&runs) {
        let t = &run["summary"];
        assert_eq!((&row["passes"], &row["count"], &row["matched"]), (&t["passes"], &t["count"], &t["matched"]), "{}", row["run"]);
        // Every item after the first is measured against the first, so its
        // KLD figures must be there: an item that lost them would otherwise
        // match a row that lost them too (both null).
        let kld = &run["summary"]["forced"]["kld"];
        if row["run"] != ids[0].as_str() {
            for key in ["mean", "same_top1"] {
                assert!(kld[key].as_f64().is_some(), "{}: no KLD {key} in the run file: {kld}", row["run"]);
            }
        }
        assert_eq!(row["kld_mean"], kld.get("mean").cloned().unwrap_or(Value::Null), "{}", row["run"]);
        assert_eq!(row["same_top1"], kld.get("same_top1").cloned().unwrap_or(Value::Null), "{}", row["run"]);
        assert_eq!(row["kv_k"], run["manifest"]["context"]["type_k"]);
        assert_eq!(row["rotation"], run["manifest"]["context"]["kv_rotation"]["mode"]);
        assert_eq!(row["state_bytes"], run["timings"]["context_bytes"]);
        let first = runs[0]["summary"]["matched"].as_i64().unwrap();
        if row["run"] != ids[0].as_str() {
            assert_eq!(row["delta_matched"].as_i64(), Some(t["matched"].as_i64().unwrap() - first));
            assert!(row["p_passes"].as_f64().is_some_and(|p| (0.0..=1.0).contains(&p)));
        }
    }
    assert!(rows[0]["delta_matched"].is_null() && rows[0]["kld_mean"].is_null(), "the reference has nothing to be measured against");

    // The first item is what a single run of that type answers.
    let single = d.join("single.json");
    ok(&bench(&[SMALL, &["--kv", "f16", "--out", s(&single)]].concat(), None));
    let single = read(&single);
    assert_eq!(answers(&single), answers(&runs[0]));
    assert_eq!(forced_logprobs(&single), forced_logprobs(&runs[0]));

    // Every later item's divergence is what a separate --reference run of
    // that item measures (each is a small run: a few seconds apiece), so no
    // item of the list is measured against anything but the first.
    let reference = out.join(format!("{}.ref", ids[0]));
    for (i, (kv, rot)) in [("f16", "off"), ("q4_0", "auto"), ("q4_0", "off")].into_iter().enumerate() {
        let (item, separate) = (&runs[i + 1], d.join(format!("separate-{}.json", i + 1)));
        ok(&bench(&[SMALL, &["--kv", kv, "--kv-rotation", rot, "--reference", s(&reference), "--out", s(&separate)]].concat(), None));
        let separate = read(&separate);
        assert!(separate["summary"]["forced"]["kld"]["mean"].as_f64().is_some(), "{}: no KLD in the separate run", ids[i + 1]);
        assert_eq!(separate["summary"]["forced"]["kld"], item["summary"]["forced"]["kld"], "{}", ids[i + 1]);
        assert_eq!(answers(&separate), answers(item), "{}", ids[i + 1]);
    }
}

#[test]
fn the_environment_turns_rotation_off_and_the_prefix_cache_knows_it() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cache = d.join("cache");
    let forced = ["--count", "4", "--lines", "8", "--crop-lines", "1:100", "--forced-only", "--kv", "q4_0", "--prefix-cache", s(&cache)];
    let run = |name: &str, extra: &[&str], env: Option<&str>| {
        let path = d.join(name);
        ok(&bench(&[&forced[..], extra, &["--out", s(&path)]].concat(), env));
        read(&path)
    };
    // Set outside posrecall, the variable is honoured and recorded as off.
    let env_off = run("env_off.json", &[], Some("1"));
    assert_eq!(rotation(&env_off), ("off".into(), false, false));
    assert_eq!(env_off["timings"]["prefix_source"], "prefill");
    // Its cached prefix is not one a rotated run may use...
    let auto = run("auto.json", &[], None);
    assert_eq!(rotation(&auto), ("auto".into(), true, true));
    assert_eq!(auto["timings"]["prefix_source"], "prefill", "a prefix evaluated without rotation is not reused with it");
    assert_ne!(forced_logprobs(&auto), forced_logprobs(&env_off));
    let states =
        || std::fs::read_dir(&cache).unwrap().filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "state")).count();
    assert_eq!(states(), 2, "one cached state per rotation");
    // ...but the rotated run's own is, and --kv-rotation off reuses the
    // environment's: the two computed alike and are recorded alike.
    let again = run("again.json", &[], None);
    assert_eq!(again["timings"]["prefix_source"], "cache");
    assert_eq!(forced_logprobs(&again), forced_logprobs(&auto));
    let flag_off = run("flag_off.json", &["--kv-rotation", "off"], Some("0"));
    assert_eq!(flag_off["timings"]["prefix_source"], "cache");
    assert_eq!(rotation(&flag_off), rotation(&env_off));
    assert_eq!(forced_logprobs(&flag_off), forced_logprobs(&env_off));
    assert_eq!(flag_off["manifest"]["context"], env_off["manifest"]["context"]);
    assert_eq!(states(), 2);
}

#[test]
fn bad_kv_lists_are_refused_before_the_model_loads() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out_dir = d.join("runs");
    let (x, r) = (d.join("x.json"), d.join("r"));
    // Not a reference, with a checksum that matches: only its header tells.
    let garbage = d.join("garbage.ref");
    std::fs::write(&garbage, "garbage").unwrap();
    std::fs::write(d.join("garbage.ref.sha256"), posrecall::support::fsutil::sha256_hex(b"garbage")).unwrap();
    let rows: &[(&[&str], &str)] = &[
        (&["--kv", "f16,,q8_0", "--out-dir", s(&out_dir)], "--kv <KV,...>': an empty item"),
        (&["--kv", "f16,q8_0,f16", "--out-dir", s(&out_dir)], "--kv: `f16` is listed twice"),
        (&["--kv-k", "f16,q8_0", "--kv-v", "f16,q8_0,q4_0", "--out-dir", s(&out_dir)], "--kv-k lists 2 items and --kv-v 3"),
        (&["--kv", "f16,q8_0", "--kv-rotation", "off,off", "--out-dir", s(&out_dir)], "--kv-rotation: `off` is listed twice"),
        (&["--kv", "f16,q8_0", "--out", s(&x), "--out-dir", s(&out_dir)], "--out with a KV list of 2 items"),
        (&["--kv", "f16,q8_0", "--save-reference", s(&r), "--out-dir", s(&out_dir)], "--save-reference with a KV list of 2 items"),
        (&["--kv", "f16,q8_0"], "give --out-dir DIR"),
        (&["--kv-rotation", "sideways"], "unknown variant `sideways`, expected `auto` or `off`"),
        (&["--format", "md"], "--format is for a KV list"),
        (&["--kv", "f16/q9_0,q8_0", "--out-dir", s(&out_dir)], "unknown variant `q9_0`"),
        // A reference that is a folder or not a reference at all is refused
        // before the list starts (the output folder is its first step).
        (&["--kv", "f16,q8_0", "--reference", s(d), "--out-dir", s(&out_dir)], "a folder, not a file"),
        (&["--kv", "f16,q8_0", "--reference", s(&garbage), "--out-dir", s(&out_dir)], "garbage.ref: not a posrecall reference file"),
    ];
    for (args, needle) in rows {
        let o = bench(args, None);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} was accepted");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!out_dir.exists() && !x.exists() && !r.exists(), "{args:?} wrote a file");
    }
}

/// A list without the forced pass runs every item, recall only: no
/// reference is saved or read (there is nothing to measure it by), the KLD
/// cells are empty, and `--format json` on stdout is JSON even without -q
/// (the per-run lines go to stderr).
#[test]
fn a_kv_list_without_the_forced_pass_runs_every_item() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("runs");
    let mut cmd = Command::new(bin());
    cmd.arg("bench")
        .arg(smollm2())
        .args(["--corpus", s(&fixture("dense.js")), "--threads", "2"])
        .args(SMALL)
        .args(["--kv", "f16,q8_0", "--no-forced", "--out-dir", s(&out), "--format", "json"])
        .env("NO_COLOR", "1")
        .env_remove("LLAMA_ATTN_ROT_DISABLE");
    let o = cmd.output().unwrap();
    let stdout = ok(&o);
    let table: Value = serde_json::from_str(&stdout).expect("--format json prints only JSON on stdout");
    let rows = table["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{table}");
    for r in rows {
        assert!(r["kld_mean"].is_null(), "a KLD without a forced pass: {r}");
    }
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("__q8_0-q8_0: ") && stderr.contains(" passed, "), "the per-run lines go to stderr: {stderr}");
    let files: Vec<String> = std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(!files.iter().any(|f| f.ends_with(".ref")), "a reference was written: {files:?}");
    for kv in ["f16-f16", "q8_0-q8_0"] {
        let run = read(&out.join(format!("SmolLM2-135M-Instruct.Q4_1__{kv}.json")));
        assert!(run["targets"][0]["forced"].is_null() && run["targets"][0]["response"].is_string(), "{kv}");
    }
}

/// With llama.cpp's variable turning rotation off, `auto` is `off`: a list
/// of both is refused before any model work (it used to run the first item
/// and fail on the second), read as llama.cpp reads the variable.
#[test]
fn auto_and_off_under_the_disabling_variable_are_refused_before_model_work() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("runs");
    for value in ["1", "0000000000000000001"] {
        let o = bench(&[SMALL, &["--kv", "q8_0", "--kv-rotation", "auto,off", "--out-dir", s(&out)]].concat(), Some(value));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains("--kv-rotation: KV rotation auto and off are the same runs") && err.contains(value), "{err}");
        assert!(!out.exists(), "something was written");
    }
}

/// An `--out-dir` that stands as something other than a folder is named for
/// what it is, before any model work: it used to say only "File exists"
/// (the folder's creation failing), leaving the user to guess. A list and a
/// sweep prepare the folder in one place, so both say the same.
#[test]
fn an_out_dir_that_is_not_a_folder_says_what_it_is() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let file = d.join("file");
    std::fs::write(&file, "keep").unwrap();
    let fifo = d.join("fifo");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let dangling = d.join("dangling");
    std::os::unix::fs::symlink(d.join("nowhere"), &dangling).unwrap();
    let rows = [
        (&file, "is a regular file, not a folder".to_string()),
        (&fifo, "is a FIFO, not a folder".to_string()),
        (&dangling, format!("is a symbolic link to {}, which does not exist, not a folder", d.join("nowhere").display())),
    ];
    for (out, needle) in &rows {
        let o = bench(&["--kv", "f16,q8_0", "--out-dir", s(out)], None);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(&format!("--out-dir: {}", out.display())) && err.contains(needle.as_str()), "{err}");
        assert!(!err.contains("File exists"), "{err}");
    }
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep");
    assert!(!d.join("nowhere").exists());
}
