//! How the harness reaches a target behind TLS or a gateway: `--ca-cert` (a private CA added to
//! the trusted roots), `--insecure` (no verification) and `--header` (sent on every request to
//! the target's API). Every client that reaches the target (the API's, the widget assets',
//! the driver-over-HTTP's) is built through [`Transport::apply`], so that they agree; the
//! standard `HTTPS_PROXY`, `HTTP_PROXY` and `NO_PROXY` variables are read by those clients
//! (reqwest's default: no client here calls `.no_proxy()`). [`network_error`] says what went
//! wrong reaching a server, for the setup messages of every client.

use crate::harness::vocab::errors::SetupError;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The TLS settings and extra headers of a run, checked and loaded.
#[derive(Clone, Debug, Default)]
pub(crate) struct Transport {
    /// The `--ca-cert` roots, added to the built-in ones.
    roots: Vec<reqwest::Certificate>,
    /// `--insecure`: certificates are not verified at all.
    pub insecure: bool,
    /// The `--header` pairs, sent on every API request.
    headers: HeaderMap,
}

/// Longest `--ca-cert` file read: a bundle of a few hundred certificates, not a disk image.
const MAX_CA_FILE: u64 = 4 << 20;

impl Transport {
    /// The transport of `--ca-cert`, `--insecure` and `--header`: the CA file read and parsed,
    /// the headers as [`Headers::parse`] checked them. Errors name the flag and what is wrong.
    pub(crate) fn load(ca_cert: Option<&Path>, insecure: bool, headers: &Headers) -> Result<Self, SetupError> {
        let roots = match ca_cert {
            None => Vec::new(),
            Some(file) => read_roots(file)?,
        };
        Ok(Self { roots, insecure, headers: headers.map.clone() })
    }

    /// `builder` with this transport's roots, verification and (when `with_headers`) headers.
    pub(crate) fn apply(&self, builder: reqwest::ClientBuilder, with_headers: bool) -> reqwest::ClientBuilder {
        let mut builder = builder.tls_danger_accept_invalid_certs(self.insecure);
        if !self.roots.is_empty() {
            builder = builder.tls_certs_merge(self.roots.iter().cloned());
        }
        if with_headers && !self.headers.is_empty() {
            builder = builder.default_headers(self.headers.clone());
        }
        builder
    }
}

fn read_roots(file: &Path) -> Result<Vec<reqwest::Certificate>, SetupError> {
    use std::io::Read;
    let bad = |problem: String| SetupError::CaCert { file: file.to_path_buf(), problem };
    let mut pem = Vec::new();
    std::fs::File::open(file)
        .and_then(|f| f.take(MAX_CA_FILE + 1).read_to_end(&mut pem))
        .map_err(|e| bad(format!("cannot read it: {e}")))?;
    if pem.len() as u64 > MAX_CA_FILE {
        return Err(bad(format!("larger than {} MiB: not a PEM bundle", MAX_CA_FILE >> 20)));
    }
    let roots = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| bad(format!("not PEM certificates: {e}")))?;
    if roots.is_empty() {
        return Err(bad("holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into()));
    }
    Ok(roots)
}

/// The `--header 'Name: value'` lines, checked once ([`Headers::parse`]): each name as given
/// and its value (a secret, like keys), in their order, and the map the clients send.
#[derive(Clone, Debug, Default)]
pub(crate) struct Headers {
    given: Vec<(String, String)>,
    map: HeaderMap,
}

impl Headers {
    /// Each line checked: a name HTTP allows, a value without line breaks. A header the harness
    /// sets itself (`Authorization`, `Accept`, `Content-Type`) is refused: the cases depend on
    /// those. Errors name the flag and what is wrong, never a header's value.
    pub(crate) fn parse(lines: &[String]) -> Result<Self, SetupError> {
        let mut headers = Self::default();
        for (n, header) in lines.iter().enumerate() {
            let bad = |problem: &'static str| SetupError::BadHeader { position: n + 1, problem };
            let (given, value) = header.split_once(':').ok_or(bad("no ':' between the name and the value"))?;
            let (given, value) = (given.trim(), value.trim());
            let name = HeaderName::from_bytes(given.as_bytes()).map_err(|_| bad("not a valid header name"))?;
            if [reqwest::header::AUTHORIZATION, reqwest::header::ACCEPT, reqwest::header::CONTENT_TYPE].contains(&name)
            {
                return Err(bad("Authorization, Accept and Content-Type are the harness's own (the cases set them)"));
            }
            let mut parsed = HeaderValue::from_str(value).map_err(|_| bad("not a valid header value"))?;
            parsed.set_sensitive(true);
            headers.map.append(name, parsed);
            headers.given.push((given.to_string(), value.to_string()));
        }
        Ok(headers)
    }

    /// The name of each header, as given (what the HAR and the printed commands name).
    pub(crate) fn names(&self) -> Vec<String> {
        self.given.iter().map(|(name, _)| name.clone()).collect()
    }

    /// The value of each header: secrets, like keys.
    pub(crate) fn values(&self) -> impl Iterator<Item = &str> {
        self.given.iter().map(|(_, value)| value.as_str())
    }

    /// `(name, value)` of each header, in their order.
    pub(crate) fn pairs(&self) -> &[(String, String)] {
        &self.given
    }
}

/// The name of each `--header 'Name: value'` line, as given, before it is checked (the flags'
/// rerun line).
pub(crate) fn header_names(headers: &[String]) -> Vec<String> {
    headers.iter().map(|h| h.split_once(':').map_or(h.as_str(), |(name, _)| name).trim().to_string()).collect()
}

/// The value of each `--header 'Name: value'` line, before it is checked: secrets, like keys.
pub(crate) fn header_values(headers: &[String]) -> impl Iterator<Item = &str> {
    headers.iter().filter_map(|h| h.split_once(':')).map(|(_, v)| v.trim())
}

/// The variable a printed command writes the value of the `n`th `--header` as (1-based):
/// `BANKCONF_HEADER_1`. The user exports it, as they export the keys.
pub(crate) fn header_variable(n: usize) -> String {
    format!("BANKCONF_HEADER_{n}")
}

/// Each `--header` as `Name: $BANKCONF_HEADER_n`, one shell word: the name quoted, the value a
/// variable the shell expands (`"X-Gateway-Token: $BANKCONF_HEADER_1"`). Never the value.
fn header_words(names: &[String]) -> impl Iterator<Item = String> + '_ {
    use crate::harness::vocab::sanitize::shell_word;
    names.iter().enumerate().map(|(n, name)| {
        let variable = header_variable(n + 1);
        if name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.') {
            format!("\"{name}: ${variable}\"")
        } else {
            format!("{}\"${variable}\"", shell_word(&format!("{name}: ")))
        }
    })
}

