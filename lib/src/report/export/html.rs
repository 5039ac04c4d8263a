//! `--format html` (and `bench --html`): one self-contained page that opens
//! offline in any browser. Inline CSS, no script, no external asset: the
//! aggregate table, a recall-vs-depth chart (SVG drawn by plotters), a
//! teacher-forced top-1-share-vs-depth chart when any run has forced metrics,
//! the per-target grid and pass rate by depth quarter, and every target's diff
//! in the four colours, collapsible, one column per run.
//!
//! Every diff line is an element of class `l-matched`, `l-missing`,
//! `l-hallucinated` or `l-extra` inside
//! `<pre class="diff" data-run="I" data-target="NAME">` (I: the run's 0-based
//! position), so tools can count what the page shows. A target's
//! teacher-forced metrics in run I are one line,
//! `<div class="forced" data-run="I" data-target="NAME">`, above its diff.
//! The charts are `<div class="chart" id="chart-matched">` and
//! `<div class="chart" id="chart-top1">`.

use crate::record::run::{NOT_MEASURED, RunFile, TargetResult};
use crate::report::aggregate::{Grid, LoadedRun, TargetColumn, rows, target_columns};
use crate::report::export::Exporter;
use crate::report::export::charts::{chart, depth_chart, heat_map, length_chart, series_color};
use crate::report::tabular::{self, Tabular};
use crate::score::LineStatus;
use crate::score::forced::Forced;
use anyhow::Result;
use html_escape::{encode_double_quoted_attribute as attr, encode_text as text};
use std::fmt::Write as _;
use std::path::Path;

pub struct Html;

impl Exporter for Html {
    fn render(&self, runs: &[LoadedRun]) -> Result<String> {
        page(runs)
    }
}

/// `bench --html FILE`: the page for one run, labelled by its run file's
/// stem (else its build label), written atomically.
pub fn write_bench_page(run: &RunFile, run_file: Option<&Path>, html: &Path) -> Result<()> {
    let label = run_file
        .and_then(|p| p.file_stem())
        .map(|s| s.to_string_lossy().into_owned())
        .or_else(|| run.manifest.model.as_ref().map(|m| m.build.clone()))
        .unwrap_or_else(|| "run".into());
    let loaded = LoadedRun { path: run_file.map(Path::to_path_buf), label, run: run.clone() };
    let page = Html.render(std::slice::from_ref(&loaded))?;
    crate::support::fsutil::write_atomic(html, page.as_bytes())
}

