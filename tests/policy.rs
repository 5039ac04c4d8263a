//! The codeneedle scoring policy (`--policy codeneedle`), the pass ratio,
//! and `posrecall rescore`: constructed answers whose counts were worked
//! out by hand from the policy's rules, the same answers and many random
//! ones held to an independent Python scorer built on difflib
//! (`scripts/oracles/codeneedle-score`), and a real run rescored there and
//! back.

use crate::common;

use common::*;
use posrecall::score::{Credit, Normalize, Policy, Score, ScoreOptions, score_raw};
use serde_json::{Value, json};
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};

fn lines(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_string()).collect()
}

fn codeneedle(lines: usize, relax: bool) -> ScoreOptions {
    let normalize = if relax { Normalize::Trim } else { Normalize::TrimEnd };
    ScoreOptions { lines, pass: 0, normalize, skip_blank: false, policy: Policy::Codeneedle, credit: Credit::All }
}

/// (scored, matched, missing, extra, hallucinated, reindented, pass)
type Counts = (usize, usize, usize, usize, usize, usize, bool);

fn counts(s: &Score) -> Counts {
    (s.scored.unwrap(), s.matched, s.missing, s.extra, s.hallucinated, s.reindented.unwrap(), s.pass)
}

/// One constructed case: its window, answer and hand-worked counts.
struct Case {
    what: &'static str,
    expected: Vec<String>,
    extra: Vec<String>,
    response: String,
    relax: bool,
    want: Counts,
}

fn cases() -> Vec<Case> {
    // Twenty lines, every fourth blank: 15 scored. `s{i};` for the others.
    let twenty: Vec<String> = (0..20).map(|i| if i % 4 == 3 { String::new() } else { format!("  s{i};") }).collect();
    let first = |n: usize| -> String { twenty.iter().filter(|l| !l.is_empty()).take(n).cloned().collect::<Vec<_>>().join("\n") };
    vec![
        Case {
            what: "an answer of blank lines only earns nothing: blank lines are neither credited nor counted",
            expected: lines(&["  a();", "", "  b();", ""]),
            extra: vec![],
            response: "```\n\n\n```\n".into(),
            relax: false,
            // 2 scored (the blanks are out), nothing matched, both missing.
            want: (2, 0, 2, 0, 0, 0, false),
        },
        Case {
            what: "lines that lost their indentation are re-indented, not hallucinated and not missing",
            expected: lines(&["    if (x) {", "      y();", "    }", "", "    return z;"]),
            extra: vec![],
            response: "```js\nif (x) {\n  y();\n}\n\nreturn z;\n```".into(),
            relax: false,
            // Only the blank line aligns (and earns nothing); the four code
            // lines pair up again as re-indented: 0 of 4, no pass.
            want: (4, 0, 0, 0, 0, 4, false),
        },
        Case {
            what: "relax-indent scores the same answer by content",
            expected: lines(&["    if (x) {", "      y();", "    }", "", "    return z;"]),
            extra: vec![],
            response: "```js\nif (x) {\n  y();\n}\n\nreturn z;\n```".into(),
            relax: true,
            want: (4, 4, 0, 0, 0, 0, true),
        },
        Case {
            what: "a window of prose: comments are scored lines, and recalled comments are credited",
            expected: lines(&["  // One.", "  // Two.", "", "  /* Three. */", "  let s = 0;"]),
            extra: vec![],
            response: "  // One.\n  // Two.\n  /* Three. */\n".into(),
            relax: false,
            // 4 scored, the three comment lines matched: 75%.
            want: (4, 3, 1, 0, 0, 0, true),
        },
        Case {
            what: "the 40% edge: 6 of 15 scored lines pass",
            expected: twenty.clone(),
            extra: vec![],
            response: first(6),
            relax: false,
            want: (15, 6, 9, 0, 0, 0, true),
        },
        Case {
            what: "the 40% edge: 5 of 15 do not",
            expected: twenty.clone(),
            extra: vec![],
            response: first(5),
            relax: false,
            want: (15, 5, 10, 0, 0, 0, false),
        },
        Case {
            what: "difflib's blocks are not a longest common subsequence",
            expected: lines(&["  }", "  return a;", "  }"]),
            extra: vec![],
            response: "  return a;\n  foo();\n  }".into(),
            relax: false,
            // The earliest longest block pairs the window's first `}` with the
            // answer's last line, which leaves `return a;` unaligned on both
            // sides: it pairs up again as re-indented (its content equal),
            // `foo();` is hallucinated, the last `}` missing. A longest common
            // subsequence would have matched two lines.
            want: (3, 1, 1, 0, 1, 1, false),
        },
        Case {
            what: "the extra window: lines past LINES aligned are extra; prose around fences is dropped",
            expected: lines(&["  a;", "  b;"]),
            extra: lines(&["", "  c;", "  d;"]),
            response: "Here it is:\n```\n  a;\n  b;\n\n  c;\n  x;\n```\nDone.".into(),
            relax: false,
            want: (2, 2, 0, 1, 1, 0, true),
        },
    ]
}

