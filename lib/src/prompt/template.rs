//! Chat templates: which one is rendered (the GGUF's or a file's), with which
//! variables (the switch that turns thinking off or on, and the user's own
//! kwargs), and the record of both that a run file keeps.
//!
//! Rendering follows Hugging Face's `apply_chat_template`: Jinja with
//! `trim_blocks` and `lstrip_blocks`, Python string methods, a
//! `raise_exception` function, and the template kwargs as top-level
//! variables (they replace the defaults of the same name).

use crate::settings::Named;
use crate::support::fsutil::sha256_hex;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

crate::settings::named_choice! {
    /// Whether a thinking model reasons before it answers.
    #[derive(Default)]
    pub enum Think {
        /// Render the template with its switch set to answer at once (the benchmark measures recall).
        #[default]
        Off,
        /// Let the model think, within the reasoning budget, before it answers.
        On,
    }
}

/// Reasoning tokens allowed before the answer budget when thinking is on.
/// Generous: the Qwen 3 model cards suggest 32K for hard problems, but
/// recalling lines is not one, and a few thousand tokens of reasoning
/// already dwarf the answer.
pub const DEFAULT_THINK_BUDGET: usize = 4096;

/// The most a reasoning budget may be.
pub(crate) const MAX_THINK_BUDGET: usize = 131_072;

/// A variable that turns a template's thinking off or on.
struct Switch {
    var: &'static str,
    /// The value that turns thinking off, given the template's text.
    off: fn(&str) -> Value,
    /// The value that turns it on; `None`: leave the template's default (which thinks).
    on: fn(&str) -> Option<Value>,
}

/// Whether the template compares a variable with the string `value`.
fn names(template: &str, value: &str) -> bool {
    template.contains(&format!("'{value}'")) || template.contains(&format!("\"{value}\""))
}

/// The switches of the templates people run, in the order they are tried;
/// every one a template reads is set.
const SWITCHES: [Switch; 5] = [
    // Qwen 3 and 3.5, QwQ, SmolLM3, GLM, DeepSeek R1 (Qwen) and V3.1, Gemma 4,
    // Nemotron, MiniCPM, Ling, Apertus…
    Switch { var: "enable_thinking", off: |_| Value::Bool(false), on: |_| Some(Value::Bool(true)) },
    // DeepSeek V3.2 and V4, Kimi K3, Granite 3.3.
    Switch { var: "thinking", off: |_| Value::Bool(false), on: |_| Some(Value::Bool(true)) },
    // MiniMax M3.
    Switch { var: "thinking_mode", off: |_| "disabled".into(), on: |_| Some("enabled".into()) },
    // gpt-oss, Hunyuan 3, Command A: the lowest effort the template knows
    // (`none`, `no_think`, else `low`); on: the template's default, or `high`
    // where that default is not to think (Hunyuan's `no_think`).
    Switch {
        var: "reasoning_effort",
        off: |t| {
            if names(t, "none") {
                "none".into()
            } else if names(t, "no_think") {
                "no_think".into()
            } else {
                "low".into()
            }
        },
        on: |t| names(t, "no_think").then(|| "high".into()),
    },
    // Seed-OSS: a budget of 0 answers without thinking.
    Switch { var: "thinking_budget", off: |_| Value::from(0), on: |_| None },
];

/// A template that cannot be used, or kwargs that are not an object. The
/// messages name no flag; the command adds it.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    #[error("{path}: {why}")]
    InFile { path: String, why: Box<TemplateError> },
    #[error("{path}: cannot read it: {why}")]
    Unreadable { path: String, why: String },
    #[error("{path}: not a Jinja template: {why}")]
    DoesNotParse { path: String, why: String },
    #[error("the chat template raised an error: {0}")]
    Raised(String),
    #[error("the chat template did not render: {0}")]
    DoesNotRender(String),
    #[error("not a JSON object: {0}")]
    KwargsNotObject(String),
    #[error("the chat template ran more than {FUEL} steps for one message (a template loop that does not end?)")]
    OutOfFuel,
    #[error("the chat template wrote more than {0} bytes for a message of {1} (only the message and a frame are expected)")]
    TooLarge(usize, usize),
    #[error("{0}: not a regular file")]
    NotAFile(String),
}

