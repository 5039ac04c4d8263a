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
        // Every item after the first is measured against the first, so each
        // of its KLD figures must be in its run file and its row: a figure
        // lost from both would otherwise match (null against null). The
        // first item has none, in either.
        let kld = &run["summary"]["forced"]["kld"];
        let figures = [("kld_mean", "/mean"), ("same_top1", "/same_top1"), ("kld_p99", "/p99"), ("delta_p_rms", "/stats/delta_p_rms")];
        if row["run"] == ids[0].as_str() {
            assert!(kld.is_null(), "the reference has nothing to be measured against: {kld}");
            for (cell, _) in figures {
                assert!(row[cell].is_null(), "{}: {cell} {}", row["run"], row[cell]);
            }
        } else {
            for (cell, pointer) in figures {
                let figure = kld.pointer(pointer).and_then(Value::as_f64);
                assert!(figure.is_some(), "{}: no KLD {pointer} in the run file: {kld}", row["run"]);
                assert_eq!(row[cell].as_f64(), figure, "{}: {cell}", row["run"]);
            }
        }
        assert_eq!(row["kv_k"], run["manifest"]["context"]["type_k"]);
        assert_eq!(row["rotation"], run["manifest"]["context"]["kv_rotation"]["mode"]);
        assert_eq!(row["state_bytes"], run["timings"]["context_bytes"]);
        let first = runs[0]["summary"]["matched"].as_i64().unwrap();
        if row["run"] != ids[0].as_str() {
            assert_eq!(row["delta_matched"].as_i64(), Some(t["matched"].as_i64().unwrap() - first));
            assert!(row["p_passes"].as_f64().is_some_and(|p| (0.0..=1.0).contains(&p)));
        }
    }
    assert!(rows[0]["delta_matched"].is_null(), "the reference has nothing to be measured against");

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
    let (smol, gemma, absent) = (smollm2(), gemma3(), d.join("absent.gguf"));
    // Another file of the first model's name: their run files would be one.
    let namesake = d.join("other").join(smol.file_name().unwrap());
    std::fs::create_dir_all(namesake.parent().unwrap()).unwrap();
    std::fs::write(&namesake, "not read: refused by its name").unwrap();
    let rows: &[(&[&str], &str)] = &[
        (&["--kv", "f16,,q8_0", "--out-dir", s(&out_dir)], "--kv <KV,...>': an empty item"),
        (&["--kv", "f16,q8_0,f16", "--out-dir", s(&out_dir)], "--kv: `f16` is listed twice"),
        (&["--kv-k", "f16,q8_0", "--kv-v", "f16,q8_0,q4_0", "--out-dir", s(&out_dir)], "--kv-k lists 2 items and --kv-v 3"),
        (&["--kv", "f16,q8_0", "--kv-rotation", "off,off", "--out-dir", s(&out_dir)], "--kv-rotation: `off` is listed twice"),
        (&["--kv", "f16,q8_0", "--out", s(&x), "--out-dir", s(&out_dir)], "--out with a list of 2 runs"),
        (&["--kv", "f16,q8_0", "--save-reference", s(&r), "--out-dir", s(&out_dir)], "--save-reference with a list of 2 runs"),
        (&["--kv", "f16,q8_0"], "give --out-dir DIR"),
        (&["--kv-rotation", "sideways"], "unknown variant `sideways`, expected `auto` or `off`"),
        (&["--format", "md"], "--format is for a list"),
        (&["--kv", "f16/q9_0,q8_0", "--out-dir", s(&out_dir)], "unknown variant `q9_0`"),
        // A reference that is a folder or not a reference at all is refused
        // before the list starts (the output folder is its first step).
        (&["--kv", "f16,q8_0", "--reference", s(d), "--out-dir", s(&out_dir)], "a folder, not a file"),
        (&["--kv", "f16,q8_0", "--reference", s(&garbage), "--out-dir", s(&out_dir)], "garbage.ref: not a posrecall reference file"),
        // Lists of models and of the other settings.
        (&[s(&smol), "--out-dir", s(&out_dir)], "is listed twice"),
        (&[s(&absent), "--out-dir", s(&out_dir)], "absent.gguf does not exist"),
        (&[s(d), "--out-dir", s(&out_dir)], "is a folder, not a model file"),
        (&[s(&namesake), "--out-dir", s(&out_dir)], "would write run files of one name (SmolLM2-135M-Instruct.Q4_1)"),
        (&[s(&gemma), "--build", "mine", "--out-dir", s(&out_dir)], "a build label names one model build, and the list has 2 models"),
        (&[s(&gemma), "--out", s(&x)], "--out with a list of 2 runs"),
        (&[s(&gemma)], "a list of 2 runs writes one run file each: give --out-dir DIR"),
        (&[s(&gemma), "--lengths", "2k,4k", "--out-dir", s(&out_dir)], "--lengths with a list of 2 runs"),
        (&["--ctx", "1024,1024", "--out-dir", s(&out_dir)], "--ctx: `1024` is listed twice"),
        (&["--probe", "chat,completion,chat", "--out-dir", s(&out_dir)], "--probe: `chat` is listed twice"),
        (&["--flash-attn", "on,off,on", "--out-dir", s(&out_dir)], "--flash-attn: `on` is listed twice"),
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

/// `bench A B C --kv …`: every model is asked the same questions (planned on
/// one shared range), each build of the first's vocabulary is measured
/// against the first instance, as a separate `--reference` run measures it,
/// and answers as a single run of it does; a model of another vocabulary
/// runs without divergence and the table says why, once.
#[test]
fn a_model_list_asks_every_build_the_same_and_measures_it_against_the_first() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = d.join("runs");
    let q8 = tool_test_model("quantize").unwrap();
    let models = [smollm2(), q8.clone(), gemma3()];
    let mut cmd = Command::new(bin());
    cmd.arg("bench")
        .args(&models)
        .args(["--corpus", s(&fixture("dense.js")), "--threads", "2", "--quiet"])
        .args(SMALL)
        .args(["--out-dir", s(&out), "--format", "md"])
        .env("NO_COLOR", "1")
        .env_remove("LLAMA_ATTN_ROT_DISABLE");
    let table = ok(&cmd.output().unwrap());
    let stems: Vec<String> = models.iter().map(|m| m.file_stem().unwrap().to_string_lossy().replace("__", "_")).collect();
    let ids: Vec<String> = stems.iter().map(|m| format!("{m}__q8_0-q8_0")).collect();
    let runs: Vec<Value> = ids.iter().map(|id| read(&out.join(format!("{id}.json")))).collect();
    let asked = |r: &Value| -> Vec<(String, u64)> {
        r["targets"].as_array().unwrap().iter().map(|t| (t["name"].as_str().unwrap().to_string(), t["line"].as_u64().unwrap())).collect()
    };
    assert_eq!(asked(&runs[0]).len(), 4);
    for r in &runs[1..] {
        assert_eq!(asked(r), asked(&runs[0]), "every model is asked the same questions");
        assert_eq!(r["manifest"]["corpus"]["crop"], runs[0]["manifest"]["corpus"]["crop"]);
    }
    // The requantised build: as a separate run against the first's reference.
    let reference = out.join(format!("{}.ref", ids[0]));
    let separate = d.join("separate.json");
    ok(&bench_model(&q8, &[SMALL, &["--reference", s(&reference), "--out", s(&separate)]].concat()));
    let separate = read(&separate);
    assert!(runs[1]["summary"]["forced"]["kld"]["mean"].as_f64().is_some(), "the second build is measured");
    assert_eq!(separate["summary"]["forced"]["kld"], runs[1]["summary"]["forced"]["kld"]);
    assert_eq!(answers(&separate), answers(&runs[1]));
    // Gemma's vocabulary is not SmolLM2's: no divergence, said once under the table.
    assert!(runs[2]["summary"]["forced"]["kld"].is_null() && runs[2]["manifest"]["reference"].is_null(), "{}", runs[2]["manifest"]);
    assert_eq!(table.matches("no KLD for").count(), 1, "{table}");
    assert!(
        table.contains(&format!("no KLD for {}: its vocabulary (262144 tokens) is not the first model's (49152 tokens)", ids[2])),
        "{table}"
    );
    // The table's model columns are the run files' figures.
    for (run, line) in runs.iter().zip(table.lines().filter(|l| l.starts_with("| ") && !l.starts_with("| model") && !l.contains("---"))) {
        let m = &run["manifest"]["model"];
        let bpw = m["size_bytes"].as_f64().unwrap() * 8.0 / m["n_params"].as_f64().unwrap();
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        assert_eq!(cells[1], m["build"].as_str().unwrap(), "{line}");
        assert_eq!(cells[2], m["file_type"].as_str().unwrap(), "{line}");
        assert_eq!(cells[4], format!("{bpw:.2}"), "{line}");
    }
    // Each model's layers as its published configuration gives them:
    // SmolLM2-135M 30 layers, all full attention; Gemma 3 270M 18, one in six
    // global and the others a 512-token window. The list mixes them, so the
    // table shows them (after the model's four columns).
    let layers = [(30, 30, 0, 0), (30, 30, 0, 0), (18, 3, 15, 512)];
    let rows = table.lines().filter(|l| l.starts_with("| ") && !l.starts_with("| model") && !l.contains("---"));
    for ((run, line), (total, full, swa, window)) in runs.iter().zip(rows).zip(layers) {
        let want = serde_json::json!({"total": total, "full_attention": full, "sliding_window": swa, "window": window, "recurrent": 0});
        assert_eq!(run["manifest"]["model"]["layers"], want, "{line}");
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        assert_eq!(cells[5], format!("{}/{total}", full + swa), "{line}");
        assert_eq!(cells[6], if swa == 0 { "none".to_string() } else { format!("{swa}×{window}") }, "{line}");
    }
    // The page of the three runs draws them against bits per weight: every
    // run's passes, and the divergence of the one build measured against the
    // reference (the reference has none, Gemma no reference), each dot in
    // its run's legend colour with its number beside it.
    let page = d.join("page.html");
    let files: Vec<std::path::PathBuf> = ids.iter().map(|id| out.join(format!("{id}.json"))).collect();
    ok(&Command::new(bin()).arg("report").args(&files).args(["--format", "html", "-o", s(&page)]).output().unwrap());
    let html = std::fs::read_to_string(&page).unwrap();
    let colours = crate::report::legend_colours(&html, "chart-builds-kld");
    let colour = |i: usize| colours.iter().find(|(l, _)| l.starts_with(&format!("{} ", i + 1))).map(|(_, c)| c.clone()).unwrap();
    let bpw =
        |r: &Value| r["manifest"]["model"]["size_bytes"].as_f64().unwrap() * 8.0 / r["manifest"]["model"]["n_params"].as_f64().unwrap();
    let near =
        |got: &[(f64, f64)], want: (f64, f64)| got.len() == 1 && (got[0].0 - want.0).abs() <= 2.0 && (got[0].1 - want.1).abs() <= 2.0;
    let passes = crate::report::chart_with(&html, "chart-builds-passes", |y| y);
    for (i, r) in runs.iter().enumerate() {
        let want = (passes.x.px(bpw(r)), passes.y.px(r["summary"]["passes"].as_f64().unwrap()));
        assert!(near(&passes.points[&colour(i)], want), "run {i}: {:?}, want {want:?}", passes.points);
        assert!(passes.labels.iter().any(|(t, x, _)| *t == (i + 1).to_string() && (x - want.0 - 9.0).abs() <= 2.0), "{:?}", passes.labels);
    }
    let kld = crate::report::chart_with(&html, "chart-builds-kld", f64::log10);
    assert_eq!(kld.points.len(), 1, "only the measured build has a divergence: {:?}", kld.points);
    let mean = runs[1]["summary"]["forced"]["kld"]["mean"].as_f64().unwrap();
    let want = (kld.x.px(bpw(&runs[1])), kld.y.px(mean.log10()));
    assert!(near(&kld.points[&colour(1)], want), "{:?}, want {want:?}", kld.points);
    // A reference of SmolLM2's vocabulary cannot measure Gemma: refused
    // before any run, nothing written.
    let other = d.join("other");
    let mut cmd = Command::new(bin());
    cmd.arg("bench")
        .args([smollm2(), gemma3()])
        .args(["--corpus", s(&fixture("dense.js")), "--threads", "2", "--quiet"])
        .args(SMALL)
        .args(["--reference", s(&reference), "--out-dir", s(&other)]);
    let o = cmd.output().unwrap();
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("its vocabulary (49152 tokens) is not the one of the model") && err.lines().count() == 1, "{err}");
    assert!(std::fs::read_dir(&other).map_or(true, |mut e| e.next().is_none()), "a run file was written");
}