const STYLE: &str = r#"
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2328; background: #fff; margin: 24px; }
h1 { font-size: 22px; margin: 0 0 4px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #d0d7de; padding-bottom: 4px; }
.sub { color: #57606a; margin: 0 0 12px; }
table { border-collapse: collapse; margin: 6px 0 10px; }
.scroll { overflow-x: auto; max-width: 100%; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: left; vertical-align: top; }
th, td.num { white-space: nowrap; }
th { background: #f6f8fa; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.pass { background: #dafbe1; }
td.fail { background: #ffebe9; }
.caption { color: #57606a; margin: 0; }
.forced { font-size: 12px; color: #57606a; margin-bottom: 4px; font-variant-numeric: tabular-nums; }
.chart svg { max-width: 100%; height: auto; border: 1px solid #d0d7de; }
.series { display: inline-block; margin-right: 16px; }
.swatch { display: inline-block; width: 22px; height: 4px; vertical-align: middle; margin-right: 6px; }
.legend span.key { display: inline-block; padding: 1px 8px; margin-right: 8px; font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
details.target { border: 1px solid #d0d7de; border-radius: 6px; margin: 6px 0; }
details.target > summary { cursor: pointer; padding: 6px 10px; background: #f6f8fa; }
details.target[open] > summary { border-bottom: 1px solid #d0d7de; }
.badge { display: inline-block; padding: 0 6px; margin-left: 6px; border-radius: 10px; font-size: 12px; }
.badge.pass { background: #dafbe1; }
.badge.fail { background: #ffebe9; }
.cols { display: grid; gap: 10px; padding: 10px; }
.col { min-width: 0; }
.colhead { font-size: 12px; color: #57606a; margin-bottom: 4px; }
.absent { color: #57606a; font-style: italic; }
pre.diff { margin: 0; padding: 4px 0; background: #fff; border: 1px solid #eaeef2; font: 12px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; white-space: pre-wrap; overflow-wrap: anywhere; }
pre.diff .l { display: block; padding: 0 6px; }
.m { user-select: none; display: inline-block; width: 1.4em; opacity: 0.8; }
.l-matched, .k-matched { color: #6e7781; }
.l-missing, .k-missing { color: #953800; background: #ffe2c4; }
.l-hallucinated, .k-hallucinated { color: #4d3800; background: #fff1a8; }
.l-extra, .k-extra { color: #0a3069; background: #d3e6ff; }
.meta td { white-space: normal; }
.heatmaps { display: flex; flex-wrap: wrap; gap: 18px; }
figure.heatmap { margin: 0; }
figure.heatmap figcaption { font-weight: 600; margin-bottom: 4px; }
"#;

/// The whole page.
fn page(runs: &[LoadedRun]) -> Result<String> {
    let mut out = String::new();
    out.push_str("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n");
    out.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(out, "<title>posrecall report: {}</title>", text(&titles(runs)));
    let _ = writeln!(out, "<style>{STYLE}</style>\n</head>\n<body>");
    out.push_str("<h1>posrecall report</h1>\n");
    let _ = writeln!(out, "<p class=\"sub\">{}</p>", text(&subtitle(runs)));

    out.push_str("<h2>Aggregate</h2>\n");
    out.push_str(&html_table(&tabular::aggregate(&rows(runs)), |_| None));

    // Runs that generated no answer (`--forced-only`) have no matched lines
    // to draw; with none that did, the chart is left out.
    if runs.iter().any(measured) {
        out.push_str("<h2>Matched lines by depth</h2>\n<div class=\"chart\" id=\"chart-matched\">\n");
        out.push_str(&chart(runs)?);
        out.push_str("</div>\n<p class=\"legend\">");
        out.push_str(&legend(runs, measured));
        out.push_str("<span class=\"series\"><span class=\"swatch\" style=\"background: #888\"></span>pass threshold</span></p>\n");
    }

    if runs.iter().any(has_forced) {
        out.push_str("<h2>Teacher-forced top-1 share by depth</h2>\n");
        out.push_str("<p class=\"caption\">Per target, the share of its expected tokens the model ranked first when fed the expected lines (1 = greedy decoding from the true prefix reproduces them exactly).</p>\n");
        out.push_str("<div class=\"chart\" id=\"chart-top1\">\n");
        let top1 = |t: &TargetResult| t.forced.as_ref().map(|f| f.top1_share);
        out.push_str(&depth_chart(runs, top1, "top-1 share", 1.0)?);
        out.push_str("</div>\n<p class=\"legend\">");
        out.push_str(&legend(runs, has_forced));
        out.push_str("</p>\n");
    }
    if runs.iter().any(has_kld) {
        out.push_str("<h2>KL divergence from the reference by depth</h2>\n");
        out.push_str("<p class=\"caption\">Per target, the mean KL divergence (nats per forced token) of the run's next-token distributions from those of the reference run it was measured against; 0 = the same distributions.</p>\n");
        out.push_str("<div class=\"chart\" id=\"chart-kld\">\n");
        let kld = |t: &TargetResult| Some(t.forced.as_ref()?.kld.as_ref()?.mean);
        let top = runs.iter().flat_map(|r| r.run.targets.iter().filter_map(kld)).fold(0.0, f64::max);
        out.push_str(&depth_chart(runs, kld, "mean KLD (nats per token)", if top > 0.0 { top } else { 1.0 })?);
        out.push_str("</div>\n<p class=\"legend\">");
        out.push_str(&legend(runs, has_kld));
        out.push_str("</p>\n");
    }

    if runs.iter().any(|r| r.run.ladder.is_some()) {
        out.push_str(&ladder_section(runs)?);
    }

    if runs.len() > 1 {
        match Grid::of(runs) {
            Some(grid) => {
                out.push_str("<h2>Per target, by depth</h2>\n");
                let _ = writeln!(out, "<p class=\"caption\">{}</p>", text(&tabular::grid_caption(&grid, runs)));
                out.push_str(&html_table(&tabular::grid(&grid, runs), |c| {
                    if c.contains('✓') {
                        Some("pass")
                    } else if c.contains('✗') {
                        Some("fail")
                    } else {
                        None
                    }
                }));
            }
            None => out.push_str("<p class=\"caption\">No per-target grid: the runs were not asked about the same targets.</p>\n"),
        }
    }
    out.push_str("<h2>Pass rate by depth quarter</h2>\n");
    out.push_str(&html_table(&tabular::quarters(runs), |_| None));

    out.push_str("<h2>Per-target diffs</h2>\n<p class=\"legend\">");
    for (class, mark, word) in CLASSES {
        let _ = write!(out, "<span class=\"key k-{class}\">{mark} {word}</span>");
    }
    out.push_str("</p>\n<p class=\"caption\">Click a function to open its diff");
    if runs.len() > 1 {
        out.push_str(", one column per run");
    }
    out.push_str(".</p>\n");
    for col in target_columns(runs) {
        out.push_str(&target_section(&col, runs));
    }

    out.push_str("<h2>Runs</h2>\n");
    out.push_str(&meta_table(runs));
    out.push_str("</body>\n</html>\n");
    Ok(out)
}

/// Whether any target of the run has teacher-forced metrics.
fn has_forced(r: &LoadedRun) -> bool {
    r.run.targets.iter().any(|t| t.forced.is_some())
}

/// Whether any target of the run was measured against a reference.
fn has_kld(r: &LoadedRun) -> bool {
    r.run.targets.iter().any(|t| t.forced.as_ref().is_some_and(|f| f.kld.is_some()))
}

/// Whether a run measured recall (generated its answers).
fn measured(r: &LoadedRun) -> bool {
    r.run.summary.total.recall.is_some()
}

/// A colour swatch and the label of each run `include` keeps, coloured by
/// the run's position (as in every chart).
fn legend(runs: &[LoadedRun], include: impl Fn(&LoadedRun) -> bool) -> String {
    let mut out = String::new();
    for (i, r) in runs.iter().enumerate().filter(|(_, r)| include(r)) {
        let (cr, cg, cb) = series_color(i);
        let _ = write!(
            out,
            "<span class=\"series\"><span class=\"swatch\" style=\"background: rgb({cr},{cg},{cb})\"></span>{}</span>",
            text(&r.label)
        );
    }
    out
}

/// The run labels, for the title.
fn titles(runs: &[LoadedRun]) -> String {
    runs.iter().map(|r| r.label.as_str()).collect::<Vec<_>>().join(", ")
}

/// Corpus, kept range and scoring parameters of the first run (all runs share `lines`).
fn subtitle(runs: &[LoadedRun]) -> String {
    let m = &runs[0].run.manifest;
    let corpus = Path::new(&m.corpus.path).file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| m.corpus.path.clone());
    format!(
        "{} run{} · corpus {} lines {}–{} · {} lines per answer, pass at {} matched",
        runs.len(),
        if runs.len() == 1 { "" } else { "s" },
        corpus,
        m.corpus.crop.first_line,
        m.corpus.crop.last_line,
        m.params.lines,
        m.params.pass
    )
}

/// A `Tabular` as an HTML table; `class_of` may add a class to a body cell.
fn html_table(t: &Tabular, class_of: impl Fn(&str) -> Option<&'static str>) -> String {
    let mut out = String::from("<div class=\"scroll\"><table>\n<thead><tr>");
    for (h, num) in t.header.iter().zip(&t.numeric) {
        let _ = write!(out, "<th{}>{}</th>", if *num { " class=\"num\"" } else { "" }, text(h));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in &t.rows {
        out.push_str("<tr>");
        for (c, num) in row.iter().zip(&t.numeric) {
            let mut classes = Vec::new();
            if *num {
                classes.push("num");
            }
            if let Some(k) = class_of(c) {
                classes.push(k);
            }
            let class = if classes.is_empty() { String::new() } else { format!(" class=\"{}\"", classes.join(" ")) };
            let _ = write!(out, "<td{class}>{}</td>", text(c));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table></div>\n");
    out
}

/// Runs with a length ladder: a depth × length heat map per run, side by
/// side, and the pass rate against length with its 95% interval.
fn ladder_section(runs: &[LoadedRun]) -> Result<String> {
    let mut out = String::from("<h2>Recall by depth and length</h2>\n");
    out.push_str(
        "<p class=\"caption\">Each cell is one depth quarter of one window: colour by the share of expected lines matched \
         (white 0, dark 1), text passes/targets and matched lines; hover for the counts. Each window holds the file \
         from the same first line up to its length in prefix tokens.</p>\n<div class=\"heatmaps\" id=\"heatmap\">\n",
    );
    for (i, r) in runs.iter().enumerate() {
        if let Some(l) = &r.run.ladder {
            out.push_str(&heat_map(i, &r.label, l, r.run.manifest.params.lines));
        }
    }
    out.push_str("</div>\n<h2>Pass rate by length</h2>\n");
    out.push_str("<p class=\"caption\">Per window, passes / targets with its 95% Wilson interval; the dashed line is the threshold of the effective length.</p>\n");
    out.push_str("<div class=\"chart\" id=\"chart-lengths\">\n");
    out.push_str(&length_chart(runs)?);
    out.push_str("</div>\n<p class=\"legend\">");
    out.push_str(&legend(runs, |r| r.run.ladder.is_some()));
    out.push_str("</p>\n<ul class=\"caption\">\n");
    for r in runs {
        if let Some(l) = &r.run.ladder {
            let eff = l.effective_length.map_or("below the shortest length".to_string(), crate::record::run::length_label);
            let _ = writeln!(
                out,
                "<li>{}: effective length (pass rate ≥ {:.2} at every length up to it) {}{}</li>",
                text(&r.label),
                l.effective_at,
                text(&eff),
                l.stopped.as_ref().map(|s| format!("; {}", text(s))).unwrap_or_default()
            );
        }
    }
    out.push_str("</ul>\n");
    Ok(out)
}

/// The classes of the diff lines: CSS suffix, marker, word.
const CLASSES: [(&str, &str, &str); 4] =
    [("matched", "=", "matched"), ("missing", "-", "missing"), ("hallucinated", "?", "hallucinated"), ("extra", "+", "extra")];

fn class_of(s: LineStatus) -> (&'static str, &'static str) {
    let (class, mark, _) = match s {
        LineStatus::Matched => CLASSES[0],
        LineStatus::Missing => CLASSES[1],
        LineStatus::Hallucinated => CLASSES[2],
        LineStatus::Extra => CLASSES[3],
    };
    (class, mark)
}

/// One target: a collapsible section, the summary naming the target and
/// each run's verdict, the body one diff column per run.
fn target_section(col: &TargetColumn<'_>, runs: &[LoadedRun]) -> String {
    let mut out = String::from("<details class=\"target\">\n<summary>");
    let _ = write!(
        out,
        "<strong>{}</strong> · line {} · depth {:.2}",
        text(&crate::report::aggregate::with_length(col.name, col.length)),
        col.line,
        col.depth
    );
    for (r, res) in runs.iter().zip(&col.results) {
        match res.as_ref().map(|t| &t.score) {
            Some(Some(s)) => {
                let lines = r.run.manifest.params.lines;
                let _ = write!(
                    out,
                    "<span class=\"badge {}\">{}: {}/{}</span>",
                    if s.pass { "pass" } else { "fail" },
                    text(&r.label),
                    s.matched,
                    lines
                );
            }
            Some(None) => {
                let _ = write!(out, "<span class=\"badge\">{}: no answer</span>", text(&r.label));
            }
            None => {}
        }
    }
    let _ = writeln!(out, "</summary>\n<div class=\"cols\" style=\"grid-template-columns: repeat({}, minmax(0, 1fr))\">", runs.len());
    for (i, (r, res)) in runs.iter().zip(&col.results).enumerate() {
        out.push_str("<div class=\"col\">");
        match res {
            Some(t) => out.push_str(&diff_column(i, &r.label, t, r.run.manifest.params.lines)),
            None => {
                let _ = write!(out, "<div class=\"colhead\">{}</div><div class=\"absent\">not asked in this run</div>", text(&r.label));
            }
        }
        out.push_str("</div>\n");
    }
    out.push_str("</div>\n</details>\n");
    out
}

/// One run's diff of one target: a heading with the counts, then every line.
fn diff_column(run: usize, label: &str, t: &TargetResult, lines: usize) -> String {
    let mut out = String::new();
    let _ = match &t.score {
        Some(s) => {
            let [verdict, counts @ ..] = crate::report::score_phrases(s, lines);
            write!(out, "<div class=\"colhead\"><strong>{}</strong> {verdict} · {}</div>", text(label), counts.join(" · "))
        }
        None => write!(out, "<div class=\"colhead\"><strong>{}</strong> no answer generated: recall {NOT_MEASURED}</div>", text(label)),
    };
    if let Some(f) = &t.forced {
        let _ = write!(out, "<div class=\"forced\" data-run=\"{run}\" data-target=\"{}\">{}</div>", attr(&t.name), text(&forced_line(f)));
    }
    let _ = write!(out, "<pre class=\"diff\" data-run=\"{run}\" data-target=\"{}\">", attr(&t.name));
    for l in t.score.iter().flat_map(|s| &s.lines) {
        let (class, mark) = class_of(l.status);
        let _ = write!(out, "<span class=\"l l-{class}\"><span class=\"m\">{mark}</span>{}</span>", text(&clip(&l.text)));
    }
    out.push_str("</pre>");
    out
}

/// One target's teacher-forced metrics in one line.
fn forced_line(f: &Forced) -> String {
    format!("teacher-forced: {} · {} tokens", crate::report::forced_phrases(f).join(" · "), f.tokens)
}

/// A runaway answer line is cut (the run file keeps it whole).
fn clip(s: &str) -> std::borrow::Cow<'_, str> {
    crate::report::clip(s, 2000)
}

/// Where each run came from and how it was made.
fn meta_table(runs: &[LoadedRun]) -> String {
    let mut out = String::from(
        "<table class=\"meta\">\n<thead><tr><th>run</th><th>file</th><th>model</th><th>corpus</th><th>parameters</th><th>runtime</th></tr></thead>\n<tbody>\n",
    );
    for r in runs {
        let m = &r.run.manifest;
        let model = match &m.model {
            Some(info) => format!(
                "{} ({}, {} params, sha256 {})",
                info.path,
                info.architecture.as_deref().unwrap_or("?"),
                info.n_params,
                &info.sha256[..info.sha256.len().min(12)]
            ),
            None => "answers scored by `posrecall score`".into(),
        };
        let corpus = format!(
            "{} lines {}–{} (crop {}{})",
            m.corpus.path,
            m.corpus.crop.first_line,
            m.corpus.crop.last_line,
            serde_name(&m.corpus.crop.mode),
            m.corpus.prefix_tokens.map(|t| format!(", {t} tokens")).unwrap_or_default()
        );
        let params = params_cell(m);
        let runtime = format!(
            "posrecall {}{}{}{}",
            m.runtime.posrecall,
            m.runtime.llama_cpp_sys_2.as_deref().map(|v| format!(", llama-cpp-sys-2 {v}")).unwrap_or_default(),
            m.runtime.backend.as_deref().map(|b| format!(", {b}")).unwrap_or_default(),
            m.runtime.cpu_features.as_ref().map(|f| format!(", CPU kernels {}", f.join(" "))).unwrap_or_default()
        );
        let file = r.path.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            text(&r.label),
            text(&file),
            text(&model),
            text(&corpus),
            text(&params),
            text(&runtime)
        );
    }
    out.push_str("</tbody>\n</table>\n");
    out
}

/// The parameters cell of a run's row.
fn params_cell(m: &crate::record::run::Manifest) -> String {
    let mut params = format!(
        "count {}, lines {}, pass {}, seed {}, normalize {}{}",
        m.params.count,
        m.params.lines,
        m.params.pass,
        m.params.seed,
        serde_name(&m.params.normalize),
        if m.params.skip_blank { ", skip blank" } else { "" }
    );
    if let Some(p) = &m.params.probe {
        let _ = write!(params, ", probe {p}");
    }
    if let Some(c) = &m.context {
        let _ = write!(params, ", n_ctx {}, flash attn {}, threads {}, gpu layers {}", c.n_ctx, c.flash_attn, c.threads, c.gpu_layers);
    }
    params
}

/// How the run file spells an enum value (`lines`, `trim`).
fn serde_name<T: serde::Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}
