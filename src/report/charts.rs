//! The charts of the HTML page: inline SVG, drawn with plotters or by hand
//! (the depth × length heat map), and the series colour of each run.

use crate::report::aggregate::LoadedRun;
use crate::run::TargetResult;
use anyhow::Result;
use html_escape::encode_text as text;
use std::fmt::Write as _;

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

/// Matched lines (y) against depth (x), one series per run, and a line at
/// each pass threshold; an inline SVG without the XML namespace attribute
/// (HTML does not need it).
pub(super) fn chart(runs: &[LoadedRun]) -> Result<String> {
    use plotters::prelude::*;
    let lines = runs[0].run.manifest.params.lines as f64;
    let mut passes: Vec<usize> = runs.iter().map(|r| r.run.manifest.params.pass).collect();
    passes.sort_unstable();
    passes.dedup();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 380)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..1f64, -0.4f64..(lines + 0.6))?;
        let y_labels = (lines as usize + 1).min(11);
        chart
            .configure_mesh()
            .x_desc("depth in the kept text (0 = start, 1 = end)")
            .y_desc("matched lines")
            .x_labels(11)
            .y_labels(y_labels)
            .x_label_formatter(&|x| format!("{x:.1}"))
            .y_label_formatter(&|y| {
                if *y < 0.0 {
                    String::new()
                } else {
                    format!("{y}")
                }
            })
            .max_light_lines(1)
            .light_line_style(RGBColor(0xf2, 0xf2, 0xf2))
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 15))
            .draw()?;
        let gray = RGBColor(0x88, 0x88, 0x88);
        for p in &passes {
            let y = *p as f64;
            chart.draw_series(DashedLineSeries::new(
                vec![(0.0, y), (1.0, y)],
                8,
                5,
                gray.stroke_width(2),
            ))?;
        }
        let n = runs.len();
        for (i, r) in runs.iter().enumerate() {
            let (cr, cg, cb) = series_color(i);
            let color = RGBColor(cr, cg, cb);
            let mut pts: Vec<(f64, f64)> = r
                .run
                .targets
                .iter()
                .map(|t| (t.depth, t.score.matched as f64))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            // Earlier runs are drawn wider, so identical results stay visible as rings.
            let k = (n - 1 - i).min(4);
            let width = 2 + 2 * k as u32;
            let radius = 4 + 2 * k as i32;
            chart.draw_series(LineSeries::new(pts.clone(), color.stroke_width(width)))?;
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, radius, color.filled())))?;
        }
        root.present()?;
    }
    Ok(svg.replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1))
}

/// A per-target value (y, 0..`top`; the top-1 share, the KL divergence)
/// against depth (x), one series per run that has it (coloured by the run's
/// position), each point a target that has it.
pub(super) fn depth_chart(runs: &[LoadedRun], value: impl Fn(&TargetResult) -> Option<f64>, y_desc: &str, top: f64) -> Result<String> {
    use plotters::prelude::*;
    let series: Vec<(usize, Vec<(f64, f64)>)> = runs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let mut pts: Vec<(f64, f64)> = r
                .run
                .targets
                .iter()
                .filter_map(|t| Some((t.depth, value(t)?)))
                .collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            (!pts.is_empty()).then_some((i, pts))
        })
        .collect();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 340)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(56)
            .build_cartesian_2d(0f64..1f64, -0.03 * top..1.03 * top)?;
        chart
            .configure_mesh()
            .x_desc("depth in the kept text (0 = start, 1 = end)")
            .y_desc(y_desc)
            .x_labels(11)
            .y_labels(11)
            .x_label_formatter(&|x| format!("{x:.1}"))
            .y_label_formatter(&|y| {
                if *y < 0.0 || *y > top {
                    String::new()
                } else if top >= 1.0 {
                    format!("{y:.1}")
                } else {
                    format!("{y:.1e}")
                }
            })
            .max_light_lines(1)
            .light_line_style(RGBColor(0xf2, 0xf2, 0xf2))
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 15))
            .draw()?;
        let n = series.len();
        for (k, (i, pts)) in series.into_iter().enumerate() {
            let (cr, cg, cb) = series_color(i);
            let color = RGBColor(cr, cg, cb);
            // Earlier runs are drawn wider, so identical results stay visible as rings.
            let w = (n - 1 - k).min(4);
            let width = 2 + 2 * w as u32;
            let radius = 4 + 2 * w as i32;
            chart.draw_series(LineSeries::new(pts.clone(), color.stroke_width(width)))?;
            chart.draw_series(pts.iter().map(|&p| Circle::new(p, radius, color.filled())))?;
        }
        root.present()?;
    }
    Ok(svg.replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1))
}

