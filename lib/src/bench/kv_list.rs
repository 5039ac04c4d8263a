//! The runs a KV list asks for (`bench --kv f16,q8_0 --kv-rotation auto,off`),
//! as llama-bench reads its sweep lists: the K/V items, each K list and V
//! list paired item by item with them (a one-item list pairs with every
//! item), each item crossed with every rotation mode, in order.

use crate::settings::{Explain, KvPair, KvRotation, KvType, Names, Setting};

/// One run of a KV list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvItem {
    pub k: KvType,
    pub v: KvType,
    pub rotation: KvRotation,
}

impl std::fmt::Display for KvItem {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "{}", KvPair { k: self.k, v: self.v })?;
        match self.rotation {
            KvRotation::Auto => Ok(()),
            r => write!(f, " (rotation {r})"),
        }
    }
}

/// A KV list that cannot be paired or names a run twice. The face names
/// each part's flag (or key).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KvListError {
    #[error(
        "lists of {n} and {m} items: lists pair up item by item, so give them the same length (or one value, which pairs with every item)"
    )]
    Lengths { a: Setting, n: usize, b: Setting, m: usize },
    #[error("`{1}` is listed twice")]
    Twice(Setting, String),
    /// llama.cpp's variable turns rotation off, so `auto` is `off`.
    #[error(
        "KV rotation auto and off are the same runs while the environment sets {var}={value} (llama.cpp then rotates nothing): list one of them, or unset {var}",
        var = crate::engine::rotation::DISABLE_VAR
    )]
    OffByEnvironment { value: String },
}

/// The runs, in order: item `i` of each list (a one-item list stands for
/// every item; `kv` empty: `default`), with K from `kv_k` and V from `kv_v`
/// where those are given, crossed with `rotation` (empty: auto).
pub fn kv_items(
    kv: &[KvPair],
    kv_k: &[KvType],
    kv_v: &[KvType],
    rotation: &[KvRotation],
    default: (KvType, KvType),
) -> Result<Vec<KvItem>, KvListError> {
    let items = paired(kv, kv_k, kv_v, rotation, default)?;
    let both = [KvRotation::Auto, KvRotation::Off].iter().all(|m| items.iter().any(|i| i.rotation == *m));
    if both && crate::engine::rotation::disabled_by_environment() {
        let value = std::env::var(crate::engine::rotation::DISABLE_VAR).unwrap_or_default();
        return Err(KvListError::OffByEnvironment { value: value.chars().take(40).collect() });
    }
    Ok(items)
}

/// [`kv_items`] without the environment: the lists paired and crossed.
fn paired(
    kv: &[KvPair],
    kv_k: &[KvType],
    kv_v: &[KvType],
    rotation: &[KvRotation],
    default: (KvType, KvType),
) -> Result<Vec<KvItem>, KvListError> {
    let default = [KvPair { k: default.0, v: default.1 }];
    let kv = if kv.is_empty() { &default[..] } else { kv };
    let lists = [(Setting::Kv, kv.len()), (Setting::KvK, kv_k.len()), (Setting::KvV, kv_v.len())];
    let mut longest: Option<(Setting, usize)> = None;
    for (part, n) in lists.into_iter().filter(|&(_, n)| n > 1) {
        match longest {
            Some((a, m)) if m != n => return Err(KvListError::Lengths { a, n: m, b: part, m: n }),
            _ => longest = Some((part, n)),
        }
    }
    let n = longest.map_or(1, |(_, n)| n);
    let at = |list_len: usize, i: usize| if list_len == 1 { 0 } else { i };
    for (i, r) in rotation.iter().enumerate() {
        if rotation[..i].contains(r) {
            return Err(KvListError::Twice(Setting::KvRotation, r.to_string()));
        }
    }
    let rotation = if rotation.is_empty() { &[KvRotation::Auto][..] } else { rotation };
    let mut items: Vec<KvItem> = Vec::with_capacity(n * rotation.len());
    for i in 0..n {
        let base = kv[at(kv.len(), i)];
        let k = kv_k.get(at(kv_k.len(), i)).copied().unwrap_or(base.k);
        let v = kv_v.get(at(kv_v.len(), i)).copied().unwrap_or(base.v);
        for &r in rotation {
            let item = KvItem { k, v, rotation: r };
            if items.contains(&item) {
                return Err(KvListError::Twice(Setting::Kv, KvPair { k, v }.to_string()));
            }
            items.push(item);
        }
    }
    Ok(items)
}

impl Explain for KvListError {
    fn explain(&self, n: &dyn Names) -> String {
        match self {
            KvListError::Lengths { a, n: len_a, b, m } => format!("{} lists {len_a} items and {} {m}: {self}", n.name(*a), n.name(*b)),
            KvListError::Twice(part, _) => format!("{}: {self}", n.name(*part)),
            KvListError::OffByEnvironment { .. } => format!("{}: {self}", n.name(Setting::KvRotation)),
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

    fn kv(items: &[KvItem]) -> Vec<(KvType, KvType, KvRotation)> {
        items.iter().map(|i| (i.k, i.v, i.rotation)).collect()
    }

    #[test]
    fn lists_pair_up_and_cross_with_rotation() {
        let d = (Q8_0, Q8_0);
        let auto = KvRotation::Auto;
        let off = KvRotation::Off;
        assert_eq!(kv(&paired(&[], &[], &[], &[], d).unwrap()), vec![(Q8_0, Q8_0, auto)]);
        assert_eq!(kv(&paired(&pairs("f16,q8_0/q4_0"), &[], &[], &[], d).unwrap()), vec![(F16, F16, auto), (Q8_0, Q4_0, auto)]);
        // K and V lists of equal length pair up; a single value pairs with every item.
        assert_eq!(kv(&paired(&[], &[F16, Q8_0], &[Q4_0], &[], d).unwrap()), vec![(F16, Q4_0, auto), (Q8_0, Q4_0, auto)]);
        assert_eq!(kv(&paired(&[], &[F16, Q8_0], &[F16, Q4_0], &[], d).unwrap()), vec![(F16, F16, auto), (Q8_0, Q4_0, auto)]);
        assert_eq!(
            kv(&paired(&pairs("f16,q4_0"), &[], &[], &[auto, off], d).unwrap()),
            vec![(F16, F16, auto), (F16, F16, off), (Q4_0, Q4_0, auto), (Q4_0, Q4_0, off)]
        );
    }

    #[test]
    fn lists_that_cannot_pair_or_repeat_a_run_are_refused() {
        let d = (Q8_0, Q8_0);
        let e = paired(&pairs("f16,q8_0"), &[F16, Q8_0, Q4_0], &[], &[], d).unwrap_err();
        assert_eq!(e, KvListError::Lengths { a: Setting::Kv, n: 2, b: Setting::KvK, m: 3 });
        assert_eq!(paired(&pairs("f16,q8_0,f16"), &[], &[], &[], d).unwrap_err(), KvListError::Twice(Setting::Kv, "f16".into()));
        assert_eq!(paired(&[], &[F16, F16], &[Q4_0], &[], d).unwrap_err(), KvListError::Twice(Setting::Kv, "f16/q4_0".into()));
        let twice = [KvRotation::Off, KvRotation::Off];
        assert_eq!(paired(&[], &[], &[], &twice, d).unwrap_err(), KvListError::Twice(Setting::KvRotation, "off".into()));
    }
}