/// The rerun's words for `--header`, `--ca-cert` and `--insecure`: each header's value as its
/// variable ([`header_variable`]), pasteable once it is exported.
pub(crate) fn rerun_words(names: &[String], ca_cert: Option<&PathBuf>, insecure: bool) -> Vec<String> {
    use crate::harness::vocab::sanitize::shell_word;
    let mut words: Vec<String> = header_words(names).map(|w| format!("--header {w}")).collect();
    if let Some(file) = ca_cert {
        words.push(format!("--ca-cert {}", shell_word(&file.display().to_string())));
    }
    if insecure {
        words.push("--insecure".to_string());
    }
    words
}

/// The `curl` options that reach the target as the run did: `--cacert FILE` for `--ca-cert`,
/// `-k` for `--insecure`, and each `--header` as `-H "Name: $BANKCONF_HEADER_n"`; each word
/// after a space.
pub(crate) fn curl_words(names: &[String], ca_cert: Option<&Path>, insecure: bool) -> String {
    use crate::harness::vocab::sanitize::shell_word;
    let mut words = String::new();
    if let Some(file) = ca_cert {
        words.push_str(&format!(" --cacert {}", shell_word(&file.display().to_string())));
    }
    if insecure {
        words.push_str(" -k");
    }
    for header in header_words(names) {
        words.push_str(&format!(" -H {header}"));
    }
    words
}

/// What a user exports before pasting a printed command, when `--header` was given:
/// `BANKCONF_HEADER_1 (X-Gateway-Token)`, for the run's notes.
pub(crate) fn header_variables_note(names: &[String]) -> Option<String> {
    let named: Vec<String> =
        names.iter().enumerate().map(|(n, name)| format!("{} ({name})", header_variable(n + 1))).collect();
    (!named.is_empty()).then(|| {
        format!(
            "the printed commands (rerun lines, curl reproductions) write each --header value as a variable: \
             export {} with its value before pasting one",
            named.join(", ")
        )
    })
}

/// The origin of `url` as `scheme://host:port` (the port always written), if it has one.
pub(crate) fn origin_of(url: &str) -> Option<String> {
    let url = reqwest::Url::parse(url).ok()?;
    Some(format!("{}://{}:{}", url.scheme(), url.host_str()?, url.port_or_known_default()?))
}

/// A browser page's paused request's `headers` (an object, as DevTools gives them) with `extra`
/// added, as the `[{name, value}]` list `Fetch.continueRequest` takes; a header of the same
/// name is replaced.
pub(crate) fn with_headers(sent: &Value, extra: &[(String, String)]) -> Vec<Value> {
    let mut out: Vec<Value> = sent
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(name, _)| !extra.iter().any(|(n, _)| n.eq_ignore_ascii_case(name)))
        .filter_map(|(name, value)| Some(serde_json::json!({ "name": name, "value": value.as_str()? })))
        .collect();
    out.extend(extra.iter().map(|(name, value)| serde_json::json!({ "name": name, "value": value })));
    out
}

