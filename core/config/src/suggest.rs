//! "Did you mean" (the search and its cut-off are `ironpath_util::suggest`'s, the one
//! for every message in ironpath) and how user text is shown in a one-line message.

pub use ironpath_util::suggest::closest;

/// `" (did you mean `x`?)"` when a candidate is close to `word`, else `""`; the candidate
/// is [`show`]n, as candidates may come from the file (node names).
pub(crate) fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(word, candidates).map_or_else(String::new, |c| format!(" (did you mean `{}`?)", show(c)))
}

/// Longest list printed in full by [`list`].
const MAX_LISTED: usize = 50;
/// Characters of a user's word printed by [`show`].
const MAX_SHOWN: usize = 64;

/// `"a, b, c"` (each [`show`]n, at most 50, then "and N more"), or `"(none)"` for an empty list.
pub(crate) fn list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let v: Vec<&str> = items.into_iter().collect();
    if v.is_empty() {
        return "(none)".to_owned();
    }
    let mut out: Vec<String> = v.iter().take(MAX_LISTED).map(|s| show(s)).collect();
    if v.len() > MAX_LISTED {
        out.push(format!("and {} more", v.len() - MAX_LISTED));
    }
    out.join(", ")
}

/// Text from the file, fit for a one-line message: control characters escaped (`\n`, `\u{1b}`)
/// and at most 64 characters, then `...`.
pub(crate) fn show(s: &str) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == MAX_SHOWN {
            out.push_str("...");
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists() {
        assert_eq!(list(["a", "b"]), "a, b");
        assert_eq!(list([]), "(none)");
        assert_eq!(did_you_mean("ipv", ["ipv4", "arp"]), " (did you mean `ipv4`?)");
        let many: Vec<String> = (0..60).map(|i| i.to_string()).collect();
        assert!(list(many.iter().map(String::as_str)).ends_with(", 49, and 10 more"));
    }

    #[test]
    fn shown_text_is_one_short_line() {
        assert_eq!(show("a\nb\u{1b}"), "a\\nb\\u{1b}");
        assert_eq!(show(&"x".repeat(100)), format!("{}...", "x".repeat(64)));
        assert_eq!(show("é ok"), "é ok");
    }
}
