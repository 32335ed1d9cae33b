//! Keeps secrets out of everything the harness prints: API keys and widget tokens (§5.2, §5.3),
//! in every form a target may echo them (JSON-escaped, percent-encoded), and every piece of them
//! (a partial echo, or what a cut leaves: text is redacted before and after it is cut, [`Redactor::cut`]).

use super::unescape::Decoded;
use aho_corasick::{AhoCorasick, AhoCorasickKind};
use std::sync::{Arc, OnceLock, RwLock};

/// Shortest piece of a secret that is redacted on its own.
const MIN_FRAGMENT: usize = 8;
/// Length of a run of a secret's characters that is never taken for part of an ordinary word.
const NO_WORD: usize = 12;

/// Replaces every secret of one run, and anything shaped like a widget token, with a
/// placeholder. Clones share the run's secrets (the HTTP client, the receiver and the HAR
/// recorder hold one each); two runs in one process never see each other's.
#[derive(Clone, Default)]
pub struct Redactor {
    secrets: Arc<RwLock<Known>>,
}

/// The forms of every secret, longest first, and the automaton that finds their pieces (built
/// on the first redaction after a secret is added).
#[derive(Default)]
struct Known {
    forms: Vec<String>,
    pieces: OnceLock<Pieces>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secrets themselves.
        f.debug_struct("Redactor").finish_non_exhaustive()
    }
}

impl Redactor {
    /// A redactor that knows `secrets` (empty ones are skipped): for messages written before a
    /// run has its own (a setup error that may echo a key).
    pub fn of<'a>(secrets: impl IntoIterator<Item = &'a str>) -> Self {
        let redactor = Self::default();
        for secret in secrets {
            redactor.add(secret);
        }
        redactor
    }

    /// Remembers a widget token. One with the `sess_` prefix (§2.1) needs no entry: whatever
    /// follows the prefix is always redacted. Others are kept like a key. (A run makes a token
    /// per connection; every entry costs each redaction, and each request's description is
    /// redacted.)
    pub fn add_token(&self, token: &str) {
        if !token.starts_with(crate::spec::prefix::WIDGET_TOKEN) {
            self.add(token);
        }
    }

    /// Remembers a secret, with its encoded forms; empty strings are ignored.
    pub fn add(&self, secret: &str) {
        if secret.is_empty() {
            return;
        }
        let mut known = self.secrets.write().unwrap_or_else(|e| e.into_inner());
        for form in forms(secret) {
            if !known.forms.contains(&form) {
                known.forms.push(form);
            }
        }
        // Longest first, so that a secret containing another is replaced whole.
        known.forms.sort_by_key(|s| std::cmp::Reverse(s.len()));
        known.pieces = OnceLock::new();
    }

    pub fn redact(&self, text: &str) -> String {
        let known = self.secrets.read().unwrap_or_else(|e| e.into_inner());
        let secrets = &known.forms;
        let pieces = known.pieces.get_or_init(|| Pieces::of(secrets.iter().map(|s| (s.as_str(), public_part(s)))));
        let mut out = text.to_string();
        for secret in secrets.iter() {
            if !out.contains(secret.as_str()) {
                continue;
            }
            out = if secret.chars().count() < MIN_FRAGMENT {
                // A short secret is often a word (`test`): replaced only where it stands alone,
                // so that the text around it is not garbled ("tested" stays).
                replace_words(&out, secret)
            } else {
                out.replace(secret.as_str(), "[redacted]")
            };
        }
        redact_widget_tokens(&redact_cut_edges(&redact_fragments(&out, pieces, secrets), secrets))
    }

    /// `text` redacted, then cut to its first `max` characters (`…` marks a cut), then redacted
    /// again: a cut that ends inside a secret leaves a piece of it, which goes too.
    pub fn cut(&self, text: &str, max: usize) -> String {
        // Only the start can reach the output: a secret that begins in it ends within this window.
        let window: String = text.chars().take(max + self.longest()).collect();
        self.redact(&shorten(&self.redact(&window), max))
    }

    /// `text` redacted, then cut to its last `max` characters (`…` marks a cut), then redacted
    /// again. (Only the tests cut so: the driver's tail is cut by [`shorten_start`] and redacted
    /// whole.)
    #[cfg(test)]
    pub fn cut_start(&self, text: &str, max: usize) -> String {
        let skip = text.chars().count().saturating_sub(max + self.longest());
        let window: String = text.chars().skip(skip).collect();
        self.redact(&shorten_start(&self.redact(&window), max))
    }

    /// Characters of the longest known secret.
    fn longest(&self) -> usize {
        let known = self.secrets.read().unwrap_or_else(|e| e.into_inner());
        known.forms.iter().map(|s| s.chars().count()).max().unwrap_or(0)
    }
}

