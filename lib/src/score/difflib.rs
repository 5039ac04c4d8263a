//! Python's `difflib.SequenceMatcher(a=…, b=…, autojunk=False)` matching
//! blocks, as the codeneedle policy aligns an answer with its window.
//!
//! This is not a longest common subsequence: it takes the longest run of
//! equal elements first (the earliest in `a`, then in `b`, among equally
//! long ones) and recurses into the two sides around it. A longer
//! subsequence that would cross the chosen run is not found, and that is
//! the alignment codeneedle's numbers were made with, so it is reproduced
//! here step for step rather than replaced by a "better" one. With no junk
//! function and `autojunk` off, nothing is junk and no element is dropped
//! as popular, so the junk-extension passes of `find_longest_match` never
//! extend anything; they are left out.

use std::collections::HashMap;
use std::hash::Hash;

/// One run of equal elements: `a[a..a + size] == b[b..b + size]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Block {
    pub a: usize,
    pub b: usize,
    pub size: usize,
}

/// The matching blocks of `a` against `b`, increasing in both, adjacent
/// ones merged, without difflib's final empty sentinel.
#[must_use]
pub fn matching_blocks<T: Eq + Hash>(a: &[T], b: &[T]) -> Vec<Block> {
    // Where each element of `b` occurs, in increasing order (difflib's b2j).
    let mut b2j: HashMap<&T, Vec<usize>> = HashMap::new();
    for (j, x) in b.iter().enumerate() {
        b2j.entry(x).or_default().push(j);
    }
    let mut queue = vec![(0, a.len(), 0, b.len())];
    let mut blocks = Vec::new();
    while let Some((alo, ahi, blo, bhi)) = queue.pop() {
        let m = longest_match(a, &b2j, alo, ahi, blo, bhi);
        if m.size > 0 {
            blocks.push(m);
            if alo < m.a && blo < m.b {
                queue.push((alo, m.a, blo, m.b));
            }
            if m.a + m.size < ahi && m.b + m.size < bhi {
                queue.push((m.a + m.size, ahi, m.b + m.size, bhi));
            }
        }
    }
    blocks.sort_unstable();
    // Adjacent blocks merge, as difflib merges them before returning.
    let mut merged: Vec<Block> = Vec::with_capacity(blocks.len());
    for blk in blocks {
        match merged.last_mut() {
            Some(last) if last.a + last.size == blk.a && last.b + last.size == blk.b => last.size += blk.size,
            _ => merged.push(blk),
        }
    }
    merged
}

/// difflib's `find_longest_match(alo, ahi, blo, bhi)` without junk: the
/// longest block in `a[alo..ahi]` × `b[blo..bhi]`, the one starting earliest
/// in `a` among equally long ones, and of those the earliest in `b`.
fn longest_match<T: Eq + Hash>(a: &[T], b2j: &HashMap<&T, Vec<usize>>, alo: usize, ahi: usize, blo: usize, bhi: usize) -> Block {
    let mut best = Block { a: alo, b: blo, size: 0 };
    // j2len[j]: the length of the longest block ending at a[i - 1], b[j].
    let mut j2len: HashMap<usize, usize> = HashMap::new();
    for (i, x) in a.iter().enumerate().take(ahi).skip(alo) {
        let mut next: HashMap<usize, usize> = HashMap::new();
        for &j in b2j.get(x).map_or(&[][..], Vec::as_slice) {
            if j < blo {
                continue;
            }
            if j >= bhi {
                break;
            }
            let k = j.checked_sub(1).and_then(|p| j2len.get(&p)).copied().unwrap_or(0) + 1;
            next.insert(j, k);
            if k > best.size {
                best = Block { a: i + 1 - k, b: j + 1 - k, size: k };
            }
        }
        j2len = next;
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocks(a: &str, b: &str) -> Vec<(usize, usize, usize)> {
        let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
        matching_blocks(&a, &b).into_iter().map(|m| (m.a, m.b, m.size)).collect()
    }

    /// Python 3.11: `SequenceMatcher(None, a, b, autojunk=False).get_matching_blocks()`
    /// (the trailing `(len(a), len(b), 0)` left out), worked out in the interpreter.
    #[test]
    fn the_blocks_are_pythons() {
        // difflib's own documentation example.
        assert_eq!(blocks("abxcd", "abcd"), [(0, 0, 2), (3, 2, 2)]);
        // The longest block comes first: "xyz" wins, and the "ab" before it
        // in b cannot pair with the "ab" after it in a.
        assert_eq!(blocks("xyzab", "abxyz"), [(0, 2, 3)]);
        // Ties go to the earliest in a, then in b.
        assert_eq!(blocks("aa", "a"), [(0, 0, 1)]);
        assert_eq!(blocks("a", "aa"), [(0, 0, 1)]);
        assert_eq!(blocks("", "abc"), []);
        assert_eq!(blocks("abc", "abc"), [(0, 0, 3)]);
    }
}
