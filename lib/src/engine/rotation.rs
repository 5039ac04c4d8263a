//! llama.cpp's rotation of quantised K and V rows, as a setting posrecall
//! controls and records.
//!
//! llama.cpp has no parameter for it: its KV cache reads the environment
//! variable `LLAMA_ATTN_ROT_DISABLE` when it is created (`llama-kv-cache.cpp`)
//! and rotates K (V) when the variable is unset or zero, the K (V) type is
//! quantised and every layer's K (V) head size is the same multiple of 64.
//! So [`decide`] reads that rule off the model before a run (its keys and
//! manifest need it before any context exists), [`create_context`] sets the
//! variable to the decided mode while llama.cpp creates the context, and
//! then checks what llama.cpp logged it did against the decision: a model
//! the rule here reads wrongly is refused instead of recorded wrongly.

use crate::settings::{KvRotation, KvType, Rotation};
use anyhow::Result;
use std::sync::Mutex;

/// llama.cpp's variable.
pub(crate) const DISABLE_VAR: &str = "LLAMA_ATTN_ROT_DISABLE";

/// Whether the process environment turns rotation off, read as llama.cpp
/// reads it (C's `atoi`: leading blanks, a sign, digits; anything else is 0).
pub(crate) fn disabled_by_environment() -> bool {
    std::env::var(DISABLE_VAR).is_ok_and(|v| atoi(&v) != 0)
}

fn atoi(s: &str) -> i64 {
    let s = s.trim_start();
    let (sign, rest) = match s.as_bytes().first() {
        Some(b'-') => (-1, &s[1..]),
        Some(b'+') => (1, &s[1..]),
        _ => (1, s),
    };
    // Only zero or not matters: leading zeros go, and a number too long for
    // an i64 is still not zero (where C's atoi would overflow).
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    match digits.trim_start_matches('0') {
        "" => 0,
        d => sign * d.parse::<i64>().unwrap_or(i64::MAX),
    }
}

/// Head sizes of a model's K and V rows: `Some(n)` when every layer has
/// the same, `None` when they differ (then llama.cpp rotates nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HeadSizes {
    pub k: Option<u32>,
    pub v: Option<u32>,
}

/// What llama.cpp will do for this model (`heads`) at these types when
/// `asked`: the environment's `off` is honoured and recorded as `off`.
pub(crate) fn predict(asked: KvRotation, heads: HeadSizes, type_k: KvType, type_v: KvType) -> Rotation {
    let mode = match asked {
        KvRotation::Auto if disabled_by_environment() => KvRotation::Off,
        m => m,
    };
    let rotates = |t: KvType, head: Option<u32>| mode == KvRotation::Auto && t.is_quantized() && head.is_some_and(|h| h > 0 && h % 64 == 0);
    Rotation { mode, k: rotates(type_k, heads.k), v: rotates(type_v, heads.v) }
}

/// What llama.cpp logged while one context was created: the rotation size
/// of K and of V for each KV cache it made (0: not rotated).
static LOGGED: Mutex<Vec<(char, u32)>> = Mutex::new(Vec::new());
/// One context created at a time, so that the variable and the log lines
/// belong to it.
static CREATING: Mutex<()> = Mutex::new(());

/// Reads llama.cpp's `n_rot_k = N` / `n_rot_v = N` lines (the engine's log
/// callback passes every line here).
pub(super) fn observe_log(line: &str) {
    for (which, key) in [('k', "n_rot_k = "), ('v', "n_rot_v = ")] {
        if let Some(at) = line.find(key) {
            let n: String = line[at + key.len()..].chars().take_while(char::is_ascii_digit).collect();
            if let Ok(n) = n.parse() {
                LOGGED.lock().unwrap_or_else(|e| e.into_inner()).push((which, n));
            }
        }
    }
}

/// Creates a context with rotation as `rotation` decided, and checks that
/// llama.cpp did just that.
pub(super) fn create_context<T>(rotation: Rotation, create: impl FnOnce() -> Result<T>) -> Result<T> {
    let _one = CREATING.lock().unwrap_or_else(|e| e.into_inner());
    let before = std::env::var_os(DISABLE_VAR);
    // SAFETY: set_var is unsafe because C code on another thread may read
    // the environment meanwhile. posrecall creates its contexts one at a
    // time (the lock above), and llama.cpp reads this variable only while
    // creating a KV cache, here; the value the user set is put back below.
    unsafe {
        match rotation.mode {
            KvRotation::Off => std::env::set_var(DISABLE_VAR, "1"),
            KvRotation::Auto => std::env::remove_var(DISABLE_VAR),
        }
    }
    LOGGED.lock().unwrap_or_else(|e| e.into_inner()).clear();
    let created = create();
    // SAFETY: as above.
    unsafe {
        match &before {
            Some(v) => std::env::set_var(DISABLE_VAR, v),
            None => std::env::remove_var(DISABLE_VAR),
        }
    }
    let made = created?;
    let logged = std::mem::take(&mut *LOGGED.lock().unwrap_or_else(|e| e.into_inner()));
    check(rotation, &logged)?;
    Ok(made)
}

