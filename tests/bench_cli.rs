//! `posrecall bench` end to end on real models: the run file, determinism,
//! KV types, the base-model probe, and bad input.

use crate::common;

use common::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output};

fn bench(model: &Path, extra: &[&str], out: Option<&Path>) -> Output {
    let mut cmd = Command::new(bin());
    cmd.arg("bench").arg(model).arg("--corpus").arg(fixture("dense.js"));
    cmd.args(["--threads", "2", "--quiet"]).args(extra);
    if let Some(o) = out {
        cmd.arg("--out").arg(o);
    }
    cmd.env("NO_COLOR", "1").output().unwrap()
}

const SMALL: &[&str] = &["--count", "4", "--lines", "8", "--crop-lines", "1:100", "--kv", "f16", "--max-new-tokens", "40"];

#[test]
fn run_file_is_complete_and_runs_are_deterministic() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    ok(&bench(&smollm2(), SMALL, Some(&a)));
    ok(&bench(&smollm2(), SMALL, Some(&b)));
    let (ra, rb) = (read(&a), read(&b));

    // Determinism: identical answers and scores.
    assert_eq!(ra["targets"], rb["targets"]);
    assert_eq!(ra["summary"], rb["summary"]);

    let targets = ra["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 4);
    for t in targets {
        let (m, x) = (t["matched"].as_u64().unwrap(), t["missing"].as_u64().unwrap());
        assert_eq!(m + x, 8, "{}", t["name"]);
        assert!(t["token_offset"].as_u64().unwrap() > 0);
        assert_eq!(t["expected"].as_array().unwrap().len(), 8);
        assert!(t["response"].is_string());
    }
    let m = &ra["manifest"];
    for key in ["path", "sha256", "size_bytes", "architecture", "name", "file_type", "build", "n_params", "n_ctx_train"] {
        assert!(!m["model"][key].is_null(), "manifest.model.{key}");
    }
    assert_eq!(m["model"]["file_type"], "Q4_1");
    assert_eq!(m["model"]["architecture"], "llama");
    for key in ["n_ctx", "type_k", "type_v", "flash_attn", "swa_full", "kv_unified", "n_batch", "n_ubatch", "threads", "gpu_layers"] {
        assert!(!m["context"][key].is_null(), "manifest.context.{key}");
    }
    assert_eq!(m["corpus"]["crop"]["first_line"], 1);
    assert_eq!(m["corpus"]["crop"]["last_line"], 100);
    assert_eq!(m["corpus"]["crop"]["mode"], "lines");
    assert_eq!(m["params"]["probe"], "chat");
    assert_eq!(m["params"]["decode_mode"], "sequential");
    assert_eq!(m["runtime"]["llama_cpp_2"], "0.1.160");
    assert_eq!(m["runtime"]["chat_renderer"], "minijinja");
    assert_eq!(m["runtime"]["prompt_boundary_exact"], true);
    // What computed, as this machine has it: the CPU alone, unless the suite
    // is told it runs where llama.cpp finds a GPU (POSRECALL_TEST_BACKEND=cuda).
    let backend = std::env::var("POSRECALL_TEST_BACKEND").unwrap_or_else(|_| "cpu".into());
    assert_eq!(m["runtime"]["backend"], backend.as_str());
    assert_eq!(m["runtime"]["device"].is_null(), backend == "cpu", "{}", m["runtime"]);
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    assert_cpu_kernels(&m["runtime"]["cpu_features"]);

    let t = &ra["timings"];
    for key in ["load_ms", "prefill_ms", "snapshot_ms", "total_ms"] {
        assert!(t[key].as_f64().unwrap() > 0.0, "timings.{key}");
    }
    // A plain transformer's lean restore keeps no snapshot: removing the
    // question's cells restores the prefix (docs/METHOD.md §4).
    assert_eq!(m["runtime"]["restore"], "lean");
    assert_eq!(t["snapshot_bytes"].as_u64(), Some(0));
    assert_eq!(t["prefix_source"], "prefill");
    // The prefix is evaluated once, not per question.
    assert_eq!(t["prefill_tokens"], m["corpus"]["prefix_tokens"]);
    for key in ["restore_ms", "query_ms"] {
        let v = t[key].as_array().unwrap();
        assert_eq!(v.len(), 4, "{key}");
        assert!(v.iter().all(|x| x.as_f64().unwrap() > 0.0), "{key}");
    }
    let generated: u64 = targets.iter().map(|t| t["generated_tokens"].as_u64().unwrap()).sum();
    assert_eq!(t["generated_tokens"].as_u64().unwrap(), generated);
    assert!(generated > 0);

    // `--only` re-asks one function from a state no other question touched:
    // the same answer, forced pass and scores as in the full run.
    let name = targets[2]["name"].as_str().unwrap();
    let c = dir.path().join("c.json");
    ok(&bench(&smollm2(), &[SMALL, &["--only", name]].concat(), Some(&c)));
    let rc = read(&c);
    assert_eq!(rc["targets"].as_array().unwrap().len(), 1);
    assert_eq!(rc["targets"][0], targets[2]);
    assert_eq!(rc["manifest"]["params"]["only"], serde_json::json!([name]));
    assert_eq!(rc["manifest"]["context"], m["context"], "the context is sized as for the full run");
    assert!(m["params"].get("only").is_none());
}

