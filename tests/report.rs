//! `posrecall report` (and `bench --html`) on real run files: two bench runs
//! of SmolLM2 on the dense fixture (f16 and q8_0 KV cache) and one `score`
//! run with a different `--lines`, made once per test binary.

use crate::common;
use posrecall::settings::Named;

use common::*;
use posrecall::record::run::{RunFile, TargetResult};
use posrecall::score::LineStatus;
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
            .args(["--crop-lines", "1:150", "--count", "2", "--lines", "6", "--json"])
            .output()
            .unwrap();
        assert!(o.status.success(), "targets: {}", String::from_utf8_lossy(&o.stderr));
        std::fs::write(&targets, &o.stdout).unwrap();
        let t: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let answers: String = t["targets"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| {
                let lines: Vec<&str> = t["expected"].as_array().unwrap().iter().take(3).map(|l| l.as_str().unwrap()).collect();
                format!("{}\n", serde_json::json!({"name": t["name"], "response": lines.join("\n")}))
            })
            .collect();
        let responses = dir.join("responses6.jsonl");
        std::fs::write(&responses, answers).unwrap();
        let c = dir.join("C.json");
        let o = Command::new(bin()).arg("score").arg(&targets).arg(&responses).arg("--out").arg(&c).arg("--quiet").output().unwrap();
        assert!(o.status.success(), "score: {}", String::from_utf8_lossy(&o.stderr));
        Runs { dir, a, b, c, targets }
    })
}

fn bench(out: &Path, kv: &str, html: Option<&Path>) {
    let mut cmd = Command::new(bin());
    cmd.arg("bench").arg(smollm2()).arg("--corpus").arg(fixture("dense.js"));
    cmd.args(["--count", "4", "--lines", "8", "--crop-lines", "1:150", "--max-new-tokens", "40"]);
    cmd.args(["--threads", "2", "--quiet", "--kv", kv]).arg("--out").arg(out);
    if let Some(h) = html {
        cmd.arg("--html").arg(h);
    }
    let o = cmd.env("NO_COLOR", "1").output().unwrap();
    assert!(o.status.success(), "bench failed: {}", String::from_utf8_lossy(&o.stderr));
}

fn report<S: AsRef<OsStr>>(args: &[S]) -> Output {
    Command::new(bin()).arg("report").args(args).env("NO_COLOR", "1").output().unwrap()
}

/// Runs `report` and returns its stdout, failing on a non-zero exit.
fn report_ok<S: AsRef<OsStr>>(args: &[S]) -> String {
    let o = report(args);
    assert!(o.status.success(), "report failed: {}", String::from_utf8_lossy(&o.stderr));
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
    let o = report(&[s(&r.a), s(&r.b), OsStr::new("--format"), OsStr::new("html"), OsStr::new("-o"), s(&out)]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(o.stdout.is_empty(), "-o writes the file, not stdout");
    let html = std::fs::read_to_string(&out).unwrap();

    for (i, path) in [&r.a, &r.b].into_iter().enumerate() {
        let run = load(path);
        assert_eq!(run.targets.len(), 4);
        for t in &run.targets {
            assert!(html.contains(&t.name), "{} not in the page", t.name);
            // The diff container of this run and target, up to its end.
            let open = format!("<pre class=\"diff\" data-run=\"{i}\" data-target=\"{}\">", t.name);
            assert_eq!(html.matches(&open).count(), 1, "{open}");
            let body = &html[html.find(&open).unwrap() + open.len()..];
            let body = &body[..body.find("</pre>").unwrap()];
            let count = |class: &str| body.matches(&format!("class=\"l l-{class}\"")).count();
            assert_eq!(count("matched"), t.score.as_ref().unwrap().matched, "run {i} {} matched", t.name);
            assert_eq!(count("missing"), t.score.as_ref().unwrap().missing, "run {i} {} missing", t.name);
            assert_eq!(count("hallucinated"), t.score.as_ref().unwrap().hallucinated, "run {i} {} hallucinated", t.name);
            assert_eq!(count("extra"), t.score.as_ref().unwrap().extra, "run {i} {} extra", t.name);
            assert_eq!(body.matches("class=\"l l-").count(), t.score.as_ref().unwrap().lines.len());
            // Collapsible per target: this diff sits in the target's own
            // <details>, whose summary names it.
            let details = details_of(&html, &t.name, t.line);
            assert!(details.contains(&open), "run {i} {}: its diff is outside its <details>", t.name);
        }
    }
    // One <details> per target, none left over.
    let sections = html.matches("<details class=\"target\">").count();
    assert_eq!(sections, load(&r.a).targets.len(), "one <details> per target");
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
                !(value.starts_with("http:") || value.starts_with("https:") || value.starts_with("//")),
                "external reference: {}",
                &html[at..(at + 80).min(html.len())]
            );
        }
    }
    assert!(!lower.contains("@import") && !lower.contains("url("), "CSS loads something");

    // bench --html wrote the same page for its single run as report does.
    let single = report_ok(&[s(&r.a), OsStr::new("--format"), OsStr::new("html")]);
    assert_eq!(std::fs::read_to_string(r.dir.join("A.html")).unwrap(), single);
}

/// The `<details class="target">` element whose summary names the target
/// `name` at `line`, up to its `</details>`; there must be exactly one.
fn details_of<'a>(html: &'a str, name: &str, line: usize) -> &'a str {
    let summary = format!("<summary><strong>{name}</strong> · line {line} ·");
    let found: Vec<&str> = html
        .split("<details class=\"target\">")
        .skip(1)
        .map(|d| &d[..d.find("</details>").expect("a closed <details>")])
        .filter(|d| d.trim_start().starts_with(&summary))
        .collect();
    assert_eq!(found.len(), 1, "one <details> whose summary starts {summary:?}");
    found[0]
}

