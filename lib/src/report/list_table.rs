//! The table a `bench` list ends with (`bench a.gguf b.gguf --kv f16,q8_0`):
//! one row per instance, each set beside the first (the reference, unless a
//! reference file was named): the model build (label, file type, size, bits
//! per weight), the settings that vary, its K and V types, rotation, state
//! size, passes, matched lines and their difference from the first with
//! `compare`'s paired p-values, divergence from the reference, and speeds.
//! As a terminal table, Markdown, CSV, JSON or JSON lines (`--format`, as
//! llama-bench's `-o`).

use crate::record::run::NOT_MEASURED;
use crate::report::aggregate::LoadedRun;
use crate::report::export::Format;
use crate::report::tabular::Tabular;
use crate::settings::{KvRotation, Rotation};
use anyhow::Result;
use serde::Serialize;

/// The formats the table has.
pub const FORMATS: [Format; 5] = [Format::Table, Format::Md, Format::Csv, Format::Json, Format::Jsonl];

/// One instance's run.
#[derive(Debug, Clone, Serialize)]
pub struct ListRow {
    /// The run file's stem.
    pub run: String,
    /// The model build's label (`manifest.model.build`: the file name unless `--build`).
    pub model: String,
    /// The quantisation the GGUF states (`Q4_K_M`), its bytes (every part of
    /// a split model), and bits per weight: bytes × 8 / parameters, as
    /// llama-bench's size and parameter columns give it.
    pub file_type: String,
    pub size_bytes: u64,
    pub bits_per_weight: Option<f64>,
    /// The model's layers (`manifest.model.layers`): all of them, those
    /// holding a KV cache (a hybrid's attention layers only), those of them
    /// with a sliding window, and the window in tokens; none in a run file
    /// made before they were recorded.
    pub layers: Option<u64>,
    pub kv_layers: Option<u64>,
    pub swa_layers: Option<u64>,
    pub swa_window: Option<u64>,
    /// The context size the run allocated, its probe and flash attention.
    pub ctx: Option<u32>,
    pub probe: String,
    pub flash_attn: String,
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
    /// KL divergence from the reference over the forced tokens: mean, 99th
    /// percentile and maximum, and the share of forced positions with the
    /// same top-1 token; none for the reference itself.
    pub kld_mean: Option<f64>,
    pub kld_p99: Option<f64>,
    pub kld_max: Option<f64>,
    /// llama-perplexity's RMS Δp (of the forced token's probability, run −
    /// reference) and its standard error; none in a run file made before
    /// the statistics were recorded.
    pub delta_p_rms: Option<f64>,
    pub delta_p_rms_se: Option<f64>,
    pub same_top1: Option<f64>,
    pub prefill_tok_s: Option<f64>,
    /// Generated tokens over the time spent answering.
    pub generation_tok_s: Option<f64>,
    /// Why a run after the first has no divergence (another vocabulary,
    /// another prompt); `None` where it has one or is the first.
    pub kld_missing: Option<String>,
}

/// The rows of `runs`, the first the baseline of the differences.
pub fn rows(runs: &[LoadedRun]) -> Result<Vec<ListRow>> {
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
        let model = m.model.as_ref();
        let layers = model.and_then(|x| x.layers);
        out.push(ListRow {
            run: r.label.clone(),
            model: model.map(|x| x.build.clone()).unwrap_or_default(),
            file_type: model.and_then(|x| x.file_type.clone()).unwrap_or_default(),
            size_bytes: model.map_or(0, |x| x.size_bytes),
            bits_per_weight: model.and_then(|x| x.bits_per_weight()),
            layers: layers.map(|l| l.total),
            kv_layers: layers.map(|l| l.with_kv()),
            swa_layers: layers.map(|l| l.sliding_window),
            swa_window: layers.map(|l| l.window),
            ctx: m.context.as_ref().map(|c| c.n_ctx),
            probe: m.params.probe.map(|p| crate::settings::Named::as_str(p).to_string()).unwrap_or_default(),
            flash_attn: m.context.as_ref().map(|c| c.flash_attn.to_string()).unwrap_or_default(),
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
            kld_p99: kld.map(|k| k.p99),
            kld_max: kld.map(|k| k.max),
            delta_p_rms: kld.and_then(|k| k.stats.as_ref()).map(|s| s.delta_p_rms),
            delta_p_rms_se: kld.and_then(|k| k.stats.as_ref()).map(|s| s.delta_p_rms_se),
            same_top1: kld.map(|k| k.same_top1),
            prefill_tok_s: crate::report::aggregate::Row::of(r).prefill_tok_s,
            generation_tok_s: timings
                .and_then(|t| {
                    (t.generated_tokens > 0).then(|| (t.generated_tokens, t.generation_ms.unwrap_or_else(|| t.query_ms.iter().sum())))
                })
                .and_then(|(n, ms)| (ms > 0.0).then(|| n as f64 / ms * 1000.0)),
            kld_missing: None,
        });
    }
    Ok(out)
}

