//! `posrecall compare A.json B.json`: the paired comparison of two runs
//! ([`posrecall::report::compare`]), as text or JSON.

use crate::cli::CompareArgs;
use anyhow::Result;
use posrecall::record::run::RunFile;
use posrecall::report::compare::{Comparison, PoliciesDiffer, render_text};

pub fn run(args: &CompareArgs) -> Result<()> {
    let a = RunFile::load(&args.a)?;
    let b = RunFile::load(&args.b)?;
    let c = Comparison::new(&a, &args.a, &b, &args.b).map_err(|e| match e.downcast::<PoliciesDiffer>() {
        Ok(d) => anyhow::anyhow!("{d}: posrecall rescore {} --policy {} --credit {} -o OUT.json", d.b, d.a_policy, d.a_credit),
        Err(e) => e,
    })?;
    let text = if args.json {
        let mut s = serde_json::to_string_pretty(&c)?;
        s.push('\n');
        s
    } else {
        render_text(&c)
    };
    crate::commands::out(&text)
}