#[test]
fn csv_parses_back_to_the_run_files() {
    let r = runs();
    let text = report_ok(&[s(&r.a), s(&r.b), s(&r.a), OsStr::new("--format"), OsStr::new("csv")]);
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let rows: Vec<HashMap<String, String>> = reader.deserialize().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 3, "one row per run, in the order given");
    for (row, path) in rows.iter().zip([&r.a, &r.b, &r.a]) {
        let run = load(path);
        let t = &run.summary.total;
        let num = |k: &str| row[k].parse::<usize>().unwrap_or_else(|_| panic!("{k}: {}", row[k]));
        assert_eq!(num("passes"), t.recall.as_ref().unwrap().passes);
        assert_eq!(num("count"), t.count);
        assert_eq!(num("matched"), t.recall.as_ref().unwrap().matched);
        assert_eq!(num("missing"), t.recall.as_ref().unwrap().missing);
        assert_eq!(num("truncated"), t.recall.as_ref().unwrap().truncated);
        assert_eq!(num("hallucinated"), t.recall.as_ref().unwrap().hallucinated);
        assert_eq!(num("extra"), t.recall.as_ref().unwrap().extra);
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
        assert!((speed - expect).abs() <= 1e-9 * expect, "{speed} vs {expect}");
        // The teacher-forced means, as in summary.forced.
        let forced = run.summary.forced.as_ref().expect("bench runs have forced metrics");
        for (k, want) in
            [("top1_share", forced.top1_share), ("mean_logprob", forced.mean_logprob), ("lines_exact_share", forced.lines_exact_share)]
        {
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
    for k in ["build", "quant", "kv_k", "kv_v", "prefill_tok_s", "top1_share", "mean_logprob", "lines_exact_share"] {
        assert_eq!(rows[0][k], "", "{k}");
    }
    // One header row, the same columns with and without forced metrics.
    let header = |text: &str| text.lines().next().unwrap().to_string();
    assert_eq!(header(&text), header(&report_ok(&[s(&r.a), OsStr::new("--format"), OsStr::new("csv")])));
    assert_eq!(rows[0]["matched"].parse::<usize>().unwrap(), load(&r.c).summary.total.recall.unwrap().matched);
}

/// The rows of the first Markdown table in `md`.
fn first_md_table(md: &str) -> Vec<&str> {
    md.lines().skip_while(|l| !l.starts_with('|')).take_while(|l| l.starts_with('|')).collect()
}

#[test]
fn markdown_has_one_row_per_run() {
    let r = runs();
    for inputs in [vec![&r.a], vec![&r.a, &r.b], vec![&r.b, &r.a, &r.b]] {
        let mut args: Vec<&OsStr> = inputs.iter().map(|p| s(p)).collect();
        args.extend([OsStr::new("--format"), OsStr::new("md")]);
        let md = report_ok(&args);
        let table = first_md_table(&md);
        assert_eq!(table.len(), 2 + inputs.len(), "header, rule, one row per run:\n{md}");
        assert!(table[1].starts_with("|---"), "{md}");
        for (row, path) in table[2..].iter().zip(&inputs) {
            let run = load(path);
            let t = &run.summary.total;
            assert!(row.contains(&format!("| {}/{} |", t.recall.as_ref().unwrap().passes, t.count)), "{row}");
            assert!(row.contains(run.manifest.context.as_ref().unwrap().type_k.as_str()), "{row}");
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
        let from_files = report_ok(&[s(&runs_dir.join("A.json")), s(&runs_dir.join("B.json")), OsStr::new("--format"), OsStr::new(format)]);
        assert_eq!(from_dir, from_files, "--format {format}");
    }
    let csv = report_ok(&[s(&runs_dir), OsStr::new("--format"), OsStr::new("csv")]);
    let labels: Vec<&str> = csv.lines().skip(1).map(|l| l.split(',').next().unwrap()).collect();
    assert_eq!(labels, ["A", "B"]);
    // --diff too, and a folder mixed with a file.
    let mixed = report_ok(&[s(&runs_dir), s(&r.a), OsStr::new("--diff")]);
    let headings = mixed.lines().filter(|l| l.starts_with("== ") && l.ends_with(" ==")).count();
    assert_eq!(headings, 3, "{mixed}");
}

/// A grid row's code/prose cell: the target's code lines and comment and
/// docstring lines, flagged when prose outnumbers code.
fn class_lines(t: &posrecall::record::run::TargetResult) -> String {
    let c = t.score.as_ref().and_then(|s| s.composition.as_ref()).expect("bench runs record their composition");
    let prose = c.comment.lines + c.docstring.lines;
    let flag = if prose > c.code.lines { " prose-dominated" } else { "" };
    format!("{}/{prose}{flag}", c.code.lines)
}

#[test]
fn two_runs_get_the_per_target_grid_and_quarters() {
    let r = runs();
    let (ra, rb) = (load(&r.a), load(&r.b));
    let table = report_ok(&[s(&r.a), s(&r.b)]);
    assert!(table.contains("Per target, by depth"), "{table}");
    assert!(table.contains("Pass rate by depth quarter"), "{table}");
    let mark = |t: &posrecall::record::run::TargetResult| {
        let f = t.forced.as_ref().expect("bench runs have forced metrics");
        format!("{} {} · {:.2}", t.score.as_ref().unwrap().matched, if t.score.as_ref().unwrap().pass { "✓" } else { "✗" }, f.top1_share)
    };
    for (ta, tb) in ra.targets.iter().zip(&rb.targets) {
        let line = table
            .lines()
            .find(|l| l.starts_with(&format!("{} ", ta.name)))
            .unwrap_or_else(|| panic!("no grid row for {}:\n{table}", ta.name));
        let cells: Vec<&str> = line.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
        assert_eq!(cells.len(), 6, "{line}");
        assert_eq!(cells[0], ta.name);
        assert_eq!(cells[1], ta.line.to_string());
        assert_eq!(cells[3], class_lines(ta), "{line}");
        assert_eq!(cells[4], mark(ta), "{line}");
        assert_eq!(cells[5], mark(tb), "{line}");
    }
    // Grid rows by depth.
    let positions: Vec<usize> = {
        let mut by_depth = ra.targets.clone();
        by_depth.sort_by(|x, y| x.depth.total_cmp(&y.depth));
        by_depth.iter().map(|t| table.find(&format!("\n{} ", t.name)).unwrap()).collect()
    };
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "grid not by depth");
    // Pass rate by depth quarter: every quarter and every run, computed from
    // the targets' depths; as many cells must have been checked as the run
    // files' summaries say hold targets (not one skipped as empty).
    let checked = check_quarter_rows(&text_table_after(&table, "Pass rate by depth quarter"), &[&ra, &rb]);
    assert_eq!(checked, nonempty_quarters(&[&ra, &rb]), "{table}");
    // The same in Markdown; one run has none.
    let md = report_ok(&[s(&r.a), s(&r.b), OsStr::new("--format"), OsStr::new("md")]);
    for t in &ra.targets {
        assert!(md.lines().any(|l| l.starts_with(&format!("| {} |", t.name))), "{md}");
    }
    let one = report_ok(&[s(&r.a)]);
    assert!(!one.contains("Per target"), "{one}");
}

/// The marker docs/GUIDE.md ("Without colour ... each diff line carries a marker")
/// documents for each line class.
fn marker(status: LineStatus) -> char {
    match status {
        LineStatus::Matched => '=',
        LineStatus::Missing => '-',
        LineStatus::Hallucinated => '?',
        LineStatus::Extra => '+',
        LineStatus::Reindented => '~',
    }
}

/// The block of `section` (one run's `--diff` output) that is `t`'s diff:
/// blocks are separated by blank lines, and a block's heading is its verdict
/// and the target's name.
fn diff_block<'a>(section: &'a str, t: &TargetResult) -> Vec<&'a str> {
    let verdict = if t.score.as_ref().unwrap().pass { "PASS" } else { "FAIL" };
    let heading = format!("{verdict} {} ", t.name);
    let blocks: Vec<&str> = section.split("\n\n").map(|b| b.trim_start_matches('\n')).filter(|b| b.starts_with(&heading)).collect();
    assert_eq!(blocks.len(), 1, "one block headed {heading:?} in\n{section}");
    blocks[0].lines().collect()
}

