//! Applies the fault or variant of the seam of an answer's headers and coding
//! ([`super::faults::headers`]): one layer over every answer of the API, after the routes.

use super::faults::headers::{Said, HEADERS};
use super::shared::Shared;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::CONTENT_LENGTH;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// The answer to `request`, with the seam's fault or variant applied.
pub(crate) async fn answer_headers(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let Some(fault) = shared.flavor.seam(&HEADERS) else { return next.run(request).await };
    let path = request.uri().path().to_string();
    let (mut head, body) = next.run(request).await.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return StatusCode::BAD_GATEWAY.into_response();
    };
    let mut body = bytes.to_vec();
    fault(&Said { path: &path, any_key: &|| shared.lock().any_key() }, &mut head, &mut body);
    head.headers.remove(CONTENT_LENGTH);
    Response::from_parts(head, Body::from(body))
}
