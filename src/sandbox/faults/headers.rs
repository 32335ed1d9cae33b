//! The seam of what an answer says of itself (RFC 9110): its headers, its coding, the text
//! beside a refusal. Each row's code is the function named on it, below the rows; one layer
//! applies it to every answer of the API, after the routes (`header_apply.rs`).

use axum::http::header::{CONTENT_ENCODING, CONTENT_TYPE};
use axum::http::response::Parts;
use axum::http::{HeaderValue, StatusCode};
use std::io::Write;

/// The rows of this seam, handed to `$then` (`seam!` here, `collect!` in `faults/mod.rs`).
macro_rules! headers {
    ($then:ident $($args:tt)*) => { $then! { $($args)*
    mutants {
        EncodingLabelLies = "encoding-label-lies", "§4", ["http.content-coding"],
            "GET /v1/accounts/{id} says Content-Encoding: gzip of a body that is plain JSON" => encoding_label_lies;
        JsonLabelledHtml = "json-labelled-html", "§4", ["http.json-media-type"],
            "the accounts list (§4.2) is labelled Content-Type: text/html" => json_labelled_html;
        PartialContentPages = "partial-content-pages", "§4.3", ["http.status-allowed"],
            "every transactions page is answered 206 Partial Content with a Content-Range, though no Range was asked for" => partial_content_pages;
        RepeatedBalance = "repeated-balance", "§2.2", ["http.one-value-per-name"],
            "every account of the accounts list names `balance` twice: the bank feed's stale 0.01 first, then the current one" => repeated_balance;
        KeyHintInRefusal = "key-hint-in-refusal", "§5", ["auth.secret-stays-with-owner"],
            "a 401 says `did you mean` with a client's whole API key" => key_hint_in_refusal;
    }
    variants {
        RepeatedSameValue = "repeated-same-value", "§2.2", [],
            "every account of the accounts list names `currency` twice with the same value (RFC 8259 §4 only recommends unique names)" => repeated_same_value;
        GzipAnswers = "gzip-answers", "§4", [],
            "every JSON answer is gzipped, with Content-Encoding: gzip (no Accept-Encoding was sent: any coding is acceptable)" => gzipped;
    }
    } };
}

headers!(seam HEADERS: HeaderFault;);

/// An answer on its way out, as a fault of this seam sees it beside its head and body.
pub(in crate::sandbox) struct Said<'a> {
    /// The request's path.
    pub path: &'a str,
    /// A client's API key, looked up only when a fault asks.
    pub any_key: &'a dyn Fn() -> Option<String>,
}

/// The seam's interface: an edit of the answer's head and body (the layer sets its length).
pub(in crate::sandbox) type HeaderFault = fn(&Said<'_>, &mut Parts, &mut Vec<u8>);

fn segments<'a>(said: &Said<'a>) -> Vec<&'a str> {
    said.path.trim_start_matches('/').split('/').collect()
}

/// `encoding-label-lies`: the single account read says gzip of a body that is plain JSON (an
/// edge cache kept the upstream's header and stored the body decompressed).
fn encoding_label_lies(said: &Said<'_>, head: &mut Parts, _: &mut Vec<u8>) {
    if head.status.is_success() && matches!(segments(said).as_slice(), ["v1", "accounts", _]) {
        head.headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
}

/// `json-labelled-html`: the accounts list goes through a template renderer's default type.
fn json_labelled_html(said: &Said<'_>, head: &mut Parts, _: &mut Vec<u8>) {
    if head.status.is_success() && matches!(segments(said).as_slice(), ["v1", "connections", _, "accounts"]) {
        head.headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    }
}

/// `partial-content-pages`: a paging layer that says 206 of every page, as of a byte range.
fn partial_content_pages(said: &Said<'_>, head: &mut Parts, _: &mut Vec<u8>) {
    if head.status.is_success() && matches!(segments(said).as_slice(), ["v1", "accounts", _, "transactions"]) {
        head.status = StatusCode::PARTIAL_CONTENT;
        head.headers.insert("content-range", HeaderValue::from_static("items 0-24/*"));
    }
}

/// `key-hint-in-refusal`: a 401 says "did you mean" with a client's whole key.
fn key_hint_in_refusal(said: &Said<'_>, head: &mut Parts, body: &mut Vec<u8>) {
    if head.status != StatusCode::UNAUTHORIZED {
        return;
    }
    let Some(key) = (said.any_key)() else { return };
    let mut json: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
    json["hint"] = serde_json::Value::String(format!("unknown API key; did you mean {key}?"));
    *body = json.to_string().into_bytes();
}

/// `gzip-answers` (legal): every JSON answer gzipped, said by `Content-Encoding: gzip` (a proxy
/// that compresses whatever the client asked: without `Accept-Encoding`, any coding is
/// acceptable, RFC 9110 §12.5.3).
fn gzipped(_: &Said<'_>, head: &mut Parts, body: &mut Vec<u8>) {
    let json = head.headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("json"));
    if !json {
        return;
    }
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    if let Ok(zipped) = encoder.write_all(body).and_then(|()| encoder.finish()) {
        *body = zipped;
        head.headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
}

/// `repeated-balance`: an account serialiser writes the feed's cached balance, then the
/// current one under the same name (a parser that keeps the last member reads the current).
fn repeated_balance(said: &Said<'_>, head: &mut Parts, body: &mut Vec<u8>) {
    if head.status.is_success() && matches!(segments(said).as_slice(), ["v1", "connections", _, "accounts"]) {
        let text = String::from_utf8_lossy(body).replace("\"balance\":", "\"balance\":0.01,\"balance\":");
        *body = text.into_bytes();
    }
}

/// `repeated-same-value`: the same serialiser, writing `currency` twice with one value.
fn repeated_same_value(said: &Said<'_>, head: &mut Parts, body: &mut Vec<u8>) {
    if head.status.is_success() && matches!(segments(said).as_slice(), ["v1", "connections", _, "accounts"]) {
        let text = String::from_utf8_lossy(body).into_owned();
        let mut out = String::with_capacity(text.len() * 2);
        let mut rest = text.as_str();
        while let Some(at) = rest.find("\"currency\":\"") {
            let value_at = at + "\"currency\":\"".len();
            let end = rest[value_at..].find('"').map_or(rest.len(), |e| value_at + e + 1);
            out.push_str(&rest[..end]);
            out.push(',');
            out.push_str(&rest[at..end]);
            rest = &rest[end..];
        }
        out.push_str(rest);
        *body = out.into_bytes();
    }
}
