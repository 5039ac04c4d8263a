//! The "is this the same?" keys, each built here from the run's manifest, so
//! that every key reads the same fields with the same meaning
//! (`corpus_sha256` is always the corpus file's, as `manifest.corpus.sha256`;
//! renaming shows in the rendered prefix's sha256).
//!
//! - [`context_key`]: the context parameters that decide an evaluated state
//!   and a run's answers.
//! - [`prefix_cache_key`]: the same evaluated prefix state.
//! - [`reference_identity`]: the same forced tokens after the same text, so
//!   one run's distributions measure another's.
//! - [`resume_key`]: the same run, so a sweep may keep a finished file and
//!   `bench --resume` an unfinished one's targets.

use crate::record::reference::Identity;
use crate::record::run::{Manifest, Params};
use crate::settings::{ContextConfig, FlashAttn, KvType, Rope};
use crate::targets::crop::Crop;
use serde::Serialize;

/// [`ContextConfig`] without the thread count, which changes neither an
/// evaluated state nor an answer.
#[derive(Debug, Serialize)]
pub(crate) struct ContextKey {
    n_ctx: u32,
    type_k: KvType,
    type_v: KvType,
    flash_attn: FlashAttn,
    swa_full: bool,
    kv_unified: bool,
    n_batch: u32,
    n_ubatch: u32,
    gpu_layers: u32,
    /// Absent unless set, so that keys made before RoPE settings existed hold.
    #[serde(skip_serializing_if = "Rope::is_default")]
    rope: Rope,
    /// Whether K and V were rotated (null: not recorded), present when a
    /// type is quantised: an unquantised cache is never rotated, so its keys
    /// made before rotation was recorded hold; a quantised one's do not,
    /// since they cannot say whether the environment turned rotation off.
    #[serde(skip_serializing_if = "Option::is_none")]
    kv_rotation: Option<Option<(bool, bool)>>,
}

pub(crate) fn context_key(c: &ContextConfig) -> ContextKey {
    ContextKey {
        n_ctx: c.n_ctx,
        type_k: c.type_k,
        type_v: c.type_v,
        flash_attn: c.flash_attn,
        swa_full: c.swa_full,
        kv_unified: c.kv_unified,
        n_batch: c.n_batch,
        n_ubatch: c.n_ubatch,
        gpu_layers: c.gpu_layers,
        rope: c.rope,
        kv_rotation: (c.type_k.is_quantized() || c.type_v.is_quantized()).then(|| c.kv_rotation.map(|r| (r.k, r.v))),
    }
}

/// What decides an evaluated prefix state: the model's weights, the
/// evaluated text (the corpus file, its kept lines and the rendered prefix
/// around them), the context, and the llama.cpp build and the CPU kernels
/// that evaluated it. Not the build label, the questions or the scoring.
#[derive(Serialize)]
struct PrefixFields<'a> {
    model_sha256: Option<&'a str>,
    corpus_sha256: &'a str,
    crop: &'a Crop,
    prefix_sha256: Option<&'a str>,
    context: Option<ContextKey>,
    backend: Option<&'a str>,
    cpu_features: Option<&'a [String]>,
    llama_cpp_sys_2: Option<&'a str>,
}

/// The name of a run's evaluated prefix in a prefix cache.
pub(crate) fn prefix_cache_key(m: &Manifest) -> String {
    hash(&PrefixFields {
        model_sha256: m.model.as_ref().map(|x| x.sha256.as_str()),
        corpus_sha256: &m.corpus.sha256,
        crop: &m.corpus.crop,
        prefix_sha256: m.runtime.prefix_sha256.as_deref(),
        context: m.context.as_ref().map(context_key),
        backend: m.runtime.backend.as_deref(),
        cpu_features: m.runtime.cpu_features.as_deref(),
        llama_cpp_sys_2: m.runtime.llama_cpp_sys_2.as_deref(),
    })
}

/// What a reference made by a run, or compared with it, must share with it:
/// the vocabulary (`n_vocab`, and the sha256 over every token's text), the
/// corpus file, its kept lines, the rendered prefix, the probe and LINES.
/// Not the model's weights or the KV cache: measuring those is the point.
pub(crate) fn reference_identity(m: &Manifest, vocab: (usize, String)) -> Identity {
    Identity {
        n_vocab: vocab.0,
        vocab_sha256: vocab.1,
        corpus_sha256: m.corpus.sha256.clone(),
        crop: m.corpus.crop.clone(),
        prefix_sha256: m.runtime.prefix_sha256.clone().unwrap_or_default(),
        probe: m.params.probe.map(|p| crate::settings::Named::as_str(p).to_string()).unwrap_or_default(),
        lines: m.params.lines,
        anchor: m.params.anchor,
    }
}