/// Checks one run's `--diff` section against its run file, built from the
/// file alone: the heading's facts, the teacher-forced line when the target
/// has forced metrics, then every scored line, in order, as `  MARK TEXT`.
fn check_diff_section(section: &str, run: &RunFile) {
    let lines = run.manifest.params.lines;
    for t in &run.targets {
        let block = diff_block(section, t);
        // The heading's fields are two spaces apart: `line 26` is not `line 260`.
        let fields: Vec<&str> = block[0].split("  ").collect();
        for fact in [
            format!("line {}", t.line),
            format!("depth {:.2}", t.depth),
            format!("matched {}/{lines}", t.score.as_ref().unwrap().matched),
            format!("missing {} (truncated {})", t.score.as_ref().unwrap().missing, t.score.as_ref().unwrap().truncated),
            format!("hallucinated {}", t.score.as_ref().unwrap().hallucinated),
            format!("extra {}", t.score.as_ref().unwrap().extra),
        ] {
            assert!(fields.contains(&fact.as_str()), "{}: no {fact:?} in {:?}", t.name, block[0]);
        }
        let mut body = &block[1..];
        if let Some(f) = &t.forced {
            let top1 = format!("top-1 {:.3}", f.top1_share);
            assert!(body[0].starts_with("  teacher-forced: ") && body[0].contains(&top1), "{}: {:?}", t.name, body[0]);
            body = &body[1..];
        }
        let expected: Vec<String> = t
            .score
            .as_ref()
            .unwrap()
            .lines
            .iter()
            .map(|l| {
                assert!(l.text.chars().count() <= 160, "a line the terminal would clip");
                format!("  {} {}", marker(l.status), l.text)
            })
            .collect();
        assert_eq!(body, expected, "{}: diff lines", t.name);
    }
}

