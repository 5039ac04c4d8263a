//! `bench --lengths` on the real models: one evaluation of the file serves
//! every length, each length answers exactly as a plain run of its window,
//! the outputs carry the depth × length grid, and bad ladders are refused.

use crate::common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

/// Small questions so that a ladder of three windows stays quick.
const SMALL: &[&str] = &["--count", "2", "--lines", "6", "--max-new-tokens", "24", "--threads", "2", "--quiet"];

/// Runs `bench` with the small questions. The teacher-forced pass runs
/// only where `forced`: `one_prefill_serves_every_length_and_each_answers_as_a_plain_run`
/// keeps it, and the other tests, which read answers, windows and outputs,
/// skip it to save its time.
fn bench_as(model: &Path, corpus: &Path, extra: &[&str], out: Option<&Path>, forced: bool) -> Output {
    let mut cmd = Command::new(bin());
    cmd.arg("bench").arg(model).arg("--corpus").arg(corpus).args(SMALL).args(extra);
    if !forced {
        cmd.arg("--no-forced");
    }
    if let Some(o) = out {
        cmd.arg("--out").arg(o);
    }
    cmd.env("NO_COLOR", "1").output().unwrap()
}

fn bench(model: &Path, corpus: &Path, extra: &[&str], out: Option<&Path>) -> Output {
    bench_as(model, corpus, extra, out, false)
}

fn rungs(run: &Value) -> &Vec<Value> {
    run["ladder"]["rungs"].as_array().expect("a ladder run has rungs")
}

fn u(v: &Value) -> usize {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}")) as usize
}

/// The targets a ladder run answered at `length`.
fn at_length(run: &Value, length: usize) -> Vec<&Value> {
    run["targets"].as_array().unwrap().iter().filter(|t| u(&t["length"]) == length).collect()
}

/// Checks the shape every ladder has, from the run file alone: the windows
/// share their first line and grow, each prefix within its length, the
/// evaluation resumed where the previous window ended (so the file was
/// evaluated once), and every target lies inside its window.
fn assert_one_growing_prefix(run: &Value) {
    let rs = rungs(run);
    assert!(rs.len() >= 2, "{rs:?}");
    let first = &rs[0]["crop"]["first_line"];
    let mut evaluated = 0;
    let mut previous: Option<&Value> = None;
    for r in rs {
        let (length, tokens) = (u(&r["length"]), u(&r["prefix_tokens"]));
        assert_eq!(&r["crop"]["first_line"], first);
        assert!(tokens <= length, "window of {tokens} tokens at length {length}");
        if let Some(p) = previous {
            assert!(u(&r["crop"]["last_line"]) > u(&p["crop"]["last_line"]), "windows must grow: {p} then {r}");
            assert!(tokens > u(&p["prefix_tokens"]));
            // The shared prefix is kept: this window's evaluation began
            // within the previous one, never from the start.
            assert!(u(&r["resumed_at"]) > 0 && u(&r["resumed_at"]) <= u(&p["prefix_tokens"]), "{r}");
        } else {
            assert_eq!(u(&r["resumed_at"]), 0);
        }
        assert_eq!(r["prefix_source"], "prefill");
        assert_eq!(u(&r["resumed_at"]) + u(&r["prefill_tokens"]), tokens, "{r}");
        evaluated += u(&r["prefill_tokens"]);
        let (lo, hi) = (u(&r["crop"]["first_line"]), u(&r["crop"]["last_line"]));
        let ts = at_length(run, length);
        assert_eq!(ts.len(), 2, "two targets at length {length}");
        assert_eq!(u(&r["summary"]["count"]), 2);
        for t in ts {
            let line = u(&t["line"]);
            assert!(lo <= line && line + 6 <= hi, "target at line {line} outside lines {lo}..{hi}");
            let depth = t["depth"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&depth));
        }
        previous = Some(r);
    }
    // One prefill: the tokens evaluated are the longest window's prefix,
    // plus, per shorter window, only its tokens after the last n_batch (512)
    // boundary it shares with the next (docs/METHOD.md §8).
    let longest = u(&rs.last().unwrap()["prefix_tokens"]);
    assert_eq!(u(&run["timings"]["prefill_tokens"]), evaluated);
    for w in rs.windows(2) {
        let resumed = u(&w[1]["resumed_at"]);
        assert_eq!(resumed % 512, 0, "{}", w[1]);
        let again = u(&w[0]["prefix_tokens"]) - resumed;
        assert!(again < 512, "{again} tokens evaluated again after a window: {} then {}", w[0], w[1]);
    }
    assert!(evaluated >= longest && evaluated < longest + 512 * rs.len(), "{evaluated} evaluated, longest {longest}");
    // The summed prefix of separate runs is what the ladder saves.
    let separate: usize = rs.iter().map(|r| u(&r["prefix_tokens"])).sum();
    assert!(separate > evaluated);
}