/// Lists cross in the documented order (models slowest, then the K/V items,
/// then flash attention), each instance once, named by what varies (K
/// quantised, V f16: a quantised V cache needs flash attention).
#[test]
fn models_cross_with_kv_and_flash_attention_in_the_documented_order() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("runs");
    let q8 = tool_test_model("quantize").unwrap();
    let mut cmd = Command::new(bin());
    cmd.arg("bench")
        .args([smollm2(), q8.clone()])
        .args(["--corpus", s(&fixture("dense.js")), "--threads", "2", "--quiet"])
        .args(["--count", "2", "--lines", "4", "--crop-lines", "1:100", "--max-new-tokens", "8", "--no-forced"])
        .args(["--kv", "f16,q8_0/f16", "--flash-attn", "on,off", "--out-dir", s(&out), "--format", "jsonl"])
        .env_remove("LLAMA_ATTN_ROT_DISABLE");
    let lines = ok(&cmd.output().unwrap());
    let rows: Vec<Value> = lines.lines().map(|l| serde_json::from_str(l).expect("one JSON object per line")).collect();
    let mut want = Vec::new();
    for m in [smollm2(), q8] {
        for kv in ["f16-f16", "q8_0-f16"] {
            for fa in ["on", "off"] {
                want.push(format!("{}__{kv}-fa_{fa}", m.file_stem().unwrap().to_string_lossy()));
            }
        }
    }
    assert_eq!(rows.iter().map(|r| r["run"].as_str().unwrap().to_string()).collect::<Vec<_>>(), want);
    for (r, id) in rows.iter().zip(&want) {
        let run = read(&out.join(format!("{id}.json")));
        let c = &run["manifest"]["context"];
        assert_eq!(r["flash_attn"], c["flash_attn"], "{id}");
        assert_eq!(c["flash_attn"], if id.ends_with("fa_on") { "on" } else { "off" }, "{id}");
        assert_eq!(c["type_k"], if id.contains("q8_0-f16") { "q8_0" } else { "f16" }, "{id}");
        assert_eq!((&r["passes"], &r["matched"]), (&run["summary"]["passes"], &run["summary"]["matched"]));
    }
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 8, "each instance once");
}

