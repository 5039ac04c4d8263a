//! Chat-template fidelity on real templates: llama.cpp's collection
//! (models/templates/*.jinja, fetched from the llama-cpp-python source
//! distribution on PyPI, pinned by sha256 and cached) rendered by posrecall
//! (`posrecall template`) and by Python jinja2 set up as Hugging Face's
//! `apply_chat_template` sets it up, with thinking off and on, compared byte
//! for byte by `scripts/oracles/template-fidelity`. Every template posrecall renders
//! must also split cleanly into a prefix and a suffix that does not change
//! the prefix. Needs python3 with jinja2 (scripts/setup installs it).

use crate::common;

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/oracles/template-fidelity")
}

/// The collection's folder (fetched on first use).
pub fn collection() -> PathBuf {
    let o = Command::new(script()).arg("--fetch-only").output().expect("python3 runs scripts/oracles/template-fidelity");
    assert!(o.status.success(), "fetching the templates failed: {}", String::from_utf8_lossy(&o.stderr));
    PathBuf::from(String::from_utf8(o.stdout).unwrap().trim())
}

fn row<'a>(rows: &'a [Value], template: &str, think: &str) -> &'a Value {
    rows.iter().find(|r| r["template"] == template && r["think"] == think).unwrap_or_else(|| panic!("no row for {template} think {think}"))
}

fn tail(r: &Value) -> &str {
    r["tail"].as_str().unwrap_or_else(|| panic!("no tail: {r}"))
}