/// The effective length recomputed from the rungs' pass rates: the longest
/// length such that it and every shorter one pass at `at` or more.
fn effective_length(run: &Value, at: f64) -> Option<usize> {
    let mut best = None;
    for r in rungs(run) {
        let passes = u(&r["summary"]["passes"]) as f64;
        let count = u(&r["summary"]["count"]) as f64;
        if passes / count < at {
            break;
        }
        best = Some(u(&r["length"]));
    }
    best
}

/// A plain run of one window (its lines kept, a fresh context) with the
/// same options.
fn plain_window(model: &Path, corpus: &Path, r: &Value, extra: &[&str], out: &Path, forced: bool) -> Value {
    let lines = format!("{}:{}", r["crop"]["first_line"], r["crop"]["last_line"]);
    ok(&bench_as(model, corpus, &[&["--crop-lines", &lines], extra].concat(), Some(out), forced));
    read(out)
}

fn assert_same_answers(ladder: &[&Value], plain: &Value, what: &str) {
    let plain = plain["targets"].as_array().unwrap();
    assert_eq!(ladder.len(), plain.len(), "{what}");
    for (a, b) in ladder.iter().zip(plain) {
        assert_eq!(a["name"], b["name"], "{what}: the same targets");
        assert_eq!(a["token_offset"], b["token_offset"], "{what}");
        assert_eq!(a["response"], b["response"], "{what}: {} answers differently", a["name"]);
        assert_eq!(a["matched"], b["matched"], "{what}");
    }
}

#[test]
fn one_prefill_serves_every_length_and_each_answers_as_a_plain_run() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let run_path = dir.path().join("ladder.json");
    let corpus = fixture("dense.js");
    // `--pass 1`: SmolLM2 matches a line or two of these answers and no
    // more, so one matched line passes and the pass rate falls along the
    // ladder (measured: 1 of 2 at 640 tokens, then 0 of 2), which gives an
    // effective length that cuts the ladder short.
    let o = bench_as(&smollm2(), &corpus, &["--lengths", "640,1280,1920", "--kv", "f16", "--pass", "1"], Some(&run_path), true);
    ok(&o);
    let run = read(&run_path);
    assert_one_growing_prefix(&run);
    assert_eq!(run["manifest"]["corpus"]["prefix_tokens"], rungs(&run).last().unwrap()["prefix_tokens"]);
    assert_eq!(run["ladder"]["effective_at"].as_f64(), Some(0.5));
    for r in rungs(&run) {
        let passed = at_length(&run, u(&r["length"])).iter().filter(|t| u(&t["matched"]) >= 1).count();
        assert_eq!(u(&r["summary"]["passes"]), passed, "one matched line passes: {r}");
    }
    // The first rung passes exactly half: a comparison that left the
    // threshold itself out (> for ≥) would give no effective length.
    let first = &rungs(&run)[0]["summary"];
    assert_eq!(u(&first["passes"]) * 2, u(&first["count"]), "the first rung should sit at the threshold: {first}");
    let eff = run["ladder"]["effective_length"].as_u64().map(|n| n as usize);
    assert_eq!(eff, effective_length(&run, 0.5));
    let longest = u(&rungs(&run).last().unwrap()["length"]);
    assert!(eff.is_some_and(|e| e < longest), "the effective length should cut this ladder short: {eff:?} of {longest}");
    let label = match eff.unwrap() {
        e if e % 1024 == 0 => format!("{}k", e / 1024),
        e => e.to_string(),
    };
    let page = dir.path().join("ladder.html");
    ok(&posrecall(&["report", s(&run_path), "--format", "html", "-o", s(&page)]));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains(&format!("effective length (pass rate ≥ 0.50 at every length up to it) {label}<")),
        "no effective length {label} in the report"
    );

    // Each window answers exactly as a plain run of that window does.
    for (i, r) in rungs(&run).iter().enumerate() {
        let plain = plain_window(&smollm2(), &corpus, r, &["--kv", "f16", "--pass", "1"], &dir.path().join(format!("plain{i}.json")), true);
        assert_eq!(plain["manifest"]["corpus"]["prefix_tokens"], r["prefix_tokens"], "window {i}");
        let ladder = at_length(&run, u(&r["length"]));
        assert_same_answers(&ladder, &plain, &format!("window {i}"));
        // The forced pass runs at every window, on the text a plain run forces.
        for (a, b) in ladder.iter().zip(plain["targets"].as_array().unwrap()) {
            assert!(a["forced"]["tokens"].as_u64().is_some_and(|n| n > 0), "window {i}: {}", a["forced"]);
            assert_eq!(a["forced"]["tokens"], b["forced"]["tokens"], "window {i}: {}", a["name"]);
        }
    }
}