/// The `== LABEL ==` sections of a `--diff` output, up to the aggregate
/// table: (label, body) each. Headings are whole lines; diff lines start with
/// two spaces, so an answer holding `==` cannot pose as one.
fn diff_sections(out: &str) -> Vec<(String, String)> {
    let end = out.find("\nrun ").expect("the aggregate table follows the diffs");
    let mut sections: Vec<(String, String)> = Vec::new();
    for line in out[..end].lines() {
        if let Some(label) = line.strip_prefix("== ").and_then(|l| l.strip_suffix(" ==")) {
            sections.push((label.to_string(), String::new()));
        } else if let Some((_, body)) = sections.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    sections
}

/// The depth quarter of the kept text `depth` falls in: [0, .25), [.25, .5),
/// [.5, .75), [.75, 1] (docs/METHOD.md, Aggregate).
fn quarter_of(depth: f64) -> usize {
    if depth < 0.25 {
        0
    } else if depth < 0.5 {
        1
    } else if depth < 0.75 {
        2
    } else {
        3
    }
}

/// (passes, targets) per depth quarter, counted from the run's targets.
fn quarters_from_targets(run: &RunFile) -> [(usize, usize); 4] {
    let mut q = [(0, 0); 4];
    for t in &run.targets {
        let cell = &mut q[quarter_of(t.depth)];
        cell.0 += t.score.as_ref().unwrap().pass as usize;
        cell.1 += 1;
    }
    q
}

/// How many (quarter, run) pairs hold targets, as the run files' summaries say.
fn nonempty_quarters(runs: &[&RunFile]) -> usize {
    runs.iter().map(|r| r.summary.by_quarter.iter().filter(|q| q.count > 0).count()).sum()
}

/// Checks the rows of a pass-rate-by-quarter table (cells as text, no header)
/// against quarters counted from the targets: the quarter's range, then per
/// run `passes/count (pct%)`, or `-` where the quarter holds no target.
/// Returns how many cells held targets, so a caller can tell nothing was skipped.
fn check_quarter_rows(rows: &[Vec<String>], runs: &[&RunFile]) -> usize {
    assert_eq!(rows.len(), 4, "four quarters: {rows:?}");
    let mut checked = 0;
    for (q, row) in rows.iter().enumerate() {
        assert_eq!(row.len(), 1 + runs.len(), "quarter {q}: {row:?}");
        assert_eq!(row[0], format!("{:.2}-{:.2}", q as f64 / 4.0, (q + 1) as f64 / 4.0));
        for (cell, run) in row[1..].iter().zip(runs) {
            let (passes, count) = quarters_from_targets(run)[q];
            let summary = &run.summary.by_quarter[q];
            assert_eq!((summary.recall.as_ref().unwrap().passes, summary.count), (passes, count), "summary, quarter {q}");
            if count == 0 {
                assert_eq!(cell, "-", "quarter {q}");
            } else {
                let pct = 100.0 * passes as f64 / count as f64;
                assert_eq!(*cell, format!("{passes}/{count} ({pct:.0}%)"), "quarter {q}");
                checked += 1;
            }
        }
    }
    checked
}

/// The body rows of the aligned table under the line starting `caption` in a
/// `--format table` report (after its header and rule), cells split at runs
/// of two or more spaces.
fn text_table_after(out: &str, caption: &str) -> Vec<Vec<String>> {
    let at = out.find(caption).unwrap_or_else(|| panic!("no {caption:?} in\n{out}"));
    out[at..]
        .lines()
        .skip(3)
        .take_while(|l| !l.trim().is_empty())
        .map(|l| l.split("  ").map(str::trim).filter(|c| !c.is_empty()).map(String::from).collect())
        .collect()
}

#[test]
fn quarters_of_fixture_runs_and_empty_quarters() {
    // The real runs above fail every target, one per quarter: these tell
    // quarters and runs apart. a, b, c: 16 targets, 3 to 5 per quarter.
    let r = runs();
    let fixtures: Vec<PathBuf> = ["a.json", "b.json", "c.json"].iter().map(|f| fixture(&format!("compare/{f}"))).collect();
    let loaded: Vec<RunFile> = fixtures.iter().map(|p| load(p)).collect();
    let args: Vec<&OsStr> = fixtures.iter().map(|p| s(p)).collect();
    let table = report_ok(&args);
    let rows = text_table_after(&table, "Pass rate by depth quarter");
    let runs: Vec<&RunFile> = loaded.iter().collect();
    assert_eq!(check_quarter_rows(&rows, &runs), nonempty_quarters(&runs));
    assert_eq!(nonempty_quarters(&runs), 12);
    // C holds two targets, in the second and third quarters: the others show `-`.
    let c = load(&r.c);
    let table = report_ok(&[s(&r.c), s(&r.c)]);
    let rows = text_table_after(&table, "Pass rate by depth quarter");
    assert_eq!(check_quarter_rows(&rows, &[&c, &c]), 4);
    assert_eq!(nonempty_quarters(&[&c, &c]), 4, "C's targets moved: update this test");
}

#[test]
fn diff_shows_every_target_of_every_run() {
    let r = runs();
    let out = report_ok(&[s(&r.a), s(&r.b), OsStr::new("--diff")]);
    let sections = diff_sections(&out);
    let labels: Vec<&str> = sections.iter().map(|(label, _)| label.as_str()).collect();
    assert_eq!(labels, ["A", "B"], "{out}");
    for ((_, section), path) in sections.iter().zip([&r.a, &r.b]) {
        check_diff_section(section, &load(path));
    }
    // The aggregate still follows.
    assert!(out.contains("prefill tok/s"));
    let md = report_ok(&[s(&r.a), OsStr::new("--format"), OsStr::new("md"), OsStr::new("--diff")]);
    assert!(md.contains("<details>") && md.contains("```text"), "{md}");
}

/// A run file with every line class: tests/fixtures/compare/a.json with a
/// hallucinated and an extra line added to its first target (the real runs
/// above have no extra lines).
fn four_class_run(dir: &Path) -> PathBuf {
    let mut v = read(&fixture("compare/a.json"));
    let t = &mut v["targets"][0];
    let lines = t["lines"].as_array_mut().unwrap();
    lines.insert(6, serde_json::json!({"text": "  invented();", "status": "hallucinated"}));
    lines.insert(7, serde_json::json!({"text": "  stmt10_baseFlatten;", "status": "extra"}));
    t["hallucinated"] = 1.into();
    t["extra"] = 1.into();
    // The totals are the targets' sums (a run file whose summary is not is refused).
    let depth = t["depth"].as_f64().unwrap();
    let quarter = ((depth * 4.0) as usize).min(3);
    for key in ["hallucinated", "extra"] {
        let add = |n: &mut serde_json::Value| *n = (n.as_u64().unwrap() + 1).into();
        add(&mut v["summary"][key]);
        add(&mut v["summary"]["by_quarter"][quarter][key]);
    }
    let path = dir.join("four.json");
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    path
}

#[test]
fn diff_marks_all_four_classes_as_documented() {
    let dir = tempfile::tempdir().unwrap();
    let path = four_class_run(dir.path());
    let run = load(&path);
    let out = report_ok(&[s(&path), OsStr::new("--diff")]);
    // The legend names each marker with its class.
    let legend = out.lines().next().unwrap();
    for (mark, word) in [('=', "matched"), ('-', "missing"), ('?', "hallucinated"), ('+', "extra")] {
        assert!(legend.contains(&format!("{mark} {word}")), "{legend}");
    }
    let sections = diff_sections(&out);
    assert_eq!(sections.len(), 1);
    check_diff_section(&sections[0].1, &run);
    // Not vacuous: the checked target has a line of every class.
    let statuses: Vec<LineStatus> = run.targets[0].score.as_ref().unwrap().lines.iter().map(|l| l.status).collect();
    for s in [LineStatus::Matched, LineStatus::Missing, LineStatus::Hallucinated, LineStatus::Extra] {
        assert!(statuses.contains(&s), "{s:?}");
    }
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
        for k in ["passes", "count", "matched", "missing", "truncated", "hallucinated", "extra"] {
            assert_eq!(e[k], serde_json::to_value(&run.summary.total).unwrap()[k], "{k}");
        }
        assert_eq!(e["by_quarter"], serde_json::to_value(&run.summary.by_quarter).unwrap());
        assert!(e["prefill_tok_s"].as_f64().unwrap() > 0.0);
        for k in ["model", "build", "quant", "kv_k", "kv_v"] {
            assert!(e[k].is_string(), "{k}");
        }
    }
    for (e, path) in entries.iter().zip([&r.a, &r.b]) {
        let forced = load(path).summary.forced.unwrap();
        assert_eq!(e["top1_share"].as_f64().unwrap(), forced.top1_share);
        assert_eq!(e["mean_logprob"].as_f64().unwrap(), forced.mean_logprob);
        assert_eq!(e["lines_exact_share"].as_f64().unwrap(), forced.lines_exact_share);
    }
    let (ra, rb) = (load(&r.a), load(&r.b));
    let grid = v["grid"]["rows"].as_array().unwrap();
    assert_eq!(grid.len(), 4);
    for g in grid {
        let cells = g["cells"].as_array().unwrap();
        assert_eq!(cells.len(), 2);
        for (cell, run) in cells.iter().zip([&ra, &rb]) {
            let t = run.targets.iter().find(|t| t.name == g["name"]).unwrap();
            assert_eq!(cell["top1_share"].as_f64().unwrap(), t.forced.as_ref().unwrap().top1_share);
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
    let rest = &line[line.find(key).unwrap_or_else(|| panic!("no {key} in {line}")) + key.len()..];
    rest.split_whitespace().next().unwrap().parse().unwrap_or_else(|_| panic!("{key} in {line}"))
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
            let line = element(&html, &format!("<div class=\"forced\" data-run=\"{i}\" data-target=\"{}\">", t.name));
            let top1 = number_after(line, "top-1");
            assert!((top1 - f.top1_share).abs() <= 5e-4, "run {i} {}: {line}", t.name);
            let lp = number_after(line, "mean log-prob");
            assert!((lp - f.mean_logprob).abs() <= 5e-4, "run {i} {}: {line}", t.name);
            let exact = f.lines_exact.iter().filter(|&&e| e).count();
            assert!(line.contains(&format!("{exact}/{} lines exact", f.lines_exact.len())), "{line}");
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
        assert!(top1_svg.to_ascii_uppercase().contains(colour), "no {colour} series in the top-1 chart");
    }

    // A score run has none: no top-1 chart, no forced lines, no forced columns.
    let html = report_ok(&[s(&r.c), OsStr::new("--format"), OsStr::new("html")]);
    assert_eq!(html.matches("<svg").count(), 1, "only the matched-lines chart");
    assert!(!html.contains("chart-top1"));
    assert!(!html.contains("class=\"forced\""));
    assert!(!html.contains("top-1 share"));

    // The terminal table and Markdown: the aggregate columns and the grid cells.
    let table = report_ok(&[s(&r.a), s(&r.b)]);
    let md = report_ok(&[s(&r.a), s(&r.b), OsStr::new("--format"), OsStr::new("md")]);
    for out in [&table, &md] {
        assert!(out.contains("top-1 share") && out.contains("mean log-prob"), "{out}");
        assert!(out.contains("teacher-forced top-1 share"), "grid caption: {out}");
        for (label, run) in [("A", &ra), ("B", &rb)] {
            let sf = run.summary.forced.as_ref().unwrap();
            let row = out
                .lines()
                .find(|l| l.trim_start_matches("| ").starts_with(&format!("{label} ")))
                .unwrap_or_else(|| panic!("no row {label}: {out}"));
            for v in [format!("{:.3}", sf.top1_share), format!("{:.3}", sf.mean_logprob), format!("{:.1}%", 100.0 * sf.lines_exact_share)] {
                assert!(row.contains(&v), "{v} not in {row}");
            }
        }
    }
    for out in [report_ok(&[s(&r.c)]), report_ok(&[s(&r.c), OsStr::new("--format"), OsStr::new("md")])] {
        assert!(!out.contains("top-1") && !out.contains("log-prob"), "{out}");
    }
}

/// The rows of the first `<table>` after `heading` in a page, each as its
/// cells' text (`<th>` or `<td>`), header row first.
fn html_table_after(html: &str, heading: &str) -> Vec<Vec<String>> {
    let at = html.find(heading).unwrap_or_else(|| panic!("no {heading:?} in the page"));
    let rest = &html[at..];
    let table = &rest[rest.find("<table>").unwrap()..rest.find("</table>").unwrap()];
    table
        .split("<tr>")
        .skip(1)
        .map(|row| {
            row[..row.find("</tr>").unwrap()]
                .split("<t")
                .skip(1)
                .map(|cell| {
                    let content = &cell[cell.find('>').unwrap() + 1..];
                    content[..content.find("</t").unwrap()].to_string()
                })
                .collect()
        })
        .collect()
}

/// The value of attribute `name` in one SVG or HTML tag.
fn attr<'a>(tag: &'a str, name: &str) -> &'a str {
    // The name at the start of the tag's text or after a space (`x` is not `cx`).
    let key = format!("{name}=\"");
    let at = tag
        .match_indices(&key)
        .map(|(i, _)| i)
        .find(|&i| i == 0 || tag[..i].ends_with(' '))
        .unwrap_or_else(|| panic!("no {name} in {tag}"))
        + key.len();
    &tag[at..at + tag[at..].find('"').unwrap()]
}