/// What makes two runs the same run: everything in the manifest that can
/// change an answer or a score (the model's sha256 and build label, the
/// context parameters but the thread count, the backend, the CPU kernels and
/// llama.cpp, the corpus and kept range, the rendered prefix, and the
/// scoring parameters).
/// Not where the files are, nor how many threads ran.
#[derive(Serialize)]
struct RunFields<'a> {
    model_sha256: Option<&'a str>,
    build: Option<&'a str>,
    context: Option<ContextKey>,
    backend: Option<&'a str>,
    cpu_features: Option<&'a [String]>,
    llama_cpp_sys_2: Option<&'a str>,
    corpus_sha256: &'a str,
    crop: &'a Crop,
    prefix_tokens: Option<usize>,
    prefix_sha256: Option<&'a str>,
    params: &'a Params,
}

/// The fields that make a run the run of `m` ([`RunFields`]).
fn run_fields(m: &Manifest) -> RunFields<'_> {
    let model = m.model.as_ref();
    RunFields {
        model_sha256: model.map(|x| x.sha256.as_str()),
        build: model.map(|x| x.build.as_str()),
        context: m.context.as_ref().map(context_key),
        backend: m.runtime.backend.as_deref(),
        cpu_features: m.runtime.cpu_features.as_deref(),
        llama_cpp_sys_2: m.runtime.llama_cpp_sys_2.as_deref(),
        corpus_sha256: &m.corpus.sha256,
        crop: &m.corpus.crop,
        prefix_tokens: m.corpus.prefix_tokens,
        prefix_sha256: m.runtime.prefix_sha256.as_deref(),
        params: &m.params,
    }
}

/// The key a sweep resumes by, and `bench --resume` (see [`RunFields`]).
pub(crate) fn resume_key(m: &Manifest) -> String {
    hash(&run_fields(m))
}

/// Where two manifests' resume keys part, for a refusal that says which
/// key differs: the first field of [`RunFields`] that differs, as
/// `params.seed` with `theirs` then `ours` (JSON); `None` when the keys are
/// the same.
pub(crate) fn resume_difference(theirs: &Manifest, ours: &Manifest) -> Option<(String, String, String)> {
    let value = |m| serde_json::to_value(run_fields(m)).unwrap_or_default();
    first_difference(&value(theirs), &value(ours), "")
}

/// The path of the first leaf where `a` and `b` differ, with both values.
fn first_difference(a: &serde_json::Value, b: &serde_json::Value, at: &str) -> Option<(String, String, String)> {
    use serde_json::Value;
    if a == b {
        return None;
    }
    if let (Value::Object(x), Value::Object(y)) = (a, b) {
        let keys = x.keys().chain(y.keys().filter(|k| !x.contains_key(*k)));
        for k in keys {
            let path = if at.is_empty() { k.clone() } else { format!("{at}.{k}") };
            let (p, q) = (x.get(k).unwrap_or(&Value::Null), y.get(k).unwrap_or(&Value::Null));
            if let Some(d) = first_difference(p, q, &path) {
                return Some(d);
            }
        }
    }
    Some((at.to_string(), a.to_string(), b.to_string()))
}

