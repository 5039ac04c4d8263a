//! The engine on real models: prompt fidelity, and restore equivalence
//! (a restored snapshot answers exactly as a fresh context would).

use crate::common;

use common::*;
use posrecall::bench::{Plan, plan};
use posrecall::corpus::Source;
use posrecall::engine::model::{self, Model};
use posrecall::prompt::Probe;
use posrecall::prompt::ProbeKind as Kind;
use posrecall::settings::KvType;

fn bos_count(model: &Model, tokens: &[llama_cpp_2::token::LlamaToken]) -> usize {
    let bos = model.model.vocab().bos();
    tokens.iter().filter(|&&t| t == bos).count()
}

/// Prefix tokens followed by a question's tokens equal the tokenization of
/// the whole rendered prompt. The documented boundary: the prefix ends with a
/// line break and the question starts a new line, so the two are tokenized
/// apart; the test shows the whole-prompt tokenization splits there too.
fn assert_fidelity(model: &Model, plan: &Plan, lines: usize) {
    for (t, q) in plan.targets.iter().zip(&plan.queries) {
        let whole_text = format!("{}{}", plan.prefix_text, plan.frame.suffix(t, lines, false));
        let whole = model.tokenize_prefix(&whole_text);
        let joined: Vec<_> = plan.prefix_tokens.iter().chain(q).copied().collect();
        assert_eq!(whole.len(), joined.len(), "token count differs for {}", t.name);
        assert_eq!(whole, joined, "tokens differ for {}", t.name);
    }
    // BOS opens the prompt exactly once: either the template writes it (and it
    // is not added again) or the tokenizer adds it. A chat template may use the
    // same token inside the prompt (SmolLM2's BOS is `<|im_start|>`); those
    // occurrences are in the text and are counted as such.
    let bos_text = model.bos_text();
    let in_text = plan.prefix_text.matches(bos_text.as_str()).count();
    let added = usize::from(!plan.prefix_text.starts_with(bos_text.as_str()));
    assert_eq!(plan.prefix_tokens[0], model.model.vocab().bos(), "the prompt must start with BOS");
    assert_ne!(plan.prefix_tokens[1], model.model.vocab().bos(), "BOS must not be doubled");
    assert_eq!(bos_count(model, &plan.prefix_tokens), in_text + added);
    for (t, q) in plan.targets.iter().zip(&plan.queries) {
        let text = plan.frame.suffix(t, lines, false);
        assert_eq!(bos_count(model, q), text.matches(bos_text.as_str()).count(), "a question must not add BOS");
    }
    assert!(plan.boundary_exact);
}

#[test]
fn smollm2_chat_prompt_fidelity() {
    let _g = serial();
    let m = model::load(&smollm2(), gpu_layers()).unwrap();
    let src = Source::open(&fixture("dense.js")).unwrap();
    let p = plan(&m, &src, &plan_options(target_spec(4, 10, None), 32, Probe::Auto), &posrecall::support::progress::Quiet).unwrap();
    assert_eq!(p.frame.kind, Kind::Chat, "SmolLM2 has a chat template: auto must pick chat");
    assert_eq!(p.frame.renderer.as_deref(), Some("minijinja"));
    // llama.cpp's built-in renderer drops this default system prompt; ours keeps it.
    assert!(
        p.prefix_text.contains("You are a helpful AI assistant named SmolLM"),
        "the template's default system prompt is missing: {:?}",
        &p.prefix_text[..200.min(p.prefix_text.len())]
    );
    assert!(p.prefix_text.contains("function chunkArray(items, size) {"));
    assert_fidelity(&m, &p, 10);
}

#[test]
fn gemma3_base_model_gets_the_completion_probe_with_exact_tokens() {
    let _g = serial();
    let m = model::load(&gemma3(), gpu_layers()).unwrap();
    assert!(m.chat_template.is_none(), "this Gemma 3 build is a base model");
    let src = Source::open(&fixture("dense.js")).unwrap();
    let p = plan(&m, &src, &plan_options(target_spec(4, 10, None), 32, Probe::Auto), &posrecall::support::progress::Quiet).unwrap();
    assert_eq!(p.frame.kind, Kind::Completion);
    for (t, q) in p.targets.iter().zip(&p.queries) {
        let text = p.frame.suffix(t, 10, false);
        assert!(text.ends_with(&format!("{}\n", t.header)), "the probe must end with the header");
        assert!(!q.is_empty());
    }
    assert_fidelity(&m, &p, 10);
}

/// Two targets of dense.js's lines 1..100: 863 tokens, so the prefill spans
/// two of llama.cpp's 512-token batches and the restored state is the second
/// batch's too. Two targets, because each costs a fresh context's prefill.
fn two_targets_in_lines_1_to_100(m: &Model) -> Plan {
    let src = Source::open(&fixture("dense.js")).unwrap();
    plan(m, &src, &plan_options(target_spec(2, 10, Some((1, 100))), 24, Probe::Auto), &posrecall::support::progress::Quiet).unwrap()
}

#[test]
fn smollm2_restore_equals_fresh_context_f16_and_q8_0() {
    let _g = serial();
    let m = model::load(&smollm2(), gpu_layers()).unwrap();
    let p = two_targets_in_lines_1_to_100(&m);
    assert!(p.prefix_tokens.len() > 512, "prefix of {} tokens", p.prefix_tokens.len());
    for kv in [KvType::F16, KvType::Q8_0] {
        assert_restore_equivalence(&m, &p, &context(p.n_ctx, kv, false), free(24));
    }
}