/// The steps a chat template may take to render one message. Real templates
/// take a few thousand (llama.cpp's whole collection renders within a
/// hundredth of this); a loop that runs away is stopped here instead of
/// hanging `bench`, `prompt`, `template` and `matrix --list`. Also bounds
/// a GGUF's own template, which a downloaded model brings.
pub const FUEL: u64 = 2_000_000;

/// The bytes a rendering may write beyond twice its message.
const OUTPUT_SLACK: usize = 1 << 20;

/// A writer that refuses to grow past `limit` bytes.
struct Bounded {
    out: Vec<u8>,
    limit: usize,
    over: bool,
}

impl std::io::Write for Bounded {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.out.len() + buf.len() > self.limit {
            self.over = true;
            return Err(std::io::Error::other("the rendering is too large"));
        }
        self.out.extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A chat template given as a file.
#[derive(Debug, Clone)]
pub struct TemplateFile {
    pub path: PathBuf,
    pub text: String,
}

impl TemplateFile {
    /// Reads the file and checks that it parses and renders (with empty
    /// special tokens), so that a bad template fails before any model work.
    pub fn load(path: &Path, vars: &TemplateVars) -> Result<TemplateFile, TemplateError> {
        let shown = path.display().to_string();
        let text = read(path)?;
        environment()
            .template_from_str(&without_generation_tags(&text))
            .map_err(|e| TemplateError::DoesNotParse { path: shown.clone(), why: one_line(&e) })?;
        let variables = vars.variables(&text)?;
        render(&text, "x", &Default::default(), &variables).map_err(|e| TemplateError::InFile { path: shown.clone(), why: Box::new(e) })?;
        Ok(TemplateFile { path: path.to_path_buf(), text })
    }
}

/// Reads a template file: a regular file only (a FIFO or a device would
/// block or never end).
pub fn read(path: &Path) -> Result<String, TemplateError> {
    let shown = path.display().to_string();
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        return Err(TemplateError::NotAFile(shown));
    }
    crate::support::fsutil::read_text(path).map_err(|e| TemplateError::Unreadable { path: shown, why: format!("{e:#}") })
}

/// What the template is rendered with, beyond the message.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TemplateVars {
    pub think: Think,
    /// The user's `chat_template_kwargs`: they replace any variable of the same name.
    pub kwargs: Map<String, Value>,
}