/// The CPU kernels a run records are the ones this build compiled and this
/// machine can run: every instruction set ggml lists is a flag of
/// /proc/cpuinfo (a kernel the CPU lacks would not have run), and the
/// AVX-512 kernels are there exactly when the build targets AVX-512 (what
/// cargo compiled these tests for: .cargo/config.toml's target-cpu=native
/// on an AVX-512 machine reaches llama.cpp as GGML_NATIVE; a portable build,
/// `RUSTFLAGS=`, has none).
#[cfg(all(target_os = "linux", target_arch = "x86_64"))]
fn assert_cpu_kernels(recorded: &Value) {
    let features: Vec<&str> =
        recorded.as_array().unwrap_or_else(|| panic!("runtime.cpu_features: {recorded}")).iter().map(|f| f.as_str().unwrap()).collect();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap();
    let flags: Vec<&str> = cpuinfo.lines().find(|l| l.starts_with("flags")).unwrap().split_whitespace().collect();
    // ggml's names of instruction sets, and the kernel's.
    let isa = [
        ("SSE3", "pni"),
        ("SSSE3", "ssse3"),
        ("AVX", "avx"),
        ("AVX2", "avx2"),
        ("F16C", "f16c"),
        ("FMA", "fma"),
        ("BMI2", "bmi2"),
        ("AVX_VNNI", "avx_vnni"),
        ("AVX512", "avx512f"),
        ("AVX512_VBMI", "avx512vbmi"),
        ("AVX512_VNNI", "avx512_vnni"),
        ("AVX512_BF16", "avx512_bf16"),
        ("AMX_INT8", "amx_int8"),
    ];
    for (ggml, flag) in isa {
        if features.contains(&ggml) {
            assert!(flags.contains(&flag), "the run used {ggml} kernels, which this CPU lacks ({flag}): {features:?}");
        }
    }
    assert_eq!(features.contains(&"AVX512"), cfg!(target_feature = "avx512f"), "AVX-512 kernels against the build's target: {features:?}");
}