/// What the rotation column shows ([`Rotation`]'s words); `?` for a run
/// file made before rotation was recorded.
fn rotation_cell(r: &ListRow) -> String {
    match (r.rotation.parse::<KvRotation>(), r.rotated_k, r.rotated_v) {
        (Ok(mode), Some(k), Some(v)) => Rotation { mode, k, v }.to_string(),
        _ => "?".to_string(),
    }
}

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map(|x| format!("{x:.digits$}")).unwrap_or_default()
}

/// The rows as cells, for the terminal and Markdown: the model's columns
/// where the list has more than one build, the context size, probe and
/// flash attention where they vary.
pub(crate) fn tabular(rows: &[ListRow]) -> Tabular {
    type Cell = fn(&ListRow) -> String;
    let varies = |f: Cell| rows.iter().any(|r| f(r) != f(&rows[0]));
    let mut columns: Vec<(&str, bool, Cell)> = Vec::new();
    if varies(|r| r.model.clone()) {
        columns.push(("model", false, |r| r.model.clone()));
        columns.push(("type", false, |r| r.file_type.clone()));
        columns.push(("size MiB", true, |r| format!("{:.1}", r.size_bytes as f64 / (1024.0 * 1024.0))));
        columns.push(("bpw", true, |r| opt(r.bits_per_weight, 2)));
    }
    // A hybrid keeps a KV cache in some layers only, a sliding-window model
    // a short one in most: shown where the list mixes them, so that their
    // KV rows are not read as a dense model's.
    let optional: [(&str, bool, Cell); 5] = [
        ("KV layers", true, |r| match (r.kv_layers, r.layers) {
            (Some(kv), Some(all)) => format!("{kv}/{all}"),
            _ => "?".to_string(),
        }),
        ("SWA", false, |r| match (r.swa_layers, r.swa_window) {
            (Some(0), _) => "none".to_string(),
            (Some(n), Some(w)) => format!("{n}×{w}"),
            _ => "?".to_string(),
        }),
        ("ctx", true, |r| r.ctx.map(|c| c.to_string()).unwrap_or_default()),
        ("probe", false, |r| r.probe.clone()),
        ("FA", false, |r| r.flash_attn.clone()),
    ];
    columns.extend(optional.into_iter().filter(|c| varies(c.2)));
    let fixed: [(&str, bool, Cell); 16] = [
        ("K", false, |r| r.kv_k.clone()),
        ("V", false, |r| r.kv_v.clone()),
        ("rotation", false, rotation_cell),
        ("state MiB", true, |r| format!("{:.1}", r.state_bytes as f64 / (1024.0 * 1024.0))),
        ("passed", true, |r| r.passes.map_or(NOT_MEASURED.into(), |p| format!("{p}/{}", r.count))),
        ("matched", true, |r| r.matched.map(|m| m.to_string()).unwrap_or_default()),
        ("Δ matched", true, |r| r.delta_matched.map(|d| format!("{d:+}")).unwrap_or_default()),
        ("p (passes)", true, |r| opt(r.p_passes, 3)),
        ("p (matched)", true, |r| opt(r.p_matched, 3)),
        ("KLD mean", true, |r| opt(r.kld_mean, 4)),
        ("KLD p99", true, |r| opt(r.kld_p99, 4)),
        ("KLD max", true, |r| opt(r.kld_max, 3)),
        ("Δp RMS %", true, |r| opt(r.delta_p_rms.map(|x| x * 100.0), 2)),
        ("same top-1", true, |r| opt(r.same_top1, 3)),
        ("prefill tok/s", true, |r| opt(r.prefill_tok_s, 1)),
        ("gen tok/s", true, |r| opt(r.generation_tok_s, 1)),
    ];
    columns.extend(fixed);
    Tabular {
        header: columns.iter().map(|c| c.0.to_string()).collect(),
        numeric: columns.iter().map(|c| c.1).collect(),
        rows: rows.iter().map(|r| columns.iter().map(|c| (c.2)(r)).collect()).collect(),
    }
}

/// Why some rows have no divergence, once per reason, under the table.
pub fn missing_note(rows: &[ListRow]) -> Option<String> {
    let mut reasons: Vec<(&str, Vec<&str>)> = Vec::new();
    for r in rows {
        if let Some(why) = &r.kld_missing {
            match reasons.iter_mut().find(|(w, _)| w == why) {
                Some((_, runs)) => runs.push(&r.run),
                None => reasons.push((why, vec![&r.run])),
            }
        }
    }
    let lines: Vec<String> = reasons.iter().map(|(why, runs)| format!("no KLD for {}: {why}", runs.join(", "))).collect();
    (!lines.is_empty()).then(|| lines.join("\n"))
}

/// The whole table in `format` (one of [`FORMATS`]).
pub fn render(rows: &[ListRow], format: Format) -> Result<String> {
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
        Format::Jsonl => {
            let mut text = String::new();
            for r in rows {
                text.push_str(&serde_json::to_string(r)?);
                text.push('\n');
            }
            text
        }
        _ => super::export::table::aligned(&tabular(rows)),
    })
}

/// Version of the JSON shape (docs/RUN_FORMAT.md, "KV table JSON").
pub(crate) const TABLE_FORMAT: u32 = 1;