/// One run's depth × length heat map, as an SVG table of cells.
pub(super) fn heat_map(run: usize, label: &str, l: &crate::run::LadderRecord, lines: usize) -> String {
    const CW: usize = 92;
    const CH: usize = 40;
    const LEFT: usize = 86;
    const TOP: usize = 44;
    let (w, h) = (LEFT + CW * l.rungs.len() + 8, TOP + CH * 4 + 8);
    let (cr, cg, cb) = series_color(run);
    let mut out = format!(
        "<figure class=\"heatmap\"><figcaption>{}</figcaption>\n<svg width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" role=\"img\">\n",
        text(label)
    );
    let _ = writeln!(out, "<text x=\"4\" y=\"16\" font-size=\"12\">depth \\ length</text>");
    for (c, r) in l.rungs.iter().enumerate() {
        let x = LEFT + c * CW + CW / 2;
        let _ = writeln!(
            out,
            "<text x=\"{x}\" y=\"30\" font-size=\"13\" text-anchor=\"middle\">{} <tspan font-size=\"10\">({})</tspan></text>",
            crate::run::length_label(r.length),
            r.prefix_tokens
        );
    }
    for q in 0..4 {
        let y = TOP + q * CH;
        let _ = writeln!(
            out,
            "<text x=\"4\" y=\"{}\" font-size=\"12\">{}</text>",
            y + CH / 2 + 4,
            crate::report::aggregate::quarter_label(q)
        );
        for (c, r) in l.rungs.iter().enumerate() {
            let t = &r.summary.by_quarter[q];
            let x = LEFT + c * CW;
            let share = match t.count {
                0 => None,
                n => Some(t.matched as f64 / (n * lines.max(1)) as f64),
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
                    format!("{}/{} · {}", t.passes, t.count, t.matched),
                    format!(
                        "{} at depth {}: {} of {} passed, {} matched lines ({:.0}% of {}), {} missing, {} hallucinated",
                        crate::run::length_label(r.length),
                        crate::report::aggregate::quarter_label(q),
                        t.passes,
                        t.count,
                        t.matched,
                        100.0 * s,
                        t.count * lines,
                        t.missing,
                        t.hallucinated
                    ),
                ),
            };
            let _ = writeln!(
                out,
                "<g><title>{}</title><rect x=\"{x}\" y=\"{y}\" width=\"{}\" height=\"{}\" fill=\"{fill}\" stroke=\"#fff\"/>\
                 <text x=\"{}\" y=\"{}\" font-size=\"12\" text-anchor=\"middle\" fill=\"{ink}\">{}</text></g>",
                text(&hover),
                CW - 2,
                CH - 2,
                x + CW / 2,
                y + CH / 2 + 4,
                text(&body)
            );
        }
    }
    out.push_str("</svg></figure>\n");
    out
}

/// Pass rate (y) against length (x, log scale), one series per ladder run,
/// each point with its 95% interval.
pub(super) fn length_chart(runs: &[LoadedRun]) -> Result<String> {
    use plotters::prelude::*;
    let series: Vec<(usize, Vec<(f64, f64, f64, f64)>)> = runs
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
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 340)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .margin(14)
            .x_label_area_size(44)
            .y_label_area_size(56)
            .build_cartesian_2d(lo..hi, -0.03f64..1.03f64)?;
        chart
            .configure_mesh()
            .x_desc("prefix tokens (log scale)")
            .y_desc("pass rate")
            .x_labels(((hi - lo).ceil() as usize + 1).min(16))
            .y_labels(11)
            .x_label_formatter(&|x| {
                let n = 2f64.powf(*x).round() as usize;
                if (x - x.round()).abs() > 1e-6 { String::new() } else { crate::run::length_label(n) }
            })
            .y_label_formatter(&|y| if *y < 0.0 || *y > 1.0 { String::new() } else { format!("{y:.1}") })
            .max_light_lines(1)
            .light_line_style(RGBColor(0xf2, 0xf2, 0xf2))
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 15))
            .draw()?;
        let gray = RGBColor(0x88, 0x88, 0x88);
        for t in thresholds {
            chart.draw_series(DashedLineSeries::new(vec![(lo, t), (hi, t)], 8, 5, gray.stroke_width(2)))?;
        }
        let n = series.len();
        for (k, (i, pts)) in series.into_iter().enumerate() {
            let (cr, cg, cb) = series_color(i);
            let color = RGBColor(cr, cg, cb);
            let w = (n - 1 - k).min(4);
            chart.draw_series(LineSeries::new(pts.iter().map(|p| (p.0, p.1)), color.stroke_width(2 + 2 * w as u32)))?;
            chart.draw_series(pts.iter().map(|p| PathElement::new(vec![(p.0, p.2), (p.0, p.3)], color.stroke_width(2))))?;
            chart.draw_series(pts.iter().map(|p| Circle::new((p.0, p.1), 4 + 2 * w as i32, color.filled())))?;
        }
        root.present()?;
    }
    Ok(svg.replacen(" xmlns=\"http://www.w3.org/2000/svg\"", "", 1))
}
