//! `--format html` (and `bench --html`): one self-contained page that opens
//! offline in any browser. Inline CSS, no script, no external asset: the
//! aggregate table, a recall-vs-depth chart (SVG drawn by plotters), a
//! teacher-forced top-1-share-vs-depth chart when any run has forced metrics,
//! the per-target grid and pass rate by depth quarter, and every target's diff
//! in the four colours, collapsible, one column per run.
//!
//! The markup is the template `report.html.j2`, rendered by minijinja with
//! HTML autoescaping: this file gathers the page's values (text from run
//! files among them) and never writes markup around them, so no value can
//! reach the page unescaped by mistake. The charts' SVG is the one value the
//! template marks safe: plotters draws it from numbers and fixed axis titles.
//!
//! Every diff line is an element of class `l-matched`, `l-missing`,
//! `l-hallucinated` or `l-extra` inside
//! `<pre class="diff" data-run="I" data-target="NAME">` (I: the run's 0-based
//! position), so tools can count what the page shows. A target's
//! teacher-forced metrics in run I are one line,
//! `<div class="forced" data-run="I" data-target="NAME">`, above its diff.
//! The charts are `<div class="chart" id="chart-matched">` and
//! `<div class="chart" id="chart-top1">`; runs of several model builds add
//! `chart-builds-kld` and `chart-builds-passes` (against bits per weight,
//! each dot numbered as the builds legend numbers its run).

use crate::record::run::{NOT_MEASURED, RunFile, TargetResult};
use crate::report::aggregate::{Grid, LoadedRun, TargetColumn, rows, target_columns};
use crate::report::export::Exporter;
use crate::report::export::charts::{
    BuildAxis, BuildPoint, HeatMap, builds_chart, chart, depth_chart, heat_map, length_chart, series_color,
};
use crate::report::tabular::{self, Tabular};
use crate::score::LineStatus;
use crate::score::forced::Forced;
use anyhow::Result;
use minijinja::{AutoEscape, Environment, UndefinedBehavior};
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

pub(crate) struct Html;

