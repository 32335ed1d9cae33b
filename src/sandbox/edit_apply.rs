//! Applies a departure of the seam of an answer's body ([`super::faults::answers`]): one layer
//! over the `/v1` routes, active only when the sandbox's mutant or variant is an edit there.

use super::faults::answers::{Answer, EDITS};
use super::shared::Shared;
use axum::body::Body;
use axum::extract::{Query, Request, State};
use axum::http::header::CONTENT_LENGTH;
use axum::middleware::Next;
use axum::response::Response;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// The layer: a 2xx JSON answer to `/v1/…`, edited by the flavor's edit.
pub(crate) async fn answers(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let Some(edit) = shared.flavor.seam(&EDITS).filter(|_| request.uri().path().starts_with("/v1/")) else {
        return next.run(request).await;
    };
    let path = request.uri().path().to_string();
    let query = Query::<HashMap<String, String>>::try_from_uri(request.uri()).map(|q| q.0).unwrap_or_default();
    let response = next.run(request).await;
    if !response.status().is_success() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 * 1024 * 1024).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let Ok(mut value) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    {
        let store = shared.lock();
        let mut memory = shared.edit_memory.lock().unwrap_or_else(|p| p.into_inner());
        let account_id = path.strip_prefix("/v1/accounts/").and_then(|rest| rest.split('/').next());
        let answer = Answer {
            path: &path,
            starting_after: query.get("starting_after").map(String::as_str),
            account: account_id.and_then(|id| store.account_as_read(id)),
            memory: &mut memory,
        };
        edit(answer, &mut value);
    }
    let text = value.to_string();
    parts.headers.insert(CONTENT_LENGTH, text.len().into());
    Response::from_parts(parts, Body::from(text))
}