/// `bench` on `model` and dense.js (the rotation variable never inherited).
fn bench_model(model: &std::path::Path, extra: &[&str]) -> Output {
    Command::new(bin())
        .arg("bench")
        .arg(model)
        .args(["--corpus", s(&fixture("dense.js")), "--threads", "2", "--quiet"])
        .args(extra)
        .env("NO_COLOR", "1")
        .env_remove("LLAMA_ATTN_ROT_DISABLE")
        .output()
        .unwrap()
}

/// `--resume` with a list keeps each finished run of the same configuration
/// in `--out-dir` and runs only the rest: a list grown by one KV type runs
/// that one, measured against the reference the first command saved, and
/// its table holds every row.
#[test]
fn a_resumed_list_keeps_its_finished_runs_and_runs_the_rest() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("runs");
    let stem = "SmolLM2-135M-Instruct.Q4_1";
    let file = |kv: &str| out.join(format!("{stem}__{kv}.json"));
    ok(&bench(&[SMALL, &["--kv", "f16,q8_0", "--out-dir", s(&out)]].concat(), None));
    let before: Vec<Vec<u8>> = ["f16-f16", "q8_0-q8_0"].iter().map(|kv| std::fs::read(file(kv)).unwrap()).collect();
    let reference = std::fs::read(out.join(format!("{stem}__f16-f16.ref"))).unwrap();
    // What a killed writer of a run file leaves beside it goes when the list
    // starts again; a hidden file of another name stays.
    let (stale, other) = (out.join(format!(".{stem}__q4_0-q4_0.json.tmp-4242-AbCdEf")), out.join(".notes.tmp-4242-AbCdEf"));
    std::fs::write(&stale, "half a run file").unwrap();
    std::fs::write(&other, "not the list's").unwrap();

    let o = bench(&[SMALL, &["--kv", "f16,q8_0,q4_0", "--out-dir", s(&out), "--resume", "--format", "json"]].concat(), None);
    let table: Value = serde_json::from_str(&ok(&o)).expect("--format json prints JSON");
    let stderr = String::from_utf8_lossy(&o.stderr);
    // -q hides the per-run lines; the files say what ran.
    assert!(stderr.is_empty(), "{stderr}");
    for (kv, bytes) in ["f16-f16", "q8_0-q8_0"].iter().zip(&before) {
        assert!(std::fs::read(file(kv)).unwrap() == *bytes, "{kv}: a finished run was run again");
    }
    assert!(std::fs::read(out.join(format!("{stem}__f16-f16.ref"))).unwrap() == reference, "the reference was written again");
    assert!(!stale.exists(), "a killed run's temporary file was left");
    assert!(other.exists(), "a file the list does not write was removed");
    let rows = table["rows"].as_array().unwrap();
    let runs: Vec<&str> = rows.iter().map(|r| r["run"].as_str().unwrap()).collect();
    assert_eq!(runs, ["f16-f16", "q8_0-q8_0", "q4_0-q4_0"].map(|kv| format!("{stem}__{kv}")).to_vec(), "every instance has its row");
    let q4 = read(&file("q4_0-q4_0"));
    assert_eq!(rows[2]["passes"], q4["summary"]["passes"]);
    assert!(q4["summary"]["forced"]["kld"]["mean"].as_f64().is_some(), "the new run is measured against the kept reference");

    // The line a kept run gets, as `matrix --resume` says it.
    let mut cmd = Command::new(bin());
    cmd.arg("bench")
        .arg(smollm2())
        .args(["--corpus", s(&fixture("dense.js")), "--threads", "2"])
        .args(SMALL)
        .args(["--kv", "f16,q8_0,q4_0", "--out-dir", s(&out), "--resume"])
        .env("NO_COLOR", "1")
        .env_remove("LLAMA_ATTN_ROT_DISABLE");
    let stdout = ok(&cmd.output().unwrap());
    for kv in ["f16-f16", "q8_0-q8_0", "q4_0-q4_0"] {
        assert!(stdout.contains(&format!("{stem}__{kv}: finished before, skipped")), "{kv}: {stdout}");
    }
}