#[test]
fn every_kv_type_and_a_mixed_pair_run() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    // The teacher-forced pass alone: it reads every forced token's
    // log-probability, which any change to the cache's numbers moves.
    let base = ["--count", "2", "--lines", "5", "--crop-lines", "1:40", "--forced-only"];
    let run = |flags: &[&str], name: &str| {
        let out = dir.path().join(format!("{name}.json"));
        let args: Vec<&str> = base.iter().copied().chain(flags.iter().copied()).collect();
        ok(&bench(&smollm2(), &args, Some(&out)));
        read(&out)
    };
    let logprobs = |r: &Value| -> Vec<f64> {
        r["targets"].as_array().unwrap().iter().map(|t| t["forced"]["mean_logprob"].as_f64().unwrap()).collect()
    };
    let f16 = run(&["--kv", "f16"], "f16");
    let reference = logprobs(&f16);
    let kinds = ["f32", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl"];
    // The types that move f16's values, with their values: no two may give
    // the same log-probabilities, or one type was silently run as another
    // (q5_1 run as q5_0 still differs from f16).
    let mut moved: Vec<(&str, Vec<f64>)> = Vec::new();
    for kv in kinds {
        let r = run(&["--kv", kv], kv);
        assert_eq!(r["manifest"]["context"]["type_k"], kv);
        assert_eq!(r["manifest"]["context"]["type_v"], kv);
        assert_eq!(r["targets"].as_array().unwrap().len(), 2);
        // Every type but f32 stores the cache with less precision than f16
        // and moves every target's log-probabilities. (f32 gave f16's
        // values to the last bit on this CPU build for these targets, so
        // only its record is checked.)
        if kv != "f32" {
            for (x, y) in reference.iter().zip(logprobs(&r)) {
                assert!((x - y).abs() > 1e-9, "{kv}: mean log-prob {y} equals f16's {x}");
            }
            let values = logprobs(&r);
            for (other, theirs) in &moved {
                assert_ne!(&values, theirs, "{kv} gave {other}'s mean log-probs: one KV type ran as the other");
            }
            moved.push((kv, values));
        }
    }
    let mixed = run(&["--kv-k", "q8_0", "--kv-v", "f16"], "q8_0-f16");
    assert_eq!(mixed["manifest"]["context"]["type_k"], "q8_0");
    assert_eq!(mixed["manifest"]["context"]["type_v"], "f16");
    assert_ne!(logprobs(&mixed), reference, "a q8_0 K cache changes the result");
}

#[test]
fn gemma3_base_model_runs_with_the_completion_probe() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("g.json");
    ok(&bench(&gemma3(), &["--count", "2", "--lines", "6", "--crop-lines", "1:100", "--max-new-tokens", "24", "--kv", "f16"], Some(&out)));
    let r = read(&out);
    assert_eq!(r["manifest"]["params"]["probe"], "completion");
    assert_eq!(r["manifest"]["model"]["architecture"], "gemma3");
    assert_eq!(r["manifest"]["model"]["chat_template"], false);
    assert_eq!(r["manifest"]["context"]["swa_full"], false);
    assert!(r["manifest"]["runtime"]["chat_renderer"].is_null());
    // A base model continuing its own file, with the function's header just
    // written, goes on with the function's first line: checked on the raw
    // answer against the expected lines, not through the scorer.
    for t in r["targets"].as_array().unwrap() {
        let first_expected = t["expected"][0].as_str().unwrap().trim();
        let first_answer = t["response"].as_str().unwrap().lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        assert_eq!(first_answer.trim(), first_expected, "{}: {:?}", t["name"], t["response"]);
        assert!(t["matched"].as_u64().unwrap() >= 1, "{}", t["name"]);
    }
}