/// Parses `--template-kwargs`: a JSON object.
pub fn parse_kwargs(s: &str) -> Result<Map<String, Value>, TemplateError> {
    match serde_json::from_str::<Value>(s) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(other) => Err(TemplateError::KwargsNotObject(format!("it is {}", json_kind(&other)))),
        Err(e) => Err(TemplateError::KwargsNotObject(e.to_string())),
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The thinking switches `template` reads (its undeclared top-level
/// variables), in [`SWITCHES`] order.
pub fn switches(template: &str) -> Vec<&'static str> {
    let env = environment();
    let source = without_generation_tags(template);
    let Ok(t) = env.template_from_str(&source) else {
        return Vec::new();
    };
    let read = t.undeclared_variables(false);
    // A template may also read a switch before it sets its default
    // (`{% set enable_thinking = enable_thinking if enable_thinking is defined else true %}`,
    // Nemotron 3; `{% set enable_thinking = enable_thinking | default(true) %}`,
    // Laguna): the set hides it from the undeclared variables.
    let tested = |v: &str| {
        ["is defined", "is not defined", "is undefined", "| default(", "|default("].iter().any(|t| {
            let needle = format!("{v} {t}");
            template.match_indices(&needle).any(|(at, _)| {
                // A whole top-level name: not `message.thinking`, not `enable_thinking`.
                !template[..at].ends_with(|c: char| c == '.' || c == '_' || c.is_alphanumeric())
            })
        })
    };
    SWITCHES.iter().map(|s| s.var).filter(|v| read.contains(*v) || tested(v)).collect()
}

impl TemplateVars {
    /// The variables `template` is rendered with: each switch it reads set
    /// for [`TemplateVars::think`], then the kwargs over them.
    pub fn variables(&self, template: &str) -> Result<Map<String, Value>, TemplateError> {
        let mut vars = Map::new();
        for var in switches(template) {
            let s = SWITCHES.iter().find(|s| s.var == var).expect("a listed switch");
            let value = match self.think {
                Think::Off => Some((s.off)(template)),
                Think::On => (s.on)(template),
            };
            if let Some(v) = value {
                vars.insert(var.to_string(), v);
            }
        }
        for (k, v) in &self.kwargs {
            vars.insert(k.clone(), v.clone());
        }
        Ok(vars)
    }

    /// The record of a template rendered with these settings.
    pub fn record(&self, template: &str, file: Option<&Path>) -> Result<TemplateRecord, TemplateError> {
        Ok(TemplateRecord {
            source: if file.is_some() { "file" } else { "gguf" }.into(),
            path: file.map(|p| p.display().to_string()),
            sha256: sha256_hex(template.as_bytes()),
            think: self.think,
            switches: switches(template).into_iter().map(String::from).collect(),
            kwargs: self.kwargs.clone(),
            variables: self.variables(template)?,
            split_mismatch: None,
        })
    }
}

/// How a run's chat template was chosen and rendered (`manifest.runtime.template`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TemplateRecord {
    /// `gguf` (the model's own) or `file` (`--chat-template`).
    pub source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub sha256: String,
    pub think: Think,
    /// The thinking switches the template reads; empty: it has none, and
    /// `think` could not be applied.
    pub switches: Vec<String>,
    /// The user's template kwargs.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub kwargs: Map<String, Value>,
    /// Every variable rendered beyond the message: switches, then kwargs.
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub variables: Map<String, Value>,
    /// Set when a real file and question do not render as the prefix
    /// followed by the question's suffix (the template reads the message):
    /// what differed. The prompts then differ from the template's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_mismatch: Option<String>,
}

impl TemplateRecord {
    /// The note said once when `think` cannot be applied: the template has
    /// no switch (and no kwarg sets one) but shows reasoning markers (it may
    /// think anyway, as the DeepSeek R1 Llama distill always does), or
    /// thinking on was asked for. A template that never thinks (Llama,
    /// Gemma 3) has nothing to switch and gets no note; every run records
    /// `switches` either way.
    pub(crate) fn no_switch_note(&self, template: &str) -> Option<String> {
        if !self.switches.is_empty() || self.kwargs.keys().any(|k| SWITCHES.iter().any(|s| s.var == k)) {
            return None;
        }
        let shows_reasoning =
            crate::prompt::reasoning::TAG_PAIRS.iter().any(|(open, close)| template.contains(open) && template.contains(close))
                || template.contains("<|channel|>");
        if !shows_reasoning && self.think == Think::Off {
            return None;
        }
        Some(format!(
            "note: the chat template has no thinking switch ({}): thinking {} is not applied; \
             reasoning in the answers is split off before scoring",
            SWITCHES.iter().map(|s| s.var).collect::<Vec<_>>().join(", "),
            self.think.as_str()
        ))
    }
}

/// Special-token texts a chat template may refer to.
#[derive(Debug, Clone, Default)]
pub struct SpecialTokens {
    pub bos: String,
    pub eos: String,
}

/// The Jinja environment chat templates are rendered in.
fn environment() -> minijinja::Environment<'static> {
    use minijinja::{Environment, Error, ErrorKind, syntax::SyntaxConfig};
    let mut env = Environment::new();
    env.set_fuel(Some(FUEL));
    // Hugging Face renders chat templates with trim_blocks and lstrip_blocks.
    env.set_syntax(SyntaxConfig::builder().trim_blocks(true).lstrip_blocks(true).build().expect("the default delimiters are valid"));
    // Python string and dict methods (`.strip()`, `.startswith()`, `.items()`).
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function("raise_exception", |msg: String| -> Result<String, Error> {
        Err(Error::new(ErrorKind::InvalidOperation, format!("{RAISED}{msg}")))
    });
    // Python's `None is iterable` is false (minijinja iterates none as empty):
    // Qwen3-Coder and Nemotron 3 test `tools is iterable` before `tools | length`.
    env.add_test("iterable", |v: minijinja::Value| !v.is_none() && v.try_iter().is_ok());
    // Rendering must be reproducible: no wall-clock dates in the prompt.
    env.add_function("strftime_now", |fmt: String| -> String { strftime_fixed(&fmt) });
    env
}