#[test]
fn constructed_answers_give_the_hand_worked_counts() {
    for c in cases() {
        let s = score_raw(&c.response, "function f() {", &c.expected, &c.extra, &[], &codeneedle(c.expected.len(), c.relax));
        assert_eq!(counts(&s), c.want, "{}", c.what);
    }
}

/// The same answers under posrecall's own rule, where they differ: blank
/// lines are scored lines, trimming ignores indentation, the alignment is a
/// longest common subsequence.
#[test]
fn posrecall_scores_the_same_answers_its_own_way() {
    let c = cases();
    let posrecall = |c: &Case| {
        let n = c.expected.len();
        let o = ScoreOptions {
            lines: n,
            pass: posrecall::targets::default_pass(n),
            normalize: Normalize::Trim,
            skip_blank: false,
            policy: Policy::Posrecall,
            credit: Credit::All,
        };
        let s = score_raw(&c.response, "function f() {", &c.expected, &c.extra, &[], &o);
        (s.matched, s.missing, s.pass, s.scored, s.reindented)
    };
    // Re-indented: trimmed, all five lines match (the blank between two anchors).
    assert_eq!(posrecall(&c[1]), (5, 0, true, None, None));
    // The non-LCS case: `return a;` and the last `}` (2 of 3; pass at 2).
    assert_eq!(posrecall(&c[6]), (2, 1, true, None, None));
}

/// Every case above, and 400 random ones over a small alphabet of lines
/// (indented and not, blank, fences, repeated braces), scored by the Python
/// oracle: every count agrees.
#[test]
fn counts_agree_with_an_independent_difflib_scorer() {
    let mut all: Vec<Case> = cases();
    let vocab =
        ["  a();", "a();", "    a();", "  }", "}", "", "  ", "  return x;", "return x;", "  // note", "```", "```js", "\tb = 1;", "b = 1;"];
    let seed = std::cell::Cell::new(0x9e37_79b9_7f4a_7c15_u64);
    let next = |n: usize| {
        let mut x = seed.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        seed.set(x);
        (x % n as u64) as usize
    };
    for _ in 0..400 {
        let n = 1 + next(8);
        let pick = |k: usize, fences: bool| -> Vec<String> {
            (0..k)
                .map(|_| {
                    loop {
                        let l = vocab[next(vocab.len())];
                        if fences || !l.starts_with("```") {
                            break l.to_string();
                        }
                    }
                })
                .collect()
        };
        let expected = pick(n, false);
        let extra_len = next(5);
        let extra = pick(extra_len, false);
        let answer_len = next(12);
        let response = pick(answer_len, true).join("\n");
        let relax = next(3) == 0;
        all.push(Case { what: "random", expected, extra, response, relax, want: (0, 0, 0, 0, 0, 0, false) });
    }
    let input: String = all
        .iter()
        .map(|c| json!({"expected": c.expected, "extra": c.extra, "response": c.response, "relax": c.relax}).to_string() + "\n")
        .collect();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/oracles/codeneedle-score");
    let mut child = Command::new(&script).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().expect("python3 runs the oracle");
    child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    let oracle: Vec<Value> = String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(oracle.len(), all.len());
    let mut differ = Vec::new();
    for (c, o) in all.iter().zip(&oracle) {
        let s = score_raw(&c.response, "function f() {", &c.expected, &c.extra, &[], &codeneedle(c.expected.len(), c.relax));
        let u = |k: &str| o[k].as_u64().unwrap() as usize;
        let theirs =
            (u("scored"), u("matched"), u("missing"), u("extra"), u("hallucinated"), u("reindented"), o["pass"].as_bool().unwrap());
        if counts(&s) != theirs {
            differ.push(format!(
                "{}: {:?} {:?} relax {}: ours {:?}, oracle {theirs:?}",
                c.what,
                c.expected,
                c.response,
                c.relax,
                counts(&s)
            ));
        }
    }
    assert!(differ.is_empty(), "{} of {} cases differ:\n{}", differ.len(), all.len(), differ.join("\n"));
}