/// Whether a secret is too short to be told apart from ordinary text: it is redacted only as a
/// whole word, and the run says so in a note (`RunConfig::short_keys_note`).
pub(crate) fn is_short(secret: &str) -> bool {
    !secret.is_empty() && secret.chars().count() < MIN_FRAGMENT
}

/// `text` with every occurrence of `word` that no letter, digit or `_` touches replaced.
fn replace_words(text: &str, word: &str) -> String {
    let is_word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(word) {
        let before = rest[..at].chars().next_back().or_else(|| out.chars().next_back());
        let after = rest[at + word.len()..].chars().next();
        out.push_str(&rest[..at]);
        if is_word(before) || is_word(after) {
            out.push_str(word);
        } else {
            out.push_str("[redacted]");
        }
        rest = &rest[at + word.len()..];
    }
    out.push_str(rest);
    out
}

/// `text` cut to its first `max` characters, `…` marking a cut. It knows no secret: for text
/// that a run's [`Redactor`] redacts whole before it is shown, which also takes a piece of a
/// secret that the cut left before its `…`.
pub(crate) fn shorten(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    format!("{}…", text.chars().take(max).collect::<String>())
}

/// `text` cut to its last `max` characters, `…` marking a cut (see [`shorten`]).
pub(crate) fn shorten_start(text: &str, max: usize) -> String {
    let count = text.chars().count();
    if count <= max {
        return text.to_string();
    }
    format!("…{}", text.chars().skip(count - max).collect::<String>())
}

/// Replaces what a cut left of a secret beside its `…`: the start of a secret (beyond its
/// public prefix) just before a `…`, or the end of one just after it. Shorter than
/// [`MIN_FRAGMENT`], such a piece escapes [`redact_fragments`].
fn redact_cut_edges(text: &str, secrets: &[String]) -> String {
    if !text.contains('…') || secrets.is_empty() {
        return text.to_string();
    }
    // A short secret's pieces are ordinary text (see `is_short`).
    let secrets: Vec<&String> = secrets.iter().filter(|s| !is_short(s)).collect();
    let mut out = String::with_capacity(text.len());
    let pieces: Vec<&str> = text.split('…').collect();
    for (i, piece) in pieces.iter().enumerate() {
        let mut piece = piece.to_string();
        if i + 1 < pieces.len() {
            // The start of a secret, then the cut.
            let left = secrets
                .iter()
                .flat_map(|s| (public_part(s) + 1..s.len()).filter_map(move |k| s.get(..k)))
                .filter(|start| piece.ends_with(start))
                .map(str::len)
                .max();
            if let Some(len) = left {
                piece.truncate(piece.len() - len);
                piece.push_str("[redacted]");
            }
        }
        if i > 0 {
            // The cut, then the end of a secret (three characters or more: fewer would hide
            // ordinary text after a `…`, and tell nothing).
            let right = secrets
                .iter()
                .flat_map(|s| (3..s.len().saturating_sub(public_part(s))).filter_map(move |k| s.get(s.len() - k..)))
                .filter(|end| piece.starts_with(end))
                .map(str::len)
                .max();
            if let Some(len) = right {
                piece = format!("[redacted]{}", &piece[len..]);
            }
        }
        if i > 0 {
            out.push('…');
        }
        out.push_str(&piece);
    }
    out
}

