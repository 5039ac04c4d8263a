//! Which of a repository's files a reference names: its quant (as
//! llama.cpp matches one) and every part of a split model.

use super::{HubError, Select};

/// A GGUF file name's split and quant: `…-Q4_K_M-00001-of-00003.gguf`.
#[derive(Debug, PartialEq)]
struct SplitName {
    /// The path without `.gguf` and the split suffix.
    prefix: String,
    /// 1-based.
    index: usize,
    count: usize,
}

fn split_name(path: &str) -> Option<SplitName> {
    let stem = path.strip_suffix(".gguf").or_else(|| path.strip_suffix(".GGUF"))?;
    let tail: Vec<&str> = stem.rsplitn(4, '-').collect();
    // [count, "of", index, prefix]
    if let [count, of, index, prefix] = tail[..]
        && of.eq_ignore_ascii_case("of")
        && count.len() == 5
        && index.len() == 5
        && let (Ok(c), Ok(i)) = (count.parse::<usize>(), index.parse::<usize>())
        && i >= 1
        && i <= c
    {
        return Some(SplitName { prefix: prefix.to_string(), index: i, count: c });
    }
    Some(SplitName { prefix: stem.to_string(), index: 1, count: 1 })
}

/// Model weights, not a projector or a draft head stored beside them.
fn is_model_file(path: &str) -> bool {
    let lower = path.to_ascii_lowercase();
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    lower.ends_with(".gguf") && !["mmproj", "mtp-", "eagle3-", "dflash-", "dspark-"].iter().any(|k| name.contains(k))
}

/// Whether `path`'s name has `quant` followed by `.` or `-` (any case), as
/// llama.cpp matches a tag. An empty tag names no file: it would be found
/// before every `.` and `-` of every name. (A reference refuses one before
/// it gets here; this keeps the rule true for any caller.)
fn has_quant(path: &str, quant: &str) -> bool {
    if quant.is_empty() {
        return false;
    }
    let (name, q) = (path.rsplit('/').next().unwrap_or(path).to_ascii_uppercase(), quant.to_ascii_uppercase());
    name.match_indices(&q).any(|(at, _)| matches!(name.as_bytes().get(at + q.len()), Some(b'.' | b'-')))
}

/// The quant tag of a model file's name (`Q4_K_M`), for listings.
fn quant_of(path: &str) -> String {
    let prefix = split_name(path).map(|s| s.prefix).unwrap_or_default();
    let name = prefix.rsplit('/').next().unwrap_or(&prefix).to_string();
    match name.rfind(['-', '.']) {
        Some(at) => name[at + 1..].to_ascii_uppercase(),
        None => name,
    }
}

/// The model files (first parts) of a listing, for messages: each with its
/// quant, and how many parts.
pub(super) fn listing(files: &[String]) -> String {
    let mut shown: Vec<String> = files
        .iter()
        .filter(|f| is_model_file(f))
        .filter_map(|f| split_name(f).filter(|s| s.index == 1).map(|s| (f, s)))
        .map(|(f, s)| match s.count {
            1 => format!("{f} ({})", quant_of(f)),
            n => format!("{f} ({}, {n} parts)", quant_of(f)),
        })
        .collect();
    if shown.is_empty() {
        return "no GGUF model file".into();
    }
    shown.sort();
    let n = shown.len();
    format!("{n} GGUF model file{}: {}", if n == 1 { "" } else { "s" }, capped(shown))
}

/// Names joined for a message, the first [`LISTED`] of them.
/// The hub's names are shown as `for_terminal` shows them: a listed name
/// holding a bidi or zero-width character would read as another.
fn capped(names: Vec<String>) -> String {
    let mut names: Vec<String> = names.iter().map(|n| crate::support::shown::for_terminal(n).into_owned()).collect();
    let more = names.len().saturating_sub(LISTED);
    names.truncate(LISTED);
    if more > 0 {
        names.push(format!("and {more} more"));
    }
    names.join(", ")
}

/// How many model files a message lists (a repository may hold thousands;
/// the message stays a line).
const LISTED: usize = 20;

