//! Thinking models, end to end on a real model and a real template: SmolLM2
//! rendered with a Qwen 3.x chat template from llama.cpp's collection
//! (`--chat-template`), thinking off and on; answers holding reasoning,
//! scored on the answer alone (`score`, with constructed answers).

use crate::common;

use common::*;
use posrecall::bench::plan;
use posrecall::corpus::Source;
use posrecall::engine::model;
use posrecall::prompt::Probe;
use posrecall::prompt::template::{TemplateFile, TemplateVars, Think};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Command;

/// A template of llama.cpp's collection (fetched and cached by the fidelity script).
fn collection_template(name: &str) -> PathBuf {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/oracles/template-fidelity");
    let o = Command::new(script).arg("--fetch-only").output().expect("python3 runs scripts/oracles/template-fidelity");
    assert!(o.status.success(), "fetching the templates failed: {}", String::from_utf8_lossy(&o.stderr));
    let p = PathBuf::from(String::from_utf8(o.stdout).unwrap().trim()).join(name);
    assert!(p.is_file(), "{} is missing", p.display());
    p
}

const QWEN3: &str = "Qwen-Qwen3-0.6B.jinja";
const QWEN35: &str = "Qwen3.5-4B.jinja";

/// Thinking off: the prompt ends with the family's closed empty think block,
/// the prompt still tokenizes exactly at the prefix boundary, and the
/// teacher-forced lines come after that block.
#[test]
fn thinking_off_renders_the_closed_empty_block() {
    let _g = serial();
    let m = model::load(&smollm2(), gpu_layers()).unwrap();
    let src = Source::open(&fixture("dense.js")).unwrap();
    let vars = TemplateVars { think: Think::Off, kwargs: Default::default() };
    let mut o = plan_options(target_spec(2, 4, Some((1, 80))), 24, Probe::Auto);
    o.template_file = Some(TemplateFile::load(&collection_template(QWEN3), &vars).unwrap());
    o.template = vars;
    let p = plan(&m, &src, &o, &posrecall::support::progress::Quiet).unwrap();
    assert!(p.frame.tail.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n"), "{:?}", p.frame.tail);
    let rec = p.template.as_ref().unwrap();
    assert_eq!((rec.source.as_str(), rec.switches.as_slice()), ("file", &["enable_thinking".to_string()][..]));
    assert_eq!(rec.variables["enable_thinking"], false);
    assert!(rec.split_mismatch.is_none());
    assert!(p.boundary_exact);
    // Not SmolLM2's own system prompt: Qwen 3's template has none by default.
    assert!(!p.prefix_text.contains("SmolLM"));
    for (t, q) in p.targets.iter().zip(&p.queries) {
        let whole = m.tokenize_prefix(&format!("{}{}", p.prefix_text, p.frame.suffix(t, 4, false)));
        let joined: Vec<_> = p.prefix_tokens.iter().chain(q).copied().collect();
        assert_eq!(whole, joined, "{}", t.name);
    }
}

/// The bench run records the template and the thinking mode; the prefix
/// cache keys follow the rendered prefix (the GGUF's template and Qwen 3's
/// differ before the file, so they are two cache entries).
#[test]
fn bench_records_the_template_and_keys_the_cache_by_the_prefix() {
    let _g = serial();
    let dir = tempfile::TempDir::new().unwrap();
    let cache = dir.path().join("cache");
    let qwen = collection_template(QWEN3);
    let (run_a, run_b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let (dense, model) = (fixture("dense.js"), smollm2());
    let common_args =
        ["--corpus", s(&dense), "--crop-lines", "1:80", "--count", "2", "--lines", "4", "--forced-only", "-q", "--prefix-cache", s(&cache)];
    let mut a = vec!["bench", s(&model)];
    a.extend(common_args);
    a.extend(["--chat-template", s(&qwen), "-o", s(&run_a)]);
    ok(&posrecall(&a));
    let mut b = vec!["bench", s(&model)];
    b.extend(common_args);
    b.extend(["-o", s(&run_b)]);
    ok(&posrecall(&b));
    let (a, b) = (read(&run_a), read(&run_b));
    let t = &a["manifest"]["runtime"]["template"];
    assert_eq!(t["source"], "file");
    assert_eq!(t["path"], s(&qwen));
    assert_eq!(t["sha256"], posrecall::support::fsutil::sha256_hex(&std::fs::read(&qwen).unwrap()));
    assert_eq!(t["switches"], json!(["enable_thinking"]));
    assert_eq!(t["variables"], json!({"enable_thinking": false}));
    assert_eq!(a["manifest"]["params"]["think"], "off");
    // SmolLM2's own template has no switch: recorded as such.
    assert_eq!(b["manifest"]["runtime"]["template"]["source"], "gguf");
    assert_eq!(b["manifest"]["runtime"]["template"]["switches"], json!([]));
    assert_ne!(a["manifest"]["runtime"]["prefix_sha256"], b["manifest"]["runtime"]["prefix_sha256"]);
    // Two prefixes, two entries (a state file and its checksum each); run b
    // evaluated its own prefix rather than loading a's.
    let mut states: Vec<String> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".state"))
        .collect();
    states.sort();
    assert_eq!(states.len(), 2, "one cache entry per rendered prefix: {states:?}");
    assert_eq!(b["timings"]["prefix_source"], "prefill");
    assert_eq!(a["timings"]["prefix_source"], "prefill");
    // The same prefix again is loaded from its entry.
    let mut again = vec!["bench", s(&model)];
    again.extend(common_args);
    again.extend(["--chat-template", s(&qwen), "-o", s(&run_a)]);
    ok(&posrecall(&again));
    assert_eq!(read(&run_a)["timings"]["prefix_source"], "cache");
}