/// The Markdown table that follows `marker` in docs/GUIDE.md: one map of
/// heading → cell per row.
fn guide_table(marker: &str) -> Vec<std::collections::HashMap<String, String>> {
    let text = std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/GUIDE.md")).unwrap();
    let at = text.find(marker).unwrap_or_else(|| panic!("docs/GUIDE.md no longer says {marker:?}"));
    let lines: Vec<&str> = text[at..].lines().skip_while(|l| !l.starts_with('|')).take_while(|l| l.starts_with('|')).collect();
    let cells = |l: &str| l.trim().trim_matches('|').split('|').map(|c| c.trim().to_string()).collect::<Vec<_>>();
    let heads = cells(lines[0]);
    lines[2..].iter().map(|l| heads.iter().cloned().zip(cells(l)).collect()).collect()
}

/// The published tables of docs/GUIDE.md ("A build A/B, measured") are
/// their run files (docs/runs/): each row's passes, matched lines, mean KLD
/// and same top-1 are the figures of the run file its model and KV types
/// name, so a table edited by hand or a run file replaced shows here.
#[test]
fn the_published_list_tables_are_their_run_files() {
    let runs = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/runs");
    let tables = [("<!-- table: build-ab f16 -->", "build-ab", 5), ("<!-- table: build-ab f16,q8_0 -->", "build-ab", 10)];
    for (marker, folder, count) in tables {
        let rows = guide_table(marker);
        assert_eq!(rows.len(), count, "{marker}");
        for row in rows {
            let stem = row["model"].trim_end_matches(".gguf");
            let file = runs.join(folder).join(format!("{stem}__{}-{}.json", row["K"], row["V"]));
            let run = read(&file);
            let (summary, kld) = (&run["summary"], &run["summary"]["forced"]["kld"]);
            assert_eq!(row["passed"], format!("{}/{}", summary["passes"], summary["count"]), "{}", file.display());
            assert_eq!(row["matched"], summary["matched"].to_string(), "{}", file.display());
            let figure = |v: &Value, places: usize| v.as_f64().map(|x| format!("{x:.places$}")).unwrap_or_default();
            assert_eq!(row["KLD mean"], figure(&kld["mean"], 4), "{}", file.display());
            assert_eq!(row["same top-1"], figure(&kld["same_top1"], 3), "{}", file.display());
        }
    }
}
