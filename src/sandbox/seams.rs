//! The seam of the faults and variants that act on what an answer says of itself (RFC 9110): its
//! headers, its coding, the text beside a refusal. Each fault's code is here, beside its name;
//! the rows are in `faults.rs`. Applied to every answer of the API, after the routes.

use super::faults::{Mutant, Variant};
use super::shared::Shared;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::io::Write;
use std::sync::Arc;

/// The answer to `request`, with the seam's fault or variant applied.
pub(crate) async fn answer_headers(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let path = request.uri().path().to_string();
    let mut response = next.run(request).await;
    let f = shared.flavor;
    let ok = response.status().is_success();
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    // `encoding-label-lies`: the single account read says gzip of a body that is plain JSON (an
    // edge cache kept the upstream's header and stored the body decompressed).
    if f.is(Mutant::EncodingLabelLies) && ok && matches!(segments.as_slice(), ["v1", "accounts", _]) {
        response.headers_mut().insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    // `json-labelled-html`: the accounts list goes through a template renderer's default type.
    if f.is(Mutant::JsonLabelledHtml) && ok && matches!(segments.as_slice(), ["v1", "connections", _, "accounts"]) {
        response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    }
    // `partial-content-pages`: a paging layer that says 206 of every page, as for a byte range.
    if f.is(Mutant::PartialContentPages) && ok && matches!(segments.as_slice(), ["v1", "accounts", _, "transactions"]) {
        *response.status_mut() = StatusCode::PARTIAL_CONTENT;
        response.headers_mut().insert("content-range", HeaderValue::from_static("items 0-24/*"));
    }
    if f.is(Mutant::KeyHintInRefusal) && response.status() == StatusCode::UNAUTHORIZED {
        return with_key_hint(&shared, response).await;
    }
    if f.has(Variant::GzipAnswers) && is_json(&response) {
        return gzipped(response).await;
    }
    response
}

fn is_json(response: &Response) -> bool {
    response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("json"))
}

/// `key-hint-in-refusal`: a 401 says "did you mean" with a client's whole key.
async fn with_key_hint(shared: &Shared, response: Response) -> Response {
    let Some(key) = shared.lock().any_key() else { return response };
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 1 << 20).await else { return StatusCode::UNAUTHORIZED.into_response() };
    let mut json: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    json["hint"] = serde_json::Value::String(format!("unknown API key; did you mean {key}?"));
    parts.headers.remove(CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(json.to_string()))
}

/// `gzip-answers` (legal): every JSON answer gzipped, said by `Content-Encoding: gzip` (a proxy
/// that compresses whatever the client asked: without `Accept-Encoding`, any coding is
/// acceptable, RFC 9110 §12.5.3).
async fn gzipped(response: Response) -> Response {
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let Ok(zipped) = encoder.write_all(&bytes).and_then(|()| encoder.finish()) else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    parts.headers.remove(CONTENT_LENGTH);
    parts.headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    Response::from_parts(parts, Body::from(zipped))
}