#[test]
fn terminal_grid_html_heat_map_and_compare_per_length() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let corpus = fixture("dense.js");
    // Two KV types side by side; f32 rather than a quantised type because a
    // CPU evaluates it fastest and only the side-by-side outputs are checked.
    let (f16, f32) = (dir.path().join("f16.json"), dir.path().join("f32.json"));
    let mut cmd = Command::new(bin());
    cmd.arg("bench").arg(smollm2()).arg("--corpus").arg(&corpus);
    cmd.args(&SMALL[..SMALL.len() - 1]).args(["--no-forced", "--lengths", "1k,2k", "--kv", "f16", "--out"]).arg(&f16);
    let o = cmd.env("NO_COLOR", "1").output().unwrap();
    let stdout = ok(&o);
    assert!(stdout.contains("== length 1k: lines 1.."), "{stdout}");
    assert!(stdout.contains("== length 2k: lines 1.."), "{stdout}");
    assert!(stdout.contains("recall by depth and length"), "{stdout}");
    for row in ["0.00-0.25", "0.75-1.00", "all", "pass rate", "95% CI"] {
        assert!(stdout.lines().any(|l| l.trim_start().starts_with(row)), "no `{row}` row in:\n{stdout}");
    }
    ok(&bench(&smollm2(), &corpus, &["--lengths", "1k,2k", "--kv", "f32"], Some(&f32)));
    // `report` prints the grid `bench` printed at its end, from the file.
    let grid = &stdout[stdout.find("recall by depth and length").unwrap()..];
    let report = ok(&posrecall_with(&["report", s(&f16)], &[("NO_COLOR", "1")]));
    assert!(report.contains(&format!("== f16 ==\n{grid}")), "report:\n{report}\nbench:\n{grid}");

    let page = dir.path().join("both.html");
    ok(&posrecall(&["report", s(&f16), s(&f32), "--format", "html", "-o", s(&page)]));
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("id=\"heatmap\""), "no heat map");
    assert!(html.contains("id=\"chart-lengths\""), "no pass-rate chart");
    // Its x axis is labelled at the ladder's lengths: the 1k window's prefix
    // holds a few tokens under 1,024, and the axis must not open a doubling
    // lower, at 512.
    let chart = html.split("id=\"chart-lengths\"").nth(1).unwrap().split("</div>").next().unwrap();
    let ticks: Vec<&str> = chart.split("</text>").filter_map(|t| t.rsplit('>').next()).map(str::trim).filter(|t| !t.is_empty()).collect();
    assert!(ticks.contains(&"1k") && ticks.contains(&"2k"), "{ticks:?}");
    assert!(!ticks.contains(&"512"), "the length axis opens at 512: {ticks:?}");
    // One heat map per run, each with a cell per length and depth quarter.
    assert_eq!(html.matches("<figure class=\"heatmap\">").count(), 2);

    let cmp = ok(&posrecall(&["compare", s(&f16), s(&f32)]));
    let (targets, per_length) = cmp.split_once("per length").unwrap_or_else(|| panic!("no per-length table:\n{cmp}"));
    for label in ["1k", "2k"] {
        assert!(per_length.lines().any(|l| l.trim_start().starts_with(label)), "no {label} row in compare:\n{cmp}");
        // The per-target table names each row's window: a function may be
        // asked at both lengths.
        assert!(targets.lines().any(|l| l.trim_start().starts_with(label)), "no {label} target row:\n{cmp}");
    }
    assert!(targets.lines().any(|l| l.trim_start().starts_with("length  target")), "{cmp}");

    // A ladder stopped short (the f32 one run to 1k alone, on the f16 run's
    // 1k window) is compared at the length both have, as the full ladders
    // compare there, with a note naming what was left out.
    let f16_run = read(&f16);
    let one = &rungs(&f16_run)[0]["crop"];
    let range = format!("{}:{}", u(&one["first_line"]), u(&one["last_line"]));
    let short = dir.path().join("f32-1k.json");
    ok(&bench(&smollm2(), &corpus, &["--crop-lines", &range, "--lengths", "1k", "--kv", "f32"], Some(&short)));
    let json = |b: &Path| -> Value { serde_json::from_str(&ok(&posrecall(&["compare", s(&f16), s(b), "--json"]))).unwrap() };
    let (mut cut, mut full) = (json(&short), json(&f32));
    // The same but for B's file name.
    for c in [&mut cut, &mut full] {
        c["per_length"][0]["comparison"]["b"]["file"] = Value::Null;
    }
    assert_eq!(cut["per_length"].as_array().unwrap().len(), 1, "{cut}");
    assert_eq!(cut["per_length"][0], full["per_length"][0], "the 1k comparison differs from the full ladders'");
    assert!(cut["notes"][0].as_str().unwrap().contains("left out: A's 2k"), "{}", cut["notes"]);
}

