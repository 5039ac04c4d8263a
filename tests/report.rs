//! `posrecall report` (and `bench --html`) on real run files: two bench runs
//! of SmolLM2 on the dense fixture (f16 and q8_0 KV cache) and one `score`
//! run with a different `--lines`, made once per test binary.

mod common;

use common::*;
use posrecall::run::RunFile;
use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The run files every test reads.
struct Runs {
    dir: PathBuf,
    /// bench, `--kv f16`, also written with `--html A.html`.
    a: PathBuf,
    /// bench, `--kv q8_0`.
    b: PathBuf,
    /// score, `--lines 6` (not comparable with A and B).
    c: PathBuf,
    /// The targets file C was scored from (not a run file).
    targets: PathBuf,
}

static RUNS: OnceLock<Runs> = OnceLock::new();

fn runs() -> &'static Runs {
    RUNS.get_or_init(|| {
        let _g = serial();
        // A fixed folder under Cargo's scratch space for integration tests,
        // remade on every run of this binary.
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("report-runs");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("A.json"), dir.join("B.json"));
        bench(&a, "f16", Some(&dir.join("A.html")));
        bench(&b, "q8_0", None);

        // A run scored from answers made elsewhere: the first half of each expected window.
        let targets = dir.join("targets6.json");
        let o = Command::new(bin())
            .arg("targets")
            .arg(fixture("dense.js"))
            .args([
                "--crop-lines",
                "1:150",
                "--count",
                "2",
                "--lines",
                "6",
                "--json",
            ])
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "targets: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        std::fs::write(&targets, &o.stdout).unwrap();
        let t: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let answers: String = t["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let lines: Vec<&str> = t["expected"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .take(3)
                    .map(|l| l.as_str().unwrap())
                    .collect();
                format!(
                    "{}\n",
                    serde_json::json!({"name": t["name"], "response": lines.join("\n")})
                )
            })
            .collect();
        let responses = dir.join("responses6.jsonl");
        std::fs::write(&responses, answers).unwrap();
        let c = dir.join("C.json");
        let o = Command::new(bin())
            .arg("score")
            .arg(&targets)
            .arg(&responses)
            .arg("--out")
            .arg(&c)
            .arg("--quiet")
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "score: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        Runs {
            dir,
            a,
            b,
            c,
            targets,
        }
    })
}

