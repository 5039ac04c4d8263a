//! Qwen2.5-Coder-0.5B-Instruct: a real code model with a 32K context and the
//! Qwen2.5 chat template, and one that really recalls code. Its own template
//! (the one in the GGUF, not one given by hand) renders as Python jinja2
//! renders it; the prompt splits exactly at the question for its tokenizer;
//! `<|im_end|>` ends an answer and never reaches the scored text; and on a
//! short window of the default corpus it matches lines, so the scorer's
//! matched, extra and truncated paths run on real recall.

use crate::common;

use common::*;
use serde_json::Value;
use std::process::Command;

/// lodash 4.17.21's lines 700..850: four eligible functions at 8 lines each
/// (`posrecall targets` lists them), about 1,500 prefix tokens.
const WINDOW: &[&str] = &["--crop-lines", "700:850", "--count", "4", "--lines", "8", "--threads", "2", "--quiet"];

fn lodash() -> std::path::PathBuf {
    let p = posrecall::support::fsutil::default_corpus_path();
    assert!(p.exists(), "{} is missing: run scripts/env/fetch-corpus", p.display());
    p
}

#[test]
fn the_ggufs_own_template_renders_as_jinja2_does() {
    let model = posrecall::engine::model::load_vocab(&qwen_coder()).unwrap();
    let template = model.chat_template.clone().expect("Qwen2.5-Coder's GGUF has a chat template");
    assert!(template.contains("<|im_start|>"), "not the Qwen2.5 template: {template}");
    let dir = tempfile::TempDir::new().unwrap();
    std::fs::create_dir(dir.path().join("t")).unwrap();
    std::fs::write(dir.path().join("t/qwen2.5-coder-gguf.jinja"), &template).unwrap();
    let json = dir.path().join("rows.json");
    let o = Command::new(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/oracles/template-fidelity"))
        .args(["--posrecall", bin(), "--templates"])
        .arg(dir.path().join("t"))
        .arg("--json")
        .arg(&json)
        .output()
        .expect("python3 runs scripts/oracles/template-fidelity");
    assert!(o.status.success(), "{}\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    let all: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let rows = all["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "thinking off and on: {all}");
    for r in rows {
        assert_eq!(r["outcome"], "identical", "{r}");
        assert_eq!(r["split_ok"], true, "{r}");
    }
}

#[test]
fn the_prefix_is_the_same_for_every_question() {
    let _serial = serial();
    // The shared prefix printed for two different targets is byte-identical;
    // only what follows it (the question) differs.
    let prompt = |target: &str| {
        let (corpus, model) = (lodash(), qwen_coder());
        let args = [
            "prompt",
            s(&model),
            "--corpus",
            s(&corpus),
            "--target",
            target,
            "--full",
            "--crop-lines",
            "700:850",
            "--count",
            "4",
            "--lines",
            "8",
        ];
        ok(&posrecall(&args))
    };
    let (a, b) = (prompt("arraySome"), prompt("baseFindKey"));
    let cut = |t: &str| t.find("Reproduce verbatim").expect("a question");
    let (pa, pb) = (&a[..cut(&a)], &b[..cut(&b)]);
    assert_eq!(pa, pb, "the prefix depends on the question");
    assert!(pa.starts_with("<|im_start|>system\n"), "{pa:.200}");
    assert!(a[cut(&a)..].contains("`arraySome`") && b[cut(&b)..].contains("`baseFindKey`"));
    assert!(a.ends_with("<|im_start|>assistant\n"), "{a:.200}");
}

#[test]
fn a_code_model_recalls_a_real_window() {
    let _serial = serial();
    let dir = tempfile::TempDir::new().unwrap();
    let out = dir.path().join("run.json");
    let (corpus, model) = (lodash(), qwen_coder());
    let mut args = vec!["bench", s(&model), "--corpus", s(&corpus), "--kv", "f16", "--out", s(&out)];
    args.extend_from_slice(WINDOW);
    ok(&posrecall(&args));
    let run = read(&out);
    let m = &run["manifest"];
    assert_eq!(m["model"]["architecture"], "qwen2");
    assert_eq!(m["model"]["n_ctx_train"], 32768);
    assert_eq!(m["params"]["probe"], "chat");
    // The prefix and each question tokenize as the whole prompt does.
    assert_eq!(m["runtime"]["prompt_boundary_exact"], true, "{}", m["runtime"]);
    assert!(m["runtime"]["template"]["split_mismatch"].is_null(), "{}", m["runtime"]["template"]);
    let targets = run["targets"].as_array().unwrap();
    for t in targets {
        let response = t["response"].as_str().unwrap();
        // The end-of-turn token stops the answer; it is never text.
        for marker in ["<|im_end|>", "<|im_start|>", "<|endoftext|>"] {
            assert!(!response.contains(marker), "{}: {marker} in {response:?}", t["name"]);
        }
        let generated = t["generated_tokens"].as_u64().unwrap();
        assert!(generated < m["params"]["max_new_tokens"].as_u64().unwrap(), "{}: ran to the cap, not to its end of turn", t["name"]);
    }
    let total = &run["summary"];
    let n = |k: &str| total[k].as_u64().unwrap();
    // Measured here: 4/4 passed, 32 of 32 lines matched, 6 extra, nothing
    // hallucinated (f16, 2 threads). A little room for another CPU's arithmetic.
    assert!(n("matched") >= 28, "{total}");
    assert!(n("passes") >= 3, "{total}");
    assert!(n("extra") >= 2, "a model that recalls past the 8 lines earns extra lines: {total}");
    assert!(n("hallucinated") <= 2, "{total}");
    // Real recall on the forced pass too: the file's next token is the model's top one.
    let top1 = run["summary"]["forced"]["top1_share"].as_f64().unwrap();
    assert!(top1 > 0.9, "{}", run["summary"]["forced"]);

    // The same question with an answer cut at 40 tokens (the fence and the
    // header take about 12): what it did write matches, and the lines it
    // never reached count as truncated.
    let cut = dir.path().join("cut.json");
    let mut args = vec!["bench", s(&model), "--corpus", s(&corpus), "--kv", "f16", "--out", s(&cut)];
    args.extend_from_slice(&["--only", "arraySome", "--max-new-tokens", "40", "--no-forced"]);
    args.extend_from_slice(WINDOW);
    ok(&posrecall(&args));
    let t = &read(&cut)["targets"][0];
    let (matched, missing, truncated) = (t["matched"].as_u64().unwrap(), t["missing"].as_u64().unwrap(), t["truncated"].as_u64().unwrap());
    assert_eq!(t["generated_tokens"], 40, "{t}");
    assert!(matched >= 2 && truncated >= 2 && truncated <= missing && matched + missing == 8, "{t}");
}