/// A sequence forked from the prefix (`--parallel`) and a prefix state adopted
/// by another context (`--check-sequential`'s sequential pass) answer exactly
/// as the prefix restored in its own context does; a sequence outside the
/// context's 1..n_seq is refused.
#[test]
fn smollm2_a_forked_sequence_and_an_adopted_snapshot_answer_as_the_prefix_does() {
    use posrecall::engine::session::Session;
    let _g = serial();
    let m = model::load(&smollm2(), gpu_layers()).unwrap();
    let p = two_targets_in_lines_1_to_100(&m);
    let cfg = context(p.n_ctx, KvType::F16, false);
    let mut own = Session::new(&m, &cfg).unwrap();
    own.prefill(&p.prefix_tokens, |_| {}).unwrap();
    own.snapshot().unwrap();
    let mut want = Vec::new();
    for q in &p.queries {
        own.restore().unwrap();
        want.push(own.generate_with(q, free(24), |_| false).unwrap().tokens);
    }
    assert_ne!(want[0], want[1], "the question matters");

    // Two sequences beside the prefix's, in one unified cache.
    let mut parallel = cfg.clone();
    parallel.n_seq = 3;
    parallel.kv_unified = true;
    parallel.n_ctx = (p.prefix_tokens.len() + 3 * p.per_sequence) as u32;
    let mut s = Session::new(&m, &parallel).unwrap();
    s.prefill(&p.prefix_tokens, |_| {}).unwrap();
    s.snapshot().unwrap();
    for bad in [0, 3, -1] {
        assert!(s.fork_prefix(bad).is_err(), "sequence {bad} of 1..3");
    }
    for (i, q) in p.queries.iter().enumerate() {
        s.fork_prefix(1 + i as i32).unwrap();
        assert_eq!(s.generate_with(q, free(24), |_| false).unwrap().tokens, want[i], "forked sequence {}", 1 + i);
    }
    // Forking again over an answered sequence starts it afresh.
    s.fork_prefix(1).unwrap();
    assert_eq!(s.generate_with(&p.queries[1], free(24), |_| false).unwrap().tokens, want[1], "sequence 1 reused");

    let mut adopted = Session::new(&m, &cfg).unwrap();
    adopted.set_snapshot(s.take_snapshot().unwrap()).unwrap();
    for (q, w) in p.queries.iter().zip(&want) {
        adopted.restore().unwrap();
        assert_eq!(&adopted.generate_with(q, free(24), |_| false).unwrap().tokens, w, "adopted prefix state");
    }
}

#[test]
fn gemma3_sliding_window_restore_equals_fresh_context() {
    let _g = serial();
    let m = model::load(&gemma3(), gpu_layers()).unwrap();
    let window: usize =
        m.model.meta_val_str("gemma3.attention.sliding_window").expect("Gemma 3 declares its sliding window").parse().unwrap();
    let src = Source::open(&fixture("dense.js")).unwrap();
    // Lines 1..200: 1,681 tokens, over three windows of 512. Two targets:
    // each costs a fresh context's prefill.
    let p =
        plan(&m, &src, &plan_options(target_spec(2, 10, Some((1, 200))), 24, Probe::Auto), &posrecall::support::progress::Quiet).unwrap();
    assert!(p.prefix_tokens.len() >= 3 * window, "prefix of {} tokens must be several sliding windows of {window}", p.prefix_tokens.len());
    // The lean snapshot is the sliding-window layers' part (their window's
    // cells), smaller than the full one, which adds every prefix cell of the
    // global layers.
    assert_restore_equivalence(&m, &p, &context(p.n_ctx, KvType::F16, false), free(24));
}

/// With `--swa-full off` the sliding-window layers really keep only their
/// window: after a prefix of several windows their cache no longer holds
/// position 0, and the whole context's state is smaller than with the
/// full-size cache. (A sequence's snapshot is the same size either way:
/// llama.cpp writes only the cells still inside the window.)
#[test]
fn gemma3_window_only_cache_forgets_old_positions() {
    let _g = serial();
    let m = model::load(&gemma3(), gpu_layers()).unwrap();
    let src = Source::open(&fixture("dense.js")).unwrap();
    // Lines 1..200: 1,681 tokens, over three windows of 512.
    let p =
        plan(&m, &src, &plan_options(target_spec(3, 10, Some((1, 200))), 24, Probe::Auto), &posrecall::support::progress::Quiet).unwrap();
    let mut seen = Vec::new();
    for swa_full in [false, true] {
        let mut s = posrecall::engine::session::Session::new(&m, &context(p.n_ctx, KvType::F16, swa_full)).unwrap();
        s.prefill(&p.prefix_tokens, |_| {}).unwrap();
        // For a sliding-window cache llama.cpp answers from the window layers.
        let oldest = s.ctx.kv_cache_seq_pos_min(0);
        seen.push((oldest, s.ctx.get_state_size(), s.snapshot().unwrap()));
    }
    let [(oldest_window, state_window, _), (oldest_full, state_full, _)] = seen[..] else { unreachable!() };
    assert!(oldest_window > 0, "the window-only cache still holds position {oldest_window}");
    assert_eq!(oldest_full, 0, "the full-size cache lost position 0");
    assert!(state_window < state_full, "context state {state_window} bytes (window) vs {state_full} (full)");
}