/// What went wrong reaching a server, and its likely cause, for a setup message: the innermost
/// cause says what happened ("Connection refused"; the outer ones repeat the URL), and the
/// words a newcomer needs are added to it ("nothing listens on that port").
pub(crate) fn network_error(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        return "timed out (the server is slow or the address drops packets)".to_string();
    }
    let mut cause: &dyn std::error::Error = e;
    let mut chain = e.to_string();
    while let Some(inner) = cause.source() {
        cause = inner;
        chain.push_str(&format!(": {inner}"));
    }
    let said = cause.to_string();
    let lower = chain.to_lowercase();
    let likely = if lower.contains("connection refused") {
        "nothing listens on that port: is the server up, and the port right?"
    } else if lower.contains("not valid for name") {
        // Before the name lookup's words: the certificate's names are written `DnsName(…)`.
        "the certificate names another host: either the URL names the server otherwise than its certificate does \
         (an IP address or an alias of its name: use a name the certificate gives), or the server presents another \
         host's certificate (a proxy's, a default site's)"
    } else if lower.contains("dns") || lower.contains("lookup address") || lower.contains("name or service") {
        "the host name does not resolve: a typo in the host, or a name this machine's DNS does not know"
    } else if ["certificate", "tls", "handshake", "corrupt message"].iter().any(|w| lower.contains(w)) {
        "TLS failed: https:// to a plain-HTTP port, or a certificate this machine does not trust (--ca-cert FILE \
         trusts a private CA; --insecure skips verification)"
    } else if lower.contains("invalid http")
        || lower.contains("unexpected message")
        || lower.contains("invalid status")
        || lower.contains("parse")
    {
        "the port answers, but not in HTTP: is it the right port, or does it want https://?"
    } else if lower.contains("closed") || lower.contains("reset") || lower.contains("incomplete") {
        "the server closed the connection before answering"
    } else {
        return said;
    };
    format!("{said} ({likely})")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_checked_and_their_values_never_named() {
        let headers = Headers::parse(&["X-Tenant: acme-7".into(), "X-Gateway-Token:  s3cr3t-value ".into()]).unwrap();
        let map = &headers.map;
        assert_eq!(map["x-tenant"], "acme-7");
        assert_eq!(map["x-gateway-token"], "s3cr3t-value");
        assert!(map["x-gateway-token"].is_sensitive());
        assert_eq!(headers.names(), ["X-Tenant", "X-Gateway-Token"]);
        assert_eq!(headers.values().collect::<Vec<_>>(), ["acme-7", "s3cr3t-value"]);
        for (bad, problem) in [
            ("X-Tenant acme", "no ':'"),
            ("X Tenant: acme", "not a valid header name"),
            ("Authorization: Bearer other", "the harness's own"),
        ] {
            let e = Headers::parse(&["X-Ok: 1".into(), bad.into()]).unwrap_err().to_string();
            assert!(e.contains("--header #2") && e.contains(problem), "{e}");
            assert!(!e.contains("acme") && !e.contains("Bearer other"), "a value named: {e}");
        }
        let words = rerun_words(&header_names(&["X-Gateway-Token: s3cr3t-value".into(), "X$`: v".into()]), None, true);
        assert_eq!(
            words,
            [
                "--header \"X-Gateway-Token: $BANKCONF_HEADER_1\"",
                "--header 'X$`: '\"$BANKCONF_HEADER_2\"",
                "--insecure"
            ]
        );
        let ca = PathBuf::from("/tmp/my ca.pem");
        let curl = curl_words(&["X-Gateway-Token".into()], Some(&ca), false);
        assert_eq!(curl, " --cacert '/tmp/my ca.pem' -H \"X-Gateway-Token: $BANKCONF_HEADER_1\"");
        assert_eq!(curl_words(&[], None, true), " -k");
        assert_eq!(header_values(&["X-A: one".into(), "X-B:two".into()]).collect::<Vec<_>>(), ["one", "two"]);
    }

    #[test]
    fn a_ca_file_must_hold_certificates() {
        let dir = std::env::temp_dir().join(format!("bankconf-ca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "no certificate here\n").unwrap();
        let e = Transport::load(Some(&empty), false, &Headers::default()).unwrap_err().to_string();
        assert!(e.starts_with("--ca-cert") && e.contains("no PEM certificate"), "{e}");
        let e = Transport::load(Some(&dir.join("missing.pem")), false, &Headers::default()).unwrap_err().to_string();
        assert!(e.contains("cannot read it"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
