//! "Did you mean": the closest accepted word by edit distance.

/// The candidate closest to `word` by edit distance (Levenshtein, over characters), if it is close
/// enough to be a plausible typo: distance at most `max(2, chars(word) / 3)`, and less than the
/// length of the longer of the two words (so `x` does not suggest `id`). Ties go to the earlier
/// candidate.
///
/// The search is bounded for hostile input: no suggestion for words longer than 64 characters,
/// and only the first 500 candidates are considered.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let len = word.chars().count();
    if len > MAX_SHOWN {
        return None;
    }
    let limit = (len / 3).max(2);
    let mut best: Option<(usize, &'a str)> = None;
    for cand in candidates.into_iter().take(500) {
        let cand_len = cand.chars().count();
        if cand_len.abs_diff(len) > limit {
            continue; // the distance is at least the difference in length
        }
        let d = edit_distance(word, cand);
        let longer = len.max(cand_len);
        if d <= limit && d < longer && best.is_none_or(|(bd, _)| d < bd) {
            best = Some((d, cand));
        }
    }
    best.map(|(_, c)| c)
}

/// Levenshtein distance over `char`s, two rows of memory.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let subst = prev[j] + usize::from(ca != cb);
            cur[j + 1] = subst.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// `" (did you mean `x`?)"` when a candidate is close to `word`, else `""`.
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
    fn distance() {
        assert_eq!(edit_distance("", ""), 0);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("rx_queue", "rx_queues"), 1);
        assert_eq!(edit_distance("é", "e"), 1);
    }

    #[test]
    fn suggests_only_close_words() {
        let keys = ["name", "driver", "rx_queues", "tx_queues", "mtu"];
        assert_eq!(closest("rx_queue", keys), Some("rx_queues"));
        assert_eq!(closest("drivr", keys), Some("driver"));
        assert_eq!(closest("mut", keys), Some("mtu"));
        assert_eq!(closest("completely_else", keys), None);
        assert_eq!(closest("x", ["id", "cpu"]), None);
        assert_eq!(closest("classfy", ["port_rx", "classify"]), Some("classify"));
        assert_eq!(closest("a", std::iter::empty()), None);
    }

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
