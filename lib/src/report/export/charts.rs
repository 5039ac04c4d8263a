//! The charts of the HTML page: inline SVG drawn with plotters, the layout
//! of the depth × length heat map (its markup is in the page's template),
//! and the series colour of each run.

use crate::record::run::TargetResult;
use crate::report::aggregate::LoadedRun;
use anyhow::Result;
use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use serde::Serialize;
use std::ops::Range;

/// Series colours of the chart (Tableau 10), by run position.
const PALETTE: [(u8, u8, u8); 10] = [
    (0x4e, 0x79, 0xa7),
    (0xf2, 0x8e, 0x2b),
    (0xe1, 0x57, 0x59),
    (0x76, 0xb7, 0xb2),
    (0x59, 0xa1, 0x4f),
    (0xed, 0xc9, 0x48),
    (0xb0, 0x7a, 0xa1),
    (0xff, 0x9d, 0xa7),
    (0x9c, 0x75, 0x5f),
    (0xba, 0xb0, 0xac),
];

pub(super) fn series_color(i: usize) -> (u8, u8, u8) {
    PALETTE[i % PALETTE.len()]
}

/// The axes every chart draws on.
type Axes<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// The x axis of the depth charts.
const DEPTH: &str = "depth in the kept text (0 = start, 1 = end)";

fn depth_label(x: &f64) -> String {
    format!("{x:.1}")
}

/// A run's series colour, for plotters.
fn run_color(i: usize) -> RGBColor {
    let (r, g, b) = series_color(i);
    RGBColor(r, g, b)
}

/// The stroke width and dot radius of series `k` of `n`: earlier runs are
/// drawn wider, so identical results stay visible as rings.
fn weight(k: usize, n: usize) -> (u32, i32) {
    let w = (n - 1 - k).min(4);
    (2 + 2 * w as u32, 4 + 2 * w as i32)
}

/// What the charts' meshes do not share: the axis descriptions, how many
/// labels each axis gets, and how they are written.
struct Mesh<'f> {
    x_desc: &'f str,
    y_desc: &'f str,
    x_labels: usize,
    y_labels: usize,
    x_label: &'f dyn Fn(&f64) -> String,
    y_label: &'f dyn Fn(&f64) -> String,
}

/// An SVG of `size` on a white ground, drawn by `draw`, inline: without the
/// XML namespace attribute (HTML does not need it).
fn render_svg(size: (u32, u32), draw: impl FnOnce(&DrawingArea<SVGBackend<'_>, Shift>) -> Result<()>) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE)?;
        draw(&root)?;
        root.present()?;
    }
    Ok(svg.replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1))
}

/// Axes over `x` × `y` with the page's margins, light grid and label styles.
fn axes<'a, 'b>(root: &'a DrawingArea<SVGBackend<'b>, Shift>, x: Range<f64>, y: Range<f64>, mesh: Mesh<'_>) -> Result<Axes<'a, 'b>> {
    let mut chart = ChartBuilder::on(root).margin(14).x_label_area_size(44).y_label_area_size(56).build_cartesian_2d(x, y)?;
    chart
        .configure_mesh()
        .x_desc(mesh.x_desc)
        .y_desc(mesh.y_desc)
        .x_labels(mesh.x_labels)
        .y_labels(mesh.y_labels)
        .x_label_formatter(mesh.x_label)
        .y_label_formatter(mesh.y_label)
        .max_light_lines(1)
        .light_line_style(RGBColor(0xf2, 0xf2, 0xf2))
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 15))
        .draw()?;
    Ok(chart)
}

/// A dashed grey line from `x.0` to `x.1` at each of `ys` (pass thresholds).
fn dashed_lines(chart: &mut Axes<'_, '_>, x: (f64, f64), ys: impl IntoIterator<Item = f64>) -> Result<()> {
    let gray = RGBColor(0x88, 0x88, 0x88);
    for y in ys {
        chart.draw_series(DashedLineSeries::new(vec![(x.0, y), (x.1, y)], 8, 5, gray.stroke_width(2)))?;
    }
    Ok(())
}

/// Each series (a run's position and its points), joined and dotted in
/// the run's colour.
fn draw_runs(chart: &mut Axes<'_, '_>, series: Vec<(usize, Vec<(f64, f64)>)>) -> Result<()> {
    let n = series.len();
    for (k, (i, pts)) in series.into_iter().enumerate() {
        let color = run_color(i);
        let (width, radius) = weight(k, n);
        chart.draw_series(LineSeries::new(pts.clone(), color.stroke_width(width)))?;
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, radius, color.filled())))?;
    }
    Ok(())
}

