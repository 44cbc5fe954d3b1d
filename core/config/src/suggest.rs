//! "Did you mean": the closest accepted word by edit distance.

/// The candidate closest to `word` by edit distance (Levenshtein, over characters), if it is close
/// enough to be a plausible typo: distance at most `max(2, chars(word) / 3)`, and less than the
/// length of the longer of the two words (so `x` does not suggest `id`). Ties go to the earlier
/// candidate.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let len = word.chars().count();
    let limit = (len / 3).max(2);
    let mut best: Option<(usize, &'a str)> = None;
    for cand in candidates {
        let d = edit_distance(word, cand);
        let longer = len.max(cand.chars().count());
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
    closest(word, candidates).map_or_else(String::new, |c| format!(" (did you mean `{c}`?)"))
}

/// `"a, b, c"`, or `"(none)"` for an empty list.
pub(crate) fn list<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    let v: Vec<&str> = items.into_iter().collect();
    if v.is_empty() {
        "(none)".to_owned()
    } else {
        v.join(", ")
    }
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
    }
}