#[test]
fn bad_input_fails_cleanly() {
    // Serial: other tests' runs write the hash cache this test reads.
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let out = out_dir.join("run.json");

    let missing = dir.path().join("missing.gguf");
    assert_clean_failure(&bench(&missing, &[], Some(&out)), &out_dir, "does not exist");

    let text = dir.path().join("not-a-model.gguf");
    std::fs::write(&text, "this is not a model\n").unwrap();
    assert_clean_failure(&bench(&text, &[], Some(&out)), &out_dir, "not a GGUF");

    let truncated = dir.path().join("truncated.gguf");
    let bytes = std::fs::read(smollm2()).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() / 3]).unwrap();
    let o = bench(&truncated, &[], Some(&out));
    assert_clean_failure(&o, &out_dir, "could not load");
    assert!(String::from_utf8_lossy(&o.stderr).contains("cut short"), "{}", String::from_utf8_lossy(&o.stderr));

    // A whole file llama.cpp cannot load: an architecture it does not know
    // (the value of general.architecture, "llama", with one letter changed).
    let unknown_arch = |bytes: &[u8]| -> Vec<u8> {
        let key = b"general.architecture";
        let at = bytes.windows(key.len()).position(|w| w == key).unwrap() + key.len();
        // The value: its type (u32), its length (u64), then its text.
        let text = at + 4 + 8;
        assert_eq!(&bytes[text..text + 5], b"llama");
        let mut out = bytes.to_vec();
        out[text + 4] = b'x';
        out
    };
    // The hash cache (a whole file is hashed before llama.cpp reads it)
    // forgets a file that is gone the next time it hashes another.
    let foreign = dir.path().join("foreign.gguf");
    std::fs::write(&foreign, unknown_arch(&bytes)).unwrap();
    assert_clean_failure(&bench(&foreign, &[], Some(&out)), &out_dir, "could not load");
    let hashed = || -> Vec<String> {
        let cache = read(&posrecall::support::fsutil::cache_dir().join("sha256-cache.json"));
        cache["files"].as_object().unwrap().keys().cloned().collect()
    };
    let key = std::fs::canonicalize(&foreign).unwrap().display().to_string();
    assert!(hashed().contains(&key), "{key} is not in the hash cache");
    let other = dir.path().join("foreign-again.gguf");
    std::fs::rename(&foreign, &other).unwrap();
    assert_clean_failure(&bench(&other, &[], Some(&out)), &out_dir, "could not load");
    let now = hashed();
    assert!(!now.contains(&key), "the hash cache still holds {key}, which is gone");
    assert!(now.contains(&std::fs::canonicalize(&other).unwrap().display().to_string()));

    let m = smollm2();
    assert_clean_failure(&bench(&m, &["--crop", "none", "--ctx", "1024", "--max-new-tokens", "64"], Some(&out)), &out_dir, "fit");
    assert_clean_failure(&bench(&m, &["--kv", "q7"], Some(&out)), &out_dir, "q7");
    assert_clean_failure(&bench(&m, &["--flash-attn", "off", "--kv-v", "q8_0"], Some(&out)), &out_dir, "flash attention");
    assert_clean_failure(&bench(&m, &["--count", "40", "--lines", "10"], Some(&out)), &out_dir, "eligible");
    // `--only` names sampled targets: a name that is nowhere, and an eligible
    // function the sampler did not pick (lines 1:100 hold 5).
    fn only(name: &str) -> Vec<&str> {
        [SMALL, &["--only", name]].concat()
    }
    assert_clean_failure(
        &bench(&m, &only("noSuchFunction"), Some(&out)),
        &out_dir,
        "no eligible function in the kept lines is named `noSuchFunction` (sampled: ",
    );
    let names = |count: &str| -> Vec<String> {
        let listed = ok(&posrecall(&["targets", s(&fixture("dense.js")), "--lines", "8", "--crop-lines", "1:100", "--count", count]));
        listed.lines().skip(2).map(|l| l.split_whitespace().next().unwrap().to_string()).collect()
    };
    let (all, four) = (names("5"), names("4"));
    assert_eq!((all.len(), four.len()), (5, 4));
    let unsampled = all.iter().find(|n| !four.contains(n)).unwrap();
    assert_clean_failure(
        &bench(&m, &only(unsampled), Some(&out)),
        &out_dir,
        &format!("`{unsampled}` is eligible but not among the 4 sampled targets; --only names sampled targets"),
    );
}