/// A linear map from data to pixels through two ticks (value, pixel).
pub(crate) struct Axis {
    v0: f64,
    px0: f64,
    v1: f64,
    px1: f64,
}

impl Axis {
    /// Through the lowest and the highest of the ticks.
    fn of(mut ticks: Vec<(f64, f64)>) -> Axis {
        assert!(ticks.len() >= 2, "{ticks:?}");
        ticks.sort_by(|a, b| a.0.total_cmp(&b.0));
        let ((v0, px0), (v1, px1)) = (ticks[0], ticks[ticks.len() - 1]);
        Axis { v0, px0, v1, px1 }
    }

    pub(crate) fn px(&self, v: f64) -> f64 {
        self.px0 + (v - self.v0) * (self.px1 - self.px0) / (self.v1 - self.v0)
    }
}

/// One chart of the page: its axes, read from the tick labels plotters
/// writes (`text-anchor="middle"` under the x axis, `"end"` left of the y
/// axis; each label's x or y is its tick's position), and its data points,
/// the circles' centres, by fill colour (`#RRGGBB`).
pub(crate) struct Chart {
    pub(crate) x: Axis,
    pub(crate) y: Axis,
    pub(crate) points: HashMap<String, Vec<(f64, f64)>>,
    /// The y of every point of the gray (#888888) pass-threshold lines.
    threshold_ys: Vec<f64>,
    /// Text anchored at its start: the numbers beside a builds chart's
    /// dots (text, x, y).
    pub(crate) labels: Vec<(String, f64, f64)>,
}

