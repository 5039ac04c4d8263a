//! Depth-stratified sampling of targets (SPEC step 3), through the library
//! API, on generated corpora whose layout is known line by line.

use posrecall::corpus::{Corpus, JavaScript, Language, Parsed};
use posrecall::targets::{Anchor, Target, TargetOptions, eligible, sample, select};
use std::collections::BTreeSet;
use std::path::Path;

/// Lines per generated function: header, 21 body lines, closing brace, blank.
const STRIDE: usize = 24;

/// `function fNN(x) {` with a 21-line body, then `}` and a blank line.
fn function(i: usize) -> String {
    let mut s = format!("function f{i:02}(x) {{\n");
    for k in 1..=20 {
        s.push_str(&format!("  var f{i:02}_{k} = x + {k};\n"));
    }
    s.push_str(&format!("  return f{i:02}_20;\n}}\n\n"));
    s
}

/// A comment block of `n` lines: no function in it.
fn comment(n: usize) -> String {
    (0..n).map(|k| format!("// filler comment line {k:04} with no code in it\n")).collect()
}

fn parse(text: &str) -> (Corpus, Parsed) {
    let corpus = Corpus::from_bytes(Path::new("generated.js"), text.as_bytes().to_vec()).unwrap();
    let parsed = JavaScript.functions(&corpus.text).unwrap();
    (corpus, parsed)
}

fn functions(n: usize) -> (Corpus, Parsed) {
    parse(&(0..n).map(function).collect::<String>())
}

fn opts(count: usize, seed: u64) -> TargetOptions {
    TargetOptions { count, lines: 20, seed, skip_blank: false, anchor: Anchor::Name, policy: Default::default(), min_code_lines: 0 }
}

fn pick(corpus: &Corpus, parsed: &Parsed, o: &TargetOptions) -> Vec<Target> {
    select(corpus, parsed, 0, corpus.line_count() - 1, o).unwrap()
}

fn names(targets: &[Target]) -> Vec<String> {
    targets.iter().map(|t| t.name.clone()).collect()
}

fn bucket(depth: f64, count: usize) -> usize {
    ((depth * count as f64) as usize).min(count - 1)
}

#[test]
fn same_seed_gives_the_same_targets() {
    let (corpus, parsed) = functions(60);
    let a = pick(&corpus, &parsed, &opts(8, 42));
    // A fresh parse of the same text, to rule out shared state.
    let (corpus2, parsed2) = functions(60);
    let b = pick(&corpus2, &parsed2, &opts(8, 42));
    assert_eq!(a.len(), 8);
    assert_eq!(a, b);
}

#[test]
fn different_seeds_give_different_targets() {
    let (corpus, parsed) = functions(60);
    let one = names(&pick(&corpus, &parsed, &opts(4, 1)));
    let two = names(&pick(&corpus, &parsed, &opts(4, 2)));
    assert_ne!(one, two, "seeds 1 and 2 picked the same 4 of 60 functions");
    let distinct: BTreeSet<Vec<String>> = (1..=10).map(|s| names(&pick(&corpus, &parsed, &opts(4, s)))).collect();
    assert!(distinct.len() >= 5, "10 seeds gave only {} different picks", distinct.len());
}

#[test]
fn every_depth_bucket_is_represented() {
    let (corpus, parsed) = functions(60);
    for seed in 1..=20 {
        for count in [4, 8, 16] {
            let picked = pick(&corpus, &parsed, &opts(count, seed));
            assert_eq!(picked.len(), count);
            let buckets: BTreeSet<usize> = picked.iter().map(|t| bucket(t.depth, count)).collect();
            assert_eq!(
                buckets,
                (0..count).collect::<BTreeSet<_>>(),
                "seed {seed}, count {count}: depths {:?}",
                picked.iter().map(|t| t.depth).collect::<Vec<_>>()
            );
        }
    }
}

#[test]
fn empty_buckets_borrow_from_the_nearest_neighbour() {
    // 10 functions, a comment as long as 20 of them, 10 more functions: with
    // COUNT 4 the two middle buckets are empty.
    let text =
        format!("{}{}{}", (0..10).map(function).collect::<String>(), comment(20 * STRIDE), (10..20).map(function).collect::<String>());
    let (corpus, parsed) = parse(&text);
    for seed in 1..=10 {
        let picked = pick(&corpus, &parsed, &opts(4, seed));
        assert_eq!(picked.len(), 4, "COUNT is reached by borrowing");
        let buckets: Vec<usize> = picked.iter().map(|t| bucket(t.depth, 4)).collect();
        // Bucket 1 borrows from bucket 0, bucket 2 from bucket 3.
        assert_eq!(buckets, [0, 0, 3, 3], "seed {seed}");
    }
}

fn fake(name: &str, depth: f64) -> Target {
    Target {
        name: name.to_string(),
        line: (depth * 10_000.0) as usize + 1,
        byte_offset: (depth * 100_000.0) as usize,
        token_offset: None,
        depth,
        header: format!("function {name}() {{"),
        expected: Vec::new(),
        classes: Vec::new(),
        extra_window: Vec::new(),
        last_expected_line: 0,
        header_only: false,
    }
}

