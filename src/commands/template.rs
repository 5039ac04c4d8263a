//! `posrecall template FILE.jinja`: render a chat template as `bench` does,
//! without a model, so that a template can be checked and the rendering
//! compared with other renderers (scripts/oracles/template-fidelity).

use crate::cli::TemplateCmdArgs;
use anyhow::{Result, anyhow};
use posrecall::prompt;
use posrecall::prompt::template::{SpecialTokens, TemplateVars, render};

pub fn run(args: &TemplateCmdArgs) -> Result<()> {
    let vars = TemplateVars { think: args.think, kwargs: crate::commands::convert::template_kwargs(args.template_kwargs.as_deref())? };
    let text = posrecall::prompt::template::read(&args.file)?;
    let record = vars.record(&text, Some(&args.file))?;
    let special = SpecialTokens { bos: args.bos_token.clone(), eos: args.eos_token.clone() };
    let content = args
        .content
        .clone()
        .unwrap_or_else(|| prompt::instruction_prompt("function answer() {\n  return 42;\n}", &prompt::query("answer", 2, false)));
    let rendered = render(&text, &content, &special, &record.variables).map_err(|e| anyhow!("{}: {e}", args.file.display()))?;
    if !args.json {
        return crate::commands::out(&rendered);
    }
    // The frame bench would use, and whether real files and questions render
    // exactly as prefix + suffix.
    let (frame, split) = match prompt::chat_frame(&text, &special, &record.variables, "//") {
        Ok(f) => {
            let check = prompt::check_frame(&f, &text, &special, &record.variables);
            (Some(f), check)
        }
        Err(e) => (None, Err(format!("{e:#}"))),
    };
    let json = serde_json::json!({
        "rendered": rendered,
        "template": record,
        "frame": frame.map(|f| serde_json::json!({"head": f.head, "mid": f.mid, "tail": f.tail})),
        "split_ok": split.is_ok(),
        "split_error": split.err(),
    });
    outln!("{}", serde_json::to_string_pretty(&json)?)
}