/// Hugging Face's `{% generation %}…{% endgeneration %}` marks the assistant's
/// text for training masks and renders its body unchanged; minijinja has no
/// such tag, so each becomes `{% if true %}` / `{% endif %}`, which keep the
/// tag's whitespace control (`{%-`, `-%}`) and trim_blocks behaviour.
fn without_generation_tags(template: &str) -> std::borrow::Cow<'_, str> {
    if !template.contains("generation") {
        return template.into();
    }
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(at) = rest.find("{%") {
        out.push_str(&rest[..at]);
        let tag = &rest[at..];
        let Some(end) = tag.find("%}") else {
            out.push_str(tag);
            return out.into();
        };
        let inner = &tag[2..end];
        let open_ctl = inner.strip_prefix(['-', '+']).map_or("", |_| &inner[..1]);
        let body = &inner[open_ctl.len()..];
        let close_ctl = if body.ends_with(['-', '+']) { &body[body.len() - 1..] } else { "" };
        let word = body[..body.len() - close_ctl.len()].trim();
        let replacement = match word {
            "generation" => Some("if true"),
            "endgeneration" => Some("endif"),
            _ => None,
        };
        match replacement {
            Some(r) => out.push_str(&format!("{{%{open_ctl} {r} {close_ctl}%}}")),
            None => out.push_str(&tag[..end + 2]),
        }
        rest = &tag[end + 2..];
    }
    out.push_str(rest);
    out.into()
}

/// The date every rendering uses: Wednesday 1 January 2025, midnight.
pub const FIXED_DATE: &str = "2025-01-01";

/// `strftime` for [`FIXED_DATE`]: the codes chat templates use (Llama 3.x
/// writes "%d %b %Y", Mistral "%Y-%m-%d"); an unknown code is kept as written.
fn strftime_fixed(fmt: &str) -> String {
    let mut out = String::new();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(code) = chars.next() else {
            out.push('%');
            break;
        };
        out.push_str(match code {
            'Y' => "2025",
            'y' => "25",
            'm' => "01",
            'd' => "01",
            'e' => " 1",
            'b' | 'h' => "Jan",
            'B' => "January",
            'a' => "Wed",
            'A' => "Wednesday",
            'j' => "001",
            'H' | 'M' | 'S' => "00",
            'F' => "2025-01-01",
            '%' => "%",
            other => {
                out.push('%');
                out.push(other);
                continue;
            }
        });
    }
    out
}

/// Marks an error raised by the template itself.
const RAISED: &str = "raised: ";

/// An error on one line (minijinja's display may add the template's source).
fn one_line(e: &minijinja::Error) -> String {
    let mut s = e.to_string();
    if let Some(d) = e.detail() {
        s = format!("{} ({d})", e.kind());
        if let Some(line) = e.line() {
            s.push_str(&format!(" at line {line}"));
        }
    }
    s.lines().next().unwrap_or("").to_string()
}