/// Answers collected elsewhere, in every reasoning format, are scored on the
/// answer alone; the reasoning is recorded, never scored.
#[test]
fn score_splits_reasoning_off_every_format() {
    let dir = tempfile::TempDir::new().unwrap();
    let printed = ok(&posrecall(&["targets", s(&fixture("dense.js")), "--json", "--count", "5", "--lines", "6"]));
    let tpath = dir.path().join("t.json");
    std::fs::write(&tpath, &printed).unwrap();
    let t: Value = serde_json::from_str(&printed).unwrap();
    let targets = t["targets"].as_array().unwrap();
    let body = |i: usize| -> String {
        let lines: Vec<&str> = targets[i]["expected"].as_array().unwrap().iter().map(|l| l.as_str().unwrap()).collect();
        lines.join("\n") + "\n"
    };
    let wrong = "```js\nreturn wrong;\n```";
    let answers = [
        // Qwen 3 thinking: a closed block holding a wrong fenced guess, then the answer.
        format!("<think>\nLet me recall.\n{wrong}\n</think>\n\n```javascript\n{}```\n", body(0)),
        // The template opened the block (QwQ, DeepSeek R1): only the closing tag.
        format!("Recalling the function.\n{wrong}\n</think>\n\n{}", body(1)),
        // gpt-oss channels.
        format!("<|channel|>analysis<|message|>{wrong}<|end|><|start|>assistant<|channel|>final<|message|>{}<|return|>", body(2)),
        // The budget ran out while thinking: the right lines inside the reasoning do not count.
        format!("<think>\n{}", body(3)),
        // No reasoning at all.
        body(4),
    ];
    let responses: String =
        answers.iter().zip(targets).map(|(a, t)| json!({"name": t["name"], "response": a}).to_string() + "\n").collect();
    let rpath = dir.path().join("r.jsonl");
    std::fs::write(&rpath, responses).unwrap();
    let run_path = dir.path().join("run.json");
    ok(&posrecall(&["score", s(&tpath), s(&rpath), "-o", s(&run_path), "-q"]));
    let run = read(&run_path);
    let r = run["targets"].as_array().unwrap();
    let matched: Vec<u64> = r.iter().map(|x| x["matched"].as_u64().unwrap()).collect();
    assert_eq!(matched, [6, 6, 6, 0, 6], "{run}");
    for x in &r[..3] {
        assert!(x["reasoning"].as_str().unwrap().contains("return wrong;"), "{x}");
        assert!(!x["response"].as_str().unwrap().contains("wrong"), "{x}");
    }
    assert!(r[3]["reasoning"].as_str().unwrap().contains(targets[3]["expected"][0].as_str().unwrap().trim()));
    assert!(r[4]["reasoning"].is_null());
}

