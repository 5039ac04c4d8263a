//! The table `bench --kv A,B,…` ends with: one row per KV item, each run
//! set beside the first (the reference, unless a reference file was named):
//! its K and V types, rotation, state size, passes, matched lines and their
//! difference from the first with `compare`'s paired p-values, divergence
//! from the reference, and speeds. As a terminal table, Markdown, CSV or
//! JSON (`--format`, as llama-bench's `-o`).

use crate::record::run::NOT_MEASURED;
use crate::report::aggregate::LoadedRun;
use crate::report::export::Format;
use crate::report::tabular::Tabular;
use crate::settings::{KvRotation, Rotation};
use anyhow::Result;
use serde::Serialize;

/// The formats the table has.
pub const FORMATS: [Format; 4] = [Format::Table, Format::Md, Format::Csv, Format::Json];

/// One KV item's run.
#[derive(Debug, Clone, Serialize)]
pub struct KvRow {
    /// The run file's stem.
    pub run: String,
    pub kv_k: String,
    pub kv_v: String,
    /// `auto` or `off`, as took effect (`manifest.context.kv_rotation.mode`);
    /// empty in a run file made before rotation was recorded.
    pub rotation: String,
    /// Whether llama.cpp rotated the K and the V rows.
    pub rotated_k: Option<bool>,
    pub rotated_v: Option<bool>,
    /// llama.cpp's state of the evaluated context (KV cells in use, and the
    /// last logits), in bytes.
    pub state_bytes: usize,
    /// Passes and matched lines; `None` where no answer was generated.
    pub passes: Option<usize>,
    pub count: usize,
    pub matched: Option<usize>,
    /// matched − the first run's, over the same targets; the first has none.
    pub delta_matched: Option<i64>,
    /// `compare`'s exact McNemar test on the pass flips against the first.
    pub p_passes: Option<f64>,
    /// `compare`'s exact Wilcoxon signed-rank test on the per-target Δmatched.
    pub p_matched: Option<f64>,
    /// Mean KL divergence from the reference and the share of forced
    /// positions with the same top-1 token; none for the reference itself.
    pub kld_mean: Option<f64>,
    pub same_top1: Option<f64>,
    pub prefill_tok_s: Option<f64>,
    /// Generated tokens over the time spent answering.
    pub generation_tok_s: Option<f64>,
}

/// The rows of `runs`, the first the baseline of the differences.
pub fn rows(runs: &[LoadedRun]) -> Result<Vec<KvRow>> {
    let Some(first) = runs.first() else { return Ok(Vec::new()) };
    let path = |r: &LoadedRun| r.path.clone().unwrap_or_else(|| r.label.clone().into());
    let mut out = Vec::with_capacity(runs.len());
    for (i, r) in runs.iter().enumerate() {
        let m = &r.run.manifest;
        let rotation = m.context.as_ref().and_then(|c| c.kv_rotation);
        let t = &r.run.summary.total;
        let kld = r.run.summary.forced.as_ref().and_then(|f| f.kld.as_ref());
        let compared = match i {
            0 => None,
            _ => Some(crate::report::compare::Comparison::new(&first.run, &path(first), &r.run, &path(r))?),
        };
        let timings = r.run.timings.as_ref();
        out.push(KvRow {
            run: r.label.clone(),
            kv_k: m.context.as_ref().map(|c| c.type_k.to_string()).unwrap_or_default(),
            kv_v: m.context.as_ref().map(|c| c.type_v.to_string()).unwrap_or_default(),
            rotation: rotation.map(|x| x.mode.to_string()).unwrap_or_default(),
            rotated_k: rotation.map(|x| x.k),
            rotated_v: rotation.map(|x| x.v),
            state_bytes: timings.map_or(0, |t| t.context_bytes),
            passes: t.recall.as_ref().map(|x| x.passes),
            count: t.count,
            matched: t.recall.as_ref().map(|x| x.matched),
            delta_matched: compared.as_ref().and_then(|c| Some(c.b.recall.as_ref()?.matched as i64 - c.a.recall.as_ref()?.matched as i64)),
            p_passes: compared.as_ref().and_then(|c| Some(c.recall.as_ref()?.mcnemar.p)),
            p_matched: compared.as_ref().and_then(|c| Some(c.recall.as_ref()?.wilcoxon_matched.p)),
            kld_mean: kld.map(|k| k.mean),
            same_top1: kld.map(|k| k.same_top1),
            prefill_tok_s: crate::report::aggregate::Row::of(r).prefill_tok_s,
            generation_tok_s: timings
                .and_then(|t| {
                    (t.generated_tokens > 0).then(|| (t.generated_tokens, t.generation_ms.unwrap_or_else(|| t.query_ms.iter().sum())))
                })
                .and_then(|(n, ms)| (ms > 0.0).then(|| n as f64 / ms * 1000.0)),
        });
    }
    Ok(out)
}

/// What the rotation column shows ([`Rotation`]'s words); `?` for a run
/// file made before rotation was recorded.
fn rotation_cell(r: &KvRow) -> String {
    match (r.rotation.parse::<KvRotation>(), r.rotated_k, r.rotated_v) {
        (Ok(mode), Some(k), Some(v)) => Rotation { mode, k, v }.to_string(),
        _ => "?".to_string(),
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}")).unwrap_or_default()
}

/// The rows as cells, for the terminal and Markdown.
pub(crate) fn tabular(rows: &[KvRow]) -> Tabular {
    let header = [
        "K",
        "V",
        "rotation",
        "state MiB",
        "passed",
        "matched",
        "Δ matched",
        "p (passes)",
        "p (matched)",
        "KLD mean",
        "same top-1",
        "prefill tok/s",
        "gen tok/s",
    ];
    let numeric = vec![false, false, false, true, true, true, true, true, true, true, true, true, true];
    let rows = rows
        .iter()
        .map(|r| {
            vec![
                r.kv_k.clone(),
                r.kv_v.clone(),
                rotation_cell(r),
                format!("{:.1}", r.state_bytes as f64 / (1024.0 * 1024.0)),
                r.passes.map_or(NOT_MEASURED.into(), |p| format!("{p}/{}", r.count)),
                r.matched.map(|m| m.to_string()).unwrap_or_default(),
                r.delta_matched.map(|d| format!("{d:+}")).unwrap_or_default(),
                opt(r.p_passes, 3),
                opt(r.p_matched, 3),
                opt(r.kld_mean, 4),
                opt(r.same_top1, 3),
                opt(r.prefill_tok_s, 1),
                opt(r.generation_tok_s, 1),
            ]
        })
        .collect();
    Tabular { header: header.iter().map(|h| h.to_string()).collect(), numeric, rows }
}

/// The whole table in `format` (one of [`FORMATS`]).
pub fn render(rows: &[KvRow], format: Format) -> Result<String> {
    Ok(match format {
        Format::Md => super::export::markdown::table(&tabular(rows)),
        Format::Csv => {
            let mut w = ::csv::Writer::from_writer(Vec::new());
            for r in rows {
                w.serialize(r)?;
            }
            String::from_utf8(w.into_inner()?)?
        }
        Format::Json => {
            let mut text = serde_json::to_string_pretty(&serde_json::json!({ "format": TABLE_FORMAT, "rows": rows }))?;
            text.push('\n');
            text
        }
        _ => super::export::table::aligned(&tabular(rows)),
    })
}

/// Version of the JSON shape (docs/RUN_FORMAT.md, "KV table JSON").
pub(crate) const TABLE_FORMAT: u32 = 1;