#[test]
fn prefix_cache_loads_verified_state_and_rebuilds_a_corrupt_one() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    // Small on purpose: the test runs the model 16 times, and what it checks
    // (which state loads, what is reported, the answers) does not depend on
    // the prefix's length. 534 tokens still span two of llama.cpp's batches.
    let args = ["--count", "2", "--lines", "6", "--crop-lines", "1:60", "--kv", "f16", "--max-new-tokens", "16", "--no-forced"];
    let with_cache: Vec<&str> = args.iter().copied().chain(["--prefix-cache", cache.to_str().unwrap()]).collect();
    let run = |flags: &[&str], name: &str| -> (Value, String) {
        let out = dir.path().join(name);
        let o = bench(&smollm2(), flags, Some(&out));
        ok(&o);
        (read(&out), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let responses = |r: &Value| -> Vec<Value> { r["targets"].as_array().unwrap().iter().map(|t| t["response"].clone()).collect() };

    let (plain, _) = run(&args, "plain.json");
    let (first, _) = run(&with_cache, "first.json");
    assert_eq!(first["timings"]["prefix_source"], "prefill");
    let (cached, _) = run(&with_cache, "cached.json");
    assert_eq!(cached["timings"]["prefix_source"], "cache");
    assert_eq!(cached["timings"]["prefill_tokens"], 0);
    let (t_prefill, t_cache) = (first["timings"]["prefill_ms"].as_f64().unwrap(), cached["timings"]["prefill_ms"].as_f64().unwrap());
    assert!(t_cache * 10.0 <= t_prefill, "cache load {t_cache} ms vs prefill {t_prefill} ms");
    assert_eq!(responses(&plain), responses(&first));
    assert_eq!(responses(&plain), responses(&cached), "answers from the cached prefix differ");

    // A flipped byte anywhere in the state file is caught, reported and rebuilt.
    let state = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "state"))
        .expect("a state file in the cache");
    let len = std::fs::metadata(&state).unwrap().len() as usize;
    for (i, at) in [0, len / 2, len - 1].into_iter().enumerate() {
        let mut bytes = std::fs::read(&state).unwrap();
        bytes[at] ^= 0x20;
        std::fs::write(&state, &bytes).unwrap();
        let (r, err) = run(&with_cache, &format!("corrupt-{i}.json"));
        assert!(err.contains("ignored"), "corruption at byte {at} not reported: {err}");
        assert_eq!(r["timings"]["prefix_source"], "prefill", "corrupt cache at byte {at} was loaded");
        assert_eq!(responses(&plain), responses(&r));
        // The rebuilt file loads again.
        let (again, _) = run(&with_cache, &format!("again-{i}.json"));
        assert_eq!(again["timings"]["prefix_source"], "cache");
    }

    // A missing checksum file, and a state file cut short, are reported and
    // rebuilt, and the answers stay those of a prefill.
    let sidecar = state.with_extension("state.sha256");
    std::fs::remove_file(&sidecar).unwrap();
    let (r, err) = run(&with_cache, "no-sidecar.json");
    assert!(err.contains("checksum file is missing"), "{err}");
    assert_eq!(r["timings"]["prefix_source"], "prefill");
    let bytes = std::fs::read(&state).unwrap();
    std::fs::write(&state, &bytes[..bytes.len() / 3]).unwrap();
    let (r, err) = run(&with_cache, "truncated.json");
    assert!(err.contains("sha256 does not match"), "{err}");
    assert_eq!(r["timings"]["prefix_source"], "prefill");
    assert_eq!(responses(&plain), responses(&r));
    // Cut short near its end with a checksum that vouches for the cut file:
    // llama.cpp's own file loader aborted the process on it, on every run.
    // Now it is refused, removed and rebuilt.
    let bytes = std::fs::read(&state).unwrap();
    let cut = &bytes[..bytes.len() - 100];
    std::fs::write(&state, cut).unwrap();
    std::fs::write(&sidecar, format!("{}\n", posrecall::support::fsutil::sha256_hex(cut))).unwrap();
    let (r, err) = run(&with_cache, "cut-vouched.json");
    assert!(err.contains("ignored") && err.contains("cut short"), "{err}");
    assert_eq!(r["timings"]["prefix_source"], "prefill");
    assert_eq!(responses(&plain), responses(&r));
    assert_eq!(std::fs::read(&state).unwrap().len(), bytes.len(), "the state was not rebuilt whole");
    let (again, _) = run(&with_cache, "after-cut.json");
    assert_eq!(again["timings"]["prefix_source"], "cache");

    // Every part of the key makes another key: the KV type, the context
    // size, flash attention, the kept lines. None of these loads the state.
    let states = || -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> =
            std::fs::read_dir(&cache).unwrap().map(|e| e.unwrap().path()).filter(|p| p.extension().is_some_and(|x| x == "state")).collect();
        v.sort();
        v
    };
    let swap = |from: &'static str, to: &'static str| -> Vec<&str> { with_cache.iter().map(|a| if *a == from { to } else { a }).collect() };
    let mut ctx = with_cache.clone();
    ctx.extend(["--ctx", "4096"]);
    let mut flash = with_cache.clone();
    flash.extend(["--flash-attn", "off"]);
    let mut crop_state = None;
    for (flags, what) in [(swap("f16", "q8_0"), "kv"), (ctx, "ctx"), (flash, "flash"), (swap("1:60", "1:59"), "crop")] {
        let before = states();
        let (r, _) = run(&flags, &format!("other-{what}.json"));
        assert_eq!(r["timings"]["prefix_source"], "prefill", "{what}: another key loaded this state");
        let added: Vec<_> = states().into_iter().filter(|p| !before.contains(p)).collect();
        assert_eq!(added.len(), 1, "{what}: one new state file");
        crop_state = Some(added[0].clone());
    }
    assert_eq!(states().len(), 5, "one state per key");

    // A whole, checksummed state of another prefix under this key's name
    // (the one llama.cpp would load without complaint) is refused: the
    // tokens it holds are not this run's prefix.
    let other = crop_state.unwrap();
    std::fs::copy(&other, &state).unwrap();
    std::fs::copy(other.with_extension("state.sha256"), &sidecar).unwrap();
    let (r, err) = run(&with_cache, "foreign-state.json");
    assert!(err.contains("llama.cpp could not load it") && err.contains("different prefix"), "{err}");
    assert_eq!(r["timings"]["prefix_source"], "prefill");
    assert_eq!(responses(&plain), responses(&r));
}