impl Exporter for Html {
    fn render(&self, runs: &[LoadedRun]) -> Result<String> {
        render(&page(runs)?)
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

/// The page's markup and style.
const TEMPLATE: &str = include_str!("report.html.j2");

/// The environment the page is rendered in.
fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    // HTML escaping for every template, whatever its name: the page's text
    // comes from run files, which anyone may have edited.
    env.set_auto_escape_callback(|_| AutoEscape::Html);
    // A name the template reads that the page lacks is a bug to see, not an
    // empty cell.
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env.set_syntax(
        minijinja::syntax::SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .keep_trailing_newline(true)
            .build()
            .expect("the default delimiters are valid"),
    );
    // minijinja's own HTML escaping also writes `/` as `&#x2f;`; that is
    // needed only in unquoted attributes, which the template has none of,
    // and would spell `6/8` and file paths as entities in the page's source,
    // which tools and tests search as the run file spells them. So strings
    // get the escaping of a quoted attribute (`& < > " '`), safe in text
    // and in the template's attributes alike; everything else (numbers, the
    // values marked safe, other modes) goes the engine's own way.
    env.set_formatter(|out, state, value| match value.as_str() {
        Some(s) if *state.auto_escape() == AutoEscape::Html && !value.is_safe() => {
            out.write_str(&html_escape::encode_quoted_attribute(s)).map_err(minijinja::Error::from)
        }
        _ => minijinja::escape_formatter(out, state, value),
    });
    env
}

/// The page, rendered.
fn render(page: &Page) -> Result<String> {
    let env = environment();
    let template = env.template_from_named_str("report.html.j2", TEMPLATE)?;
    Ok(template.render(minijinja::value::Serde(page))?)
}

/// Everything the page shows, in the order it shows it; `None` leaves a
/// section out.
#[derive(Serialize)]
struct Page {
    title: String,
    subtitle: String,
    aggregate: Table,
    matched: Option<Chart>,
    top1: Option<Chart>,
    kld: Option<Chart>,
    /// llama-perplexity's figures against the reference, where a run has them.
    kld_stats: Option<[Table; 2]>,
    kld_stats_caption: &'static str,
    ladder: Option<Ladder>,
    /// Runs of more than one model build: KLD and passes against bits per weight.
    builds: Option<Builds>,
    /// More than one run: the grid (or why there is none) and a diff column per run.
    several: bool,
    grid: Option<GridSection>,
    quarters: Table,
    keys: Vec<Key>,
    targets: Vec<TargetSection>,
    /// The cells of the runs table, one row per run.
    meta: Vec<[String; 6]>,
}

/// A table; a cell's class marks it numeric, passed or failed.
#[derive(Serialize)]
struct Table {
    header: Vec<Cell>,
    rows: Vec<Vec<Cell>>,
}

#[derive(Serialize)]
struct Cell {
    text: String,
    class: Option<String>,
}

/// A chart's SVG (drawn here, no text from a run file) and its legend.
#[derive(Serialize)]
struct Chart {
    svg: String,
    legend: Vec<Series>,
}

/// A legend entry: a run's label and its series colour (`rgb(r,g,b)`).
#[derive(Serialize)]
struct Series {
    label: String,
    colour: String,
}

/// The charts of a list of model builds (`bench a.gguf b.gguf`, or their
/// run files given to `report`): one numbered dot per run, the legend
/// saying which number is which run.
#[derive(Serialize)]
struct Builds {
    kld: Option<Chart>,
    passes: Option<Chart>,
    legend: Vec<Series>,
}

#[derive(Serialize)]
struct Ladder {
    heat_maps: Vec<HeatMap>,
    lengths: Chart,
    effective: Vec<Effective>,
}

/// A ladder run's effective length, and why it stopped short if it did.
#[derive(Serialize)]
struct Effective {
    label: String,
    at: String,
    length: String,
    stopped: Option<String>,
}

#[derive(Serialize)]
struct GridSection {
    caption: String,
    table: Table,
}

/// A key of the diffs' legend: CSS suffix, marker, word.
#[derive(Serialize)]
struct Key {
    class: &'static str,
    mark: &'static str,
    word: &'static str,
}

/// One target: its summary line and one column per run.
#[derive(Serialize)]
struct TargetSection {
    name: String,
    line: usize,
    depth: String,
    badges: Vec<Badge>,
    columns: Vec<Column>,
}

/// A run's verdict in a target's summary (`pass`/`fail` class when it has a score).
#[derive(Serialize)]
struct Badge {
    class: Option<&'static str>,
    label: String,
    verdict: String,
}

/// A run's column of a target: its diff, or none when the run did not ask it.
#[derive(Serialize)]
struct Column {
    label: String,
    diff: Option<Diff>,
}

#[derive(Serialize)]
struct Diff {
    /// The target's name as the run file spells it (the data-target attribute).
    target: String,
    /// The heading after the run's label: verdict and counts.
    head: String,
    forced: Option<String>,
    lines: Vec<DiffLine>,
}

#[derive(Serialize)]
struct DiffLine {
    class: &'static str,
    mark: &'static str,
    text: String,
}

/// The whole page's values.
fn page(runs: &[LoadedRun]) -> Result<Page> {
    // Runs that generated no answer (`--forced-only`) have no matched lines
    // to draw; with none that did, the chart is left out.
    let matched = match runs.iter().any(measured) {
        true => Some(Chart { svg: chart(runs)?, legend: legend(runs, measured) }),
        false => None,
    };
    let top1 = match runs.iter().any(has_forced) {
        true => {
            let top1 = |t: &TargetResult| t.forced.as_ref().map(|f| f.top1_share);
            Some(Chart { svg: depth_chart(runs, top1, "top-1 share", 1.0)?, legend: legend(runs, has_forced) })
        }
        false => None,
    };
    let kld = match runs.iter().any(has_kld) {
        true => {
            let kld = |t: &TargetResult| Some(t.forced.as_ref()?.kld.as_ref()?.mean);
            let top = runs.iter().flat_map(|r| r.run.targets.iter().filter_map(kld)).fold(0.0, f64::max);
            let svg = depth_chart(runs, kld, "mean KLD (nats per token)", if top > 0.0 { top } else { 1.0 })?;
            Some(Chart { svg, legend: legend(runs, has_kld) })
        }
        false => None,
    };
    let ladder = match runs.iter().any(|r| r.run.ladder.is_some()) {
        true => Some(ladder(runs)?),
        false => None,
    };
    let grid = (runs.len() > 1).then(|| Grid::of(runs)).flatten().map(|grid| GridSection {
        caption: tabular::grid_caption(&grid, runs),
        table: table(&tabular::grid(&grid, runs), |c| {
            if c.contains('✓') {
                Some("pass")
            } else if c.contains('✗') {
                Some("fail")
            } else {
                None
            }
        }),
    });
    Ok(Page {
        title: titles(runs),
        subtitle: subtitle(runs),
        aggregate: table(&tabular::aggregate(&rows(runs)), |_| None),
        matched,
        top1,
        kld,
        kld_stats: tabular::kld_stats(runs).zip(tabular::delta_p_stats(runs)).map(|(k, d)| [table(&k, |_| None), table(&d, |_| None)]),
        kld_stats_caption: tabular::KLD_STATS_CAPTION,
        ladder,
        builds: builds(runs)?,
        several: runs.len() > 1,
        grid,
        quarters: table(&tabular::quarters(runs), |_| None),
        keys: CLASSES.iter().map(|&(class, mark, word)| Key { class, mark, word }).collect(),
        targets: target_columns(runs).iter().map(|col| target_section(col, runs)).collect(),
        meta: runs.iter().map(meta_row).collect(),
    })
}

/// The builds charts, where the runs hold more than one model build (by
/// sha256) whose bits per weight are known.
fn builds(runs: &[LoadedRun]) -> Result<Option<Builds>> {
    let bpw: Vec<(usize, f64)> =
        runs.iter().enumerate().filter_map(|(i, r)| Some((i, r.run.manifest.model.as_ref()?.bits_per_weight()?))).collect();
    let mut shas: Vec<&str> = runs.iter().filter_map(|r| Some(r.run.manifest.model.as_ref()?.sha256.as_str())).collect();
    shas.sort_unstable();
    shas.dedup();
    if shas.len() < 2 || bpw.len() < 2 {
        return Ok(None);
    }
    let points = |value: &dyn Fn(&LoadedRun) -> Option<f64>| -> Vec<BuildPoint> {
        bpw.iter().filter_map(|&(i, bpw)| Some(BuildPoint { run: i, bpw, value: value(&runs[i])? })).collect()
    };
    let kld = points(&|r| Some(r.run.summary.forced.as_ref()?.kld.as_ref()?.mean));
    let passes = points(&|r| Some(r.run.summary.total.recall.as_ref()?.passes as f64));
    let top = runs.iter().map(|r| r.run.summary.total.count).max().unwrap_or(0) as f64;
    let chart = |points: &[BuildPoint], axis, y_desc| -> Result<Option<Chart>> {
        Ok(match points.is_empty() {
            true => None,
            false => Some(Chart { svg: builds_chart(points, axis, y_desc)?, legend: Vec::new() }),
        })
    };
    let legend = bpw
        .iter()
        .map(|&(i, bpw)| {
            let (cr, cg, cb) = series_color(i);
            let model = runs[i].run.manifest.model.as_ref();
            let file_type = model.and_then(|m| m.file_type.as_deref()).map(|t| format!(" · {t}")).unwrap_or_default();
            Series { label: format!("{} {}{file_type} · {bpw:.2} bpw", i + 1, runs[i].label), colour: format!("rgb({cr},{cg},{cb})") }
        })
        .collect();
    Ok(Some(Builds {
        kld: chart(&kld, BuildAxis::Log, "mean KLD (nats per token, log scale)")?,
        passes: chart(&passes, BuildAxis::Count { top }, "targets passed")?,
        legend,
    }))
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

/// The label and series colour of each run `include` keeps, coloured by
/// the run's position (as in every chart).
fn legend(runs: &[LoadedRun], include: impl Fn(&LoadedRun) -> bool) -> Vec<Series> {
    runs.iter()
        .enumerate()
        .filter(|(_, r)| include(r))
        .map(|(i, r)| {
            let (cr, cg, cb) = series_color(i);
            Series { label: r.label.clone(), colour: format!("rgb({cr},{cg},{cb})") }
        })
        .collect()
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

/// A `Tabular` for the template; `class_of` may add a class to a body cell.
fn table(t: &Tabular, class_of: impl Fn(&str) -> Option<&'static str>) -> Table {
    let num = |n: bool| n.then(|| "num".to_string());
    let header = t.header.iter().zip(&t.numeric).map(|(h, n)| Cell { text: h.clone(), class: num(*n) }).collect();
    let rows = t
        .rows
        .iter()
        .map(|row| {
            row.iter()
                .zip(&t.numeric)
                .map(|(c, n)| {
                    let classes: Vec<&str> = n.then_some("num").into_iter().chain(class_of(c)).collect();
                    Cell { text: c.clone(), class: (!classes.is_empty()).then(|| classes.join(" ")) }
                })
                .collect()
        })
        .collect();
    Table { header, rows }
}

/// Runs with a length ladder: a depth × length heat map per run, side by
/// side, and the pass rate against length with its 95% interval.
fn ladder(runs: &[LoadedRun]) -> Result<Ladder> {
    let with = || runs.iter().enumerate().filter_map(|(i, r)| Some((i, r, r.run.ladder.as_ref()?)));
    let heat_maps = with().map(|(i, r, l)| heat_map(i, &r.label, l, r.run.manifest.params.lines)).collect();
    let lengths = Chart { svg: length_chart(runs)?, legend: legend(runs, |r| r.run.ladder.is_some()) };
    let effective = with()
        .map(|(_, r, l)| Effective {
            label: r.label.clone(),
            at: format!("{:.2}", l.effective_at),
            length: l.effective_length.map_or("below the shortest length".to_string(), crate::record::run::length_label),
            stopped: l.stopped.clone(),
        })
        .collect();
    Ok(Ladder { heat_maps, lengths, effective })
}

/// The classes of the diff lines: CSS suffix, marker, word.
const CLASSES: [(&str, &str, &str); 5] = [
    ("matched", "=", "matched"),
    ("missing", "-", "missing"),
    ("hallucinated", "?", "hallucinated"),
    ("extra", "+", "extra"),
    ("reindented", "~", "re-indented"),
];

fn class_of(s: LineStatus) -> (&'static str, &'static str) {
    let (class, mark, _) = match s {
        LineStatus::Matched => CLASSES[0],
        LineStatus::Missing => CLASSES[1],
        LineStatus::Hallucinated => CLASSES[2],
        LineStatus::Extra => CLASSES[3],
        LineStatus::Reindented => CLASSES[4],
    };
    (class, mark)
}

/// One target: the summary naming the target and each run's verdict, and
/// one diff column per run.
fn target_section(col: &TargetColumn<'_>, runs: &[LoadedRun]) -> TargetSection {
    let badges = runs
        .iter()
        .zip(&col.results)
        .filter_map(|(r, res)| {
            let label = r.label.clone();
            Some(match res.as_ref()?.score.as_ref() {
                Some(s) => Badge {
                    class: Some(if s.pass { "pass" } else { "fail" }),
                    label,
                    verdict: format!("{}/{}", s.matched, r.run.manifest.params.lines),
                },
                None => Badge { class: None, label, verdict: "no answer".into() },
            })
        })
        .collect();
    let columns = runs
        .iter()
        .zip(&col.results)
        .map(|(r, res)| Column { label: r.label.clone(), diff: res.map(|t| diff(t, r.run.manifest.params.lines)) })
        .collect();
    TargetSection {
        name: crate::report::aggregate::with_length(col.name, col.length),
        line: col.line,
        depth: format!("{:.2}", col.depth),
        badges,
        columns,
    }
}

/// One run's diff of one target: the counts, then every line.
fn diff(t: &TargetResult, lines: usize) -> Diff {
    let head = match &t.score {
        Some(s) => {
            let phrases = crate::report::score_phrases(s, lines);
            let (verdict, counts) = phrases.split_first().map_or(("", &[][..]), |(v, c)| (v.as_str(), c));
            format!("{verdict} · {}", counts.join(" · "))
        }
        None => format!("no answer generated: recall {NOT_MEASURED}"),
    };
    let lines = t
        .score
        .iter()
        .flat_map(|s| &s.lines)
        .map(|l| {
            let (class, mark) = class_of(l.status);
            DiffLine { class, mark, text: clip(&l.text).into_owned() }
        })
        .collect();
    Diff { target: t.name.clone(), head, forced: t.forced.as_ref().map(forced_line), lines }
}

/// One target's teacher-forced metrics in one line.
fn forced_line(f: &Forced) -> String {
    format!("teacher-forced: {} · {} tokens", crate::report::forced_phrases(f).join(" · "), f.tokens)
}

/// A runaway answer line is cut (the run file keeps it whole).
fn clip(s: &str) -> std::borrow::Cow<'_, str> {
    crate::report::clip(s, 2000)
}

/// Where a run came from and how it was made: the cells of its row.
fn meta_row(r: &LoadedRun) -> [String; 6] {
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
    let runtime = format!(
        "posrecall {}{}{}{}",
        m.runtime.posrecall,
        m.runtime.llama_cpp_sys_2.as_deref().map(|v| format!(", llama-cpp-sys-2 {v}")).unwrap_or_default(),
        m.runtime.backend.as_deref().map(|b| format!(", {b}")).unwrap_or_default(),
        m.runtime.cpu_features.as_ref().map(|f| format!(", CPU kernels {}", f.join(" "))).unwrap_or_default()
    );
    let file = r.path.as_ref().map(|p| p.display().to_string()).unwrap_or_default();
    [r.label.clone(), file, model, corpus, params_cell(m), runtime]
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

#[cfg(test)]
mod tests {
    /// Strings are escaped for text and quoted attributes whatever the
    /// template's name, `/` is left as it is, and numbers and what the
    /// template marks safe are written unchanged.
    #[test]
    fn the_environment_escapes_every_string_not_marked_safe() {
        let env = super::environment();
        let ctx = minijinja::context! { s => "<a href='x'>\"6/8\" & </script>", n => 3, svg => "<svg></svg>" };
        let out = env.render_str("{{ s }}|{{ n }}|{{ svg|safe }}", ctx).unwrap();
        assert_eq!(out, "&lt;a href=&#x27;x&#x27;&gt;&quot;6/8&quot; &amp; &lt;/script&gt;|3|<svg></svg>");
    }
}
