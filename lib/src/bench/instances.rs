//! The instances of a list, llama-bench's way: `bench a.gguf b.gguf --ctx
//! 8192,16384 --probe completion,chat --kv f16,q8_0 --kv-rotation auto,off
//! --flash-attn on,off` is every combination of its lists, one run each.
//!
//! The order (documented in docs/GUIDE.md "Lists"): models slowest, then
//! context sizes, then probes, then the K/V items, then rotation modes, then
//! flash attention fastest. Models, context sizes and probes each need a plan
//! of their own (a model's tokens, a context's room, a probe's prompt), so
//! each of their combinations is one [`Entry`] of a sweep; the rest change
//! only the context llama.cpp is given, so each entry runs its [`Item`]s on
//! one model load. The K/V lists pair up item by item (`--kv`, `--kv-k`,
//! `--kv-v`; a one-item list pairs with every item), as a KV type is one
//! choice for two caches; every other list crosses. One engine for the
//! command line and for `models.toml` ([`cross`] makes both's items).

use crate::settings::{Explain, FlashAttn, KvPair, KvRotation, KvType, Names, Setting};

/// What one run of an entry varies: the context llama.cpp is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Item {
    pub k: KvType,
    pub v: KvType,
    pub rotation: KvRotation,
    pub flash_attn: FlashAttn,
}

impl std::fmt::Display for Item {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}", KvPair { k: self.k, v: self.v })?;
        if self.rotation != KvRotation::Auto {
            write!(f, " (rotation {})", self.rotation)?;
        }
        if self.flash_attn != FlashAttn::default() {
            write!(f, " (flash attention {})", self.flash_attn)?;
        }
        Ok(())
    }
}

/// A list that cannot be paired or names a run twice. The face names each
/// part's flag (or key).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListError {
    #[error(
        "lists of {n} and {m} items: lists pair up item by item, so give them the same length (or one value, which pairs with every item)"
    )]
    Lengths { a: Setting, n: usize, b: Setting, m: usize },
    #[error("`{1}` is listed twice")]
    Twice(Setting, String),
    /// `--kv` names K and V both: with a K or V list besides, which one
    /// would be run is a rule to remember, and a command line that reads
    /// as f16 would run another cache.
    #[error("it names K and V itself (K/V, e.g. f16/q8_0); give the types there, or K and V lists without it")]
    Both { part: Setting },
    /// llama.cpp's variable turns rotation off, so `auto` is `off`.
    #[error(
        "KV rotation auto and off are the same runs while the environment sets {var}={value} (llama.cpp then rotates nothing): list one of them, or unset {var}",
        var = crate::engine::rotation::DISABLE_VAR
    )]
    OffByEnvironment { value: String },
}

/// The K/V items (each list paired item by item, `kv` empty: `default`)
/// crossed with every `rotation` mode (empty: auto) and every `flash_attn`
/// setting (empty: the default), in the documented order; a list that
/// names a value twice, or the environment making two rotation modes one,
/// is refused.
pub fn items(
    kv: &[KvPair],
    kv_k: &[KvType],
    kv_v: &[KvType],
    rotation: &[KvRotation],
    flash_attn: &[FlashAttn],
    default: (KvType, KvType),
) -> Result<Vec<Item>, ListError> {
    let pairs = paired(kv, kv_k, kv_v, default)?;
    once(Setting::KvRotation, rotation)?;
    once(Setting::FlashAttn, flash_attn)?;
    let items = cross(&pairs, rotation, flash_attn);
    let both = [KvRotation::Auto, KvRotation::Off].iter().all(|m| items.iter().any(|i| i.rotation == *m));
    if both && crate::engine::rotation::disabled_by_environment() {
        let value = std::env::var(crate::engine::rotation::DISABLE_VAR).unwrap_or_default();
        return Err(ListError::OffByEnvironment { value: value.chars().take(40).collect() });
    }
    Ok(items)
}

/// Refuses a list that names one value twice: the two runs would be one.
pub fn once<T: PartialEq + std::fmt::Display>(setting: Setting, list: &[T]) -> Result<(), ListError> {
    match list.iter().enumerate().find(|(i, x)| list[..*i].contains(x)) {
        Some((_, x)) => Err(ListError::Twice(setting, x.to_string())),
        None => Ok(()),
    }
}