fn bench(out: &Path, kv: &str, html: Option<&Path>) {
    let mut cmd = Command::new(bin());
    cmd.arg("bench")
        .arg(smollm2())
        .arg("--corpus")
        .arg(fixture("dense.js"));
    cmd.args([
        "--count",
        "4",
        "--lines",
        "8",
        "--crop-lines",
        "1:150",
        "--max-new-tokens",
        "40",
    ]);
    cmd.args(["--threads", "2", "--quiet", "--kv", kv])
        .arg("--out")
        .arg(out);
    if let Some(h) = html {
        cmd.arg("--html").arg(h);
    }
    let o = cmd.env("NO_COLOR", "1").output().unwrap();
    assert!(
        o.status.success(),
        "bench failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

fn report<S: AsRef<OsStr>>(args: &[S]) -> Output {
    Command::new(bin())
        .arg("report")
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// Runs `report` and returns its stdout, failing on a non-zero exit.
fn report_ok<S: AsRef<OsStr>>(args: &[S]) -> String {
    let o = report(args);
    assert!(
        o.status.success(),
        "report failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

fn load(p: &Path) -> RunFile {
    RunFile::load(p).unwrap()
}

fn s(p: &Path) -> &OsStr {
    p.as_os_str()
}

#[test]
fn html_shows_every_line_of_every_target_offline() {
    let r = runs();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.html");
    let o = report(&[
        s(&r.a),
        s(&r.b),
        OsStr::new("--format"),
        OsStr::new("html"),
        OsStr::new("-o"),
        s(&out),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stdout.is_empty(), "-o writes the file, not stdout");
    let html = std::fs::read_to_string(&out).unwrap();

    for (i, path) in [&r.a, &r.b].into_iter().enumerate() {
        let run = load(path);
        assert_eq!(run.targets.len(), 4);
        for t in &run.targets {
            assert!(html.contains(&t.name), "{} not in the page", t.name);
            // The diff container of this run and target, up to its end.
            let open = format!(
                "<pre class=\"diff\" data-run=\"{i}\" data-target=\"{}\">",
                t.name
            );
            assert_eq!(html.matches(&open).count(), 1, "{open}");
            let body = &html[html.find(&open).unwrap() + open.len()..];
            let body = &body[..body.find("</pre>").unwrap()];
            let count = |class: &str| body.matches(&format!("class=\"l l-{class}\"")).count();
            assert_eq!(count("matched"), t.matched, "run {i} {} matched", t.name);
            assert_eq!(count("missing"), t.missing, "run {i} {} missing", t.name);
            assert_eq!(
                count("hallucinated"),
                t.hallucinated,
                "run {i} {} hallucinated",
                t.name
            );
            assert_eq!(count("extra"), t.extra, "run {i} {} extra", t.name);
            assert_eq!(body.matches("class=\"l l-").count(), t.lines.len());
            // Collapsible per target.
            assert!(html.contains("<details"));
        }
    }
    // The legend names the four classes.
    for class in ["matched", "missing", "hallucinated", "extra"] {
        assert!(html.contains(&format!("k-{class}")), "legend lacks {class}");
    }

    // Self-contained: no script, no stylesheet link, no remote src/href.
    assert!(html.contains("<svg"), "no chart");
    assert!(html.contains("<table"), "no table");
    let lower = html.to_ascii_lowercase();
    assert!(!lower.contains("<script"), "the page needs no script");
    assert!(!lower.contains("<link"), "the page links an asset");
    for attr in ["src=", "href="] {
        for (at, _) in lower.match_indices(attr) {
            let value = lower[at + attr.len()..].trim_start_matches(['"', '\'']);
            assert!(
                !(value.starts_with("http:")
                    || value.starts_with("https:")
                    || value.starts_with("//")),
                "external reference: {}",
                &html[at..(at + 80).min(html.len())]
            );
        }
    }
    assert!(
        !lower.contains("@import") && !lower.contains("url("),
        "CSS loads something"
    );

    // bench --html wrote the same page for its single run as report does.
    let single = report_ok(&[s(&r.a), OsStr::new("--format"), OsStr::new("html")]);
    assert_eq!(
        std::fs::read_to_string(r.dir.join("A.html")).unwrap(),
        single
    );
}

#[test]
fn csv_parses_back_to_the_run_files() {
    let r = runs();
    let text = report_ok(&[
        s(&r.a),
        s(&r.b),
        s(&r.a),
        OsStr::new("--format"),
        OsStr::new("csv"),
    ]);
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let rows: Vec<HashMap<String, String>> = reader.deserialize().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 3, "one row per run, in the order given");
    for (row, path) in rows.iter().zip([&r.a, &r.b, &r.a]) {
        let run = load(path);
        let t = &run.summary.total;
        let num = |k: &str| {
            row[k]
                .parse::<usize>()
                .unwrap_or_else(|_| panic!("{k}: {}", row[k]))
        };
        assert_eq!(num("passes"), t.passes);
        assert_eq!(num("count"), t.count);
        assert_eq!(num("matched"), t.matched);
        assert_eq!(num("missing"), t.missing);
        assert_eq!(num("truncated"), t.truncated);
        assert_eq!(num("hallucinated"), t.hallucinated);
        assert_eq!(num("extra"), t.extra);
        let model = run.manifest.model.as_ref().unwrap();
        assert_eq!(row["model"], model.name.clone().unwrap());
        assert_eq!(row["build"], model.build);
        assert_eq!(row["quant"], "Q4_1");
        let ctx = run.manifest.context.as_ref().unwrap();
        assert_eq!(row["kv_k"], ctx.type_k.as_str());
        assert_eq!(row["kv_v"], ctx.type_v.as_str());
        let tm = run.timings.as_ref().unwrap();
        let speed: f64 = row["prefill_tok_s"].parse().unwrap();
        let expect = tm.prefill_tokens as f64 / tm.prefill_ms * 1000.0;
        assert!(
            (speed - expect).abs() <= 1e-9 * expect,
            "{speed} vs {expect}"
        );
        // The teacher-forced means, as in summary.forced.
        let forced = run
            .summary
            .forced
            .as_ref()
            .expect("bench runs have forced metrics");
        for (k, want) in [
            ("top1_share", forced.top1_share),
            ("mean_logprob", forced.mean_logprob),
            ("lines_exact_share", forced.lines_exact_share),
        ] {
            let got: f64 = row[k].parse().unwrap_or_else(|_| panic!("{k}: {}", row[k]));
            assert!((got - want).abs() <= 1e-12, "{k}: {got} vs {want}");
        }
    }
    assert_eq!(rows[0]["kv_k"], "f16");
    assert_eq!(rows[1]["kv_k"], "q8_0");

    // A score run has no model, context or timings: blank fields, model "external (...)".
    let text = report_ok(&[s(&r.c), OsStr::new("--format"), OsStr::new("csv")]);
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let rows: Vec<HashMap<String, String>> = reader.deserialize().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["model"], "external (dense.js)");
    assert!(load(&r.c).summary.forced.is_none());
    for k in [
        "build",
        "quant",
        "kv_k",
        "kv_v",
        "prefill_tok_s",
        "top1_share",
        "mean_logprob",
        "lines_exact_share",
    ] {
        assert_eq!(rows[0][k], "", "{k}");
    }
    // One header row, the same columns with and without forced metrics.
    let header = |text: &str| text.lines().next().unwrap().to_string();
    assert_eq!(
        header(&text),
        header(&report_ok(&[
            s(&r.a),
            OsStr::new("--format"),
            OsStr::new("csv")
        ]))
    );
    assert_eq!(
        rows[0]["matched"].parse::<usize>().unwrap(),
        load(&r.c).summary.total.matched
    );
}

/// The rows of the first Markdown table in `md`.
fn first_md_table(md: &str) -> Vec<&str> {
    md.lines()
        .skip_while(|l| !l.starts_with('|'))
        .take_while(|l| l.starts_with('|'))
        .collect()
}

#[test]
fn markdown_has_one_row_per_run() {
    let r = runs();
    for inputs in [vec![&r.a], vec![&r.a, &r.b], vec![&r.b, &r.a, &r.b]] {
        let mut args: Vec<&OsStr> = inputs.iter().map(|p| s(p)).collect();
        args.extend([OsStr::new("--format"), OsStr::new("md")]);
        let md = report_ok(&args);
        let table = first_md_table(&md);
        assert_eq!(
            table.len(),
            2 + inputs.len(),
            "header, rule, one row per run:\n{md}"
        );
        assert!(table[1].starts_with("|---"), "{md}");
        for (row, path) in table[2..].iter().zip(&inputs) {
            let run = load(path);
            let t = &run.summary.total;
            assert!(
                row.contains(&format!("| {}/{} |", t.passes, t.count)),
                "{row}"
            );
            assert!(
                row.contains(run.manifest.context.as_ref().unwrap().type_k.as_str()),
                "{row}"
            );
        }
        assert_eq!(md.contains("### Per target"), inputs.len() > 1, "{md}");
    }
}

#[test]
fn a_folder_reports_like_its_files_in_name_order() {
    let r = runs();
    let dir = tempfile::tempdir().unwrap();
    let runs_dir = dir.path().join("runs");
    std::fs::create_dir(&runs_dir).unwrap();
    // Written in reverse order; the folder is read by file name.
    std::fs::copy(&r.b, runs_dir.join("B.json")).unwrap();
    std::fs::copy(&r.a, runs_dir.join("A.json")).unwrap();
    // Not run files: skipped.
    std::fs::write(runs_dir.join("notes.json"), "{\"hello\": 1}").unwrap();
    std::fs::write(runs_dir.join("README.txt"), "not json").unwrap();
    std::fs::copy(&r.targets, runs_dir.join("targets.json")).unwrap();
    for format in ["table", "md", "csv", "json", "html"] {
        let from_dir = report_ok(&[s(&runs_dir), OsStr::new("--format"), OsStr::new(format)]);
        let from_files = report_ok(&[
            s(&runs_dir.join("A.json")),
            s(&runs_dir.join("B.json")),
            OsStr::new("--format"),
            OsStr::new(format),
        ]);
        assert_eq!(from_dir, from_files, "--format {format}");
    }
    let csv = report_ok(&[s(&runs_dir), OsStr::new("--format"), OsStr::new("csv")]);
    let labels: Vec<&str> = csv
        .lines()
        .skip(1)
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert_eq!(labels, ["A", "B"]);
    // --diff too, and a folder mixed with a file.
    let mixed = report_ok(&[s(&runs_dir), s(&r.a), OsStr::new("--diff")]);
    let headings = mixed
        .lines()
        .filter(|l| l.starts_with("== ") && l.ends_with(" =="))
        .count();
    assert_eq!(headings, 3, "{mixed}");
}

#[test]
fn two_runs_get_the_per_target_grid_and_quarters() {
    let r = runs();
    let (ra, rb) = (load(&r.a), load(&r.b));
    let table = report_ok(&[s(&r.a), s(&r.b)]);
    assert!(table.contains("Per target, by depth"), "{table}");
    assert!(table.contains("Pass rate by depth quarter"), "{table}");
    let mark = |t: &posrecall::run::TargetResult| {
        let f = t.forced.as_ref().expect("bench runs have forced metrics");
        format!(
            "{} {} · {:.2}",
            t.matched,
            if t.pass { "✓" } else { "✗" },
            f.top1_share
        )
    };
    for (ta, tb) in ra.targets.iter().zip(&rb.targets) {
        let line = table
            .lines()
            .find(|l| l.starts_with(&format!("{} ", ta.name)))
            .unwrap_or_else(|| panic!("no grid row for {}:\n{table}", ta.name));
        let cells: Vec<&str> = line
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(cells.len(), 5, "{line}");
        assert_eq!(cells[0], ta.name);
        assert_eq!(cells[1], ta.line.to_string());
        assert_eq!(cells[3], mark(ta), "{line}");
        assert_eq!(cells[4], mark(tb), "{line}");
    }
    // Grid rows by depth.
    let positions: Vec<usize> = {
        let mut by_depth = ra.targets.clone();
        by_depth.sort_by(|x, y| x.depth.total_cmp(&y.depth));
        by_depth
            .iter()
            .map(|t| table.find(&format!("\n{} ", t.name)).unwrap())
            .collect()
    };
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "grid not by depth"
    );
    // Quarter pass rates from summary.by_quarter.
    for (q, (qa, qb)) in ra
        .summary
        .by_quarter
        .iter()
        .zip(&rb.summary.by_quarter)
        .enumerate()
    {
        let label = format!("{:.2}-{:.2}", q as f64 / 4.0, (q + 1) as f64 / 4.0);
        let line = table.lines().find(|l| l.starts_with(&label)).unwrap();
        for t in [qa, qb] {
            if t.count > 0 {
                assert!(
                    line.contains(&format!("{}/{}", t.passes, t.count)),
                    "{line}"
                );
            }
        }
    }
    // The same in Markdown; one run has none.
    let md = report_ok(&[s(&r.a), s(&r.b), OsStr::new("--format"), OsStr::new("md")]);
    for t in &ra.targets {
        assert!(
            md.lines()
                .any(|l| l.starts_with(&format!("| {} |", t.name))),
            "{md}"
        );
    }
    let one = report_ok(&[s(&r.a)]);
    assert!(!one.contains("Per target"), "{one}");
}

#[test]
fn diff_shows_every_target_of_every_run() {
    let r = runs();
    let out = report_ok(&[s(&r.a), s(&r.b), OsStr::new("--diff")]);
    for (label, path) in [("A", &r.a), ("B", &r.b)] {
        let run = load(path);
        let section = &out[out.find(&format!("== {label} ==")).expect(label)..];
        for t in &run.targets {
            let diff =
                posrecall::report::terminal::target_diff(t, run.manifest.params.lines, false);
            assert!(section.contains(&diff), "{label}: {} diff missing", t.name);
        }
    }
    // The aggregate still follows.
    assert!(out.contains("prefill tok/s"));
    let md = report_ok(&[
        s(&r.a),
        OsStr::new("--format"),
        OsStr::new("md"),
        OsStr::new("--diff"),
    ]);
    assert!(md.contains("<details>") && md.contains("```text"), "{md}");
}

#[test]
fn json_report_has_the_documented_shape() {
    let r = runs();
    let text = report_ok(&[s(&r.a), s(&r.b), OsStr::new("--format"), OsStr::new("json")]);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["format"], 1);
    let entries = v["runs"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    for (e, path) in entries.iter().zip([&r.a, &r.b]) {
        let run = load(path);
        assert_eq!(e["file"], path.display().to_string());
        assert_eq!(e["run"], path.file_stem().unwrap().to_str().unwrap());
        assert_eq!(e["lines"], 8);
        assert_eq!(e["pass"], run.manifest.params.pass);
        for k in [
            "passes",
            "count",
            "matched",
            "missing",
            "truncated",
            "hallucinated",
            "extra",
        ] {
            assert_eq!(
                e[k],
                serde_json::to_value(&run.summary.total).unwrap()[k],
                "{k}"
            );
        }
        assert_eq!(
            e["by_quarter"],
            serde_json::to_value(&run.summary.by_quarter).unwrap()
        );
        assert!(e["prefill_tok_s"].as_f64().unwrap() > 0.0);
        for k in ["model", "build", "quant", "kv_k", "kv_v"] {
            assert!(e[k].is_string(), "{k}");
        }
    }
    for (e, path) in entries.iter().zip([&r.a, &r.b]) {
        let forced = load(path).summary.forced.unwrap();
        assert_eq!(e["top1_share"].as_f64().unwrap(), forced.top1_share);
        assert_eq!(e["mean_logprob"].as_f64().unwrap(), forced.mean_logprob);
        assert_eq!(
            e["lines_exact_share"].as_f64().unwrap(),
            forced.lines_exact_share
        );
    }
    let (ra, rb) = (load(&r.a), load(&r.b));
    let grid = v["grid"]["rows"].as_array().unwrap();
    assert_eq!(grid.len(), 4);
    for g in grid {
        let cells = g["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 2);
        for (cell, run) in cells.iter().zip([&ra, &rb]) {
            let t = run.targets.iter().find(|t| t.name == g["name"]).unwrap();
            assert_eq!(
                cell["top1_share"].as_f64().unwrap(),
                t.forced.as_ref().unwrap().top1_share
            );
        }
    }
    let one = report_ok(&[s(&r.c), OsStr::new("--format"), OsStr::new("json")]);
    let v: serde_json::Value = serde_json::from_str(&one).unwrap();
    assert!(v["runs"][0]["prefill_tok_s"].is_null());
    for k in ["top1_share", "mean_logprob", "lines_exact_share"] {
        assert!(v["runs"][0][k].is_null(), "{k}");
    }
    for g in v["grid"]["rows"].as_array().unwrap() {
        assert!(g["cells"][0]["top1_share"].is_null());
    }
}

/// The text of the element that `open` starts, up to the next `</div>`.
fn element<'a>(html: &'a str, open: &str) -> &'a str {
    assert_eq!(html.matches(open).count(), 1, "{open}");
    let body = &html[html.find(open).unwrap() + open.len()..];
    &body[..body.find("</div>").unwrap()]
}

/// The number after `key ` in `line`, up to the next space.
fn number_after(line: &str, key: &str) -> f64 {
    let rest = &line[line
        .find(key)
        .unwrap_or_else(|| panic!("no {key} in {line}"))
        + key.len()..];
    rest.split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("{key} in {line}"))
}

#[test]
fn teacher_forced_metrics_in_every_format() {
    let r = runs();
    let (ra, rb) = (load(&r.a), load(&r.b));
    let html = report_ok(&[s(&r.a), s(&r.b), OsStr::new("--format"), OsStr::new("html")]);

    // Every run's per-target line, with the run file's numbers.
    for (i, run) in [&ra, &rb].into_iter().enumerate() {
        for t in &run.targets {
            let f = t.forced.as_ref().expect("bench runs have forced metrics");
            let line = element(
                &html,
                &format!(
                    "<div class=\"forced\" data-run=\"{i}\" data-target=\"{}\">",
                    t.name
                ),
            );
            let top1 = number_after(line, "top-1");
            assert!(
                (top1 - f.top1_share).abs() <= 5e-4,
                "run {i} {}: {line}",
                t.name
            );
            let lp = number_after(line, "mean log-prob");
            assert!(
                (lp - f.mean_logprob).abs() <= 5e-4,
                "run {i} {}: {line}",
                t.name
            );
            let exact = f.lines_exact.iter().filter(|&&e| e).count();
            assert!(
                line.contains(&format!("{exact}/{} lines exact", f.lines_exact.len())),
                "{line}"
            );
            assert!(line.contains(&format!("{} tokens", f.tokens)), "{line}");
        }
        // The aggregate columns.
        let sf = run.summary.forced.as_ref().unwrap();
        assert!(html.contains(&format!("<td class=\"num\">{:.3}</td>", sf.top1_share)));
        assert!(html.contains(&format!("<td class=\"num\">{:.3}</td>", sf.mean_logprob)));
    }
    // Two charts: matched lines and top-1 share.
    assert_eq!(html.matches("<svg").count(), 2, "two charts");
    assert!(html.contains("id=\"chart-matched\"") && html.contains("id=\"chart-top1\""));
    // The top-1 chart has one series per run: a line per run in its colour.
    let top1_svg = {
        let at = html.find("id=\"chart-top1\"").unwrap();
        let svg = &html[at..];
        &svg[..svg.find("</svg>").unwrap()]
    };
    for colour in ["#4E79A7", "#F28E2B"] {
        assert!(
            top1_svg.to_ascii_uppercase().contains(colour),
            "no {colour} series in the top-1 chart"
        );
    }

    // A score run has none: no top-1 chart, no forced lines, no forced columns.
    let html = report_ok(&[s(&r.c), OsStr::new("--format"), OsStr::new("html")]);
    assert_eq!(
        html.matches("<svg").count(),
        1,
        "only the matched-lines chart"
    );
    assert!(!html.contains("chart-top1"));
    assert!(!html.contains("class=\"forced\""));
    assert!(!html.contains("top-1 share"));

    // The terminal table and Markdown: the aggregate columns and the grid cells.
    let table = report_ok(&[s(&r.a), s(&r.b)]);
    let md = report_ok(&[s(&r.a), s(&r.b), OsStr::new("--format"), OsStr::new("md")]);
    for out in [&table, &md] {
        assert!(
            out.contains("top-1 share") && out.contains("mean log-prob"),
            "{out}"
        );
        assert!(
            out.contains("teacher-forced top-1 share"),
            "grid caption: {out}"
        );
        for (label, run) in [("A", &ra), ("B", &rb)] {
            let sf = run.summary.forced.as_ref().unwrap();
            let row = out
                .lines()
                .find(|l| l.trim_start_matches("| ").starts_with(&format!("{label} ")))
                .unwrap_or_else(|| panic!("no row {label}: {out}"));
            for v in [
                format!("{:.3}", sf.top1_share),
                format!("{:.3}", sf.mean_logprob),
                format!("{:.1}%", 100.0 * sf.lines_exact_share),
            ] {
                assert!(row.contains(&v), "{v} not in {row}");
            }
        }
    }
    for out in [
        report_ok(&[s(&r.c)]),
        report_ok(&[s(&r.c), OsStr::new("--format"), OsStr::new("md")]),
    ] {
        assert!(!out.contains("top-1") && !out.contains("log-prob"), "{out}");
    }
}


#[test]
fn bad_input_is_one_line_and_writes_nothing() {
    let r = runs();
    let inputs = tempfile::tempdir().unwrap();
    let garbage = inputs.path().join("garbage.json");
    std::fs::write(&garbage, "this is not json").unwrap();
    let empty = inputs.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let no_runs = inputs.path().join("no-runs");
    std::fs::create_dir(&no_runs).unwrap();
    std::fs::write(no_runs.join("notes.json"), "{}").unwrap();
    std::fs::write(no_runs.join("notes.txt"), "hello").unwrap();
    let missing = inputs.path().join("missing.json");

    let cases: Vec<(Vec<&OsStr>, &str)> = vec![
        (vec![s(&garbage)], "is not a posrecall run file"),
        (vec![s(&r.a), s(&r.targets)], "is not a posrecall run file"),
        (vec![s(&r.a), s(&r.c)], "different --lines"),
        (vec![s(&r.c), s(&r.b)], "different --lines"),
        (vec![], "required"),
        (vec![s(&empty)], "holds no run files"),
        (vec![s(&no_runs)], "holds no run files"),
        (vec![s(&r.a), s(&missing)], "cannot read run file"),
        (
            vec![
                s(&r.a),
                OsStr::new("--diff"),
                OsStr::new("--format"),
                OsStr::new("csv"),
            ],
            "--diff",
        ),
    ];
    for (args, needle) in cases {
        for format in ["table", "html", "json"] {
            if args.contains(&OsStr::new("--format")) && format != "table" {
                continue;
            }
            let out_dir = tempfile::tempdir().unwrap();
            let out = out_dir.path().join("report.out");
            let mut full = args.clone();
            if !args.contains(&OsStr::new("--format")) {
                full.extend([OsStr::new("--format"), OsStr::new(format)]);
            }
            full.extend([OsStr::new("-o"), s(&out)]);
            let o = report(&full);
            assert_clean_failure(&o, out_dir.path(), needle);
        }
    }
}