/// A real run (SmolLM2) rescored under codeneedle, then back under
/// posrecall: the codeneedle file records its policy, its source's sha256
/// and per target the scored lines (the non-blank expected lines, counted
/// here); `compare` refuses to pair it with the original and says how to
/// rescore; rescoring back, or rescoring the original under its own policy,
/// gives the original's targets and summary exactly.
#[test]
fn a_run_rescored_under_codeneedle_and_back_scores_as_it_did() {
    let _g = serial();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (run, cn, back, same) = (d.join("run.json"), d.join("cn.json"), d.join("back.json"), d.join("same.json"));
    let corpus = fixture("dense.js");
    ok(&posrecall(&[
        "bench",
        s(&smollm2()),
        "--corpus",
        s(&corpus),
        "--threads",
        "2",
        "--quiet",
        "--count",
        "4",
        "--lines",
        "8",
        "--crop-lines",
        "1:100",
        "--kv",
        "f16",
        "--max-new-tokens",
        "60",
        "--out",
        s(&run),
    ]));
    ok(&posrecall(&["rescore", s(&run), "--policy", "codeneedle", "-o", s(&cn), "--quiet"]));
    ok(&posrecall(&["rescore", s(&cn), "--policy", "posrecall", "-o", s(&back), "--quiet"]));
    ok(&posrecall(&["rescore", s(&run), "--policy", "posrecall", "-o", s(&same), "--quiet"]));

    let original = read(&run);
    let c = read(&cn);
    assert_eq!(c["manifest"]["params"]["policy"], "codeneedle");
    assert_eq!(c["manifest"]["params"]["normalize"], "trim_end");
    let bytes = std::fs::read(&run).unwrap();
    assert_eq!(c["manifest"]["rescored_from"]["sha256"], posrecall::support::fsutil::sha256_hex(&bytes));
    assert!(original["manifest"]["params"].get("policy").is_none(), "a posrecall run does not name its policy");
    for (t, o) in c["targets"].as_array().unwrap().iter().zip(original["targets"].as_array().unwrap()) {
        let non_blank = o["expected"].as_array().unwrap().iter().filter(|l| !l.as_str().unwrap().trim().is_empty()).count();
        assert_eq!(t["scored"].as_u64(), Some(non_blank as u64), "{}", t["name"]);
        assert!(t["reindented"].is_u64() && t["matched"].as_u64() <= t["scored"].as_u64());
        assert_eq!(t["response"], o["response"], "the answers are the run's own");
        let passes = t["matched"].as_u64().unwrap() * 100 >= 40 * non_blank as u64 && non_blank > 0;
        assert_eq!(t["pass"].as_bool(), Some(passes), "{}", t["name"]);
    }

    let refused = posrecall(&["compare", s(&run), s(&cn)]);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("different policies (posrecall vs codeneedle)")
            && err.contains("posrecall rescore")
            && err.contains("--policy posrecall"),
        "{err}"
    );
    ok(&posrecall(&["report", s(&cn)]));

    for rescored in [&back, &same] {
        let mut r = read(rescored);
        assert!(r["manifest"]["rescored_from"].is_object());
        r["manifest"].as_object_mut().unwrap().remove("rescored_from");
        assert_eq!(r, original, "{} is the original run, scores and all", rescored.display());
    }

    // Never over an input, and nothing written when refused.
    let before = std::fs::read(&run).unwrap();
    let o = posrecall(&["rescore", s(&run), "--policy", "codeneedle", "-o", s(&run)]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("also an input"));
    assert_eq!(std::fs::read(&run).unwrap(), before);
    // codeneedle's pass is its own ratio: a threshold is refused, naming the flag.
    let o = posrecall(&["rescore", s(&run), "--policy", "codeneedle", "--pass", "3", "-o", s(&d.join("x.json"))]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("--pass"));
    assert!(!d.join("x.json").exists());
}