fn chart(html: &str, id: &str) -> Chart {
    chart_with(html, id, |y| y)
}

/// A chart whose y tick labels are values `y_scale` maps to the axis (a
/// log axis: `f64::log10`).
pub(crate) fn chart_with(html: &str, id: &str, y_scale: fn(f64) -> f64) -> Chart {
    let open = format!("<div class=\"chart\" id=\"{id}\">");
    let svg = element(html, &open);
    let svg = &svg[..svg.find("</svg>").expect("an SVG")];
    let (mut xs, mut ys, mut labels) = (Vec::new(), Vec::new(), Vec::new());
    for text in svg.split("<text ").skip(1) {
        let (tag, content) = text.split_once('>').unwrap();
        let content = content[..content.find("</text>").unwrap()].trim();
        let Ok(v) = content.parse::<f64>() else {
            continue; // an axis title
        };
        let num = |k| attr(tag, k).parse::<f64>().unwrap();
        match attr(tag, "text-anchor") {
            "middle" => xs.push((v, num("x"))),
            "end" => ys.push((y_scale(v), num("y"))),
            "start" => labels.push((content.to_string(), num("x"), num("y"))),
            other => panic!("tick label anchored {other}"),
        }
    }
    let mut points: HashMap<String, Vec<(f64, f64)>> = HashMap::new();
    for c in svg.split("<circle ").skip(1) {
        let num = |k| attr(c, k).parse::<f64>().unwrap();
        points.entry(attr(c, "fill").to_ascii_uppercase()).or_default().push((num("cx"), num("cy")));
    }
    let threshold_ys = svg
        .split("<polyline ")
        .skip(1)
        .filter(|l| attr(l, "stroke") == "#888888")
        .flat_map(|l| attr(l, "points").split_whitespace().map(|p| p.split_once(',').unwrap().1.parse().unwrap()))
        .collect();
    Chart { x: Axis::of(xs), y: Axis::of(ys), points, threshold_ys, labels }
}

/// The series colour of each label in the legend `<p class="legend">` that
/// follows the chart `id`: `rgb(r,g,b)` swatches, as `#RRGGBB`.
pub(crate) fn legend_colours(html: &str, id: &str) -> HashMap<String, String> {
    let rest = &html[html.find(&format!("id=\"{id}\"")).unwrap()..];
    let legend = &rest[rest.find("<p class=\"legend\">").unwrap()..];
    let legend = &legend[..legend.find("</p>").unwrap()];
    legend
        .split("<span class=\"series\">")
        .skip(1)
        .filter(|s| s.contains("rgb("))
        .map(|s| {
            let rgb = &s[s.find("rgb(").unwrap() + 4..s.find(')').unwrap()];
            let hex: String = rgb.split(',').map(|c| format!("{:02X}", c.trim().parse::<u8>().unwrap())).collect();
            let label = &s[s.find("</span>").unwrap() + 7..s.rfind("</span>").unwrap()];
            (label.to_string(), format!("#{hex}"))
        })
        .collect()
}

