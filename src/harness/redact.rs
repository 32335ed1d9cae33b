//! Keeps secrets out of everything the harness prints: API keys and widget tokens (§5.2, §5.3).

use std::sync::RwLock;

/// Replaces every known secret, and anything shaped like a widget token, with a placeholder.
#[derive(Default)]
pub struct Redactor {
    secrets: RwLock<Vec<String>>,
}

impl Redactor {
    /// Remembers a secret; empty strings are ignored.
    pub fn add(&self, secret: &str) {
        if secret.is_empty() {
            return;
        }
        let mut secrets = self.secrets.write().unwrap_or_else(|e| e.into_inner());
        if !secrets.iter().any(|s| s == secret) {
            secrets.push(secret.to_string());
            // Longest first, so that a secret containing another is replaced whole.
            secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        }
    }

    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for secret in self.secrets.read().unwrap_or_else(|e| e.into_inner()).iter() {
            out = out.replace(secret.as_str(), "[redacted]");
        }
        redact_widget_tokens(&out)
    }
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
