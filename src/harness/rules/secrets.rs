//! One rule for secrets over every byte received (§5 item 2: a key stays on its client's
//! backend): an API key reaches no one but its client. The transport asks [`revealed`] of each
//! answer (its headers and whole body, before any redaction) and of each delivery, and keeps
//! only whose keys they carried, never the text; the rule over the record
//! (`checks::http`'s `auth.secret-stays-with-owner`) fails every one that reached another.

/// The owners among `keys` whose key `text` carries, whole or a piece of it, plain, escaped or
/// encoded ([`crate::harness::vocab::redact::reveals`]), once every occurrence of what the
/// request itself sent (`sent`: its credential, echoed back to its sender, is no leak) is taken
/// out. A key equal to what was sent is its sender's own and is not searched.
pub(crate) fn revealed<O: Copy>(text: &str, sent: Option<&str>, keys: &[(O, &str)]) -> Vec<O> {
    let sent = sent.map(|s| s.strip_prefix("Bearer ").unwrap_or(s).trim()).filter(|s| !s.is_empty());
    let text = match sent {
        Some(s) => text.replace(s, " "),
        None => text.to_string(),
    };
    keys.iter()
        .filter(|(_, key)| !key.is_empty() && Some(*key) != sent)
        .filter(|(_, key)| crate::harness::vocab::redact::reveals(&text, key))
        .map(|(owner, _)| *owner)
        .collect()
}

/// Characters of a widget token that make a piece of it ([`tokens_shown`]).
pub(crate) const TOKEN_PIECE: usize = 12;

/// The owners other than `sender` among `tokens` (every widget token the run was given, with
/// its owner) of which `text` carries a piece of [`TOKEN_PIECE`] characters, plain: one pass
/// over the text whatever the number of tokens (a run makes some 60), where [`revealed`]'s
/// search of every encoding of every piece would cost seconds. A piece that two tokens share
/// is structure, not secret (a JWT's header, a claim's name, a fixed prefix such as `sess_`),
/// and is not searched; nor is anything while fewer than two tokens are known, since the
/// structure cannot be told then. A token's encodings are not searched (docs/checks.md).
pub(crate) fn tokens_shown<O: Copy + Ord>(text: &str, tokens: &[(O, &str)], sender: Option<O>) -> Vec<O> {
    if tokens.len() < 2 {
        return Vec::new();
    }
    let mut pieces: std::collections::HashMap<&[u8], (O, usize)> = std::collections::HashMap::new();
    for (owner, token) in tokens {
        let mut own = std::collections::HashSet::new();
        for piece in token.as_bytes().windows(TOKEN_PIECE).filter(|p| own.insert(*p)) {
            pieces.entry(piece).and_modify(|(_, n)| *n += 1).or_insert((*owner, 1));
        }
    }
    pieces.retain(|_, (owner, n)| *n == 1 && Some(*owner) != sender);
    if pieces.is_empty() {
        return Vec::new();
    }
    let found: std::collections::BTreeSet<O> =
        text.as_bytes().windows(TOKEN_PIECE).filter_map(|w| pieces.get(w).map(|(o, _)| *o)).collect();
    found.into_iter().collect()
}

/// The run's widget tokens with their owners, and the search [`tokens_shown`] makes for them
/// built once per token learned rather than once per answer: an automaton of every piece that
/// one token alone holds, which scans a text in one pass (issue 72: building the pieces' map
/// for each of some 500 answers was a third of a sandbox run's processor time).
pub(crate) struct TokenSearch<O> {
    tokens: Vec<(O, String)>,
    /// The automaton of the unique pieces, and each pattern's owner; `None` until the first
    /// search after a token was added.
    built: Option<(aho_corasick::AhoCorasick, Vec<O>)>,
}

impl<O: Copy + Ord + std::hash::Hash> Default for TokenSearch<O> {
    fn default() -> Self {
        Self { tokens: Vec::new(), built: None }
    }
}

impl<O: Copy + Ord + std::hash::Hash> TokenSearch<O> {
    /// How many tokens it knows.
    pub(crate) fn len(&self) -> usize {
        self.tokens.len()
    }

    /// Learns `owner`'s `token`.
    pub(crate) fn add(&mut self, owner: O, token: String) {
        self.tokens.push((owner, token));
        self.built = None;
    }

    /// What [`tokens_shown`] says of `text`, with the automaton built once per token set.
    pub(crate) fn shown(&mut self, text: &str, sender: Option<O>) -> Vec<O> {
        if self.tokens.len() < 2 {
            return Vec::new();
        }
        if self.built.is_none() {
            self.built = unique_pieces(&self.tokens);
        }
        let Some((automaton, owners)) = &self.built else {
            let known: Vec<(O, &str)> = self.tokens.iter().map(|(o, t)| (*o, t.as_str())).collect();
            return tokens_shown(text, &known, sender);
        };
        let found: std::collections::BTreeSet<O> = automaton
            .find_overlapping_iter(text)
            .map(|m| owners[m.pattern().as_usize()])
            .filter(|owner| Some(*owner) != sender)
            .collect();
        found.into_iter().collect()
    }
}