/// Checks what llama.cpp `logged` against what `rotation` expects. No line
/// at all: the model keeps no KV cache, or llama.cpp's log was not read
/// (another callback installed). Where nothing was to rotate, that changes
/// nothing recorded; where a rotation was expected, the record would claim
/// what no line confirmed, so it is refused rather than passed unchecked.
fn check(rotation: Rotation, logged: &[(char, u32)]) -> Result<()> {
    if logged.is_empty() {
        return match rotation.k || rotation.v {
            true => Err(Unchecked { expected: rotation }.into()),
            false => Ok(()),
        };
    }
    let did = |which| logged.iter().any(|&(w, n)| w == which && n > 0);
    if (did('k'), did('v')) != (rotation.k, rotation.v) {
        return Err(Unforeseen { expected: rotation, k: did('k'), v: did('v') }.into());
    }
    Ok(())
}

/// llama.cpp rotated otherwise than [`decide`] read its rule.
/// Needs no hint: it says what to change (the mode or the types), which
/// `bench` and a sweep file set under names of their own.
#[derive(Debug, thiserror::Error)]
#[error(
    "llama.cpp rotated K {} and V {} where posrecall expected K {} and V {} (rotation {}): this model's attention is one posrecall's reading of llama.cpp's rotation rule does not cover; turn rotation off, or use unquantised K and V",
    yes(*k), yes(*v), yes(expected.k), yes(expected.v), expected.mode
)]
pub(crate) struct Unforeseen {
    pub expected: Rotation,
    pub k: bool,
    pub v: bool,
}

/// llama.cpp logged nothing about rotation where posrecall expected one, so
/// the rotation a run file would record is unconfirmed.
/// Needs no hint: it says what to change (the rotation or the types).
#[derive(Debug, thiserror::Error)]
#[error(
    "llama.cpp logged no rotation sizes while creating the context, where posrecall expected K {} and V {} rotated (rotation {}): the rotation could not be checked, so it is not recorded; turn rotation off, or use unquantised K and V",
    yes(expected.k), yes(expected.v), expected.mode
)]
pub(crate) struct Unchecked {
    pub expected: Rotation,
}

fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What llama.cpp logged is checked against what was expected: a
    /// difference is refused, and so is silence where a rotation was
    /// expected (nothing would confirm it); silence where none was is a
    /// model without a KV cache.
    #[test]
    fn the_logged_rotation_is_checked_and_silence_confirms_nothing() {
        let auto = |k, v| Rotation { mode: KvRotation::Auto, k, v };
        assert!(check(auto(true, true), &[('k', 64), ('v', 64)]).is_ok());
        assert!(check(auto(false, false), &[('k', 0), ('v', 0)]).is_ok());
        assert!(check(auto(false, false), &[]).is_ok());
        let e = check(auto(true, false), &[('k', 0), ('v', 0)]).unwrap_err().to_string();
        assert!(e.starts_with("llama.cpp rotated K no and V no where posrecall expected K yes and V no"), "{e}");
        let e = check(auto(true, true), &[]).unwrap_err().to_string();
        assert!(
            e.starts_with("llama.cpp logged no rotation sizes while creating the context, where posrecall expected K yes and V yes"),
            "{e}"
        );
        assert!(check(auto(false, true), &[]).is_err());
    }

    #[test]
    fn the_variable_reads_as_c_atoi_reads_it() {
        assert_eq!(atoi("1"), 1);
        assert_eq!(atoi("  7x"), 7);
        assert_eq!(atoi("-2"), -2);
        assert_eq!(atoi("true"), 0);
        assert_eq!(atoi(""), 0);
        assert_eq!(atoi("0"), 0);
        assert_eq!(atoi("0000000000000000001"), 1, "18 zeros then a one is one, not zero");
        assert_ne!(atoi("99999999999999999999999"), 0);
        assert_eq!(atoi("000"), 0);
    }

    #[test]
    fn the_rule_is_quantised_types_with_heads_a_multiple_of_64() {
        let heads = HeadSizes { k: Some(64), v: Some(64) };
        let r = predict(KvRotation::Off, heads, KvType::Q4_0, KvType::Q4_0);
        assert_eq!((r.mode, r.k, r.v), (KvRotation::Off, false, false));
        if !disabled_by_environment() {
            let r = predict(KvRotation::Auto, heads, KvType::Q8_0, KvType::F16);
            assert_eq!((r.mode, r.k, r.v), (KvRotation::Auto, true, false));
            let r = predict(KvRotation::Auto, HeadSizes { k: Some(96), v: None }, KvType::Q8_0, KvType::Q8_0);
            assert_eq!((r.k, r.v), (false, false), "96 is not a multiple of 64; mixed heads rotate nothing");
            let r = predict(KvRotation::Auto, HeadSizes { k: Some(128), v: Some(128) }, KvType::F16, KvType::Bf16);
            assert_eq!((r.k, r.v), (false, false));
        }
    }
}