/// Renders `template` for one user message holding `content`, with the
/// generation prompt, the special tokens and `vars`.
pub fn render(template: &str, content: &str, special: &SpecialTokens, vars: &Map<String, Value>) -> Result<String, TemplateError> {
    let env = environment();
    let source = without_generation_tags(template);
    let tmpl =
        env.template_from_str(&source).map_err(|e| TemplateError::DoesNotParse { path: "the chat template".into(), why: one_line(&e) })?;
    let mut ctx = Map::new();
    ctx.insert("messages".into(), serde_json::json!([{ "role": "user", "content": content }]));
    // As Hugging Face's apply_chat_template: no tools, no documents, but defined.
    ctx.insert("tools".into(), Value::Null);
    ctx.insert("documents".into(), Value::Null);
    ctx.insert("add_generation_prompt".into(), Value::Bool(true));
    ctx.insert("bos_token".into(), Value::String(special.bos.clone()));
    ctx.insert("eos_token".into(), Value::String(special.eos.clone()));
    for (k, v) in vars {
        ctx.insert(k.clone(), v.clone());
    }
    let mut out = Bounded { out: Vec::new(), limit: 2 * content.len() + OUTPUT_SLACK, over: false };
    let rendered = tmpl.render_captured_to(minijinja::value::Serde(&ctx), &mut out);
    if out.over {
        return Err(TemplateError::TooLarge(out.limit, content.len()));
    }
    rendered.map_err(|e| {
        if e.kind() == minijinja::ErrorKind::OutOfFuel {
            return TemplateError::OutOfFuel;
        }
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(c) = cause {
            let detail = c.downcast_ref::<minijinja::Error>().and_then(|m| m.detail());
            if let Some(msg) = detail.and_then(|d| d.strip_prefix(RAISED)) {
                return TemplateError::Raised(msg.lines().next().unwrap_or("").to_string());
            }
            cause = c.source();
        }
        TemplateError::DoesNotRender(one_line(&e))
    })?;
    String::from_utf8(out.out).map_err(|_| TemplateError::DoesNotRender("its output is not UTF-8".into()))
}