/// A targets file carries its policy (its extra window is the policy's):
/// `score --policy` another one is refused, saying how to make the right
/// file, and a codeneedle targets file scores under codeneedle by itself.
#[test]
fn score_takes_the_targets_files_policy_and_refuses_another() {
    let dir = tempfile::tempdir().unwrap();
    let (plain, cn, answers) = (dir.path().join("t.json"), dir.path().join("cn.json"), dir.path().join("r.jsonl"));
    let corpus = fixture("dense.js");
    let targets = |extra: &[&str]| {
        let mut args = vec!["targets", s(&corpus), "--json", "--count", "2", "--lines", "8"];
        args.extend_from_slice(extra);
        ok(&posrecall(&args))
    };
    std::fs::write(&plain, targets(&[])).unwrap();
    std::fs::write(&cn, targets(&["--policy", "codeneedle"])).unwrap();
    std::fs::write(&answers, "").unwrap();
    let o = posrecall(&["score", s(&plain), s(&answers), "--policy", "codeneedle"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("made for --policy posrecall") && err.contains("targets --policy codeneedle"), "{err}");
    let out = dir.path().join("run.json");
    ok(&posrecall(&["score", s(&cn), s(&answers), "--out", s(&out), "--quiet"]));
    let run = read(&out);
    assert_eq!(run["manifest"]["params"]["policy"], "codeneedle");
    assert!(run["targets"].as_array().unwrap().iter().all(|t| t["scored"].is_u64() && t["pass"] == false));
}

/// A length ladder rescored: each target is found again in its own
/// window's lines, and each window's passes, pass rate and the effective
/// length follow the new threshold. The runs are the published Qwen2.5-Coder
/// ladders (docs/runs/ladder-qwen-coder, asked at 10 lines when PASS was a
/// fixed 8): at `--pass 4` their windows pass what docs/GUIDE.md counted by
/// hand from the stored matched lines (6, 7, 6 and 2 of 8 at 5k, 8k, 16k and
/// 32k with f16; 6, 8 and 6 with q8_0; both effective to 16k); every target
/// passes exactly when its stored matched lines reach 4; at the runs' own
/// PASS 8 every window and target is the original's.
#[test]
fn a_ladder_rescores_window_by_window() {
    let dir = tempfile::tempdir().unwrap();
    let published = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/runs/ladder-qwen-coder");
    for (kv, passes, effective) in [("f16", vec![6, 7, 6, 2], 16384), ("q8_0", vec![6, 8, 6], 16384)] {
        // The run names the corpus where its machine kept it: `--corpus`
        // says where it is here, held to the sha256 the run records.
        let input = published.join(format!("{kv}.json"));
        let original = read(&input);
        let (at4, at8) = (dir.path().join(format!("{kv}-4.json")), dir.path().join(format!("{kv}-8.json")));
        let corpus = lodash();
        let here = ["--corpus", s(&corpus)];
        let o = posrecall(&["rescore", s(&input), "--policy", "posrecall", "-o", s(&at4)]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains("which is not there; give where it is now with --corpus PATH"), "{err}");
        ok(&posrecall(&[&["rescore", s(&input), "--policy", "posrecall", "--pass", "4", "-o", s(&at4), "--quiet"][..], &here].concat()));
        ok(&posrecall(&[&["rescore", s(&input), "--policy", "posrecall", "-o", s(&at8), "--quiet"][..], &here].concat()));
        // Another file is refused for its sha256.
        let o = posrecall(&["rescore", s(&input), "--policy", "posrecall", "--corpus", s(&fixture("dense.js")), "-o", s(&at8)]);
        assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("is not the file"), "{o:?}");

        let r4 = read(&at4);
        assert_eq!(r4["manifest"]["params"]["pass"], 4);
        let rungs = r4["ladder"]["rungs"].as_array().unwrap();
        let got: Vec<u64> = rungs.iter().map(|g| g["summary"]["passes"].as_u64().unwrap()).collect();
        assert_eq!(got, passes, "{kv}: passes per window at 4 of 10");
        for g in rungs {
            let rate = g["summary"]["passes"].as_f64().unwrap() / 8.0;
            assert_eq!(g["pass_rate"].as_f64(), Some(rate), "{kv}");
            assert!(g["pass_low"].as_f64().unwrap() <= rate && rate <= g["pass_high"].as_f64().unwrap(), "{kv}");
        }
        assert_eq!(r4["ladder"]["effective_length"], effective, "{kv}");
        let targets = r4["targets"].as_array().unwrap();
        for (t, o) in targets.iter().zip(original["targets"].as_array().unwrap()) {
            assert_eq!((&t["name"], &t["length"], &t["matched"]), (&o["name"], &o["length"], &o["matched"]));
            assert_eq!(t["pass"].as_bool(), Some(o["matched"].as_u64().unwrap() >= 4), "{kv}: {}", t["name"]);
        }

        let r8 = read(&at8);
        assert_eq!(r8["manifest"]["params"]["pass"], 8);
        assert_eq!(r8["ladder"]["effective_length"], original["ladder"]["effective_length"], "{kv}");
        for (g, o) in r8["ladder"]["rungs"].as_array().unwrap().iter().zip(original["ladder"]["rungs"].as_array().unwrap()) {
            for key in ["length", "crop", "pass_rate", "pass_low", "pass_high"] {
                assert_eq!(g[key], o[key], "{kv}: {key}");
            }
            assert_eq!(g["summary"]["passes"], o["summary"]["passes"], "{kv}");
        }
        for (t, o) in r8["targets"].as_array().unwrap().iter().zip(original["targets"].as_array().unwrap()) {
            assert_eq!((&t["pass"], &t["matched"]), (&o["pass"], &o["matched"]), "{kv}: {}", t["name"]);
        }
    }
}