#[test]
fn the_collection_renders_as_the_reference_renderer_does() {
    let dir = tempfile::TempDir::new().unwrap();
    let json = dir.path().join("rows.json");
    let templates = collection();
    let o = Command::new(script())
        .args(["--posrecall", common::bin(), "--templates"])
        .arg(&templates)
        .arg("--json")
        .arg(&json)
        .output()
        .expect("python3 runs scripts/oracles/template-fidelity");
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "templates render differently without a listed reason:\n{report}\n{}", String::from_utf8_lossy(&o.stderr));
    let summary = report.lines().last().unwrap_or("");
    eprintln!("{summary}");
    let all: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let identical = all["identical"].as_array().unwrap().len();
    // 66 of the 70 at the pinned version: three tool-use variants that Python
    // refuses without tools, one template both refuse (scripts/oracles/template-fidelity).
    assert!(identical >= 66, "only {identical} identical: {summary}");
    let rows = all["rows"].as_array().unwrap();

    // The plan's families, thinking off and on, as their model cards say.
    for qwen in ["Qwen-Qwen3-0.6B.jinja", "Qwen3.5-4B.jinja"] {
        let off = row(rows, qwen, "off");
        assert_eq!(off["switches"], serde_json::json!(["enable_thinking"]), "{qwen}");
        assert!(tail(off).ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n"), "{qwen}: {off}");
        assert!(!tail(row(rows, qwen, "on")).contains("</think>"), "{qwen}");
    }
    let oss = row(rows, "openai-gpt-oss-120b.jinja", "off");
    assert_eq!(oss["variables"]["reasoning_effort"], "low");
    // DeepSeek R1 distills always think: no switch; the template opens the block.
    let r1 = row(rows, "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "off");
    assert_eq!(r1["switches"], serde_json::json!([]));
    assert!(tail(r1).ends_with("<think>\n"), "{r1}");
    for t in ["HuggingFaceTB-SmolLM3-3B.jinja", "GLM-4.6.jinja", "Qwen-QwQ-32B.jinja"] {
        assert!(tail(row(rows, t, "off")).contains("</think>"), "{t}: thinking off closes the block");
    }
    // Every template with a thinking switch: what its own text writes with
    // the switch off (or only with it on), read from the template, is in
    // that prompt and not in the other.
    let switched: std::collections::BTreeSet<&str> = rows
        .iter()
        .filter(|r| r["think"] == "off" && r["switches"].as_array().is_some_and(|a| !a.is_empty()))
        .map(|r| r["template"].as_str().unwrap())
        .collect();
    assert_eq!(switched, SWITCHED.iter().map(|s| s.0).collect(), "the templates with a thinking switch");
    let prompt = |t: &str, think: &str| {
        let r = row(rows, t, think);
        format!("{}{}", r["head"].as_str().unwrap(), tail(r))
    };
    for (t, only_in, fragment, source) in SWITCHED {
        let text = std::fs::read_to_string(templates.join(t)).unwrap();
        assert!(text.contains(source), "{t}: the template does not write {source:?}");
        let other = if only_in == "off" { "on" } else { "off" };
        assert!(prompt(t, only_in).contains(fragment), "{t}: thinking {only_in} lacks {fragment:?}: {:?}", prompt(t, only_in));
        assert!(!prompt(t, other).contains(fragment), "{t}: thinking {other} has {fragment:?}: {:?}", prompt(t, other));
    }
    // Every template posrecall renders splits cleanly.
    for r in rows.iter().filter(|r| r["split_ok"].is_boolean()) {
        assert_eq!(r["split_ok"], true, "{r}");
    }
}

/// The collection's templates with a thinking switch, each with what its own
/// text writes only with thinking `off` (a closed or empty reasoning block, a
/// directive not to reason) or only `on` (the opened block, where off leaves
/// it unopened), and the template text that writes it. gpt-oss cannot stop
/// reasoning: its off is the lowest effort. Granite 3.3 reasons only when
/// told how. (muse-glimmer's `reasoning_strength` has no value that turns
/// reasoning off, so it is no switch.)
const SWITCHED: [(&str, &str, &str, &str); 33] = [
    ("Apertus-8B-Instruct.jinja", "off", "Deliberation: disabled", r"{{ 'disabled\n' }}"),
    ("Bielik-11B-v3.0-Instruct.jinja", "on", "<|im_start|>assistant\n<think>\n", r"{{- '<think>\n' }}"),
    (
        "ByteDance-Seed-OSS.jinja",
        "off",
        "The current thinking budget is 0, so I will directly start answering the question.",
        "The current thinking budget is 0, so I will directly start answering the question.",
    ),
    ("Cohere2MoE.jinja", "off", "<|START_THINKING|><|END_THINKING|>", "{% else %}<|START_THINKING|><|END_THINKING|>"),
    (
        "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja",
        "off",
        "<|START_THINKING|><|END_THINKING|>",
        "<|START_THINKING|><|END_THINKING|>",
    ),
    ("GLM-4.6.jinja", "off", "/nothink<|assistant|>\n<think></think>", "<think></think>"),
    ("GLM-4.7-Flash.jinja", "off", "<|assistant|></think>", "'</think>' if (enable_thinking is defined and not enable_thinking)"),
    ("HuggingFaceTB-SmolLM3-3B.jinja", "off", "<think>\n\n</think>\n", r#"assistant\n" + "<think>\n\n</think>\n" }}"#),
    ("Kimi-K3.jinja", "on", "<|open|>think<|sep|>", "open_tag('think' if thinking else 'response')"),
    ("MiniMax-M3.jinja", "off", "Do not output any thinking process.", "Do not output any thinking process."),
    (
        "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja",
        "off",
        "<|im_start|>assistant\n<think></think>",
        r"'<|im_start|>assistant\n<think></think>'",
    ),
    ("Qwen-QwQ-32B.jinja", "off", "<think>\n</think>", "</think>"),
    ("Qwen-Qwen3-0.6B.jinja", "off", "<think>\n\n</think>\n\n", r"'<think>\n\n</think>\n\n'"),
    ("Qwen3.5-4B.jinja", "off", "<think>\n\n</think>\n\n", r"'<think>\n\n</think>\n\n'"),
    ("Reka-Edge.jinja", "on", " <think>\n", r#""assistant: <think>\n""#),
    ("Spark2.5.jinja", "off", "<|Bot|></think>", "</think>"),
    ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "off", "<think>\n</think>", "</think>"),
    ("deepseek-ai-DeepSeek-V3.1.jinja", "off", "<think></think>", "<think></think>"),
    ("deepseek-ai-DeepSeek-V3.2.jinja", "off", "</think>", "</think>"),
    ("deepseek-ai-DeepSeek-V4-Flash-0731.jinja", "off", "</think>", "</think>"),
    ("deepseek-ai-DeepSeek-V4.jinja", "off", "</think>", "</think>"),
    ("google-gemma-4-31B-it-interleaved.jinja", "off", "<|channel>thought\n<channel|>", r"'<|channel>thought\n<channel|>'"),
    ("google-gemma-4-31B-it.jinja", "off", "<|channel>thought\n<channel|>", r"'<|channel>thought\n<channel|>'"),
    (
        "ibm-granite-granite-3.3-2B-Instruct.jinja",
        "on",
        "Write your thoughts between <think></think>",
        "Write your thoughts between <think></think>",
    ),
    ("inclusionai-ling-3.0-flash.jinja", "off", "detailed thinking off", "detailed thinking off"),
    ("llama-cpp-rwkv-world.jinja", "off", "<think>\n</think>", "</think>"),
    ("openai-gpt-oss-120b.jinja", "off", "Reasoning: low", r#""Reasoning: " + reasoning_effort"#),
    ("openbmb-MiniCPM5-1B.jinja", "off", "<think>\n\n</think>\n\n", "</think>"),
    ("poolside-Laguna-S-2.1.jinja", "off", "<assistant></think>", "</think>"),
    ("poolside-Laguna-XS-2.1.jinja", "off", "<assistant>\n</think>", "</think>"),
    ("poolside-Laguna-XS.2.jinja", "off", "<assistant>\n</think>", "</think>"),
    ("tencent-Hy3.jinja", "off", "<think:opensource></think:opensource>", "'</think{}>'.format(HYTK)"),
    ("upstage-Solar-Open-100B.jinja", "off", "<|think|><|end|>", "<|think|><|end|>"),
];

/// A template that is not in the collection's format still goes through the
/// same checks: `posrecall template --json` reports a frame that does not
/// reassemble (a prefix depending on the question).
#[test]
fn a_prefix_that_depends_on_the_question_is_reported() {
    let dir = tempfile::TempDir::new().unwrap();
    let t = dir.path().join("sneaky.jinja");
    std::fs::write(&t, "<sys len={{ messages[0].content | length }}>{{ messages[0].content }}<end>").unwrap();
    let out = common::ok(&common::posrecall(&["template", common::s(&t), "--json"]));
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["split_ok"], false, "{v}");
    assert!(v["split_error"].as_str().unwrap().contains("differs from the frame"), "{v}");
}
