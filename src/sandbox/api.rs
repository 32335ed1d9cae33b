//! The service API under `/v1` (§4, §9) behind bearer keys (§5), and the widget script (§1).
//!
//! The spec leaves errors open (§7); the sandbox answers, always with the body
//! `{"error": {"code", "message"}}`:
//!
//! | Case | Status | `code` |
//! |---|---|---|
//! | no `Authorization` header, not `Bearer <key>`, or an unknown key | 401 (+ `WWW-Authenticate: Bearer`) | `unauthorized` |
//! | unknown connection/account, or one of another client | 404 | `not_found` |
//! | accounts of a connection that is not CONNECTED (§4.2) | 409 | `connection_not_connected` |
//! | `limit` not a positive integer | 400 | `invalid_limit` |
//! | `starting_after` not a transaction of the account | 400 | `invalid_cursor` |
//! | unknown path | 404 | `not_found` |
//! | wrong method | 405 | `method_not_allowed` |
//!
//! Checks run in that order: authentication, then existence, then state or parameters.
//! `POST /v1/connections` answers 201. Pagination (§4.3, §8): default `limit` 25, maximum 100
//! (larger values are clamped to 100, not refused); order as in
//! [`super::model::list_order`].

use super::render;
use super::store::ReadError;
use super::widget;
use super::Shared;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::header::{AUTHORIZATION, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use std::collections::HashMap;
use std::sync::Arc;

/// Page size when `limit` is absent (§4.3, §8: the sandbox's choice).
pub const DEFAULT_LIMIT: usize = 25;
/// Larger `limit` values are clamped to this.
pub const MAX_LIMIT: usize = 100;

/// An error answer of the sandbox (§7 leaves them open; see the module table).
#[derive(Debug)]
pub(crate) struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into() }
    }

    fn unauthorized(message: &str) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Json(render::error(self.code, &self.message));
        if self.status == StatusCode::UNAUTHORIZED {
            (self.status, [(WWW_AUTHENTICATE, "Bearer")], body).into_response()
        } else {
            (self.status, body).into_response()
        }
    }
}

impl From<ReadError> for ApiError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::NotFound => Self::not_found("no such resource for this API key"),
            ReadError::NotConnected(status) => Self::new(
                StatusCode::CONFLICT,
                "connection_not_connected",
                format!("accounts are available only when the connection is CONNECTED; it is {}", status.upper()),
            ),
            ReadError::UnknownCursor => Self::new(
                StatusCode::BAD_REQUEST,
                "invalid_cursor",
                "starting_after is not a transaction of this account",
            ),
        }
    }
}

/// The authenticated client (§5): its `cli_` id.
pub(crate) struct ClientId(pub String);

impl FromRequestParts<Arc<Shared>> for ClientId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<Shared>) -> Result<Self, ApiError> {
        let header =
            parts.headers.get(AUTHORIZATION).ok_or_else(|| ApiError::unauthorized("missing Authorization header"))?;
        let header = header.to_str().map_err(|_| ApiError::unauthorized("malformed Authorization header"))?;
        let key = match header.split_once(' ') {
            Some((scheme, key))
                if scheme.eq_ignore_ascii_case("Bearer") && !key.is_empty() && !key.contains(char::is_whitespace) =>
            {
                key
            }
            _ => return Err(ApiError::unauthorized("Authorization header must be `Bearer <API_KEY>`")),
        };
        state.lock().client_for_key(key).map(ClientId).ok_or_else(|| ApiError::unauthorized("unknown API key"))
    }
}

pub(crate) fn routes() -> Router<Arc<Shared>> {
    Router::new()
        .route("/v1/connections", post(create_connection))
        .route("/v1/connections/{connection_id}/accounts", get(list_accounts))
        .route("/v1/accounts/{account_id}", get(get_account))
        .route("/v1/accounts/{account_id}/transactions", get(list_transactions))
        .route("/widget/{file}", get(widget_script))
}

/// §4.1. Any request body is ignored.
async fn create_connection(State(shared): State<Arc<Shared>>, ClientId(client): ClientId) -> Response {
    let body = shared.lock().create_connection(&client);
    (StatusCode::CREATED, Json(body)).into_response()
}

/// §4.2.
async fn list_accounts(
    State(shared): State<Arc<Shared>>,
    ClientId(client): ClientId,
    Path(connection_id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    Ok(Json(shared.lock().connection_accounts(&client, &connection_id)?))
}

/// §4.4: the account object of §2.2, with its current balance.
async fn get_account(
    State(shared): State<Arc<Shared>>,
    ClientId(client): ClientId,
    Path(account_id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let store = shared.lock();
    Ok(Json(render::account(store.own_account(&client, &account_id)?)))
}

/// `limit` of §4.3: a positive integer (leading zeros allowed), clamped to [`MAX_LIMIT`].
pub(crate) fn parse_limit(raw: Option<&str>) -> Result<usize, ApiError> {
    let Some(raw) = raw else {
        return Ok(DEFAULT_LIMIT);
    };
    let bad = || {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_limit",
            format!("limit must be a positive integer, got {raw:?}"),
        )
    };
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let digits = raw.trim_start_matches('0');
    if digits.is_empty() {
        return Err(bad());
    }
    Ok(digits.parse::<usize>().map_or(MAX_LIMIT, |n| n.min(MAX_LIMIT)))
}

/// §4.3.
async fn list_transactions(
    State(shared): State<Arc<Shared>>,
    ClientId(client): ClientId,
    Path(account_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let store = shared.lock();
    store.own_account(&client, &account_id)?;
    let limit = parse_limit(query.get("limit").map(String::as_str))?;
    let cursor = query.get("starting_after").map(String::as_str);
    Ok(Json(store.transactions_page(&client, &account_id, limit, cursor)?))
}

/// §1: the widget script, no authentication. Other files under `/widget/` are 404.
async fn widget_script(State(shared): State<Arc<Shared>>, Path(file): Path<String>) -> Response {
    if file != widget::file_name(&shared.service) {
        return ApiError::not_found(format!("no widget file {file}")).into_response();
    }
    ([(CONTENT_TYPE, "application/javascript")], widget::script(&shared.service)).into_response()
}

pub(crate) async fn fallback() -> ApiError {
    ApiError::not_found("no such endpoint")
}

pub(crate) async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "method not allowed on this path")
}
