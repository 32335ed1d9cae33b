//! A near miss of the run's API key (§5: a key is accepted exactly or not at all), as one typed
//! edit that yields both the key sent and a POSIX shell expression over `$BANKCONF_API_KEY`
//! that makes the same key: a reproduction pastes, and never holds the key or a piece of it.

/// The variable a reproduction reads the key from (the rerun command exports it too).
pub(crate) const KEY_VARIABLE: &str = "BANKCONF_API_KEY";

/// One edit of the key. Positions count characters from the start of the key.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) enum KeyEdit {
    /// A character appended (a letter or digit, so that it needs no quoting).
    Append(char),
    /// Short of its last character.
    CutLast,
    /// Short of its first character.
    CutFirst,
    /// Every letter in the other case.
    SwapCase,
    /// The character at a position replaced by the next of its class ([`bump`]).
    Bump { at: usize },
    /// The next of the class of the character at a position, inserted before it.
    InsertBumped { at: usize },
    /// The character at a position removed.
    Remove { at: usize },
    /// The letter at a position in the other case.
    SwapCaseAt { at: usize },
    /// Every character from a position on replaced by the next of its class.
    BumpFrom { from: usize },
    /// Only the characters before a position (the service prefix alone).
    Keep { len: usize },
}

/// Another character of the same class: the next digit, the next letter of the same case
/// (wrapping), `x` for anything else. The shell's `tr` of `BUMP_TR` does the same.
pub(crate) fn bump(c: char) -> char {
    match c {
        '0'..='8' | 'a'..='y' | 'A'..='Y' => char::from(c as u8 + 1),
        '9' => '0',
        'z' => 'a',
        'Z' => 'A',
        _ => 'x',
    }
}

/// [`bump`] as a pipeline over standard input.
const BUMP_TR: &str = "tr '0-9a-zA-Z' '1-90b-zaB-ZA' | tr -c '0-9a-zA-Z' x";

fn swap(c: char) -> char {
    if c.is_ascii_uppercase() {
        c.to_ascii_lowercase()
    } else {
        c.to_ascii_uppercase()
    }
}

impl KeyEdit {
    /// The key this edit makes of `key`.
    pub(crate) fn apply(&self, key: &str) -> String {
        let chars: Vec<char> = key.chars().collect();
        let at_most = |n: usize| n.min(chars.len());
        let s = |cs: &[char]| cs.iter().collect::<String>();
        match *self {
            Self::Append(c) => format!("{key}{c}"),
            Self::CutLast => s(&chars[..chars.len().saturating_sub(1)]),
            Self::CutFirst => s(&chars[at_most(1)..]),
            Self::SwapCase => chars.iter().map(|c| swap(*c)).collect(),
            Self::Bump { at } => self.around(&chars, at, |c| vec![bump(c)]),
            Self::InsertBumped { at } => self.around(&chars, at, |c| vec![bump(c), c]),
            Self::Remove { at } => self.around(&chars, at, |_| Vec::new()),
            Self::SwapCaseAt { at } => self.around(&chars, at, |c| vec![swap(c)]),
            Self::BumpFrom { from } => {
                let from = at_most(from);
                format!("{}{}", s(&chars[..from]), chars[from..].iter().map(|c| bump(*c)).collect::<String>())
            }
            Self::Keep { len } => s(&chars[..at_most(len)]),
        }
    }

    /// The key with the character at `at` replaced by `with(it)`; unchanged past its end.
    fn around(&self, chars: &[char], at: usize, with: impl Fn(char) -> Vec<char>) -> String {
        let Some(c) = chars.get(at) else { return chars.iter().collect() };
        chars[..at].iter().copied().chain(with(*c)).chain(chars[at + 1..].iter().copied()).collect()
    }

    /// A shell expression (inside double quotes) that makes the same key from
    /// `$BANKCONF_API_KEY`: `${BANKCONF_API_KEY}0`, `${BANKCONF_API_KEY%?}`, …
    pub(crate) fn shell(&self) -> String {
        let v = KEY_VARIABLE;
        // `${V#???}`: the key without its first n characters; `${V%"${V#???}"}`: its first n.
        let after = |n: usize| if n == 0 { format!("${{{v}}}") } else { format!("${{{v}#{}}}", "?".repeat(n)) };
        let before = |n: usize| if n == 0 { String::new() } else { format!("${{{v}%\"{}\"}}", after(n)) };
        // The character at n, through a pipeline.
        let one = |n: usize, pipe: &str| {
            let rest = if n == 0 { v.to_string() } else { format!("{v}#{}", "?".repeat(n)) };
            format!("$(r=${{{rest}}}; printf %s \"${{r%\"${{r#?}}\"}}\" | {pipe})")
        };
        const SWAP_TR: &str = "tr 'a-zA-Z' 'A-Za-z'";
        match *self {
            Self::Append(c) => format!("${{{v}}}{c}"),
            Self::CutLast => format!("${{{v}%?}}"),
            Self::CutFirst => format!("${{{v}#?}}"),
            Self::SwapCase => format!("$(printf %s \"${{{v}}}\" | {SWAP_TR})"),
            Self::Bump { at } => format!("{}{}{}", before(at), one(at, BUMP_TR), after(at + 1)),
            Self::InsertBumped { at } => format!("{}{}{}", before(at), one(at, BUMP_TR), after(at)),
            Self::Remove { at } => format!("{}{}", before(at), after(at + 1)),
            Self::SwapCaseAt { at } => format!("{}{}{}", before(at), one(at, SWAP_TR), after(at + 1)),
            Self::BumpFrom { from } => format!("{}$(printf %s \"{}\" | {BUMP_TR})", before(from), after(from)),
            Self::Keep { len } => before(len),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn edits(len: usize) -> Vec<KeyEdit> {
        let mut all = vec![KeyEdit::Append('0'), KeyEdit::CutLast, KeyEdit::CutFirst, KeyEdit::SwapCase];
        for at in [0, 1, len / 2, len - 1] {
            all.extend([
                KeyEdit::Bump { at },
                KeyEdit::InsertBumped { at },
                KeyEdit::Remove { at },
                KeyEdit::SwapCaseAt { at },
                KeyEdit::BumpFrom { from: at },
                KeyEdit::Keep { len: at },
            ]);
        }
        all
    }

    /// What `sh` makes of each expression is the key the probe sends.
    #[test]
    fn the_shell_expression_makes_the_key_sent() {
        for key in ["bankconf_test_aZ9z-Y0_q", "sk_live_0123456789abcdefXYZ", "k9"] {
            let script: String =
                edits(key.chars().count()).iter().map(|e| format!("printf '%s\\n' \"{}\"\n", e.shell())).collect();
            let out = std::process::Command::new("sh").arg("-c").arg(&script).env(KEY_VARIABLE, key).output().unwrap();
            let made: Vec<String> = String::from_utf8(out.stdout).unwrap().lines().map(str::to_string).collect();
            let sent: Vec<String> = edits(key.chars().count()).iter().map(|e| e.apply(key)).collect();
            for ((edit, made), sent) in edits(key.chars().count()).iter().zip(&made).zip(&sent) {
                assert_eq!(made, sent, "{key}: {edit:?}: {}", edit.shell());
            }
            assert_eq!(made.len(), sent.len(), "{}", String::from_utf8_lossy(&out.stderr));
        }
    }

    #[test]
    fn no_expression_holds_the_key() {
        let key = "bankconf_test_secretpart42";
        for edit in edits(key.len()) {
            assert!(!edit.shell().contains("secret") && !edit.shell().contains("42"), "{edit:?}");
        }
    }
}