/// Every K/V pair with every rotation mode (empty: auto) and every flash
/// attention setting (empty: the default), flash attention fastest: the
/// items of one entry, for the command line and `models.toml` alike.
pub fn cross(pairs: &[(KvType, KvType)], rotation: &[KvRotation], flash_attn: &[FlashAttn]) -> Vec<Item> {
    let rotation = if rotation.is_empty() { &[KvRotation::Auto][..] } else { rotation };
    let default = [FlashAttn::default()];
    let flash_attn = if flash_attn.is_empty() { &default[..] } else { flash_attn };
    let mut items = Vec::with_capacity(pairs.len() * rotation.len() * flash_attn.len());
    for &(k, v) in pairs {
        for &r in rotation {
            for &fa in flash_attn {
                items.push(Item { k, v, rotation: r, flash_attn: fa });
            }
        }
    }
    items
}

/// The K/V pairs the KV lists give: `kv`'s items, or (`kv` empty) item `i`
/// of `kv_k` and `kv_v` (a one-item list stands for every item), each part
/// not given from `default`; `kv` with either of the others, and a pair
/// named twice, are refused.
fn paired(kv: &[KvPair], kv_k: &[KvType], kv_v: &[KvType], default: (KvType, KvType)) -> Result<Vec<(KvType, KvType)>, ListError> {
    if !kv.is_empty() {
        for (part, list) in [(Setting::KvK, kv_k), (Setting::KvV, kv_v)] {
            if !list.is_empty() {
                return Err(ListError::Both { part });
            }
        }
    }
    let default = [KvPair { k: default.0, v: default.1 }];
    let kv = if kv.is_empty() { &default[..] } else { kv };
    let lists = [(Setting::Kv, kv.len()), (Setting::KvK, kv_k.len()), (Setting::KvV, kv_v.len())];
    let mut longest: Option<(Setting, usize)> = None;
    for (part, n) in lists.into_iter().filter(|&(_, n)| n > 1) {
        match longest {
            Some((a, m)) if m != n => return Err(ListError::Lengths { a, n: m, b: part, m: n }),
            _ => longest = Some((part, n)),
        }
    }
    let n = longest.map_or(1, |(_, n)| n);
    let at = |list_len: usize, i: usize| if list_len == 1 { 0 } else { i };
    let mut pairs: Vec<(KvType, KvType)> = Vec::with_capacity(n);
    for i in 0..n {
        let base = kv[at(kv.len(), i)];
        let k = kv_k.get(at(kv_k.len(), i)).copied().unwrap_or(base.k);
        let v = kv_v.get(at(kv_v.len(), i)).copied().unwrap_or(base.v);
        if pairs.contains(&(k, v)) {
            return Err(ListError::Twice(Setting::Kv, KvPair { k, v }.to_string()));
        }
        pairs.push((k, v));
    }
    Ok(pairs)
}

