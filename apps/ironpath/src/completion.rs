//! What the interactive shells (`testpmd -i`, `ironpath ctl`) offer on Tab: each
//! shell has its own command grammar (patterns such as `show port info <port|all>`)
//! and tokens; [`forms`] and [`offer`] walk it into an [`Offer`], and
//! [`candidates`] turns that into rustyline's list.

use rustyline::completion::Pair;

/// What Tab offers at a point of a line.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Offer {
    /// Byte offset of the word being completed.
    pub start: usize,
    /// Words that may come next and begin with what is typed, each once, in
    /// grammar order.
    pub words: Vec<String>,
    /// Where no word can be offered: `<ARG>: usage` lines of the commands whose
    /// next argument is typed freely (a number, a MAC address ...).
    pub usage: Vec<String>,
}

/// A pattern's forms: `[...]` at the end adds the form without it (nested ones
/// too), so `start [tx_first [<N>]]` is `start`, `start tx_first`, `start tx_first
/// <N>`; each word made a token by `parse`.
pub fn forms<T: Clone>(pattern: &'static str, parse: impl Fn(&'static str) -> T) -> Vec<Vec<T>> {
    let mut out = Vec::new();
    let mut toks = Vec::new();
    for w in pattern.split(' ') {
        if w.starts_with('[') {
            out.push(toks.clone());
        }
        toks.push(parse(w.trim_start_matches('[').trim_end_matches(']')));
    }
    out.push(toks);
    out
}

/// What may follow the words typed, by one token of one grammar line.
pub enum Next {
    /// These words.
    Words(Vec<String>),
    /// A free argument: its usage line.
    Usage(String),
    /// Nothing to offer.
    Nothing,
}

/// What Tab offers with `line` typed up to the cursor: for every form (`forms_of`)
/// of every grammar line whose tokens `accept` the words typed before the cursor's
/// word, what its next token offers (`next`): the words beginning with the word
/// being typed, each once, or usage lines where no word can be offered at all.
pub fn offer<G, T: Copy>(
    line: &str,
    grammar: &[G],
    forms_of: impl Fn(&G) -> Vec<Vec<T>>,
    accepts: impl Fn(T, &str) -> bool,
    next: impl Fn(&G, T) -> Next,
) -> Offer {
    let start = line.rfind(char::is_whitespace).map_or(0, |i| i + 1);
    let partial = &line[start..];
    let typed: Vec<&str> = line[..start].split_whitespace().collect();
    let mut offer = Offer { start, ..Offer::default() };
    for g in grammar {
        for form in forms_of(g) {
            let Some(&tok) = form.get(typed.len()) else { continue };
            if !typed.iter().zip(&form).all(|(w, &t)| accepts(t, w)) {
                continue;
            }
            match next(g, tok) {
                Next::Words(words) => {
                    for w in words.into_iter().filter(|w| w.starts_with(partial)) {
                        if !offer.words.contains(&w) {
                            offer.words.push(w);
                        }
                    }
                }
                Next::Usage(u) => {
                    if !offer.usage.contains(&u) {
                        offer.usage.push(u);
                    }
                }
                Next::Nothing => {}
            }
        }
    }
    if !offer.words.is_empty() {
        offer.usage.clear();
    }
    offer
}

/// rustyline's candidates for `offer`, made on `line` (typed up to the cursor):
/// each word followed by a space; usage lines are listed, never inserted (each
/// leaves the word as typed). A single usage line gets a second line, as
/// rustyline takes a lone candidate without listing it.
pub fn candidates(offer: Offer, line: &str) -> (usize, Vec<Pair>) {
    let partial = &line[offer.start..];
    let mut c: Vec<Pair> =
        offer.words.into_iter().map(|w| Pair { display: w.clone(), replacement: format!("{w} ") }).collect();
    for u in offer.usage {
        c.push(Pair { display: format!(" {u}"), replacement: partial.to_string() });
    }
    if c.len() == 1 && c[0].replacement == partial {
        c.push(Pair { display: " (no word to offer: type the argument)".into(), replacement: partial.to_string() });
    }
    (offer.start, c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_inserted_and_a_lone_usage_is_listed_not_inserted() {
        let words = Offer { start: 4, words: vec!["port".into(), "fwd".into()], usage: vec![] };
        let (start, c) = candidates(words, "set p");
        assert_eq!(start, 4);
        assert_eq!(c.iter().map(|p| p.replacement.as_str()).collect::<Vec<_>>(), ["port ", "fwd "]);
        let usage = Offer { start: 10, words: vec![], usage: vec!["<N>: set burst N".into()] };
        let (_, c) = candidates(usage, "set burst 3");
        assert_eq!(c.len(), 2, "a second line keeps rustyline from inserting the usage");
        assert!(c.iter().all(|p| p.replacement == "3"), "{:?}", c.iter().map(|p| &p.replacement).collect::<Vec<_>>());
    }
}