/// SmolLM2 with `<think>` and `</think>` as control tokens of its vocabulary
/// (`scripts/dev/make-tiny-models --think-vocab`), as thinking models have them.
fn think_vocab_smollm2() -> PathBuf {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/dev/make-tiny-models");
    let o = Command::new(&script).arg("--think-vocab").output().expect("scripts/dev/make-tiny-models runs");
    assert!(o.status.success(), "{} --think-vocab failed: {}", script.display(), String::from_utf8_lossy(&o.stderr));
    PathBuf::from(String::from_utf8(o.stdout).unwrap().trim())
}

/// Thinking on, with a budget: the template opens the block (Qwen 3.5), the
/// model reasons for the budget, the reasoning is closed as the family closes
/// it (`\n</think>\n\n`), and the answer follows within its own budget.
#[test]
fn thinking_on_closes_the_reasoning_at_its_budget() {
    let _g = serial();
    // (Lines 1..100: in lines 1..80 the native AVX-512 build's SmolLM2
    // repeats its reasoning after the closing text, in its own answer; the
    // portable AVX2 build does so in lines 1..100.)
    closes_the_reasoning_at_its_budget(&smollm2(), "1:100");
}

/// The same where `</think>` is a control token, which llama.cpp renders as
/// nothing unless asked: the closing marker must still reach the answer's
/// text, or the reasoning is never split off and the answer is lost.
#[test]
fn a_closing_marker_that_is_a_control_token_still_closes_the_reasoning() {
    let _g = serial();
    let model = think_vocab_smollm2();
    let vocab = posrecall::engine::model::load_vocab(&model).unwrap();
    assert_eq!(vocab.tokenize_rest("</think>").len(), 1, "</think> is one control token here");
    // (Lines 1..100: in lines 1..80 this vocabulary's SmolLM2 ends one of
    // its two answers before its first token, leaving nothing to close.)
    closes_the_reasoning_at_its_budget(&model, "1:100");
}

fn closes_the_reasoning_at_its_budget(model: &std::path::Path, crop: &str) {
    let dir = tempfile::TempDir::new().unwrap();
    let out = dir.path().join("run.json");
    let qwen = collection_template(QWEN35);
    let dense = fixture("dense.js");
    let o = posrecall(&[
        "bench",
        s(model),
        "--corpus",
        s(&dense),
        "--crop-lines",
        crop,
        "--count",
        "2",
        "--lines",
        "4",
        "--chat-template",
        s(&qwen),
        "--think",
        "on",
        "--think-budget",
        "8",
        "--max-new-tokens",
        "24",
        "--parallel",
        "2",
        "-q",
        "-o",
        s(&out),
    ]);
    ok(&o);
    let run = read(&out);
    let m = &run["manifest"];
    assert_eq!((&m["params"]["think"], &m["params"]["think_budget"]), (&json!("on"), &json!(8)));
    assert_eq!(m["runtime"]["template"]["variables"], json!({"enable_thinking": true}));
    // Closing at a budget runs one sequence at a time, and says so.
    assert!(m["runtime"]["parallel_fallback"].as_str().unwrap().contains("thinking on"), "{m}");
    let vocab = posrecall::engine::model::load_vocab(model).unwrap();
    let close_tokens = vocab.tokenize_rest("\n</think>\n\n").len() as u64;
    let mut total = 0;
    for t in run["targets"].as_array().unwrap() {
        let reasoning_tokens = t["reasoning_tokens"].as_u64().unwrap();
        // The 8 reasoning tokens and the closing tokens (the block was opened
        // in the prompt), no more.
        assert!((8..=8 + close_tokens).contains(&reasoning_tokens), "{close_tokens} closing tokens: {t}");
        assert!(t["reasoning"].is_string(), "{t}");
        // The family's closing text was fed, and the scored answer holds no
        // reasoning.
        let response = t["response"].as_str().unwrap();
        // (A model may write a marker of its own later in its answer; the
        // answer must not start inside the block, nor repeat the reasoning.)
        let reasoning = t["reasoning"].as_str().unwrap().trim();
        assert!(!response.trim_start().starts_with("<think>"), "{t}");
        assert!(reasoning.is_empty() || !response.contains(reasoning), "{t}");
        // Closed, so an answer followed (an unclosed block leaves none).
        assert!(!response.trim().is_empty(), "{t}");
        assert!(t["generated_tokens"].as_u64().unwrap() <= 8 + 24, "{t}");
        assert!(t["forced"].is_object(), "{t}");
        total += reasoning_tokens;
    }
    assert_eq!(run["summary"]["reasoning_tokens"], total);
}