/// The files (every part, in order) that `select` names among `files` (the
/// repository's paths).
pub(super) fn choose(reference: &str, select: &Select, files: &[String]) -> Result<Vec<String>, HubError> {
    let models: Vec<&String> = files.iter().filter(|f| is_model_file(f) && split_name(f).is_some_and(|s| s.index == 1)).collect();
    let first = match select {
        Select::File(want) => match files.iter().find(|f| *f == want) {
            Some(f) if split_name(f).is_some_and(|s| s.index == 1) => f.clone(),
            Some(f) => {
                let s = split_name(f).expect("a .gguf name");
                return Err(HubError::NoMatch {
                    reference: reference.into(),
                    what: format!(
                        "{} is part {} of {} of a split model; name its first part",
                        crate::support::shown::for_terminal(f),
                        s.index,
                        s.count
                    ),
                    listing: listing(files),
                });
            }
            None => {
                return Err(HubError::NoMatch { reference: reference.into(), what: format!("no file {want}"), listing: listing(files) });
            }
        },
        Select::Quant(q) => {
            let tags: Vec<&str> = match q {
                Some(q) => vec![q.as_str()],
                None => vec!["Q4_K_M", "Q8_0"],
            };
            let mut found = None;
            for tag in &tags {
                let hits: Vec<&&String> = models.iter().filter(|f| has_quant(f, tag)).collect();
                match hits[..] {
                    [] => continue,
                    [one] => found = Some((*one).clone()),
                    _ => {
                        let names: Vec<String> = hits.iter().map(|f| f.to_string()).collect();
                        return Err(HubError::Ambiguous {
                            reference: reference.into(),
                            what: format!("{} model files match {tag}", hits.len()),
                            listing: capped(names),
                        });
                    }
                }
                break;
            }
            match (found, q, &models[..]) {
                (Some(f), _, _) => f,
                (None, None, [only]) => (*only).clone(),
                (None, None, many) if many.len() > 1 => {
                    return Err(HubError::Ambiguous {
                        reference: reference.into(),
                        what: "no quant given, none is Q4_K_M or Q8_0, and several model files are".into(),
                        listing: listing(files),
                    });
                }
                (None, q, _) => {
                    let what = match q {
                        Some(q) => format!("no model file matches {q}"),
                        None => "no model file".into(),
                    };
                    return Err(HubError::NoMatch { reference: reference.into(), what, listing: listing(files) });
                }
            }
        }
    };
    let split = split_name(&first).expect("a .gguf name");
    if split.count == 1 {
        return Ok(vec![first]);
    }
    let mut all = Vec::with_capacity(split.count);
    for i in 1..=split.count {
        let part = files.iter().find(|f| split_name(f).is_some_and(|s| s.prefix == split.prefix && s.count == split.count && s.index == i));
        match part {
            Some(p) => all.push(p.clone()),
            None => {
                return Err(HubError::NoMatch {
                    reference: reference.into(),
                    what: format!("part {i} of {} of {first} is not in the repository", split.count),
                    listing: listing(files),
                });
            }
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quants_are_chosen_as_llama_cpp_chooses_them_and_ambiguity_is_an_error() {
        let files: Vec<String> = [
            "README.md",
            "m-Q4_K_M.gguf",
            "m-Q8_0.gguf",
            "mmproj-m-F16.gguf",
            "UD-Q4_K_XL/m-UD-Q4_K_XL-00001-of-00002.gguf",
            "UD-Q4_K_XL/m-UD-Q4_K_XL-00002-of-00002.gguf",
            "m-Q4_K_XL.gguf",
        ]
        .map(String::from)
        .to_vec();
        let pick = |s: Select| choose("r", &s, &files);
        assert_eq!(pick(Select::Quant(Some("q8_0".into()))).unwrap(), ["m-Q8_0.gguf"]);
        assert_eq!(pick(Select::Quant(None)).unwrap(), ["m-Q4_K_M.gguf"]);
        let e = pick(Select::Quant(Some("Q4_K_XL".into()))).unwrap_err().to_string();
        assert!(e.contains("2 model files match Q4_K_XL") && e.contains("m-Q4_K_XL.gguf"), "{e}");
        assert_eq!(
            pick(Select::Quant(Some("UD-Q4_K_XL".into()))).unwrap(),
            ["UD-Q4_K_XL/m-UD-Q4_K_XL-00001-of-00002.gguf", "UD-Q4_K_XL/m-UD-Q4_K_XL-00002-of-00002.gguf"]
        );
        let many: Vec<String> = (0..5000).map(|i| format!("m-{i}-Q5_K.gguf")).collect();
        let e = choose("r", &Select::Quant(Some("Q2_K".into())), &many).unwrap_err().to_string();
        assert!(e.contains("5000 GGUF model files") && e.ends_with("and 4980 more") && e.len() < 1000, "{e}");
        let e = pick(Select::Quant(Some("Q2_K".into()))).unwrap_err().to_string();
        assert!(e.contains("no model file matches Q2_K") && e.contains("4 GGUF model files") && e.contains("2 parts"), "{e}");
        assert!(pick(Select::File("UD-Q4_K_XL/m-UD-Q4_K_XL-00002-of-00002.gguf".into())).unwrap_err().to_string().contains("part 2 of 2"));
        let missing: Vec<String> = files.iter().filter(|f| !f.ends_with("-00002-of-00002.gguf")).cloned().collect();
        let e = choose("r", &Select::Quant(Some("UD-Q4_K_XL".into())), &missing).unwrap_err().to_string();
        assert!(e.contains("part 2 of 2"), "{e}");
        // An empty tag matches nothing (not every file with a `.` or a `-`).
        let e = pick(Select::Quant(Some(String::new()))).unwrap_err().to_string();
        assert!(e.contains("no model file matches"), "{e}");
        assert!(!has_quant("m-Q8_0.gguf", ""));
    }
}