/// The options docs/GUIDE.md lists for `bench` reach the run: each is run end
/// to end and checked in the run file against what it must change.
#[test]
fn bench_options_reach_the_run() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let run = |model: &Path, flags: &[&str], name: &str| -> Value {
        let out = dir.path().join(format!("{name}.json"));
        ok(&bench(model, flags, Some(&out)));
        read(&out)
    };
    let small = ["--count", "2", "--lines", "5", "--max-new-tokens", "8", "--no-forced", "--kv", "f16"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> { small.iter().copied().chain(extra.iter().copied()).collect() };

    // --crop densest under a prefix cap: the window holds the most eligible
    // functions, its prefix stays under the cap, and targets come from it.
    // The corpus is dense.js after 300 lines of comments: 700 tokens hold
    // about 32 of those lines and no function, so the head of the file has
    // nothing to ask (checked below) and the densest window must lie in
    // dense.js, past line 300.
    let filler: String =
        (1..=300).map(|i| format!("// filler line {i}: this part of the file holds no function at all, only words.\n")).collect();
    let corpus = dir.path().join("filler.js");
    std::fs::write(&corpus, filler + &std::fs::read_to_string(fixture("dense.js")).unwrap()).unwrap();
    let capped = |crop: &str| -> Output {
        let out = dir.path().join(format!("{crop}.json"));
        Command::new(bin())
            .arg("bench")
            .arg(smollm2())
            .arg("--corpus")
            .arg(&corpus)
            .args(small)
            .args(["--crop", crop, "--max-prefix-tokens", "700", "--threads", "2", "--quiet", "--out"])
            .arg(out)
            .output()
            .unwrap()
    };
    let head = capped("head");
    assert!(!head.status.success() && String::from_utf8_lossy(&head.stderr).contains("only 0 eligible"), "{head:?}");
    ok(&capped("densest"));
    let r = read(&dir.path().join("densest.json"));
    let crop = &r["manifest"]["corpus"]["crop"];
    assert_eq!(crop["mode"], "densest");
    assert!(crop["first_line"].as_u64().unwrap() > 300, "{crop}");
    let prefix = r["manifest"]["corpus"]["prefix_tokens"].as_u64().unwrap();
    // The cap is on the file; the chat template adds a few dozen tokens.
    assert!(prefix <= 700 + 64, "{prefix} prefix tokens under a 700-token cap");
    for t in r["targets"].as_array().unwrap() {
        let line = t["line"].as_u64().unwrap();
        assert!(line >= crop["first_line"].as_u64().unwrap() && line <= crop["last_line"].as_u64().unwrap());
    }

    // --ctx auto is capped at the trained context: a file that does not fit
    // it keeps the head that fills it. SmolLM2's 8K would cost a prefill of
    // 8K tokens (lodash: over a minute and a half here), so the test runs a
    // copy of the model whose header declares 2,048, and dense.js (2,486
    // tokens): the same weights and tokenizer, the one metadata value
    // changed in place (the file keeps its layout).
    let short = dir.path().join("smollm2-ctx2048.gguf");
    let mut bytes = std::fs::read(smollm2()).unwrap();
    set_u32_metadata(&mut bytes, "llama.context_length", 8192, 2048);
    std::fs::write(&short, bytes).unwrap();
    let out = dir.path().join("ctx-auto.json");
    let o = Command::new(bin())
        .args(["bench", s(&short), "--corpus", s(&fixture("dense.js")), "--count", "1", "--lines", "5", "--forced-only"])
        .args(["--kv", "f16", "--threads", "2", "--quiet", "--out", s(&out)])
        .output()
        .unwrap();
    ok(&o);
    let r = read(&out);
    let (n_ctx, trained) = (r["manifest"]["context"]["n_ctx"].as_u64().unwrap(), r["manifest"]["model"]["n_ctx_train"].as_u64().unwrap());
    assert_eq!(trained, 2048);
    assert!(n_ctx <= trained && n_ctx > trained - 256, "n_ctx {n_ctx} of {trained}");
    let prefix = r["manifest"]["corpus"]["prefix_tokens"].as_u64().unwrap();
    assert!(prefix < n_ctx && prefix > trained - 256, "{prefix} prefix tokens in a context of {n_ctx}");

    // --build labels the run; --probe completion overrides a chat template.
    let r = run(&smollm2(), &with(&["--crop-lines", "1:60", "--build", "Q4_1-from-PyPI", "--probe", "completion"]), "build");
    assert_eq!(r["manifest"]["model"]["build"], "Q4_1-from-PyPI");
    assert_eq!(r["manifest"]["params"]["probe"], "completion");
    assert!(r["manifest"]["runtime"]["chat_renderer"].is_null());
    let report = ok(&posrecall(&["report", dir.path().join("build.json").to_str().unwrap()]));
    assert!(report.contains("Q4_1-from-PyPI"), "{report}");

    // --swa-full on reaches the context of a sliding-window model: Gemma 3's
    // sliding-window layers (512 positions) then keep every one of the
    // prefix's 1,236 positions, so the context's state is larger than the
    // window-only cache's, whose window layers keep their window alone.
    let on = run(&gemma3(), &with(&["--crop-lines", "1:150", "--swa-full", "on"]), "swa-on");
    let off = run(&gemma3(), &with(&["--crop-lines", "1:150"]), "swa-off");
    assert_eq!(on["manifest"]["context"]["swa_full"], true);
    assert_eq!(off["manifest"]["context"]["swa_full"], false);
    let bytes = |r: &Value| r["timings"]["context_bytes"].as_u64().unwrap();
    assert!(bytes(&on) > bytes(&off), "context state {} bytes with --swa-full on, {} off", bytes(&on), bytes(&off));

    // bench --rename asks about the renamed functions of the renamed text.
    let r = run(&smollm2(), &with(&["--crop-lines", "1:60", "--rename", "--seed", "3"]), "rename");
    let rename = &r["manifest"]["corpus"]["rename"];
    assert_eq!(rename["seed"], 3);
    let original = std::fs::read_to_string(fixture("dense.js")).unwrap();
    for t in r["targets"].as_array().unwrap() {
        let name = t["name"].as_str().unwrap();
        assert!(!original.contains(&format!("function {name}(")), "{name} is not a renamed function");
    }
    // The model was given the renamed text, not the file on disk.
    assert_ne!(rename["sha256"], r["manifest"]["corpus"]["sha256"]);
}

/// Sets the GGUF metadata value `key`, a u32 that must read `from`, to `to`,
/// in place. A GGUF key/value entry is the key's length (u64), the key, the
/// value's type (u32; 4 is UINT32) and the value (u32 here), little-endian.
fn set_u32_metadata(gguf: &mut [u8], key: &str, from: u32, to: u32) {
    let k = key.as_bytes();
    let at = gguf.windows(k.len()).position(|w| w == k).unwrap_or_else(|| panic!("no {key} in the model's header"));
    assert_eq!(gguf[at - 8..at], (k.len() as u64).to_le_bytes(), "{key}: not a key entry");
    let value = at + k.len();
    assert_eq!(gguf[value..value + 4], 4u32.to_le_bytes(), "{key}: not a UINT32");
    assert_eq!(gguf[value + 4..value + 8], from.to_le_bytes(), "{key}: not {from}");
    gguf[value + 4..value + 8].copy_from_slice(&to.to_le_bytes());
}
