//! Sandbox control routes, outside `/v1` and without authentication. They stand in for what the
//! spec leaves open: registering webhook addresses (§4.5, §6.3) and what moves a connection
//! between states or changes its data (§3.2). [`super::Control`] calls the same functions.
//!
//! - `POST /sandbox/webhooks` with `{"url": "http(s)://..."}`: 201 `{"url", "registered": true}`,
//!   200 with `"registered": false` if it was already registered, 400 on a missing or non-HTTP
//!   URL. With `Authorization: Bearer <API_KEY>`, the address takes that client's events only
//!   (404 for an unknown key); without, every client's.
//! - `POST /sandbox/connections/{connectionId}/{action}` with an optional body
//!   `{"accountId", "transactionId"}` (absent, empty or `{}` all mean no target): 200 with
//!   `{"connectionId", "action", "status", "eventIds", "accountId", "transactionId"}`;
//!   409 `not_possible` from the current state (see `lifecycle`); 404 `not_found` for an
//!   unknown connection, account or transaction; 400 `unknown_action` / `invalid_body`.
//! - `DELETE /sandbox/webhooks` with `{"url": "..."}`: 200 `{"url", "unregistered": bool}`;
//!   nothing more is delivered there, retries included. `GET /sandbox/webhooks`: the
//!   registered addresses, `{"urls": [...]}`.
//! - `GET /sandbox/events`: every event emitted so far, in order (a debugging aid).

use super::api::ApiError;
use super::shared::Shared;
use super::transitions::{ActionArgs, ControlError};
use crate::spec::Action;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::sync::Arc;

pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/sandbox/webhooks", post(register_webhook).delete(unregister_webhook).get(webhooks))
        .route("/sandbox/connections/{connection_id}/{action}", post(apply))
        .route("/sandbox/events", get(events))
}

async fn unregister_webhook(State(shared): State<Arc<Shared>>, body: Bytes) -> Result<Response, ApiError> {
    let map = json_body(&body)?.ok_or_else(|| invalid_body("expected {\"url\": \"...\"}"))?;
    let url = optional_string(&map, "url")?.ok_or_else(|| invalid_body("url is required"))?;
    let unregistered = shared.unregister_webhook(&url);
    Ok(Json(json!({ "url": url, "unregistered": unregistered })).into_response())
}

async fn webhooks(State(shared): State<Arc<Shared>>) -> Json<Value> {
    Json(json!({ "urls": shared.webhooks() }))
}

fn invalid_body(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, "invalid_body", message)
}

/// The JSON object of a body, `None` when the body is absent or blank.
fn json_body(body: &Bytes) -> Result<Option<serde_json::Map<String, Value>>, ApiError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    match serde_json::from_slice(body) {
        Ok(Value::Object(map)) => Ok(Some(map)),
        Ok(_) => Err(invalid_body("body must be a JSON object")),
        Err(e) => Err(invalid_body(format!("body is not JSON: {e}"))),
    }
}

fn optional_string(map: &serde_json::Map<String, Value>, field: &str) -> Result<Option<String>, ApiError> {
    match map.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(invalid_body(format!("{field} must be a string"))),
    }
}

async fn register_webhook(
    State(shared): State<Arc<Shared>>,
    headers: axum::http::HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let map = json_body(&body)?.ok_or_else(|| invalid_body("expected {\"url\": \"...\"}"))?;
    let url = optional_string(&map, "url")?.ok_or_else(|| invalid_body("url is required"))?;
    match reqwest::Url::parse(&url) {
        Ok(u) if matches!(u.scheme(), "http" | "https") && u.host().is_some() => {}
        _ => return Err(invalid_body(format!("url must be an http(s) URL, got {url:?}"))),
    }
    let key = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .map(|h| h.strip_prefix("Bearer ").unwrap_or(h).trim());
    let registered = match shared.register_webhook(&url, key) {
        Ok(registered) => registered,
        Err(e) => return Err(ApiError::not_found(e.to_string())),
    };
    let status = if registered { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(json!({ "url": url, "registered": registered }))).into_response())
}

async fn apply(
    State(shared): State<Arc<Shared>>,
    Path((connection_id, action)): Path<(String, String)>,
    body: Bytes,
) -> Result<Json<Value>, ApiError> {
    let action = Action::parse(&action).ok_or_else(|| {
        ApiError::new(StatusCode::BAD_REQUEST, "unknown_action", format!("unknown action {action:?}"))
    })?;
    let target = match json_body(&body)? {
        None => ActionArgs::default(),
        Some(map) => ActionArgs {
            account_id: optional_string(&map, "accountId")?,
            transaction_id: optional_string(&map, "transactionId")?,
        },
    };
    match shared.apply(&connection_id, action, &target) {
        Ok(outcome) => Ok(Json(outcome.to_json())),
        Err(ControlError::NotFound(m)) => Err(ApiError::not_found(m)),
        Err(ControlError::NotPossible(m)) => Err(ApiError::new(StatusCode::CONFLICT, "not_possible", m)),
    }
}

async fn events(State(shared): State<Arc<Shared>>) -> Json<Value> {
    Json(Value::Array(shared.lock().events()))
}
