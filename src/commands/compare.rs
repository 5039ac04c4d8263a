//! `posrecall compare A.json B.json`: the paired comparison of two runs
//! ([`posrecall::report::compare`]), as text or JSON.

use crate::cli::CompareArgs;
use anyhow::Result;
use posrecall::record::run::RunFile;
use posrecall::report::compare::{Comparison, render_text};

pub fn run(args: &CompareArgs) -> Result<()> {
    let a = RunFile::load(&args.a)?;
    let b = RunFile::load(&args.b)?;
    let c = Comparison::new(&a, &args.a, &b, &args.b)?;
    let text = if args.json {
        let mut s = serde_json::to_string_pretty(&c)?;
        s.push('\n');
        s
    } else {
        render_text(&c)
    };
    crate::commands::out(&text)
}