/// A secret as a target may echo it: as is, JSON-escaped (with `/` escaped or not), and
/// percent-encoded (upper or lower hex, `+` or `%20` for a space).
fn forms(secret: &str) -> Vec<String> {
    let json = serde_json::to_string(secret).unwrap_or_default();
    let json = json.trim_matches('"').to_string();
    let mut percent = String::new();
    for b in secret.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            percent.push(b as char);
        } else {
            percent.push_str(&format!("%{b:02X}"));
        }
    }
    let lower = lower_hex(&percent);
    let plus = percent.replace("%20", "+");
    let mut all =
        vec![secret.to_string(), json.replace('/', "\\/"), json, lower, plus.clone(), lower_hex(&plus), percent];
    all.dedup();
    all
}

/// `%2F` → `%2f`, the rest unchanged.
fn lower_hex(percent: &str) -> String {
    let mut out = String::with_capacity(percent.len());
    let mut hex_left = 0;
    for c in percent.chars() {
        if c == '%' {
            hex_left = 2;
            out.push(c);
        } else if hex_left > 0 {
            hex_left -= 1;
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// Replaces every piece of a secret of [`MIN_FRAGMENT`] characters or more (a target may echo
/// part of a key, or a cut may leave part of one). A piece made only of the key's public
/// prefix (up to its last `_`, §5.2) is left: the harness itself forges keys with it. A secret
/// echoed with some characters escaped is found in the text decoded ([`Decoded`]), and its
/// escapes are hidden with it.
fn redact_fragments(text: &str, pieces: &Pieces, secrets: &[String]) -> String {
    let mut hidden = pieces.hidden(text);
    keep_words(text, &mut hidden);
    if let Some(decoded) = Decoded::of(text) {
        let mut found = pieces.hidden(&decoded.text);
        keep_words(&decoded.text, &mut found);
        // A whole secret is hidden wherever it stands, whatever touches it.
        for secret in secrets.iter().filter(|s| !is_short(s)) {
            for (at, _) in decoded.text.match_indices(secret.as_str()) {
                found[at..at + secret.len()].iter_mut().for_each(|h| *h = true);
            }
        }
        decoded.map_back(&found, &mut hidden);
    }
    if !hidden.contains(&true) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut in_secret = false;
    for (at, c) in text.char_indices() {
        match (hidden[at], in_secret) {
            (true, false) => out.push_str("[redacted]"),
            (false, _) => out.push(c),
            (true, true) => {}
        }
        in_secret = hidden[at];
    }
    out
}

/// Unhides each run of `hidden` bytes that a letter or digit touches on either side: a piece of
/// a key inside a longer word is that word ("interrupted" beside a key holding "interrupt…"),
/// not an echo, which stands apart (quoted, after a space, beside a cut). A whole key is
/// replaced wherever it stands ([`Redactor::redact`]), and so is a run of [`NO_WORD`] bytes or
/// more: that many characters of a secret in a row are an echo whatever touches them (an escape
/// this redactor does not decode may end in a letter).
fn keep_words(text: &str, hidden: &mut [bool]) {
    let bytes = text.as_bytes();
    let word = |at: usize| bytes.get(at).is_some_and(|b| b.is_ascii_alphanumeric() || *b >= 0x80);
    let mut start = 0;
    while start < hidden.len() {
        if !hidden[start] {
            start += 1;
            continue;
        }
        let end = (start..hidden.len()).find(|&i| !hidden[i]).unwrap_or(hidden.len());
        if end - start < NO_WORD && ((start > 0 && word(start - 1)) || word(end)) {
            hidden[start..end].iter_mut().for_each(|h| *h = false);
        }
        start = end;
    }
}

/// Bytes of a secret's form that are its public prefix: up to its last `_` (§5.2).
fn public_part(form: &str) -> usize {
    form.rfind('_').map_or(0, |at| at + 1)
}

/// Every piece of [`MIN_FRAGMENT`] bytes of some forms, each form given with the length of its
/// public prefix (pieces only of that are left), found in one pass over a text: a text is
/// scanned once, not once per piece (a run redacts every request, answer and report).
struct Pieces(Option<AhoCorasick>);

impl Pieces {
    fn of<'a>(forms: impl IntoIterator<Item = (&'a str, usize)>) -> Self {
        let mut all = std::collections::BTreeSet::new();
        for (form, public) in forms {
            for start in (0..=form.len().saturating_sub(MIN_FRAGMENT)).filter(|s| s + MIN_FRAGMENT > public) {
                if let Some(piece) = form.get(start..start + MIN_FRAGMENT) {
                    all.insert(piece);
                }
            }
        }
        // Rebuilt whenever a secret is added (`security.near-miss-key` adds one per request it
        // sends): a contiguous NFA builds far faster than a DFA and still scans in one pass.
        let built = AhoCorasick::builder().kind(Some(AhoCorasickKind::ContiguousNFA)).build(all);
        Self(built.ok())
    }

    /// Which bytes of `text` belong to a piece (pieces may overlap). Should the automaton not
    /// have been built (only past its size limits, far beyond a run's few keys), every byte is:
    /// the redactor fails closed.
    fn hidden(&self, text: &str) -> Vec<bool> {
        let Some(automaton) = &self.0 else { return vec![true; text.len()] };
        let mut hidden = vec![false; text.len()];
        for found in automaton.find_overlapping_iter(text) {
            hidden[found.range()].iter_mut().for_each(|h| *h = true);
        }
        hidden
    }
}

/// Whether `text` carries `secret`, or a piece of it of `MIN_FRAGMENT` characters or more
/// beyond its public prefix: as the redactor finds them (plain, JSON-escaped, percent-encoded),
/// and also base64, base64url and hex encoded (for judging what a target hands a frontend,
/// §5.2/§5.3; the redactor itself does not search those, to keep redaction cheap).
pub(crate) fn reveals(text: &str, secret: &str) -> bool {
    if secret.is_empty() {
        return false;
    }
    let search = Revealing::of(secret);
    search.whole.iter().any(|form| text.contains(form.as_str())) || search.pieces.hidden(text).contains(&true)
}

/// What [`reveals`] searches for one secret: its whole forms, and the automaton of the pieces
/// of every form and encoding. Built once per secret and kept: a run asks it of every answer and
/// delivery (some 700 texts) with the same two keys, and building the automaton each time was
/// the largest single cost of a sandbox run's processor time (issue 72).
struct Revealing {
    whole: Vec<String>,
    pieces: Pieces,
}

impl Revealing {
    /// The search for `secret`, built on its first use; at most [`Self::KEPT`] are kept (a run
    /// has a few keys; a long-lived library user starts afresh past that).
    fn of(secret: &str) -> Arc<Self> {
        static BUILT: OnceLock<std::sync::Mutex<std::collections::HashMap<String, Arc<Revealing>>>> = OnceLock::new();
        let mut built = BUILT.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
        if let Some(search) = built.get(secret) {
            return Arc::clone(search);
        }
        if built.len() >= Self::KEPT {
            built.clear();
        }
        let search = Arc::new(Self::build(secret));
        built.insert(secret.to_string(), Arc::clone(&search));
        search
    }

    const KEPT: usize = 64;

    fn build(secret: &str) -> Self {
        let mut all: Vec<(String, usize)> = forms(secret)
            .into_iter()
            .map(|form| {
                let public = public_part(&form);
                (form, public)
            })
            .collect();
        let whole = all.iter().map(|(form, _)| form.clone()).collect();
        let public = public_part(secret);
        let bytes = secret.as_bytes();
        // A piece that starts at byte `a` encodes as a run of base64 of `secret[a % 3..]`; its
        // first `shown` characters encode only the public prefix.
        for shift in 0..3.min(bytes.len()) {
            let shown = public.saturating_sub(shift) * 4 / 3;
            for alphabet in [BASE64, BASE64URL] {
                all.push((base64(&bytes[shift..], alphabet), shown));
            }
        }
        let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
        all.push((hex.to_ascii_uppercase(), 2 * public));
        all.push((hex, 2 * public));
        // A piece that is judged a leak holds MIN_FRAGMENT characters past the public prefix, not
        // the prefix and one more: `ins_artisan_demo` beside a key `artisan_d…` is the
        // institution's id, not an echo (the redactor, which only hides, still takes those).
        let pieces = Pieces::of(all.iter().map(|(f, p)| (f.as_str(), *p + MIN_FRAGMENT - 1)));
        Self { whole, pieces }
    }
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const BASE64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// `bytes` in base64 with `alphabet`, without padding.
fn base64(bytes: &[u8], alphabet: &[u8; 64]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..=chunk.len() {
            out.push(alphabet[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// Widget tokens carry `sess_` (§2.1): whatever follows the prefix is replaced.
fn redact_widget_tokens(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(crate::spec::prefix::WIDGET_TOKEN) {
        let after = at + crate::spec::prefix::WIDGET_TOKEN.len();
        out.push_str(&rest[..after]);
        let tail = &rest[after..];
        let token_len =
            tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')).unwrap_or(tail.len());
        if token_len > 0 {
            out.push_str("[redacted]");
        }
        rest = &tail[token_len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// One automaton finds exactly the bytes that a search for each piece on its own,
        /// at every position, finds.
        #[test]
        fn pieces_are_found_as_a_search_for_each_would(
            secret in "[a-z]{2,5}_[A-Za-z0-9%]{8,24}",
            text in proptest::collection::vec((0usize..40, 0usize..12, "[ -~]{0,6}"), 0..8),
        ) {
            let text: String = text
                .iter()
                .map(|(start, len, filler)| format!("{}{filler}", secret.get(*start..(start + len).min(secret.len())).unwrap_or("")))
                .collect();
            let public = public_part(&secret);
            let mut expected = vec![false; text.len()];
            for start in (0..=secret.len() - MIN_FRAGMENT).filter(|s| s + MIN_FRAGMENT > public) {
                let piece = &secret[start..start + MIN_FRAGMENT];
                for at in (0..text.len()).filter(|at| text[*at..].starts_with(piece)) {
                    expected[at..at + MIN_FRAGMENT].iter_mut().for_each(|h| *h = true);
                }
            }
            proptest::prop_assert_eq!(Pieces::of([(secret.as_str(), public)]).hidden(&text), expected);
        }
    }

    #[test]
    fn a_piece_of_a_key_inside_a_word_is_that_word() {
        let r = Redactor::of(["bankconf_test_interruptprimary00001"]);
        assert_eq!(r.redact("the run was interrupted"), "the run was interrupted");
        assert_eq!(r.redact("part=\"interruptprim\" and (nterruptprimary0)"), "part=\"[redacted]\" and ([redacted])");
        assert_eq!(r.redact("Bearer bankconf_test_interruptprimary00001x"), "Bearer [redacted]x");
    }

    /// Every 8-character piece of `key`'s secret part (after its last `_`).
    fn secret_pieces(key: &str) -> Vec<&str> {
        let secret = &key[public_part(key)..];
        (0..=secret.len() - MIN_FRAGMENT).map(|i| &secret[i..i + MIN_FRAGMENT]).collect()
    }

    #[test]
    fn a_key_echoed_with_its_underscores_escaped_is_hidden() {
        let key = "hob_live_Q7w8E9r0T1y2U3";
        let r = Redactor::of([key]);
        let escaped = |with: &str| key.replace('_', with);
        for (how, echo) in [
            ("json \\u005f", format!("{{\"error\":\"bad key {}\"}}", escaped("\\u005f"))),
            ("json \\u005F", format!("{{\"k\":\"{}\"}}", escaped("\\u005F"))),
            ("url %5F", format!("see https://x.test/keys?k={}&a=1", escaped("%5F"))),
            ("url %5f", format!("GET /v1/x/{}/y", escaped("%5f"))),
            ("html &#x5f", format!("<b>{}</b>", escaped("&#x5f"))),
            ("html &#95;", format!("<b>{}</b>", escaped("&#95;"))),
            ("mixed", format!("k={}", key.replacen('_', "%5F", 1))),
            ("the secret part alone", format!("part:{}", &key[8..])),
            ("all escaped", key.bytes().map(|b| format!("%{b:02X}")).collect()),
        ] {
            let out = r.redact(&echo);
            for piece in secret_pieces(key) {
                assert!(!out.contains(piece), "{how}: {piece:?} in {out:?}");
            }
            assert!(out.contains("[redacted]"), "{how}: {out}");
        }
        // Ordinary words beside a key stay whole, escaped neighbours or not.
        let r = Redactor::of(["bankconf_test_interruptprimary00001"]);
        assert_eq!(r.redact("was interrupted; 100%5F done"), "was interrupted; 100%5F done");
        assert_eq!(r.redact("\\u005finterrupted"), "\\u005finterrupted");
    }

    #[test]
    fn a_short_key_is_redacted_only_as_a_word() {
        let r = Redactor::of(["test"]);
        assert_eq!(
            r.redact("it would be tested: Bearer test, key=test."),
            "it would be tested: Bearer [redacted], key=[redacted]."
        );
        assert_eq!(r.redact("…est of the tests…"), "…est of the tests…");
        // A key of 8 characters or more is redacted wherever it stands, and its pieces too.
        let r = Redactor::of(["abcdefgh12"]);
        assert_eq!(r.redact("xabcdefgh12y"), "x[redacted]y");
    }

    #[test]
    fn redacts_encoded_and_cut_secrets() {
        let secret = "hk_test/+\"9z8y7x6w5v";
        let r = Redactor::of([secret]);
        let json = serde_json::to_string(secret).unwrap();
        let percent = "hk_test%2F%2B%229z8y7x6w5v";
        let out = r.redact(&format!("{json} {percent} {}", percent.to_lowercase()));
        assert!(!out.contains("9z8y7x"), "{out}");
        // Cut inside the secret, or echoed in part: the piece goes too.
        assert!(!r.redact("a hk_test/+\"9z8 b").contains("9z8"));
        let cut_off = r.cut(&format!("{}{secret} tail", "x".repeat(100)), 110);
        assert!(!cut_off.contains("hk_test/+"), "{cut_off}");
        let cut_off = r.cut_start(&format!("head {secret}{}", "x".repeat(100)), 110);
        assert!(!cut_off.contains("9z8y7x6w5v"), "{cut_off}");
        // Cut by a hand that knew no secret: the piece beside the `…` goes when redacted.
        let key = "bankconf_test_abcdefghij";
        let r = Redactor::of([key]);
        for cut in
            [shorten(&format!("{}{key}", "x".repeat(10)), 27), shorten_start(&format!("{key}{}", "x".repeat(10)), 13)]
        {
            let out = r.redact(&cut);
            assert!(!out.contains("abc") && !out.contains("hij") && out.contains("[redacted]"), "{cut} -> {out}");
        }
        // Another run's redactor knows none of these secrets.
        assert_eq!(Redactor::default().redact(key), key);
    }

    #[test]
    fn reveals_pieces_of_a_secret_in_every_encoding() {
        let key = "bankconf_test_q7w8e9r0t1y2u3i4o5p6a7s8";
        assert_eq!(base64(b"Man", BASE64), "TWFu");
        assert_eq!(base64(b"Ma", BASE64), "TWE");
        assert_eq!(base64(b"\xfb\xff", BASE64URL), "-_8");
        let piece = &key.as_bytes()[16..28];
        for (shift, text) in [
            (0, key.to_string()),
            (0, piece.iter().map(|b| format!("{b:02X}")).collect()),
            (0, base64(key.as_bytes(), BASE64)),
            (1, base64(piece, BASE64URL)),
            (2, format!("{{\"t\":\"sess_{}\"}}", base64(&key.as_bytes()[17..], BASE64))),
            (3, key.replace('_', "%5F")),
        ] {
            assert!(reveals(&text, key), "{shift}: {text}");
        }
        // The public prefix alone, or another key, is not the key.
        assert!(!reveals("bankconf_test_", key));
        assert!(!reveals(&base64(b"bankconf_test_", BASE64), key));
        assert!(!reveals("bankconf_test_zzzzzzzzzzzzzzzzzzzzzzzz", key));
        // The public prefix and a letter or two are a word that happens to follow it, not a leak.
        let key = "artisan_dQ3xk9PzLm2Vt8RwYb4NcJ7hDs1Ab";
        assert!(!reveals(r#"{"institution":{"id":"ins_artisan_demo"}}"#, key));
        assert!(reveals("hint: dQ3xk9Pz", key));
    }

    #[test]
    fn redacts_keys_and_tokens() {
        let r = Redactor::default();
        r.add("bankconf_test_SECRET");
        let text = r#"key bankconf_test_SECRET token {"widgetToken":"sess_ABC123"} sess_"#;
        let out = r.redact(text);
        assert!(!out.contains("SECRET") && !out.contains("ABC123"), "{out}");
        assert!(out.contains("sess_[redacted]"));
    }
}