impl crate::settings::Explain for TemplateError {
    fn explain(&self, n: &dyn crate::settings::Names) -> String {
        use crate::settings::Setting;
        format!("{self}; give a working template with {}, or fix {}", n.set(Setting::ChatTemplate, "FILE"), n.name(Setting::TemplateKwargs))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const QWEN3_TAIL: &str = "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- if enable_thinking is defined and enable_thinking is false %}{{- '<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}";

    fn vars(think: Think, kwargs: &str) -> TemplateVars {
        TemplateVars { think, kwargs: parse_kwargs(kwargs).unwrap() }
    }

    #[test]
    fn thinking_off_renders_the_closed_empty_block() {
        let v = vars(Think::Off, "{}").variables(QWEN3_TAIL).unwrap();
        let out = render(QWEN3_TAIL, "hi", &SpecialTokens::default(), &v).unwrap();
        assert_eq!(out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
        let v = vars(Think::On, "{}").variables(QWEN3_TAIL).unwrap();
        let out = render(QWEN3_TAIL, "hi", &SpecialTokens::default(), &v).unwrap();
        assert!(out.ends_with("<|im_start|>assistant\n"));
    }

    #[test]
    fn kwargs_replace_the_switch() {
        let v = vars(Think::Off, r#"{"enable_thinking": true, "x": 1}"#).variables(QWEN3_TAIL).unwrap();
        assert_eq!(v["enable_thinking"], Value::Bool(true));
        assert_eq!(v["x"], Value::from(1));
    }

    #[test]
    fn a_template_without_a_switch_is_recorded_and_noted() {
        // Never thinks: recorded, no note unless thinking on is asked for.
        let t = "{% for m in messages %}{{ m.content }}{% endfor %}";
        let r = vars(Think::Off, "{}").record(t, None).unwrap();
        assert!(r.switches.is_empty());
        assert!(r.no_switch_note(t).is_none());
        assert!(vars(Think::On, "{}").record(t, None).unwrap().no_switch_note(t).is_some());
        // Always thinks (the R1 Llama distill opens the block itself): noted.
        let r1 = "{% for m in messages %}{{ m.content }}{% endfor %}<think>\n{# </think> #}";
        assert!(vars(Think::Off, "{}").record(r1, None).unwrap().no_switch_note(r1).is_some());
        let r = vars(Think::Off, "{}").record(QWEN3_TAIL, None).unwrap();
        assert_eq!(r.switches, ["enable_thinking"]);
        assert!(r.no_switch_note(QWEN3_TAIL).is_none());
    }

    #[test]
    fn a_switch_read_before_its_default_is_set_is_found() {
        let t = "{%- set enable_thinking = enable_thinking if enable_thinking is defined else True %}{{ message.thinking is defined }}";
        assert_eq!(switches(t), ["enable_thinking"]);
        let laguna = "{%- set enable_thinking = enable_thinking | default(true) -%}{% if enable_thinking %}<think>{% endif %}";
        assert_eq!(switches(laguna), ["enable_thinking"]);
        assert_eq!(switches("{%- set thinking = message.thinking | default('') -%}"), Vec::<&str>::new());
    }

    #[test]
    fn reasoning_effort_takes_the_lowest_the_template_knows() {
        let low = "{{ reasoning_effort }}";
        assert_eq!(vars(Think::Off, "{}").variables(low).unwrap()["reasoning_effort"], "low");
        let none = "{% if reasoning_effort == 'none' %}x{% endif %}";
        assert_eq!(vars(Think::Off, "{}").variables(none).unwrap()["reasoning_effort"], "none");
        assert!(vars(Think::On, "{}").variables(low).unwrap().is_empty());
        let hunyuan = "{% if reasoning_effort not in ['high', 'low', 'no_think'] %}{% endif %}";
        assert_eq!(vars(Think::Off, "{}").variables(hunyuan).unwrap()["reasoning_effort"], "no_think");
        assert_eq!(vars(Think::On, "{}").variables(hunyuan).unwrap()["reasoning_effort"], "high");
    }

    #[test]
    fn generation_tags_render_their_body() {
        let t = "a{%- generation -%}  b  {%- endgeneration %}\nc{% generation %}d{% endgeneration %}";
        assert_eq!(without_generation_tags(t), "a{%- if true -%}  b  {%- endif %}\nc{% if true %}d{% endif %}");
        assert_eq!(render(t, "", &SpecialTokens::default(), &Map::new()).unwrap(), "abcd");
    }

    #[test]
    fn none_is_not_iterable_as_in_python() {
        let t = "{{ tools is iterable }} {{ [] is iterable }} {{ 'ab' is iterable }}";
        assert_eq!(render(t, "", &SpecialTokens::default(), &Map::new()).unwrap(), "False True True");
    }

    #[test]
    fn dates_are_fixed() {
        assert_eq!(strftime_fixed("%d %b %Y"), "01 Jan 2025");
        assert_eq!(strftime_fixed("%Y-%m-%d %Q%"), "2025-01-01 %Q%");
    }

    #[test]
    fn bad_kwargs_and_raising_templates() {
        assert!(matches!(parse_kwargs("[1]"), Err(TemplateError::KwargsNotObject(_))));
        assert!(matches!(parse_kwargs("{"), Err(TemplateError::KwargsNotObject(_))));
        let raising = "{{ raise_exception('no system role') }}";
        let e = render(raising, "x", &SpecialTokens::default(), &Map::new()).unwrap_err();
        assert!(matches!(&e, TemplateError::Raised(m) if m == "no system role"), "{e}");
        let e = render("{% for %}", "x", &SpecialTokens::default(), &Map::new()).unwrap_err();
        assert!(matches!(e, TemplateError::DoesNotParse { .. }), "{e}");
        // A loop that never ends in practice, and one that writes without end,
        // are stopped with a message instead of hanging or aborting.
        let endless = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}";
        assert!(matches!(render(endless, "x", &SpecialTokens::default(), &Map::new()), Err(TemplateError::OutOfFuel)));
        let huge = "{% for a in range(1000) %}{{ 'x' * 100000 }}{% endfor %}";
        let e = render(huge, "hello", &SpecialTokens::default(), &Map::new()).unwrap_err();
        assert!(matches!(e, TemplateError::TooLarge(_, 5)), "{e}");
        // A template that writes the message once, around a frame, is not bounded by it.
        let big = "m".repeat(3_000_000);
        assert_eq!(render("<s>{{ messages[0].content }}</s>", &big, &SpecialTokens::default(), &Map::new()).unwrap().len(), big.len() + 7);
    }
}