/// A run's points (depth, `value`) at the targets `value` gives one for, by depth.
fn by_depth(r: &LoadedRun, value: &impl Fn(&TargetResult) -> Option<f64>) -> Vec<(f64, f64)> {
    let mut pts: Vec<(f64, f64)> = r.run.targets.iter().filter_map(|t| Some((t.depth, value(t)?))).collect();
    pts.sort_by(|a, b| a.0.total_cmp(&b.0));
    pts
}

/// Matched lines (y) against depth (x), one series per run, and a line at
/// each pass threshold.
pub(super) fn chart(runs: &[LoadedRun]) -> Result<String> {
    let lines = runs[0].run.manifest.params.lines as f64;
    let mut passes: Vec<usize> = runs.iter().map(|r| r.run.manifest.params.pass).collect();
    passes.sort_unstable();
    passes.dedup();
    // Every run is a series, even one without targets.
    let matched = |t: &TargetResult| t.score.as_ref().map(|s| s.matched as f64);
    let series = runs.iter().enumerate().map(|(i, r)| (i, by_depth(r, &matched))).collect();
    render_svg((960, 380), |root| {
        let y_label = |y: &f64| if *y < 0.0 { String::new() } else { format!("{y}") };
        let mesh = Mesh {
            x_desc: DEPTH,
            y_desc: "matched lines",
            x_labels: 11,
            y_labels: (lines as usize + 1).min(11),
            x_label: &depth_label,
            y_label: &y_label,
        };
        let mut chart = axes(root, 0f64..1f64, -0.4f64..(lines + 0.6), mesh)?;
        dashed_lines(&mut chart, (0.0, 1.0), passes.iter().map(|&p| p as f64))?;
        draw_runs(&mut chart, series)
    })
}

/// A per-target value (y, 0..`top`; the top-1 share, the KL divergence)
/// against depth (x), one series per run that has it (coloured by the run's
/// position), each point a target that has it.
pub(super) fn depth_chart(runs: &[LoadedRun], value: impl Fn(&TargetResult) -> Option<f64>, y_desc: &str, top: f64) -> Result<String> {
    let series = runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let pts = by_depth(r, &value);
            (!pts.is_empty()).then_some((i, pts))
        })
        .collect();
    render_svg((960, 340), |root| {
        let y_label = |y: &f64| {
            if *y < 0.0 || *y > top {
                String::new()
            } else if top >= 1.0 {
                format!("{y:.1}")
            } else {
                format!("{y:.1e}")
            }
        };
        let mesh = Mesh { x_desc: DEPTH, y_desc, x_labels: 11, y_labels: 11, x_label: &depth_label, y_label: &y_label };
        let mut chart = axes(root, 0f64..1f64, -0.03 * top..1.03 * top, mesh)?;
        draw_runs(&mut chart, series)
    })
}

/// The heat map's cell size, and the room left of and above the cells for
/// the headings.
const CW: usize = 92;
const CH: usize = 40;
const LEFT: usize = 86;
const TOP: usize = 44;

/// One run's depth × length heat map: where the template draws each
/// column heading, row heading and cell of its SVG, and what they say.
#[derive(Serialize)]
pub(super) struct HeatMap {
    label: String,
    width: usize,
    height: usize,
    cell_width: usize,
    cell_height: usize,
    columns: Vec<HeatColumn>,
    rows: Vec<HeatRow>,
}

/// A length's heading: its label and the prefix tokens of its window.
#[derive(Serialize)]
struct HeatColumn {
    x: usize,
    length: String,
    tokens: usize,
}

/// A depth quarter: its heading and its cell at each length.
#[derive(Serialize)]
struct HeatRow {
    y: usize,
    quarter: String,
    cells: Vec<HeatCell>,
}

/// A cell: its box, fill and ink, the text in it and its hover title.
#[derive(Serialize)]
struct HeatCell {
    x: usize,
    y: usize,
    fill: String,
    ink: &'static str,
    text_x: usize,
    text_y: usize,
    body: String,
    hover: String,
}

