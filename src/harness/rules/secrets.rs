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

/// The owners among `tokens` of which `text` carries a piece of [`TOKEN_PIECE`] characters
/// past the token's prefix (`sess_`, §2.1), plain: one pass over the text whatever the number
/// of tokens (a run makes some 60), where [`revealed`]'s search of every encoding of every piece
/// would cost seconds. A token's encodings are not searched (docs/checks.md).
pub(crate) fn tokens_shown<O: Copy + Ord>(text: &str, tokens: &[(O, &str)]) -> Vec<O> {
    let mut pieces: std::collections::HashMap<&[u8], O> = std::collections::HashMap::new();
    for (owner, token) in tokens {
        let random = token.split_once('_').map_or(*token, |(_, r)| r).as_bytes();
        for piece in random.windows(TOKEN_PIECE) {
            pieces.insert(piece, *owner);
        }
    }
    if pieces.is_empty() {
        return Vec::new();
    }
    let found: std::collections::BTreeSet<O> =
        text.as_bytes().windows(TOKEN_PIECE).filter_map(|w| pieces.get(w).copied()).collect();
    found.into_iter().collect()
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
        assert_eq!(tokens_shown("{\"session\":\"sess_1PDZG9OPMSA2OQ2CTR5TN72VHM\"}", &tokens), vec![1]);
        assert_eq!(tokens_shown("reconnect with …MSA2OQ2CTR5T…", &tokens), vec![1]);
        assert!(tokens_shown("sess_ and 1PDZG9OPMSA is shorter than a piece", &tokens).is_empty());
        assert!(tokens_shown::<u8>("", &[]).is_empty());
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
