//! "Did you mean": the closest accepted word by edit distance, with one cut-off for
//! every message in ironpath (YAML keys, device arguments, drivers, commands, options).

/// Words longer than this (in characters) get no suggestion: a bound for hostile input.
pub const MAX_WORD: usize = 64;
/// Only this many candidates are considered: a bound for hostile input.
pub const MAX_CANDIDATES: usize = 500;

/// The largest edit distance still taken for a typo of a `len`-character word:
/// `max(2, len / 3)`.
pub const fn cut_off(len: usize) -> usize {
    let third = len / 3;
    if third > 2 {
        third
    } else {
        2
    }
}

/// The candidate closest to `word` by edit distance (Levenshtein, over characters), if it
/// is close enough to be a plausible typo: distance at most [`cut_off`]`(chars(word))`,
/// and less than the length of the longer of the two words (so `x` does not suggest
/// `id`). Ties go to the earlier candidate.
///
/// The search is bounded for hostile input: no suggestion for words longer than
/// [`MAX_WORD`] characters, and only the first [`MAX_CANDIDATES`] candidates are
/// considered.
pub fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let len = word.chars().count();
    if len > MAX_WORD {
        return None;
    }
    let limit = cut_off(len);
    let mut best: Option<(usize, &'a str)> = None;
    for cand in candidates.into_iter().take(MAX_CANDIDATES) {
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

/// `" (did you mean `x`?)"` when a candidate is [`closest`] to `word`, else `""`: the
/// tail of an "unknown ..." message.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    closest(word, candidates).map_or_else(String::new, |c| format!(" (did you mean `{c}`?)"))
}

/// Levenshtein distance over `char`s, two rows of memory.
pub fn edit_distance(a: &str, b: &str) -> usize {
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
        // The words the runtime and the apps suggest for.
        assert_eq!(closest("net_nul", ["net_null", "net_ring"]), Some("net_null"));
        assert_eq!(closest("zzzzzzzz", ["net_null", "net_ring"]), None);
        assert_eq!(closest("sise", ["size", "copy", "mac"]), Some("size"));
        assert_eq!(closest("--bursts", ["--burst", "--nb-cores"]), Some("--burst"));
        assert_eq!(closest("stat", ["start", "stop", "show"]), Some("start"));
    }

    #[test]
    fn cut_off_grows_with_the_word() {
        assert_eq!(cut_off(0), 2);
        assert_eq!(cut_off(8), 2);
        assert_eq!(cut_off(9), 3);
        assert_eq!(cut_off(30), 10);
    }

    #[test]
    fn bounded_for_hostile_input() {
        let long = "a".repeat(MAX_WORD + 1);
        assert_eq!(closest(&long, [long.as_str()]), None);
        let far = std::iter::repeat_n("zzzzzz", MAX_CANDIDATES);
        assert_eq!(closest("abd", far.clone().chain(["abc"])), None);
        assert_eq!(closest("abd", far.take(MAX_CANDIDATES - 1).chain(["abc"])), Some("abc"));
    }

    #[test]
    fn message_tail() {
        assert_eq!(did_you_mean("ipv", ["ipv4", "arp"]), " (did you mean `ipv4`?)");
        assert_eq!(did_you_mean("zzz", ["ipv4", "arp"]), "");
    }
}