/// One run's depth × length heat map, as an SVG table of cells.
pub(super) fn heat_map(run: usize, label: &str, l: &crate::record::run::LadderRecord, lines: usize) -> HeatMap {
    let columns = l
        .rungs
        .iter()
        .enumerate()
        .map(|(c, r)| HeatColumn { x: LEFT + c * CW + CW / 2, length: crate::record::run::length_label(r.length), tokens: r.prefix_tokens })
        .collect();
    let rows = (0..4)
        .map(|q| {
            let y = TOP + q * CH;
            let cells = l.rungs.iter().enumerate().map(|(c, r)| heat_cell(run, q, r, lines, LEFT + c * CW, y)).collect();
            HeatRow { y: y + CH / 2 + 4, quarter: crate::report::aggregate::quarter_label(q), cells }
        })
        .collect();
    HeatMap {
        label: label.to_string(),
        width: LEFT + CW * l.rungs.len() + 8,
        height: TOP + CH * 4 + 8,
        cell_width: CW - 2,
        cell_height: CH - 2,
        columns,
        rows,
    }
}

/// The cell of depth quarter `q` at rung `r`, its corner at `(x, y)`, in the
/// colour of run `run`.
fn heat_cell(run: usize, q: usize, r: &crate::record::run::RungRecord, lines: usize, x: usize, y: usize) -> HeatCell {
    let (cr, cg, cb) = series_color(run);
    let t = &r.summary.by_quarter[q];
    // A ladder always measures recall (`RunFile::check`); a cell
    // without it is drawn as one without targets.
    let recall = t.recall.clone().unwrap_or_default();
    let share = match (t.count, &t.recall) {
        (0, _) | (_, None) => None,
        (n, Some(r)) => Some(r.matched as f64 / (n * lines.max(1)) as f64),
    };
    let fill = match share {
        None => "#f6f8fa".to_string(),
        Some(s) => {
            let mix = |v: u8| (255.0 - (255.0 - v as f64) * s).round() as u8;
            format!("rgb({},{},{})", mix(cr), mix(cg), mix(cb))
        }
    };
    let ink = if share.is_some_and(|s| s > 0.55) { "#fff" } else { "#1f2328" };
    let (body, hover) = match share {
        None => ("·".to_string(), "no target".to_string()),
        Some(s) => (
            format!("{}/{} · {}", recall.passes, t.count, recall.matched),
            format!(
                "{} at depth {}: {} of {} passed, {} matched lines ({:.0}% of {}), {} missing, {} hallucinated",
                crate::record::run::length_label(r.length),
                crate::report::aggregate::quarter_label(q),
                recall.passes,
                t.count,
                recall.matched,
                100.0 * s,
                t.count * lines,
                recall.missing,
                recall.hallucinated
            ),
        ),
    };
    HeatCell { x, y, fill, ink, text_x: x + CW / 2, text_y: y + CH / 2 + 4, body, hover }
}

/// Pass rate (y) against length (x, log scale), one series per ladder run,
/// each point with its 95% interval.
pub(super) fn length_chart(runs: &[LoadedRun]) -> Result<String> {
    // Per run: its index and its points (length, pass rate, interval low, high).
    type Series = (usize, Vec<(f64, f64, f64, f64)>);
    let series: Vec<Series> = runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let l = r.run.ladder.as_ref()?;
            Some((i, l.rungs.iter().map(|g| ((g.prefix_tokens.max(1) as f64).log2(), g.pass_rate, g.pass_low, g.pass_high)).collect()))
        })
        .collect();
    let xs = series.iter().flat_map(|(_, p)| p.iter().map(|p| p.0));
    let (lo, hi) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    // A margin around the points, not whole doublings: a 4k rung holds a few
    // tokens under 4,096, and flooring its log would open the axis at 2k.
    // The powers of two nearest the ends stay on the axis, so that rungs
    // within one doubling still get a labelled tick.
    let (lo, hi) = ((lo - 0.3).min(lo.round()), (hi + 0.3).max(hi.round()));
    let thresholds: Vec<f64> = runs.iter().filter_map(|r| Some(r.run.ladder.as_ref()?.effective_at)).collect();
    render_svg((960, 340), |root| {
        let x_label = |x: &f64| {
            let n = 2f64.powf(*x).round() as usize;
            if (x - x.round()).abs() > 1e-6 { String::new() } else { crate::record::run::length_label(n) }
        };
        let y_label = |y: &f64| if *y < 0.0 || *y > 1.0 { String::new() } else { format!("{y:.1}") };
        let mesh = Mesh {
            x_desc: "prefix tokens (log scale)",
            y_desc: "pass rate",
            x_labels: ((hi - lo).ceil() as usize + 1).min(16),
            y_labels: 11,
            x_label: &x_label,
            y_label: &y_label,
        };
        let mut chart = axes(root, lo..hi, -0.03f64..1.03f64, mesh)?;
        dashed_lines(&mut chart, (lo, hi), thresholds)?;
        let n = series.len();
        for (k, (i, pts)) in series.into_iter().enumerate() {
            let color = run_color(i);
            let (width, radius) = weight(k, n);
            chart.draw_series(LineSeries::new(pts.iter().map(|p| (p.0, p.1)), color.stroke_width(width)))?;
            chart.draw_series(pts.iter().map(|p| PathElement::new(vec![(p.0, p.2), (p.0, p.3)], color.stroke_width(2))))?;
            chart.draw_series(pts.iter().map(|p| Circle::new((p.0, p.1), radius, color.filled())))?;
        }
        Ok(())
    })
}