/// Asserts that the series of colour `colour` in `chart` is exactly the
/// points `data` (depth, value), each within 2 pixels: plotters rounds to
/// whole pixels, and a matched line is some 30 pixels, a depth of 0.01 some 9.
fn check_series(chart: &Chart, colour: &str, data: &[(f64, f64)], what: &str) {
    let key = |p: &(f64, f64)| ((p.0 * 10.0).round() as i64, (p.1 * 10.0).round() as i64);
    let mut want: Vec<(f64, f64)> = data.iter().map(|&(d, v)| (chart.x.px(d), chart.y.px(v))).collect();
    let mut got = chart.points.get(colour).cloned().unwrap_or_default();
    want.sort_by_key(key);
    got.sort_by_key(key);
    assert_eq!(got.len(), want.len(), "{what}: points {got:?}, want {want:?}");
    for (g, w) in got.iter().zip(&want) {
        assert!((g.0 - w.0).abs() <= 2.0 && (g.1 - w.1).abs() <= 2.0, "{what}: point at {g:?}, want {w:?} (all: {got:?} vs {want:?})");
    }
}

/// The matched-lines chart holds, per run, one point per target at (depth,
/// matched), in the run's legend colour, and the pass threshold line.
fn check_matched_chart(html: &str, runs: &[(String, RunFile)]) {
    let c = chart(html, "chart-matched");
    let colours = legend_colours(html, "chart-matched");
    assert_eq!(colours.len(), runs.len(), "{colours:?}");
    for (label, run) in runs {
        let data: Vec<(f64, f64)> = run.targets.iter().map(|t| (t.depth, t.score.as_ref().unwrap().matched as f64)).collect();
        check_series(&c, &colours[label], &data, &format!("matched lines of {label}"));
        let pass = c.y.px(run.manifest.params.pass as f64);
        assert!(c.threshold_ys.iter().any(|y| (y - pass).abs() <= 2.0), "no threshold line at {pass}");
    }
    assert!(!c.threshold_ys.is_empty());
    assert_eq!(c.points.len(), runs.len(), "one series per run: {:?}", c.points.keys());
}

/// The top-1 chart holds, per run with teacher-forced metrics, one point per
/// target at (depth, top1_share); runs without them have no series.
fn check_top1_chart(html: &str, runs: &[(String, RunFile)]) {
    let c = chart(html, "chart-top1");
    let colours = legend_colours(html, "chart-top1");
    let forced: Vec<&(String, RunFile)> = runs.iter().filter(|(_, r)| r.targets[0].forced.is_some()).collect();
    assert_eq!(colours.len(), forced.len(), "{colours:?}");
    assert_eq!(c.points.len(), forced.len(), "{:?}", c.points.keys());
    for (label, run) in forced {
        let data: Vec<(f64, f64)> = run.targets.iter().map(|t| (t.depth, t.forced.as_ref().unwrap().top1_share)).collect();
        check_series(&c, &colours[label], &data, &format!("top-1 share of {label}"));
    }
}

/// The grid cell docs/GUIDE.md ("Reports") documents: matched lines, ✓ pass or ✗ fail, and
/// after `·` the target's top-1 share when it has one (`12 ✓ · 0.93`).
fn grid_cell(t: &TargetResult) -> String {
    let mark = format!("{} {}", t.score.as_ref().unwrap().matched, if t.score.as_ref().unwrap().pass { "✓" } else { "✗" });
    match &t.forced {
        Some(f) => format!("{mark} · {:.2}", f.top1_share),
        None => mark,
    }
}

/// The per-target grid: a header of target, line, depth, code/prose lines
/// and exactly one column per run (its label), then one row per target by depth, each with
/// one cell per run.
fn check_grid(html: &str, runs: &[(String, RunFile)]) {
    let rows = html_table_after(html, "<h2>Per target, by depth</h2>");
    // The code/prose column where the run files record a composition.
    let made_of = runs[0].1.targets.iter().any(|t| t.score.as_ref().is_some_and(|s| s.composition.is_some()));
    let mut header = vec!["target".to_string(), "line".into(), "depth".into()];
    if made_of {
        header.push("code/prose lines".into());
    }
    header.extend(runs.iter().map(|(label, _)| label.clone()));
    assert_eq!(rows[0], header, "one column per run");
    let mut by_depth: Vec<&TargetResult> = runs[0].1.targets.iter().collect();
    by_depth.sort_by(|a, b| a.depth.total_cmp(&b.depth));
    assert_eq!(rows.len(), 1 + by_depth.len(), "one row per target");
    for (row, t) in rows[1..].iter().zip(by_depth) {
        let mut want = vec![t.name.clone(), t.line.to_string(), format!("{:.2}", t.depth)];
        if made_of {
            want.push(class_lines(t));
        }
        for (_, run) in runs {
            let same = run.targets.iter().find(|u| u.name == t.name).expect("same targets");
            want.push(grid_cell(same));
        }
        assert_eq!(*row, want, "grid row of {}", t.name);
    }
}

/// Every target's diff section has one column per run (`repeat(N, ...)` and
/// N `<div class="col">`); returns how many sections there are.
fn check_diff_columns(html: &str, runs: usize) -> usize {
    let sections: Vec<&str> = html.split("<details class=\"target\">").skip(1).map(|d| &d[..d.find("</details>").unwrap()]).collect();
    for d in &sections {
        assert!(d.contains(&format!("grid-template-columns: repeat({runs}, ")), "{d}");
        assert_eq!(d.matches("<div class=\"col\">").count(), runs, "{d}");
    }
    sections.len()
}

/// Labels (file stems, as `report` labels runs) and run files of `paths`.
fn labelled(paths: &[PathBuf]) -> Vec<(String, RunFile)> {
    paths.iter().map(|p| (p.file_stem().unwrap().to_string_lossy().into_owned(), load(p))).collect()
}

fn html_of(paths: &[PathBuf]) -> String {
    let mut args: Vec<&OsStr> = paths.iter().map(|p| s(p)).collect();
    args.extend([OsStr::new("--format"), OsStr::new("html")]);
    report_ok(&args)
}