#[test]
fn the_prefix_cache_keeps_each_window() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let corpus = fixture("dense.js");
    let args = ["--lengths", "1k,2k", "--kv", "f16", "--prefix-cache", s(&cache)];
    ok(&bench(&smollm2(), &corpus, &args, Some(&a)));
    ok(&bench(&smollm2(), &corpus, &args, Some(&b)));
    let (ra, rb) = (read(&a), read(&b));
    for r in rungs(&rb) {
        assert_eq!(r["prefix_source"], "cache", "{r}");
        assert_eq!(u(&r["prefill_tokens"]), 0);
    }
    assert_eq!(u(&rb["timings"]["prefill_tokens"]), 0);
    assert_eq!(ra["targets"], rb["targets"], "answers from the cached windows differ");
}

#[test]
fn sliding_window_and_hybrid_models_rewind_to_each_window() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let corpus = fixture("dense.js");
    // Gemma 3 keeps only a window of its sliding-window layers' cells, and
    // the hybrids' recurrent state cannot be cut back by removing cells:
    // both must come back to each window's end exactly.
    let mut models = vec![("gemma3".to_string(), gemma3())];
    models.extend(tiny_hybrids().into_iter().take(1));
    for (name, model) in models {
        let out = dir.path().join(format!("{name}.json"));
        ok(&bench(&model, &corpus, &["--lengths", "1k,2k", "--kv", "f16"], Some(&out)));
        let run = read(&out);
        assert_one_growing_prefix(&run);
        // Every window, the longer ones included (the rewind to a window's
        // end happens between windows).
        for (i, r) in rungs(&run).iter().enumerate() {
            let plain = plain_window(&model, &corpus, r, &["--kv", "f16"], &dir.path().join(format!("{name}-plain{i}.json")), false);
            assert_same_answers(&at_length(&run, u(&r["length"])), &plain, &format!("{name} window {i}"));
        }
    }
}

/// `--lengths auto` at the default KV type (q8_0): lengths double from 1K
/// up to what fits, the last one the longest window; with `--effective-at 0` every length counts, so
/// the effective length is the longest, as the test recomputes it.
#[test]
fn auto_lengths_double_and_a_threshold_gives_an_effective_length() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("auto.json");
    ok(&bench(&smollm2(), &fixture("dense.js"), &["--lengths", "auto", "--effective-at", "0"], Some(&out)));
    let run = read(&out);
    assert_eq!(run["manifest"]["context"]["type_k"], "q8_0", "{}", run["manifest"]["context"]);
    let lengths: Vec<usize> = rungs(&run).iter().map(|r| u(&r["length"])).collect();
    assert!(lengths.len() >= 2, "{lengths:?}");
    // Doubling from 1K, then what fits (here the whole file, 2,486 tokens).
    let (top, below) = lengths.split_last().unwrap();
    for (i, &l) in below.iter().enumerate() {
        assert_eq!(l, 1024 << i, "auto doubles from 1K: {lengths:?}");
    }
    assert!(*top > below[below.len() - 1] && *top <= 2 * below[below.len() - 1], "{lengths:?}");
    assert_eq!(*top, u(&run["manifest"]["corpus"]["prefix_tokens"]), "the top length is the whole window");
    assert_one_growing_prefix(&run);
    // A rung under the default 0.5: --effective-at 0 ignored would cut the
    // effective length there.
    assert!(effective_length(&run, 0.5) != Some(*top), "every rung passes at 0.5 or more: 0 and the default would agree");
    let eff = run["ladder"]["effective_length"].as_u64().map(|n| n as usize);
    assert_eq!(eff, Some(*lengths.last().unwrap()));
    assert_eq!(eff, effective_length(&run, 0.0));
}

