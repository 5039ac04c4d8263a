//! Chat-template fidelity on real templates: llama.cpp's collection
//! (models/templates/*.jinja, fetched from the llama-cpp-python source
//! distribution on PyPI, pinned by sha256 and cached) rendered by posrecall
//! (`posrecall template`) and by Python jinja2 set up as Hugging Face's
//! `apply_chat_template` sets it up, with thinking off and on, compared byte
//! for byte by `scripts/template-fidelity`. Every template posrecall renders
//! must also split cleanly into a prefix and a suffix that does not change
//! the prefix. Needs python3 with jinja2 (scripts/setup installs it).

mod common;

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/template-fidelity")
}

/// The collection's folder (fetched on first use).
pub fn collection() -> PathBuf {
    let o = Command::new(script()).arg("--fetch-only").output().expect("python3 runs scripts/template-fidelity");
    assert!(o.status.success(), "fetching the templates failed: {}", String::from_utf8_lossy(&o.stderr));
    PathBuf::from(String::from_utf8(o.stdout).unwrap().trim())
}

fn row<'a>(rows: &'a [Value], template: &str, think: &str) -> &'a Value {
    rows.iter()
        .find(|r| r["template"] == template && r["think"] == think)
        .unwrap_or_else(|| panic!("no row for {template} think {think}"))
}

fn tail(r: &Value) -> &str {
    r["tail"].as_str().unwrap_or_else(|| panic!("no tail: {r}"))
}

#[test]
fn the_collection_renders_as_the_reference_renderer_does() {
    let dir = tempfile::TempDir::new().unwrap();
    let json = dir.path().join("rows.json");
    let o = Command::new(script())
        .args(["--posrecall", common::bin(), "--templates"])
        .arg(collection())
        .arg("--json")
        .arg(&json)
        .output()
        .expect("python3 runs scripts/template-fidelity");
    let report = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "templates render differently without a listed reason:\n{report}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let summary = report.lines().last().unwrap_or("");
    eprintln!("{summary}");
    let all: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let identical = all["identical"].as_array().unwrap().len();
    // 66 of the 70 at the pinned version: three tool-use variants that Python
    // refuses without tools, one template both refuse (scripts/template-fidelity).
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
    // Every template posrecall renders splits cleanly.
    for r in rows.iter().filter(|r| r["split_ok"].is_boolean()) {
        assert_eq!(r["split_ok"], true, "{r}");
    }
}

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