#[test]
fn html_charts_grid_and_quarters_match_the_run_files() {
    let r = runs();
    let compare = |f: &str| fixture(&format!("compare/{f}"));
    for paths in [
        vec![r.a.clone(), r.b.clone()],
        vec![compare("a.json"), compare("b.json")],
        vec![compare("a.json"), compare("b.json"), compare("c.json")],
    ] {
        let runs = labelled(&paths);
        let html = html_of(&paths);
        check_matched_chart(&html, &runs);
        check_top1_chart(&html, &runs);
        check_grid(&html, &runs);
        let files: Vec<&RunFile> = runs.iter().map(|(_, r)| r).collect();
        let quarters = html_table_after(&html, "<h2>Pass rate by depth quarter</h2>");
        let checked = check_quarter_rows(&quarters[1..], &files);
        assert_eq!(checked, nonempty_quarters(&files));
        let targets = runs[0].1.targets.len();
        assert_eq!(check_diff_columns(&html, runs.len()), targets);
    }
}

#[test]
fn runs_with_different_targets_get_no_grid_but_the_rest() {
    // other_targets.json is b.json with its sixth target (memoize) renamed throttle.
    let paths = [fixture("compare/a.json"), fixture("compare/other_targets.json")];
    let runs = labelled(&paths);
    let html = html_of(&paths);
    assert!(!html.contains("<h2>Per target, by depth</h2>"), "a grid of different targets");
    assert!(html.contains("No per-target grid: the runs were not asked about the same targets."));
    // The rest of the page is there: both runs in the aggregate, both series in
    // each chart, the quarters, and every target's diff.
    let aggregate = html_table_after(&html, "<h2>Aggregate</h2>");
    let labels: Vec<&str> = aggregate[1..].iter().map(|row| row[0].as_str()).collect();
    assert_eq!(labels, ["a", "other_targets"]);
    check_matched_chart(&html, &runs);
    check_top1_chart(&html, &runs);
    let files: Vec<&RunFile> = runs.iter().map(|(_, r)| r).collect();
    let quarters = html_table_after(&html, "<h2>Pass rate by depth quarter</h2>");
    assert_eq!(check_quarter_rows(&quarters[1..], &files), nonempty_quarters(&files));
    // 15 shared targets, memoize in a only and throttle in other_targets only.
    assert_eq!(check_diff_columns(&html, 2), 17);
    assert_eq!(html.matches("not asked in this run").count(), 2);
    for (i, (_, run)) in runs.iter().enumerate() {
        for t in &run.targets {
            let open = format!("<pre class=\"diff\" data-run=\"{i}\" data-target=\"{}\">", t.name);
            assert!(details_of(&html, &t.name, t.line).contains(&open), "{i} {}", t.name);
        }
    }
    // The terminal table says the same.
    let args: Vec<&OsStr> = paths.iter().map(|p| s(p)).collect();
    let table = report_ok(&args);
    assert!(table.contains("(No per-target grid"), "{table}");
    assert!(!table.contains("Per target, by depth"), "{table}");
}

/// Text from a run file is text on the page, whatever it holds: a target
/// name, an answer line, a corpus path, a model path and a label (the run
/// file's stem) that are markup, `</script>` among them, show escaped where
/// the page shows them, and add no element to it.
#[test]
fn html_shows_markup_from_a_run_file_as_text() {
    const NAME: &str = "<script>alert(1)</script>";
    const ANSWER: &str = "</script><script>alert(\"x\")</script> & 'q'";
    const CORPUS: &str = "corpus/</style><script>alert(2)</script>.js";
    const MODEL: &str = "<img src=x onerror=alert(3)>";
    const STEM: &str = "<b onmouseover=alert(4)>run";
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("run.json");
    std::fs::copy(fixture("compare/a.json"), &plain).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&plain).unwrap()).unwrap();
    v["targets"][0]["name"] = NAME.into();
    v["targets"][0]["lines"][0]["text"] = ANSWER.into();
    v["manifest"]["corpus"]["path"] = CORPUS.into();
    v["manifest"]["model"]["path"] = MODEL.into();
    let hostile = dir.path().join(format!("{STEM}.json"));
    std::fs::write(&hostile, serde_json::to_string(&v).unwrap()).unwrap();

    let html = html_of(std::slice::from_ref(&hostile));
    let lower = html.to_ascii_lowercase();
    for tag in ["<script", "</script", "<img", "<b "] {
        assert!(!lower.contains(tag), "{tag} reached the page as markup");
    }
    assert_eq!(lower.matches("</style").count(), 1, "a second </style>");
    // The same page, tag for tag, as that of the run file before the edit.
    let tags = |page: &str| page.matches('<').count();
    assert_eq!(tags(&html), tags(&html_of(&[plain])), "the edited strings added or removed markup");
    let esc = |s: &str| s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;").replace('\'', "&#x27;");
    for shown in [
        format!("<summary><strong>{}</strong> · line ", esc(NAME)),
        format!("<pre class=\"diff\" data-run=\"0\" data-target=\"{}\">", esc(NAME)),
        format!("<span class=\"m\">=</span>{}</span>", esc(ANSWER)),
        format!("<td>{}</td>", esc(STEM)),
        format!("<td>{} (llama,", esc(MODEL)),
        format!("<td>{} lines 1–1000", esc(CORPUS)),
        format!("<title>posrecall report: {}</title>", esc(STEM)),
    ] {
        assert!(html.contains(&shown), "{shown} is not on the page");
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
        (vec![s(&r.a), OsStr::new("--diff"), OsStr::new("--format"), OsStr::new("csv")], "--diff"),
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