impl Explain for ListError {
    fn explain(&self, n: &dyn Names) -> String {
        match self {
            ListError::Lengths { a, n: len_a, b, m } => format!("{} lists {len_a} items and {} {m}: {self}", n.name(*a), n.name(*b)),
            ListError::Twice(part, _) => format!("{}: {self}", n.name(*part)),
            ListError::Both { part } => format!("{} with {}: {self}", n.name(Setting::Kv), n.name(*part)),
            ListError::OffByEnvironment { .. } => format!("{}: {self}", n.name(Setting::KvRotation)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use KvType::*;

    fn pairs(s: &str) -> Vec<KvPair> {
        s.split(',').map(|x| x.parse().unwrap()).collect()
    }

    /// [`items`] without the environment.
    fn listed(kv: &[KvPair], kv_k: &[KvType], kv_v: &[KvType], rot: &[KvRotation], fa: &[FlashAttn]) -> Result<Vec<Item>, ListError> {
        once(Setting::KvRotation, rot)?;
        once(Setting::FlashAttn, fa)?;
        Ok(cross(&paired(kv, kv_k, kv_v, (Q8_0, Q8_0))?, rot, fa))
    }

    fn kv(items: &[Item]) -> Vec<(KvType, KvType, KvRotation)> {
        items.iter().map(|i| (i.k, i.v, i.rotation)).collect()
    }

    #[test]
    fn lists_pair_up_and_cross_with_rotation() {
        let auto = KvRotation::Auto;
        let off = KvRotation::Off;
        assert_eq!(kv(&listed(&[], &[], &[], &[], &[]).unwrap()), vec![(Q8_0, Q8_0, auto)]);
        assert_eq!(kv(&listed(&pairs("f16,q8_0/q4_0"), &[], &[], &[], &[]).unwrap()), vec![(F16, F16, auto), (Q8_0, Q4_0, auto)]);
        // K and V lists of equal length pair up; a single value pairs with every item.
        assert_eq!(kv(&listed(&[], &[F16, Q8_0], &[Q4_0], &[], &[]).unwrap()), vec![(F16, Q4_0, auto), (Q8_0, Q4_0, auto)]);
        assert_eq!(kv(&listed(&[], &[F16, Q8_0], &[F16, Q4_0], &[], &[]).unwrap()), vec![(F16, F16, auto), (Q8_0, Q4_0, auto)]);
        assert_eq!(
            kv(&listed(&pairs("f16,q4_0"), &[], &[], &[auto, off], &[]).unwrap()),
            vec![(F16, F16, auto), (F16, F16, off), (Q4_0, Q4_0, auto), (Q4_0, Q4_0, off)]
        );
    }

    #[test]
    fn flash_attention_crosses_fastest() {
        let (on, off) = (FlashAttn::On, FlashAttn::Off);
        let got: Vec<(KvType, KvRotation, FlashAttn)> =
            listed(&pairs("f16,q8_0"), &[], &[], &[KvRotation::Auto, KvRotation::Off], &[on, off])
                .unwrap()
                .iter()
                .map(|i| (i.k, i.rotation, i.flash_attn))
                .collect();
        use KvRotation::{Auto as A, Off as O};
        assert_eq!(
            got,
            vec![(F16, A, on), (F16, A, off), (F16, O, on), (F16, O, off), (Q8_0, A, on), (Q8_0, A, off), (Q8_0, O, on), (Q8_0, O, off)]
        );
        // No list: the default, as one run is given.
        assert_eq!(listed(&[], &[], &[], &[], &[]).unwrap()[0].flash_attn, FlashAttn::default());
    }

    #[test]
    fn lists_that_cannot_pair_or_repeat_a_run_are_refused() {
        let e = listed(&[], &[F16, Q8_0], &[F16, Q8_0, Q4_0], &[], &[]).unwrap_err();
        assert_eq!(e, ListError::Lengths { a: Setting::KvK, n: 2, b: Setting::KvV, m: 3 });
        // K/V in one list and K or V in another would mix by a rule no
        // command line shows: refused, whatever the lengths.
        assert_eq!(listed(&pairs("f16"), &[Q8_0], &[], &[], &[]).unwrap_err(), ListError::Both { part: Setting::KvK });
        assert_eq!(listed(&pairs("f16,q8_0"), &[], &[Q4_0, F16], &[], &[]).unwrap_err(), ListError::Both { part: Setting::KvV });
        assert_eq!(listed(&pairs("f16,q8_0,f16"), &[], &[], &[], &[]).unwrap_err(), ListError::Twice(Setting::Kv, "f16".into()));
        assert_eq!(listed(&[], &[F16, F16], &[Q4_0], &[], &[]).unwrap_err(), ListError::Twice(Setting::Kv, "f16/q4_0".into()));
        let twice = [KvRotation::Off, KvRotation::Off];
        assert_eq!(listed(&[], &[], &[], &twice, &[]).unwrap_err(), ListError::Twice(Setting::KvRotation, "off".into()));
        let twice = [FlashAttn::On, FlashAttn::Off, FlashAttn::On];
        assert_eq!(listed(&[], &[], &[], &[], &twice).unwrap_err(), ListError::Twice(Setting::FlashAttn, "on".into()));
    }
}
