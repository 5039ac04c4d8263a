//! `--format csv`: a header row, then one row per run: the fields of
//! [`Row`](crate::report::aggregate::Row), in its order, with the
//! divergence from a reference spread over one column per figure. Every row
//! has every column, whatever the run measured: an absent prefill speed,
//! teacher-forced mean, closed-book total or divergence is an empty field.

use crate::report::aggregate::{LoadedRun, Row, rows};
use crate::report::export::Exporter;
use crate::score::kld::KldStats;
use anyhow::{Context, Result};
use serde::Serialize;

pub(crate) struct Csv;

/// One run's CSV record: [`Row`] with `kld` flattened into `kld_*` columns.
#[derive(Serialize)]
struct Record<'a> {
    run: &'a str,
    model: &'a str,
    build: &'a str,
    quant: &'a str,
    kv_k: &'a str,
    kv_v: &'a str,
    // Empty where no answer was generated (recall not measured).
    passes: Option<usize>,
    count: usize,
    matched: Option<usize>,
    missing: Option<usize>,
    truncated: Option<usize>,
    hallucinated: Option<usize>,
    extra: Option<usize>,
    // What the lines were made of (summary.composition): per class, the
    // expected lines and the matched ones; empty where the run has none.
    code_lines: Option<usize>,
    code_matched: Option<usize>,
    comment_lines: Option<usize>,
    comment_matched: Option<usize>,
    docstring_lines: Option<usize>,
    docstring_matched: Option<usize>,
    blank_lines: Option<usize>,
    blank_matched: Option<usize>,
    prefill_tok_s: Option<f64>,
    tokens_per_step: Option<f64>,
    top1_share: Option<f64>,
    mean_logprob: Option<f64>,
    lines_exact_share: Option<f64>,
    closed_book_matched: Option<usize>,
    context_matched: Option<i64>,
    kld_targets: Option<usize>,
    kld_tokens: Option<usize>,
    kld_mean: Option<f64>,
    kld_p99: Option<f64>,
    kld_max: Option<f64>,
    kld_same_top1: Option<f64>,
    kld_mean_delta_p: Option<f64>,
    reference: Option<&'a str>,
}

impl<'a> Record<'a> {
    fn of(r: &'a Row) -> Record<'a> {
        let k = r.kld.as_ref();
        let c = r.recall.as_ref().and_then(|x| x.composition.as_ref());
        Record {
            run: &r.run,
            model: &r.model,
            build: &r.build,
            quant: &r.quant,
            kv_k: &r.kv_k,
            kv_v: &r.kv_v,
            passes: r.recall.as_ref().map(|x| x.passes),
            count: r.count,
            matched: r.recall.as_ref().map(|x| x.matched),
            missing: r.recall.as_ref().map(|x| x.missing),
            truncated: r.recall.as_ref().map(|x| x.truncated),
            hallucinated: r.recall.as_ref().map(|x| x.hallucinated),
            extra: r.recall.as_ref().map(|x| x.extra),
            code_lines: c.map(|c| c.code.lines),
            code_matched: c.map(|c| c.code.matched),
            comment_lines: c.map(|c| c.comment.lines),
            comment_matched: c.map(|c| c.comment.matched),
            docstring_lines: c.map(|c| c.docstring.lines),
            docstring_matched: c.map(|c| c.docstring.matched),
            blank_lines: c.and_then(|c| c.blank).map(|b| b.lines),
            blank_matched: c.and_then(|c| c.blank).map(|b| b.matched),
            prefill_tok_s: r.prefill_tok_s,
            tokens_per_step: r.tokens_per_step,
            top1_share: r.top1_share,
            mean_logprob: r.mean_logprob,
            lines_exact_share: r.lines_exact_share,
            closed_book_matched: r.closed_book_matched,
            context_matched: r.context_matched,
            kld_targets: k.map(|k| k.targets),
            kld_tokens: k.map(|k| k.tokens),
            kld_mean: k.map(|k| k.mean),
            kld_p99: k.map(|k| k.p99),
            kld_max: k.map(|k| k.max),
            kld_same_top1: k.map(|k| k.same_top1),
            kld_mean_delta_p: k.map(|k| k.mean_delta_p),
            reference: r.reference.as_deref(),
        }
    }
}

impl Exporter for Csv {
    fn render(&self, runs: &[LoadedRun]) -> Result<String> {
        let rows = rows(runs);
        let mut w = ::csv::Writer::from_writer(Vec::new());
        for row in &rows {
            w.serialize(Record::of(row)).context("cannot write CSV")?;
        }
        let bytes = w.into_inner().context("cannot write CSV")?;
        let bytes = with_stats(&bytes, &rows)?;
        String::from_utf8(bytes).context("CSV is not UTF-8")
    }
}

/// The records with llama-perplexity's figures appended, one column each
/// (`stats_` and the figure's name in the run file, `stats_kld_p99_9`),
/// empty for a run without them. The csv crate writes no header for a
/// nested struct, so the columns are added to the records it wrote.
fn with_stats(records: &[u8], rows: &[Row]) -> Result<Vec<u8>> {
    if rows.is_empty() {
        return Ok(records.to_vec());
    }
    let names: Vec<String> = KldStats::default().figures().into_iter().map(|(n, _)| format!("stats_{n}")).collect();
    let mut read = ::csv::Reader::from_reader(records);
    let mut w = ::csv::Writer::from_writer(Vec::new());
    let mut header = read.headers().context("cannot write CSV")?.clone();
    names.iter().for_each(|n| header.push_field(n));
    w.write_record(&header).context("cannot write CSV")?;
    for (record, row) in read.records().zip(rows) {
        let mut record = record.context("cannot write CSV")?;
        match row.kld.as_ref().and_then(|k| k.stats.as_ref()) {
            Some(s) => s.figures().iter().for_each(|(_, v)| record.push_field(&v.to_string())),
            None => names.iter().for_each(|_| record.push_field("")),
        }
        w.write_record(&record).context("cannot write CSV")?;
    }
    w.into_inner().context("cannot write CSV")
}