/// The automaton of the [`TOKEN_PIECE`]-byte pieces that one token alone holds, with each
/// piece's owner (`None` only past the automaton's size limits, far beyond a run's tokens).
fn unique_pieces<O: Copy + std::hash::Hash + Eq>(
    tokens: &[(O, String)],
) -> Option<(aho_corasick::AhoCorasick, Vec<O>)> {
    let mut pieces: std::collections::HashMap<&[u8], (O, usize)> = std::collections::HashMap::new();
    for (owner, token) in tokens {
        let mut own = std::collections::HashSet::new();
        for piece in token.as_bytes().windows(TOKEN_PIECE).filter(|p| own.insert(*p)) {
            pieces.entry(piece).and_modify(|(_, n)| *n += 1).or_insert((*owner, 1));
        }
    }
    let (patterns, owners): (Vec<&[u8]>, Vec<O>) =
        pieces.into_iter().filter(|(_, (_, n))| *n == 1).map(|(piece, (owner, _))| (piece, owner)).unzip();
    let automaton = aho_corasick::AhoCorasick::builder()
        .kind(Some(aho_corasick::AhoCorasickKind::ContiguousNFA))
        .build(patterns)
        .ok()?;
    Some((automaton, owners))
}

/// The text a rule searches of an exchange: every header (`name: value`, one a line), then the
/// body.
pub(crate) fn searched<'a>(headers: impl IntoIterator<Item = (&'a str, &'a str)>, body: &str) -> String {
    let mut text = String::new();
    for (name, value) in headers {
        text.push_str(name);
        text.push_str(": ");
        text.push_str(value);
        text.push('\n');
    }
    text.push_str(body);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIRST: &str = "acme_live_Q3xk9PzLm2Vt8RwYb4NcJ7hDs1";
    const SECOND: &str = "acme_live_Zr5Tq8Wm3Kx6Lp1Vn9Bc2Hj4Gd";

    #[test]
    fn a_token_shows_by_a_piece_of_it_and_only_so() {
        let tokens = [(1, "sess_1PDZG9OPMSA2OQ2CTR5TN72VHM"), (2, "sess_AB3DE5GH7JK9MN1PQ3RS5TU7VW")];
        let text = "{\"session\":\"sess_1PDZG9OPMSA2OQ2CTR5TN72VHM\"}";
        assert_eq!(tokens_shown(text, &tokens, None), vec![1]);
        assert!(tokens_shown(text, &tokens, Some(1)).is_empty(), "its owner's own");
        assert_eq!(tokens_shown("reconnect with …MSA2OQ2CTR5T…", &tokens, Some(2)), vec![1]);
        assert!(tokens_shown("sess_ and 1PDZG9OPMSA is shorter than a piece", &tokens, None).is_empty());
        assert!(tokens_shown(text, &tokens[..1], None).is_empty(), "one token: its structure unknown");
        // Two JWTs share their header: a third party's token with the same header shows nothing.
        let header = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9";
        let (a, b) = (
            format!("{header}.eyJzdWIiOiJBQUFBIn0.c2lnbmF0dXJlQQ"),
            format!("{header}.eyJzdWIiOiJCQkJCIn0.c2lnbmF0dXJlQg"),
        );
        let jwts = [(1, a.as_str()), (2, b.as_str())];
        assert!(tokens_shown(&format!("{header}.eyJzdWIiOiJDQ0NDIn0.other"), &jwts, Some(2)).is_empty());
    }

    #[test]
    fn the_built_search_says_what_the_plain_one_says() {
        let tokens = [
            (1, "sess_1PDZG9OPMSA2OQ2CTR5TN72VHM"),
            (2, "sess_AB3DE5GH7JK9MN1PQ3RS5TU7VW"),
            (3, "sess_ZZ3DE5GH7JK9MN1PQ3RS5TU7VW"),
        ];
        let mut search = TokenSearch::default();
        for (owner, token) in tokens {
            search.add(owner, token.to_string());
        }
        for text in [
            "x sess_1PDZG9OPMSA2OQ2CTR5TN72VHM y",
            "…MSA2OQ2CTR5T… and 7JK9MN1PQ3RS5TU7",
            "sess_AB3DE5GH7JK9",
            "nothing",
        ] {
            for sender in [None, Some(1), Some(2)] {
                assert_eq!(search.shown(text, sender), tokens_shown(text, &tokens, sender), "{text} {sender:?}");
            }
        }
    }

    #[test]
    fn a_key_echoed_to_its_sender_is_no_leak_another_is() {
        let keys = [(1, FIRST), (2, SECOND)];
        let echo = format!("{{\"error\":\"bad key {FIRST}\"}}");
        assert!(revealed(&echo, Some(&format!("Bearer {FIRST}")), &keys).is_empty());
        let hint = format!("unknown key; did you mean {}…?", &SECOND[..20]);
        assert_eq!(revealed(&hint, Some("Bearer acme_live_nope"), &keys), vec![2]);
        let header = searched([("x-api-key", SECOND)], "{}");
        assert_eq!(revealed(&header, None, &keys), vec![2]);
        // A near miss sent (the key short of its last character) and echoed is the sender's own.
        let near = &FIRST[..FIRST.len() - 1];
        assert!(revealed(&format!("no such key {near}"), Some(&format!("Bearer {near}")), &keys).is_empty());
    }
}