fn hash(fields: &impl Serialize) -> String {
    crate::support::fsutil::sha256_hex(&serde_json::to_vec(fields).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::{KvRotation, Rotation};

    #[test]
    fn the_context_key_leaves_out_threads_only() {
        let rotated = Rotation { mode: KvRotation::Auto, k: false, v: true };
        let a = ContextConfig {
            kv_rotation: Some(rotated),
            ..ContextConfig::sequential(1024, (KvType::F16, KvType::Q8_0), FlashAttn::Auto, false, Some(2), 0)
        };
        let mut b = a.clone();
        b.threads = 16;
        let key = |c: &ContextConfig| serde_json::to_string(&context_key(c)).unwrap();
        assert_eq!(key(&a), key(&b));
        b.n_ubatch = 256;
        assert_ne!(key(&a), key(&b));
        // Every recorded field but threads is in the key.
        let recorded = serde_json::to_value(&a).unwrap();
        let keyed = serde_json::to_value(context_key(&a)).unwrap();
        let names = |v: &serde_json::Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        let mut expected = names(&recorded);
        expected.retain(|k| k != "threads");
        assert_eq!(names(&keyed), expected);
    }

    #[test]
    fn rotation_is_keyed_where_a_type_is_quantised() {
        let key = |kv: (KvType, KvType), r: Option<(bool, bool)>| {
            let c = ContextConfig {
                kv_rotation: r.map(|(k, v)| Rotation { mode: if k || v { KvRotation::Auto } else { KvRotation::Off }, k, v }),
                ..ContextConfig::sequential(1024, kv, FlashAttn::Auto, false, Some(2), 0)
            };
            serde_json::to_string(&context_key(&c)).unwrap()
        };
        let q4 = (KvType::Q4_0, KvType::Q4_0);
        assert_ne!(key(q4, Some((true, true))), key(q4, Some((false, false))), "rotated and not are other states");
        assert_ne!(key(q4, Some((true, true))), key(q4, None), "a state made before rotation was recorded is not trusted");
        let f16 = (KvType::F16, KvType::F16);
        assert_eq!(key(f16, Some((false, false))), key(f16, None), "an unquantised cache is never rotated: old keys hold");
    }

    fn manifest() -> Manifest {
        serde_json::from_value(serde_json::json!({
            "command": "bench",
            "model": { "path": "/a/m.gguf", "sha256": "aa", "size_bytes": 1, "architecture": "llama",
                       "name": "m", "file_type": "Q4_1", "build": "b", "n_params": 1, "n_ctx_train": 8192,
                       "chat_template": true },
            "context": { "n_ctx": 512, "type_k": "f16", "type_v": "f16", "flash_attn": "auto", "swa_full": false,
                         "kv_unified": false, "n_batch": 512, "n_ubatch": 512, "threads": 2, "gpu_layers": 0 },
            "corpus": { "path": "/c/x.js", "sha256": "cc", "language": "javascript",
                        "crop": { "mode": "lines", "first_line": 1, "last_line": 9, "sha256": "dd" },
                        "prefix_tokens": 100 },
            "params": { "count": 2, "lines": 6, "pass": 6, "seed": 1, "normalize": "trim", "skip_blank": false,
                        "probe": "chat", "max_new_tokens": 16, "decode_mode": "sequential" },
            "runtime": { "posrecall": "0.1.0", "llama_cpp_sys_2": "0.1.161", "backend": "cpu",
                         "prefix_sha256": "ee" }
        }))
        .unwrap()
    }

    fn with(key: fn(&Manifest) -> String, f: &dyn Fn(&mut Manifest)) -> String {
        let mut m = manifest();
        f(&mut m);
        key(&m)
    }

    #[test]
    fn the_resume_difference_names_the_field() {
        let a = manifest();
        assert_eq!(resume_difference(&a, &a), None);
        let mut b = manifest();
        b.params.seed = 7;
        let (field, theirs, ours) = resume_difference(&a, &b).expect("the seeds differ");
        assert_eq!((field.as_str(), ours.as_str()), ("params.seed", "7"));
        assert_ne!(theirs, ours);
        let mut c = manifest();
        c.context.as_mut().unwrap().n_ctx = 1024;
        assert_eq!(resume_difference(&a, &c).map(|d| (d.0, d.2)), Some(("context.n_ctx".to_string(), "1024".to_string())));
        // Not a field of the key: no difference.
        c = manifest();
        c.context.as_mut().unwrap().threads = 16;
        assert_eq!(resume_difference(&a, &c), None);
    }

    #[test]
    fn the_resume_key_follows_what_decides_a_run() {
        let key = resume_key(&manifest());
        // Where the files are and how many threads ran do not make another run.
        assert_eq!(with(resume_key, &|m| m.model.as_mut().unwrap().path = "/b/m.gguf".into()), key);
        assert_eq!(with(resume_key, &|m| m.corpus.path = "/d/x.js".into()), key);
        assert_eq!(with(resume_key, &|m| m.context.as_mut().unwrap().threads = 16), key);
        assert_eq!(with(resume_key, &|m| m.runtime.posrecall = "0.1.1".into()), key);
        // Everything that can change an answer or a score does.
        assert_ne!(with(resume_key, &|m| m.model.as_mut().unwrap().sha256 = "ab".into()), key);
        assert_ne!(with(resume_key, &|m| m.model.as_mut().unwrap().build = "c".into()), key);
        assert_ne!(with(resume_key, &|m| m.context.as_mut().unwrap().type_v = KvType::Q8_0), key);
        assert_ne!(with(resume_key, &|m| m.context.as_mut().unwrap().n_ctx = 1024), key);
        assert_ne!(with(resume_key, &|m| m.context.as_mut().unwrap().gpu_layers = 99), key);
        assert_ne!(with(resume_key, &|m| m.context.as_mut().unwrap().rope.freq_scale = Some(0.25)), key);
        assert_ne!(with(prefix_cache_key, &|m| m.context.as_mut().unwrap().rope.freq_base = Some(1e4)), prefix_cache_key(&manifest()));
        // A split model's parts are its identity's, not another key field.
        assert_eq!(
            with(resume_key, &|m| m.model.as_mut().unwrap().parts =
                vec![crate::record::run::ModelPart { path: "/p".into(), size_bytes: 1, sha256: "s".into() }]),
            key
        );
        assert_ne!(with(resume_key, &|m| m.corpus.crop.last_line = 10), key);
        assert_ne!(with(resume_key, &|m| m.corpus.sha256 = "cd".into()), key);
        assert_ne!(with(resume_key, &|m| m.params.max_new_tokens = Some(17)), key);
        assert_ne!(with(resume_key, &|m| m.params.seed = 2), key);
        // Asking by header asks other questions, about other functions; by
        // name (the default) the params are written as before it existed,
        // so keys made then hold.
        assert_ne!(with(resume_key, &|m| m.params.anchor = crate::targets::Anchor::Header), key);
        assert!(!serde_json::to_string(&manifest().params).unwrap().contains("anchor"));
        assert_ne!(with(resume_key, &|m| m.runtime.prefix_sha256 = Some("ef".into())), key);
        assert_ne!(with(resume_key, &|m| m.runtime.backend = Some("cuda".into())), key);
        assert_ne!(with(resume_key, &|m| m.runtime.cpu_features = Some(vec!["AVX2".into()])), key);
    }

    #[test]
    fn the_prefix_key_follows_the_evaluated_state_only() {
        let key = prefix_cache_key(&manifest());
        // The questions, the scoring, the label and the threads do not change the state.
        assert_eq!(with(prefix_cache_key, &|m| m.model.as_mut().unwrap().build = "c".into()), key);
        assert_eq!(with(prefix_cache_key, &|m| m.params.seed = 2), key);
        assert_eq!(with(prefix_cache_key, &|m| m.params.anchor = crate::targets::Anchor::Header), key);
        assert_eq!(with(prefix_cache_key, &|m| m.params.max_new_tokens = Some(17)), key);
        assert_eq!(with(prefix_cache_key, &|m| m.context.as_mut().unwrap().threads = 16), key);
        assert_eq!(with(prefix_cache_key, &|m| m.corpus.path = "/d/x.js".into()), key);
        // The weights, the text, the context and the build that evaluated it do.
        assert_ne!(with(prefix_cache_key, &|m| m.model.as_mut().unwrap().sha256 = "ab".into()), key);
        assert_ne!(with(prefix_cache_key, &|m| m.corpus.sha256 = "cd".into()), key);
        assert_ne!(with(prefix_cache_key, &|m| m.corpus.crop.first_line = 2), key);
        assert_ne!(with(prefix_cache_key, &|m| m.runtime.prefix_sha256 = Some("ef".into())), key);
        assert_ne!(with(prefix_cache_key, &|m| m.context.as_mut().unwrap().type_k = KvType::Q8_0), key);
        assert_ne!(with(prefix_cache_key, &|m| m.runtime.backend = Some("cuda".into())), key);
        assert_ne!(with(prefix_cache_key, &|m| m.runtime.llama_cpp_sys_2 = Some("0.1.162".into())), key);
        // Another CPU variant's kernels round differently: its state is another state.
        let avx2 = with(prefix_cache_key, &|m| m.runtime.cpu_features = Some(vec!["AVX2".into()]));
        assert_ne!(avx2, key);
        assert_ne!(with(prefix_cache_key, &|m| m.runtime.cpu_features = Some(vec!["AVX2".into(), "AVX512".into()])), avx2);
    }

    #[test]
    fn the_reference_identity_leaves_out_the_weights_and_the_cache() {
        let vocab = || (49152, "vv".to_string());
        let id = reference_identity(&manifest(), vocab());
        assert_eq!((id.corpus_sha256.as_str(), id.prefix_sha256.as_str(), id.probe.as_str(), id.lines), ("cc", "ee", "chat", 6));
        let mut other = manifest();
        other.model.as_mut().unwrap().sha256 = "ab".into();
        other.context.as_mut().unwrap().type_k = KvType::Q8_0;
        assert_eq!(reference_identity(&other, vocab()), id);
        other.params.lines = 7;
        assert_ne!(reference_identity(&other, vocab()), id);
    }
}
