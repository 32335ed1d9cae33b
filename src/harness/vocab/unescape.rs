//! A text with its common escapes decoded, each decoded byte mapped back to the bytes it came
//! from: so that the redactor finds a secret a target echoed with some of its characters escaped
//! (`hob\u005flive_…` in a JSON string, `hob%5Flive%5F…` in a URL, `&#x5f;` in HTML) and hides
//! the escapes too. An escape that ends in a letter or digit (`f`, `F`) would otherwise touch the
//! secret's pieces and make them read as part of a longer word.

/// `text` with its escapes of ASCII characters decoded.
pub(crate) struct Decoded {
    pub(crate) text: String,
    /// For each byte of `text`, the range of bytes of the original it came from.
    spans: Vec<(usize, usize)>,
}

impl Decoded {
    /// The decoded form of `text`, or `None` when it holds no escape this knows (the common
    /// case: nothing to decode, nothing more to scan).
    pub(crate) fn of(text: &str) -> Option<Self> {
        let bytes = text.as_bytes();
        let mut out = Decoded { text: String::with_capacity(text.len()), spans: Vec::with_capacity(text.len()) };
        let (mut at, mut any) = (0, false);
        while at < bytes.len() {
            if let Some((c, len)) = escape_at(bytes, at) {
                out.text.push(c);
                out.spans.push((at, at + len));
                at += len;
                any = true;
                continue;
            }
            // Copy one whole character (a multi-byte one keeps its bytes, each mapped to itself).
            let width = text[at..].chars().next().map_or(1, char::len_utf8);
            out.text.push_str(&text[at..at + width]);
            out.spans.extend((at..at + width).map(|b| (b, b + 1)));
            at += width;
        }
        any.then_some(out)
    }

    /// The bytes of the original that `hidden` (over the decoded text) covers.
    pub(crate) fn map_back(&self, hidden: &[bool], original: &mut [bool]) {
        for (i, (start, end)) in self.spans.iter().enumerate() {
            if hidden.get(i).copied().unwrap_or(false) {
                original[*start..*end].iter_mut().for_each(|h| *h = true);
            }
        }
    }
}

/// The ASCII character an escape at `at` stands for, and the escape's length: `\u00XX`,
/// `\xXX`, `%XX`, `&#xXX;` and `&#NN;` (the `;` optional, as a lenient reader takes it).
fn escape_at(bytes: &[u8], at: usize) -> Option<(char, usize)> {
    let rest = &bytes[at..];
    let (value, len) = match rest {
        // An escaped backslash is one unit: in `\\u005f` (JSON for the text `\u005f`) the
        // second backslash starts no escape, and a span never splits the pair.
        [b'\\', b'\\', ..] => (b'\\', 2),
        [b'\\', b'u' | b'U', b'0', b'0', h, l, ..] => (hex_pair(*h, *l)?, 6),
        [b'\\', b'x', h, l, ..] => (hex_pair(*h, *l)?, 4),
        [b'%', h, l, ..] => (hex_pair(*h, *l)?, 3),
        [b'&', b'#', b'x' | b'X', h, l, ..] => {
            let semi = usize::from(rest.get(5) == Some(&b';'));
            (hex_pair(*h, *l)?, 5 + semi)
        }
        [b'&', b'#', ..] => {
            let digits = rest[2..].iter().take(3).take_while(|b| b.is_ascii_digit()).count();
            let value: u32 = std::str::from_utf8(&rest[2..2 + digits]).ok()?.parse().ok()?;
            let semi = usize::from(rest.get(2 + digits) == Some(&b';'));
            (u8::try_from(value).ok()?, 2 + digits + semi)
        }
        _ => return None,
    };
    // Only printable ASCII: a secret is made of it, and other bytes are not worth mapping.
    (value.is_ascii_graphic()).then_some((value as char, len))
}

fn hex_pair(high: u8, low: u8) -> Option<u8> {
    let digit = |b: u8| (b as char).to_digit(16);
    Some((digit(high)? * 16 + digit(low)?) as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_common_escapes_and_maps_them_back() {
        let text = r"a\u005fb%5Fc%5fd&#x5f;e&#95f\x5fg é";
        let decoded = Decoded::of(text).unwrap();
        assert_eq!(decoded.text, "a_b_c_d_e_f_g é");
        let mut hidden = vec![false; decoded.text.len()];
        hidden[1] = true;
        let mut original = vec![false; text.len()];
        decoded.map_back(&hidden, &mut original);
        let shown: String = text.char_indices().filter(|(i, _)| original[*i]).map(|(_, c)| c).collect();
        assert_eq!(shown, r"\u005f");
        assert!(Decoded::of("plain text, 100%").is_none());
        assert!(Decoded::of("%zz &#; \\u12").is_none());
        // JSON of the text `a\u005fb`: the pair stays whole, and the rest is as written.
        assert_eq!(Decoded::of(r"a\\u005fb").unwrap().text, r"a\u005fb");
    }
}
