//! `--format csv`: a header row, then one row per run (the fields of
//! [`Row`](crate::report::aggregate::Row), in its order; an absent prefill
//! speed or teacher-forced mean is an empty field).

use crate::report::aggregate::{LoadedRun, rows};
use crate::report::export::Exporter;
use anyhow::{Context, Result};

pub struct Csv;

impl Exporter for Csv {
    fn render(&self, runs: &[LoadedRun]) -> Result<String> {
        let mut w = ::csv::Writer::from_writer(Vec::new());
        for row in rows(runs) {
            w.serialize(&row).context("cannot write CSV")?;
        }
        let bytes = w.into_inner().context("cannot write CSV")?;
        String::from_utf8(bytes).context("CSV is not UTF-8")
    }
}