/// The y axis of a builds chart: a linear count from 0 to `top`, or a
/// decimal log scale (the divergences of quant builds span decades).
pub(super) enum BuildAxis {
    Count { top: f64 },
    Log,
}

/// One instance of a list in a builds chart: its run's position (its colour
/// and the number drawn beside it), its bits per weight and its value.
pub(super) struct BuildPoint {
    pub run: usize,
    pub bpw: f64,
    pub value: f64,
}

/// A value (y) against bits per weight (x), one labelled dot per instance:
/// the chart people post for quant builds. The label is the run's number in
/// the legend (numbers only: no text from a run file is drawn in the SVG).
/// On the log axis a value of 0 or less has no place and is not drawn.
pub(super) fn builds_chart(points: &[BuildPoint], axis: BuildAxis, y_desc: &str) -> Result<String> {
    let log = matches!(axis, BuildAxis::Log);
    let pts: Vec<(usize, f64, f64)> =
        points.iter().filter(|p| !log || p.value > 0.0).map(|p| (p.run, p.bpw, if log { p.value.log10() } else { p.value })).collect();
    let (x_lo, x_hi) = pts.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    // Half a bit either side, so the end points and their numbers stay
    // inside the frame.
    let (x_lo, x_hi) = if pts.is_empty() { (0.0, 16.0) } else { ((x_lo - 0.5).max(0.0), x_hi + 0.5) };
    let y = match axis {
        BuildAxis::Count { top } => -0.03 * top.max(1.0)..1.08 * top.max(1.0),
        BuildAxis::Log => {
            let (lo, hi) = pts.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.2), b.max(p.2)));
            let (lo, hi) = if pts.is_empty() { (-3.0, 0.0) } else { (lo.floor(), hi.ceil()) };
            // At least one decade, with room above the top dot's number.
            lo - 0.05..(hi.max(lo + 1.0) + 0.1)
        }
    };
    let decades = (y.end - y.start).round() as usize + 1;
    render_svg((960, 380), |root| {
        let x_label = |x: &f64| format!("{x:.1}");
        let y_label = |v: &f64| match axis {
            BuildAxis::Count { top } if *v >= 0.0 && *v <= top => format!("{v}"),
            BuildAxis::Count { .. } => String::new(),
            // A label at each whole power of ten only.
            BuildAxis::Log if (v - v.round()).abs() < 1e-6 => format!("1e{}", v.round() as i64),
            BuildAxis::Log => String::new(),
        };
        let y_labels = match axis {
            BuildAxis::Count { top } => (top as usize + 1).min(11),
            BuildAxis::Log => decades,
        };
        let mesh = Mesh { x_desc: "bits per weight", y_desc, x_labels: 12, y_labels, x_label: &x_label, y_label: &y_label };
        let mut chart = axes(root, x_lo..x_hi, y, mesh)?;
        for &(run, x, y) in &pts {
            let color = run_color(run);
            chart.draw_series(std::iter::once(Circle::new((x, y), 7, color.filled())))?;
            // The number up and right of its dot, in pixels from the dot.
            let label = Text::new(format!("{}", run + 1), (9, -20), ("sans-serif", 15).into_font().color(&BLACK));
            chart.draw_series(std::iter::once(EmptyElement::at((x, y)) + label))?;
        }
        Ok(())
    })
}