#[test]
fn the_ladder_stops_where_the_corpus_or_the_context_ends_and_says_so() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    // dense.js's first 150 lines (1,221 tokens): a corpus that ends soon
    // after the first window keeps this test's two prefills short.
    let corpus = dir.path().join("short.js");
    let text = std::fs::read_to_string(fixture("dense.js")).unwrap();
    std::fs::write(&corpus, text.lines().take(150).map(|l| format!("{l}\n")).collect::<String>()).unwrap();
    let out = dir.path().join("end.json");
    let o = bench(&smollm2(), &corpus, &["--lengths", "1k,32k,64k", "--kv", "f16"], Some(&out));
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("the end of the corpus"), "{err}");
    assert!(err.contains("64k dropped"), "{err}");
    let run = read(&out);
    let rs = rungs(&run);
    assert_eq!(rs.len(), 2);
    assert_eq!(u(&rs[1]["crop"]["last_line"]), std::fs::read_to_string(&corpus).unwrap().lines().count());
    assert!(run["ladder"]["stopped"].as_str().unwrap().contains("the end of the corpus"));

    // A context smaller than the file: the ladder stops at what fits it.
    let out = dir.path().join("ctx.json");
    let o = bench(&smollm2(), &corpus, &["--lengths", "768,4k", "--ctx", "1024", "--kv", "f16"], Some(&out));
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("what fits the context of 1024 tokens"), "{err}");
    let run = read(&out);
    let rs = rungs(&run);
    assert_eq!(rs.len(), 2, "{rs:?}");
    assert!(u(&rs[1]["prefix_tokens"]) < 1024 && u(&rs[1]["prefix_tokens"]) > u(&rs[0]["prefix_tokens"]));
    assert_eq!(u(&run["manifest"]["context"]["n_ctx"]), 1024);

    // Lines kept by hand: the note names them, not the context.
    let out = dir.path().join("crop.json");
    let o = bench(&smollm2(), &corpus, &["--lengths", "768,64k", "--crop-lines", "1:120", "--kv", "f16"], Some(&out));
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("(the end of the kept lines 1..120)") && !err.contains("what fits the context"), "{err}");
}

#[test]
fn bad_ladders_are_refused_in_one_line() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let corpus = fixture("dense.js");
    let out = dir.path().join("x.json");
    for (args, needle) in [
        (vec!["--lengths", "2k,2k"], "given twice"),
        (vec!["--lengths", "32"], "between 64"),
        (vec!["--lengths", "4q"], "not a length in tokens"),
        (vec!["--lengths", "1k,,2k"], "one of them is empty"),
        (vec!["--lengths", "1k", "--effective-at", "1.5"], "--effective-at 1.5: must be between 0 and 1"),
        (vec!["--effective-at", "0.5"], "--lengths"),
        (vec!["--lengths", "1k,2k", "--closed-book"], "--closed-book"),
    ] {
        let o = bench(&smollm2(), &corpus, &args, Some(&out));
        assert_clean_failure(&o, dir.path(), needle);
    }

    // Too short a first window: the error names the shortest length that
    // holds COUNT targets, and that length works.
    let o = bench(&smollm2(), &corpus, &["--lengths", "128,2k"], Some(&out));
    assert_clean_failure(&o, dir.path(), "the shortest length that holds 2 is");
    let err = String::from_utf8_lossy(&o.stderr);
    let shortest: usize = err
        .split("the shortest length that holds 2 is ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no length in: {err}"));
    assert!(shortest > 128, "{err}");
    let o = bench(&smollm2(), &corpus, &["--lengths", &format!("{shortest},2k"), "--kv", "f16"], Some(&out));
    ok(&o);
    let run = read(&out);
    assert_eq!(u(&rungs(&run)[0]["length"]), shortest);
    assert_eq!(at_length(&run, shortest).len(), 2);
}

#[test]
fn matrix_runs_a_ladder_from_params_lengths() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let sweep = dir.path().join("models.toml");
    let runs = dir.path().join("runs");
    std::fs::write(
        &sweep,
        format!(
            "[corpus]\npath = {:?}\n\n[params]\ncount = 2\nlines = 6\nmax_new_tokens = 24\nthreads = 2\nlengths = \"1k,2k\"\neffective_at = 0.25\n\n\
             [[model]]\nname = \"smol\"\npath = {:?}\nkv = [\"f16\"]\n",
            fixture("dense.js").to_str().unwrap(),
            smollm2().to_str().unwrap()
        ),
    )
    .unwrap();
    ok(&posrecall(&["matrix", s(&sweep), "--out-dir", s(&runs), "--quiet"]));
    let files: Vec<_> =
        std::fs::read_dir(&runs).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|e| e == "json")).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let run = read(&files[0]);
    assert_eq!(run["ladder"]["effective_at"].as_f64(), Some(0.25));
    assert_eq!(rungs(&run).iter().map(|r| u(&r["length"])).collect::<Vec<_>>(), [1024, 2048]);
    assert_one_growing_prefix(&run);
}