/// `posrecall prompt` prints exactly the text of the question `bench` asks
/// (the whole file with --full, elided without), and the token counts, from
/// the vocabulary alone.
#[test]
fn prompt_prints_what_the_model_is_given() {
    let _g = serial();
    let qwen = collection_template(QWEN3);
    let (dense, model) = (fixture("dense.js"), smollm2());
    let args = |full: bool| {
        let mut a = vec!["prompt", s(&model), "--corpus", s(&dense), "--count", "2", "--lines", "4", "--crop-lines", "1:80"];
        a.extend(["--chat-template", s(&qwen), "--target", "groupByKey"]);
        if full {
            a.push("--full");
        }
        posrecall(&a)
    };
    let full = args(true);
    let text = ok(&full);
    // The same plan, from the library: the prefix and this target's suffix.
    let m = model::load(&model, gpu_layers()).unwrap();
    let src = Source::open(&dense).unwrap();
    let vars = TemplateVars { think: Think::Off, kwargs: Default::default() };
    let mut o = plan_options(target_spec(2, 4, Some((1, 80))), 24, Probe::Auto);
    o.max_new_tokens = None;
    o.template_file = Some(TemplateFile::load(&qwen, &vars).unwrap());
    o.template = vars;
    let p = plan(&m, &src, &o, &posrecall::support::progress::Quiet).unwrap();
    let i = p.targets.iter().position(|t| t.name == "groupByKey").expect("groupByKey is a target");
    assert_eq!(text, format!("{}{}", p.prefix_text, p.frame.suffix(&p.targets[i], 4, false)));
    let err = String::from_utf8_lossy(&full.stderr);
    assert!(
        err.contains(&format!("prefix: {} tokens (lines 1..80", p.prefix_tokens.len()))
            && err.contains(&format!("suffix: {} tokens", p.queries[i].len())),
        "{err}"
    );
    let short = ok(&args(false));
    assert!(short.contains("lines of the file not shown") && short.len() < text.len());
    assert!(short.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
}

/// Thinking on, with a template whose prompt leaves the model to open its
/// reasoning (Qwen 3): SmolLM2 never writes `<think>`, so its answers have no
/// reasoning to spend a budget on and get the answer budget alone (they got
/// the think budget on top of it).
#[test]
fn an_answer_that_never_reasons_gets_no_reasoning_budget() {
    let _g = serial();
    let dir = tempfile::TempDir::new().unwrap();
    let out = dir.path().join("run.json");
    let (qwen3, dense, model) = (collection_template(QWEN3), fixture("dense.js"), smollm2());
    let o = posrecall(&[
        "bench",
        s(&model),
        "--corpus",
        s(&dense),
        "--crop-lines",
        "1:80",
        "--count",
        "2",
        "--lines",
        "4",
        "--chat-template",
        s(&qwen3),
        "--think",
        "on",
        "--think-budget",
        "64",
        "--max-new-tokens",
        "12",
        "--no-forced",
        "-q",
        "-o",
        s(&out),
    ]);
    ok(&o);
    let run = read(&out);
    assert_eq!(run["manifest"]["params"]["think_budget"], 64);
    for t in run["targets"].as_array().unwrap() {
        let response = t["response"].as_str().unwrap();
        assert!(!response.trim_start().starts_with("<think>"), "{t}");
        // Nothing was split off as reasoning, so none is recorded (a run
        // records reasoning and its tokens only where an answer had some).
        assert!(t.get("reasoning").is_none() && t.get("reasoning_tokens").is_none(), "{t}");
        assert!(t["generated_tokens"].as_u64().unwrap() <= 12, "an answer without reasoning took the think budget: {t}");
    }
}
