//! Neutralises target- and driver-controlled text for the medium it lands in: a terminal or CI
//! log (no escape sequences), Markdown rendered on a CI job page (no HTML, no links), and JUnit
//! XML (no character XML forbids). Everything a target sends is hostile (docs/checks.md "Hostile targets").

/// Whether `c` must not reach a terminal or an XML file raw: controls other than newline and
/// tab (ESC starts terminal escape sequences, CR overwrites a line), the characters XML 1.0
/// forbids (U+FFFE, U+FFFF), and the invisible format characters that reorder or hide text
/// (bidirectional overrides, zero-width characters).
fn hidden(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{fffe}' | '\u{ffff}' | '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}')
        || matches!(c, '\u{2066}'..='\u{2069}' | '\u{feff}')
}

/// Text made visible: every `hidden` character written as its Rust escape (`\u{1b}`). Serves
/// the terminal and XML alike (every XML-illegal character is hidden).
pub(crate) fn visible(text: &str) -> String {
    if !text.chars().any(hidden) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if hidden(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// Text safe in a JUnit XML document: [`visible`] (XML-illegal characters replaced).
pub(crate) fn xml(text: &str) -> String {
    visible(text)
}

/// Text safe as Markdown inline content (a table cell, a list item): one line, HTML written as
/// entities, and the punctuation that makes links, images, emphasis or cell breaks escaped.
pub(crate) fn markdown_inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in visible(text).chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\n' | '\r' => out.push(' '),
            '\\' | '`' | '*' | '_' | '[' | ']' | '!' | '|' | '#' | '~' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// Text for the inside of a Markdown code fence: [`visible`], and no `<`, so that nothing in a
/// report reads as HTML even to a renderer or reader that ignores the fence.
pub(crate) fn markdown_code(text: &str) -> String {
    visible(text).replace('<', "‹").replace('>', "›")
}

/// `word`, quoted for a POSIX shell when it needs it (`shlex`). A NUL, which no argument can
/// hold, is dropped.
pub(crate) fn shell_word(word: &str) -> String {
    let word = word.replace('\0', "");
    shlex::try_quote(&word).map(|q| q.into_owned()).unwrap_or(word)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_made_visible() {
        assert_eq!(visible("a\u{1b}[2Kb\r\n\tc"), "a\\u{1b}[2Kb\\u{d}\n\tc");
        assert_eq!(xml("x\u{fffe}\u{0}y"), "x\\u{fffe}\\u{0}y");
        assert_eq!(visible("plain"), "plain");
    }

    #[test]
    fn shell_words_paste_as_one_argument() {
        assert_eq!(shell_word("http://127.0.0.1:8080/x"), "http://127.0.0.1:8080/x");
        for word in ["it's here", "a b", "$HOME", "", "x\0y"] {
            assert_eq!(shlex::split(&shell_word(word)), Some(vec![word.replace('\0', "")]), "{word:?}");
        }
    }

    #[test]
    fn markdown_has_no_html_and_no_links() {
        let out = markdown_inline("</details><img src=x onerror=alert(1)> | ![t](http://x) a\nb");
        assert!(!out.contains('<') && out.contains("\\!\\[t\\]") && !out.contains('\n'), "{out}");
        assert!(!markdown_code("</details><img src=x>").contains('<'));
    }
}