#[test]
fn an_empty_bucket_borrows_only_from_a_bucket_with_spare() {
    // COUNT 5: buckets [0, .2) [.2, .4) [.4, .6) [.6, .8) [.8, 1].
    // Bucket 2 is empty; bucket 1 has nothing to spare once it gave its own
    // target, bucket 3 has one more: the borrowed target must come from 3.
    let candidates =
        vec![fake("a0", 0.01), fake("a1", 0.05), fake("a2", 0.10), fake("b0", 0.30), fake("d0", 0.61), fake("d1", 0.70), fake("e0", 0.90)];
    for seed in 0..20 {
        let picked = sample(candidates.clone(), &opts(5, seed));
        let got = names(&picked);
        assert_eq!(picked.len(), 5, "seed {seed}: {got:?}");
        assert!(got.contains(&"d0".to_string()) && got.contains(&"d1".to_string()), "seed {seed}: {got:?}");
        assert!(got.contains(&"b0".to_string()) && got.contains(&"e0".to_string()), "seed {seed}: {got:?}");
        assert_eq!(got.iter().filter(|n| n.starts_with('a')).count(), 1, "seed {seed}: {got:?}");
    }
}

#[test]
fn fewer_candidates_than_count_is_an_error_saying_how_many() {
    let (corpus, parsed) = functions(3);
    let err = select(&corpus, &parsed, 0, corpus.line_count() - 1, &opts(5, 1)).expect_err("3 eligible functions cannot give 5 targets");
    assert_eq!(err.found, 3);
    assert_eq!(err.wanted, 5);
    let msg = err.to_string();
    assert!(msg.contains("only 3 eligible"), "{msg}");
    assert!(msg.contains("count asked for is 5"), "{msg}");
    // The library names no flag: the command adds which one fixes it.
    assert!(!msg.contains("--"), "{msg}");
    // Exactly enough is fine.
    assert_eq!(pick(&corpus, &parsed, &opts(3, 1)).len(), 3);
}

#[test]
fn count_zero_is_an_error() {
    let (corpus, parsed) = functions(3);
    let err = select(&corpus, &parsed, 0, corpus.line_count() - 1, &opts(0, 1)).expect_err("a count of 0 asks for nothing");
    assert_eq!((err.found, err.wanted), (3, 0));
    let msg = err.to_string();
    assert!(msg.contains("but the count asked for is 0"), "{msg}");
    assert!(!msg.contains("--"), "the library names no flag: {msg}");
}

/// Byte offset where 0-based line `i` starts, computed from the text alone.
fn offset_of_line(text: &str, i: usize) -> usize {
    text.split_inclusive('\n').take(i).map(str::len).sum()
}

#[test]
fn crop_range_keeps_targets_inside_and_measures_depth_within_it() {
    let (corpus, parsed) = functions(40);
    let text = corpus.text.clone();
    // 0-based: the middle of f10 through the middle of f30's body.
    let (first, last) = (10 * STRIDE + 5, 30 * STRIDE + 12);
    let kept_start = offset_of_line(&text, first);
    let kept_len = offset_of_line(&text, last + 1) - kept_start;

    let all = eligible(&corpus, &parsed, first, last, &opts(4, 1));
    // f10 starts before the range and f30's body is cut short by it.
    let want: Vec<String> = (11..30).map(|i| format!("f{i:02}")).collect();
    assert_eq!(names(&all), want);
    // f29's ground truth fits, but its extra window stops at the range's end.
    let f29 = all.iter().find(|t| t.name == "f29").unwrap();
    let f29_window_start = 29 * STRIDE + 1 + 20;
    assert_eq!(f29.extra_window.len(), last + 1 - f29_window_start);

    for seed in 1..=10 {
        let picked = select(&corpus, &parsed, first, last, &opts(4, seed)).unwrap();
        assert_eq!(picked.len(), 4);
        for t in &picked {
            assert!(t.line > first && t.line <= last + 1, "{} at line {}", t.name, t.line);
            assert!(t.last_expected_line <= last + 1, "{} ends at {}", t.name, t.last_expected_line);
            assert!((0.0..=1.0).contains(&t.depth), "{}: depth {}", t.name, t.depth);
            let depth = (t.byte_offset - kept_start) as f64 / kept_len as f64;
            assert!((t.depth - depth).abs() < 1e-12, "{}: depth {} != {depth}", t.name, t.depth);
        }
        let buckets: BTreeSet<usize> = picked.iter().map(|t| bucket(t.depth, 4)).collect();
        assert_eq!(buckets.len(), 4, "seed {seed}: buckets are cut within the kept range");
    }
    // The first kept function is near depth 0 of the range, not of the file.
    let f11 = &all[0];
    assert!(f11.depth < 0.06, "f11 depth within the range: {}", f11.depth);
}

#[test]
fn targets_come_out_in_file_order() {
    let (corpus, parsed) = functions(60);
    for seed in 1..=10 {
        let picked = pick(&corpus, &parsed, &opts(16, seed));
        assert!(
            picked.windows(2).all(|w| w[0].byte_offset < w[1].byte_offset && w[0].line < w[1].line),
            "seed {seed}: {:?}",
            picked.iter().map(|t| t.line).collect::<Vec<_>>()
        );
    }
    // Also when every candidate is taken.
    let picked = pick(&corpus, &parsed, &opts(60, 1));
    let want: Vec<String> = (0..60).map(|i| format!("f{i:02}")).collect();
    assert_eq!(names(&picked), want);
}
