//! What of a URL may be shown or recorded: one rule for every address a
//! user gives (`ask`'s server, the hub's `HF_ENDPOINT`), since a proxy's
//! `?token=` or a `user:password@` is as secret as an API key.

/// `url` without the `user:password@` of its authority and without its
/// query and fragment (each replaced by `?…` or `#…`, so that the reader
/// sees there was one), for anything shown or recorded: messages, hints,
/// run files, reports.
pub fn shown_url(url: &str) -> String {
    let (head, rest) = match url.split_once("://") {
        Some((scheme, rest)) => {
            let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
            let rest = authority.rfind('@').map_or(rest, |at| &rest[at + 1..]);
            (format!("{scheme}://"), rest)
        }
        None => (String::new(), url),
    };
    match rest.find(['?', '#']) {
        Some(i) => format!("{head}{}{}…", &rest[..i], &rest[i..=i]),
        None => format!("{head}{rest}"),
    }
}

/// The secrets `url` carries (its password and user name, its query's and
/// fragment's values, decoded and as written), for replacing wherever a
/// message quotes them apart from the URL (a server echoing its query, a
/// redirect's target). Values under 4 characters are left: replacing them
/// would garble the words around them, and they guard nothing.
pub(crate) fn secrets_of(url: &str) -> Vec<String> {
    let Ok(u) = url::Url::parse(url) else { return Vec::new() };
    let mut out: Vec<String> = vec![u.username().to_string()];
    out.extend(u.password().map(str::to_string));
    for part in [u.query(), u.fragment()].into_iter().flatten() {
        for pair in part.split('&') {
            let raw = pair.split_once('=').map_or(pair, |(_, v)| v);
            out.push(raw.to_string());
        }
        out.extend(url::form_urlencoded::parse(part.as_bytes()).map(|(_, v)| v.into_owned()));
    }
    out.retain(|s| s.chars().count() >= 4);
    // The longest first, so that a secret holding another is replaced whole.
    out.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    out.dedup();
    out
}

/// `msg` with `url` shown as [`shown_url`] shows it and each of its
/// [`secrets_of`] replaced by `…`.
pub(crate) fn redact(msg: &str, url: &str) -> String {
    let mut msg = msg.replace(url, &shown_url(url));
    for s in secrets_of(url) {
        msg = msg.replace(&s, "…");
    }
    msg
}

/// Whether `c` acts on a terminal instead of showing: a control character
/// but the tab (it moves the cursor, restyles), or one that reorders or
/// hides text (bidi controls, zero-width characters, the byte-order mark),
/// with which `evil\u{202e}fdp.gguf` reads as another name.
fn acts(c: char) -> bool {
    (c.is_control() && c != '\t')
        || matches!(
            c,
            '\u{ad}'
                | '\u{61c}'
                | '\u{180e}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{2069}'
                | '\u{feff}'
        )
}

/// `text` for a terminal: each character that would act on it instead of
/// showing escaped (`\r`, `\u{1b}`, `\u{202e}`); other text as it is. The
/// one rule for what a server or a model sends and a message or a diff
/// shows (run files keep the bytes).
pub(crate) fn for_terminal(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(acts) {
        return std::borrow::Cow::Borrowed(text);
    }
    text.chars().map(|c| if acts(c) { c.escape_debug().to_string() } else { c.to_string() }).collect::<String>().into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_queries_and_fragments_are_never_shown() {
        assert_eq!(shown_url("http://u:p%40x@h:1/a?b=c@d"), "http://h:1/a?…");
        assert_eq!(shown_url("http://h:1/a@b"), "http://h:1/a@b");
        assert_eq!(shown_url("https://h/v1?key=sekrit#t=x"), "https://h/v1?…");
        assert_eq!(shown_url("https://h/v1#access_token=sekrit"), "https://h/v1#…");
        assert_eq!(shown_url("not a url"), "not a url");
        let msg = redact("GET http://h/x?key=sekrit123 failed: the server said key sekrit123 is wrong", "http://h/x?key=sekrit123");
        assert_eq!(msg, "GET http://h/x?… failed: the server said key … is wrong");
        assert_eq!(for_terminal("a\u{202e}b\u{200b}\u{2066}\u{feff}\u{200e}c\té"), "a\\u{202e}b\\u{200b}\\u{2066}\\u{feff}\\u{200e}c\té");
        assert_eq!(for_terminal("\r\u{1b}"), "\\r\\u{1b}");
        assert_eq!(secrets_of("http://u:pass%20word@h/?token=a%2Fbcd&x=1"), ["pass%20word", "a%2Fbcd", "a/bcd"]);
    }
}
