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
//! `super::model::list_order`.

use super::faults::widget::{Served, WidgetFile, WIDGET};
use super::faults::{Mutant, Variant};
use super::flavor::Flavor;
use super::render;
use super::shared::Shared;
use super::store::ReadError;
use super::widget;
use axum::body::Body;
use axum::extract::{FromRequestParts, Path, Query, Request, State};
use axum::http::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::request::Parts;
use axum::http::StatusCode;
use axum::middleware::map_response_with_state;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// An error answer of the sandbox (§7 leaves them open; see the module table).
#[derive(Debug)]
pub(crate) struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// What a mutant puts beside the message (`error.details`).
    pub details: Option<serde_json::Value>,
}

impl ApiError {
    pub(super) fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), details: None }
    }

    fn unauthorized(message: &str) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub(super) fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = render::error(self.code, &self.message);
        if let Some(details) = self.details {
            body["error"]["details"] = details;
        }
        let body = Json(body);
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

/// A read error as this sandbox answers it (the `*-500` mutants answer 500 instead).
fn read_error(f: Flavor, e: ReadError) -> ApiError {
    let broken = match e {
        ReadError::NotFound => f.is(Mutant::UnknownIds500),
        ReadError::UnknownCursor => f.is(Mutant::UnknownCursor500),
        ReadError::NotConnected(_) => false,
    };
    if broken {
        return ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "simulated server error");
    }
    e.into()
}

/// The authenticated client (§5): its `cli_` id.
pub(crate) struct ClientId(pub String);

impl FromRequestParts<Arc<Shared>> for ClientId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &Arc<Shared>) -> Result<Self, ApiError> {
        let mut result = authenticate(parts, state);
        if result.is_err() && state.flavor.is(Mutant::WidgetTokenOpensOwnData) {
            result =
                token_opens_own(parts, state).map(ClientId).ok_or_else(|| ApiError::unauthorized("unknown API key"));
        }
        if result.is_err() && state.flavor.is(Mutant::RefusedRequestCreates) && parts.uri.path() == "/v1/connections" {
            // Refused, but made anyway: a connection of the first client, announced as usual.
            let mut store = state.lock();
            if let Some(first) = store.first_client() {
                store.create_connection(&first);
            }
        }
        if result.is_err() && state.flavor.is(Mutant::RefusedReadSyncs) {
            refused_read_syncs(parts, state);
        }
        if result.is_err() && state.flavor.is(Mutant::RefusedReadReverifies) {
            refused_read_reverifies(parts, state);
        }
        // The auth mutants serve the first client where they should refuse.
        let accept = match &result {
            Err(e) if e.message.starts_with("missing") => state.flavor.is(Mutant::NoAuthRequired),
            Err(e) if e.message.starts_with("unknown") => state.flavor.is(Mutant::AnyKeyAccepted),
            Err(_) => state.flavor.is(Mutant::MalformedHeaderAccepted),
            Ok(_) => false,
        };
        match state.lock().first_client() {
            Some(first) if accept => Ok(ClientId(first)),
            _ => result,
        }
    }
}

/// [`Mutant::RefusedReadSyncs`]: the account a refused `GET /v1/accounts/{id}` names is synced
/// before the key is looked at, as an `update_accounts` of its own (announced).
fn refused_read_syncs(parts: &Parts, state: &Arc<Shared>) {
    let path: Vec<&str> = parts.uri.path().trim_start_matches('/').split('/').collect();
    let ["v1", "accounts", id] = path.as_slice() else { return };
    sync_as_read(state, id, None);
}

/// [`Mutant::RefusedReadReverifies`]: the connection a refused read names (its own path's, or
/// its account's) is re-verified before the key is looked at, announced.
fn refused_read_reverifies(parts: &Parts, state: &Arc<Shared>) {
    let path: Vec<&str> = parts.uri.path().trim_start_matches('/').split('/').collect();
    let mut store = state.lock();
    let connection = match path.as_slice() {
        ["v1", "connections", id, "accounts"] => id.to_string(),
        ["v1", "accounts", id] | ["v1", "accounts", id, "transactions"] => {
            let Some(account) = store.account_as_read(id) else { return };
            account.connection_id.clone()
        }
        _ => return,
    };
    store.reverify_on_refusal(&connection);
}

/// Syncs account `id` as an `update_accounts` of its own (announced), unless it is `reader`'s
/// own: a refresh on read that runs before the key or the owner is looked at.
fn sync_as_read(state: &Arc<Shared>, id: &str, reader: Option<&str>) {
    let mut store = state.lock();
    if reader.is_some_and(|client| store.own_account(client, id, false).is_ok()) {
        return;
    }
    let Some(connection) = store.account_as_read(id).map(|a| a.connection_id.clone()) else { return };
    let args = super::transitions::ActionArgs { account_id: Some(id.to_string()), transaction_id: None };
    let _ = store.apply(&connection, crate::spec::Action::UpdateAccounts, &args);
}

/// [`Mutant::WidgetTokenOpensOwnData`]: a `widgetToken` as the Bearer key opens its own
/// connection's accounts and transactions (and nothing else), as its connection's client.
fn token_opens_own(parts: &Parts, state: &Arc<Shared>) -> Option<String> {
    let header = parts.headers.get(AUTHORIZATION)?.to_str().ok()?;
    let token = header.strip_prefix("Bearer ")?;
    let store = state.lock();
    let connection = store.connection_of_token(token)?;
    let path: Vec<&str> = parts.uri.path().trim_start_matches('/').split('/').collect();
    let own = match path.as_slice() {
        ["v1", "connections", id, "accounts"] => *id == connection.id,
        ["v1", "accounts", id] | ["v1", "accounts", id, "transactions"] => {
            connection.account_ids.iter().any(|a| a == id)
        }
        _ => false,
    };
    own.then(|| connection.client_id.clone())
}

fn authenticate(parts: &Parts, state: &Arc<Shared>) -> Result<ClientId, ApiError> {
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

pub(crate) fn routes(shared: Arc<Shared>) -> Router<Arc<Shared>> {
    Router::new()
        .route("/v1/connections", post(create_connection))
        .route("/v1/connections/{connection_id}/accounts", get(list_accounts))
        .route("/v1/accounts/{account_id}", get(get_account))
        .route("/v1/accounts/{account_id}/transactions", get(list_transactions))
        .route("/widget/{file}", get(widget_script))
        .layer(map_response_with_state(shared.clone(), status_variants))
        .layer(axum::middleware::from_fn_with_state(shared, super::header_apply::answer_headers))
}

/// The status-code variants (§7 leaves codes and bodies open): applied to every answer.
async fn status_variants(State(shared): State<Arc<Shared>>, response: Response) -> Response {
    if shared.flavor.is(Mutant::JsonBom) {
        return with_bom(response).await;
    }
    let status = response.status();
    if shared.flavor.has(Variant::PlainErrors) {
        if status == StatusCode::CREATED {
            let (mut parts, body) = response.into_parts();
            parts.status = StatusCode::OK;
            return Response::from_parts(parts, body);
        }
        if status.is_client_error() {
            let status = match status {
                StatusCode::UNAUTHORIZED | StatusCode::CONFLICT => StatusCode::FORBIDDEN,
                StatusCode::BAD_REQUEST => StatusCode::UNPROCESSABLE_ENTITY,
                other => other,
            };
            let text = format!("request refused: {}\n", status.canonical_reason().unwrap_or("error"));
            return (status, [(CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response();
        }
    }
    if shared.flavor.has(Variant::EmptyErrors) && status.is_client_error() {
        return StatusCode::BAD_REQUEST.into_response();
    }
    response
}

/// The answer with a byte-order mark before its JSON body ([`Mutant::JsonBom`]).
async fn with_bom(response: Response) -> Response {
    let json = response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("json"));
    if !json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    parts.headers.remove(axum::http::header::CONTENT_LENGTH);
    let mut with = "\u{feff}".as_bytes().to_vec();
    with.extend_from_slice(&bytes);
    Response::from_parts(parts, axum::body::Body::from(with))
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
    let mut store = shared.lock();
    store.stamp_on_first_read(&connection_id);
    let mut accounts = store.connection_accounts(&client, &connection_id).map_err(|e| read_error(shared.flavor, e))?;
    if shared.flavor.is(Mutant::SecondClientAccountConnection) && store.first_client().as_ref() != Some(&client) {
        for account in accounts.as_array_mut().into_iter().flatten() {
            account["connectionId"] = serde_json::json!(format!("{connection_id}X"));
        }
    }
    if shared.flavor.is(Mutant::LeakBlankedField) && store.client_of_connection(&connection_id) != Some(client.as_str())
    {
        for account in accounts.as_array_mut().into_iter().flatten() {
            account["name"] = serde_json::json!("");
        }
    }
    Ok(Json(accounts))
}

/// §4.4: the account object of §2.2, with its current balance.
async fn get_account(
    State(shared): State<Arc<Shared>>,
    ClientId(client): ClientId,
    Path(account_id): Path<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let f = shared.flavor;
    if f.is(Mutant::OtherClientReadSyncs) {
        sync_as_read(&shared, &account_id, Some(&client));
    }
    if f.is(Mutant::ReadEchoesUpdate) {
        shared.lock().echo_read(&client, &account_id);
    }
    let store = shared.lock();
    let account = store.own_account(&client, &account_id, f.is(Mutant::IsolationAccount)).map_err(|e| {
        let mut refused = read_error(f, e);
        if let Some(theirs) = store.account_as_read(&account_id).filter(|_| f.is(Mutant::RefusalShowsAccount)) {
            // Refused, with the account the key may not read beside the refusal.
            refused.details = Some(render::single_account(f, theirs));
        }
        if let Some(token) = store.token_of_account(&account_id).filter(|_| f.is(Mutant::RefusalShowsToken)) {
            // Refused, with a way back in for whoever holds the account's connection's session.
            refused.details = Some(serde_json::json!({ "reconnect": { "widgetToken": token } }));
        }
        refused
    })?;
    if f.is(Mutant::AccountEndpointMissing) {
        return Err(ApiError::not_found("no such endpoint"));
    }
    if f.is(Mutant::AccountUnreadableAfterUpdate) && account.last_synced_at != account.created_at {
        return Err(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "simulated server error"));
    }
    let mut one = render::single_account(f, account);
    if f.is(Mutant::LeakBlankedField) && account.client_id != client {
        one["name"] = serde_json::json!("");
    }
    if let Some(other) = store.sibling_account(account).filter(|_| f.is(Mutant::AccountAnsweredUnderOtherId)) {
        // Another account of the connection, whole, under the id asked for.
        one = render::single_account(f, other);
    }
    if let Some(other) = store.sibling_account(account).filter(|_| f.is(Mutant::AccountReadOtherFields)) {
        // The right id with another account's name, type and currency.
        let theirs = render::single_account(f, other);
        for field in ["name", "type", "currency"] {
            one[field] = theirs[field].clone();
        }
    }
    if f.has(Variant::AccountBesideBalance) {
        let balance = serde_json::json!({"current": one["balance"], "available": one["availableBalance"]});
        one = serde_json::json!({"account": one, "balance": balance});
    }
    Ok(Json(one))
}

/// `limit` of §4.3: a positive integer (leading zeros allowed), clamped to the maximum
/// ([`super::model::MAX_LIMIT`]; the small-limit variants choose another, and one refuses larger values).
pub(crate) fn parse_limit(f: Flavor, raw: Option<&str>) -> Result<usize, ApiError> {
    let (default, max) = f.limits();
    let Some(raw) = raw else {
        return Ok(default);
    };
    if f.is(Mutant::LimitIgnored) {
        return Ok(default);
    }
    let status = if f.is(Mutant::BadLimit500) { StatusCode::INTERNAL_SERVER_ERROR } else { StatusCode::BAD_REQUEST };
    let bad = || ApiError::new(status, "invalid_limit", format!("limit must be a positive integer, got {raw:?}"));
    if raw.is_empty() || !raw.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let digits = raw.trim_start_matches('0');
    if digits.is_empty() {
        return Err(bad());
    }
    let n = digits.parse::<usize>().unwrap_or(usize::MAX);
    if n > max && f.has(Variant::SmallLimitRejected) {
        return Err(ApiError::new(StatusCode::BAD_REQUEST, "invalid_limit", format!("limit must be at most {max}")));
    }
    Ok(n.min(max))
}

/// §4.3.
async fn list_transactions(
    State(shared): State<Arc<Shared>>,
    ClientId(client): ClientId,
    Path(account_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let f = shared.flavor;
    let store = shared.lock();
    let cursor = query.get("starting_after").map(String::as_str);
    let any_client = f.is(Mutant::IsolationTransactions) || (f.is(Mutant::IsolationWithCursor) && cursor.is_some());
    let owner = store.own_account(&client, &account_id, any_client).map_err(|e| read_error(f, e))?.client_id.clone();
    // The owner check compares with the first client's tenant: the second's own are refused.
    if f.is(Mutant::SecondClientOwnTransactionsRefused) && store.first_client().as_ref() != Some(&client) {
        return Err(ApiError::not_found("no such account"));
    }
    let limit = parse_limit(f, query.get("limit").map(String::as_str))?;
    let mut page =
        store.transactions_page(&client, &account_id, limit, cursor, any_client).map_err(|e| read_error(f, e))?;
    if f.is(Mutant::PhantomDeletion) {
        drop(store);
        let last = page.get("has_more") == Some(&serde_json::Value::Bool(false));
        shared.lock().phantom_deletion(&account_id, cursor.is_none(), last);
        return Ok(Json(page));
    }
    if f.is(Mutant::SecondClientTransactionAccount) && store.first_client().as_ref() != Some(&client) {
        for item in page.get_mut("data").and_then(|d| d.as_array_mut()).into_iter().flatten() {
            item["accountId"] = serde_json::json!(format!("{account_id}X"));
        }
    }
    if f.is(Mutant::LeakBlankedField) && owner != client {
        for item in page.get_mut("data").and_then(|d| d.as_array_mut()).into_iter().flatten() {
            item["description"] = serde_json::json!("");
        }
    }
    Ok(Json(page))
}

/// §1: the widget script, no authentication, and the frame page and session of a widget like
/// real ones; other files under `/widget/` are 404. Each through the widget's seam
/// ([`super::faults::widget`]).
async fn widget_script(
    State(shared): State<Arc<Shared>>,
    Path(file): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: axum::http::HeaderMap,
) -> Response {
    let (delay, answer) = widget_file(&shared, &file, &query, &headers);
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    answer
}

/// The widget's file `file`, and how long to wait before it is sent.
fn widget_file(
    shared: &Shared,
    file: &str,
    query: &HashMap<String, String>,
    headers: &axum::http::HeaderMap,
) -> (Duration, Response) {
    let connection = query.get("connectionId").cloned().unwrap_or_default();
    let (kind, media, body) = match file {
        widget::FRAME_FILE => {
            let page = "<!doctype html><html><body><p>Sandbox Bank: log in</p></body></html>";
            (WidgetFile::Frame, "text/html", page.to_string())
        }
        widget::SESSION_FILE => {
            let session =
                serde_json::json!({ "connectionId": connection, "institution": { "id": "ins_sandbox_bank" } });
            (WidgetFile::Session, "application/json", session.to_string())
        }
        _ if file == widget::file_name(&shared.service) => {
            (WidgetFile::Script, "application/javascript", widget::conforming(&shared.service))
        }
        _ => return (Duration::ZERO, ApiError::not_found(format!("no widget file {file}")).into_response()),
    };
    let bearer = headers.get(AUTHORIZATION).and_then(|h| h.to_str().ok()).and_then(|h| h.strip_prefix("Bearer "));
    let key = || shared.lock().any_key().unwrap_or_default();
    let holds_key = || bearer.and_then(|k| shared.lock().client_for_key(k)).is_some();
    // A client's page (another origin) reads the session, so it says any origin may (§1 item 2).
    let any = (axum::http::header::ACCESS_CONTROL_ALLOW_ORIGIN, axum::http::HeaderValue::from_static("*"));
    let headers = if kind == WidgetFile::Session { vec![any] } else { Vec::new() };
    let mut served = Served {
        file: kind,
        service: &shared.service,
        media,
        body,
        headers,
        refusal: None,
        delay: Duration::ZERO,
        key: &key,
        holds_key: &holds_key,
    };
    if let Some(fault) = shared.flavor.seam(&WIDGET) {
        fault(&mut served);
    }
    match served.refusal {
        Some(StatusCode::UNAUTHORIZED) => {
            return (Duration::ZERO, ApiError::unauthorized("an API key is required").into_response())
        }
        Some(_) => return (Duration::ZERO, ApiError::not_found(format!("no widget file {file}")).into_response()),
        None => {}
    }
    let (delay, mut answer) = (served.delay, ([(CONTENT_TYPE, served.media)], served.body).into_response());
    answer.headers_mut().extend(served.headers);
    (delay, answer)
}

pub(crate) async fn fallback() -> ApiError {
    ApiError::not_found("no such endpoint")
}

pub(crate) async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "method not allowed on this path")
}

/// Largest answer body [`translate_ids`] rewrites (the variant's answers are far smaller).
const MAX_TRANSLATED: usize = 16 * 1024 * 1024;

/// The API layer of [`Variant::PerClientIds`] (see `aliases`): the request's ids in, the
/// answer's ids out, as the authenticated client sees them. Other flavors pass through.
pub(crate) async fn translate_ids(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    if !shared.flavor.per_client_ids() || !request.uri().path().starts_with("/v1/") {
        return next.run(request).await;
    }
    let key = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|h| h.to_str().ok())
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::to_string);
    let Some(client) = key.and_then(|k| shared.lock().client_for_key(&k)) else {
        return next.run(request).await;
    };
    let (mut parts, body) = request.into_parts();
    if let Some(uri) = inward_uri(&shared, &client, &parts.uri) {
        parts.uri = uri;
    }
    let response = next.run(Request::from_parts(parts, body)).await;
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_TRANSLATED).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let Ok(mut value) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    shared.lock().aliases_mut().outward(&client, &mut value);
    let text = value.to_string();
    parts.headers.insert(CONTENT_LENGTH, text.len().into());
    Response::from_parts(parts, Body::from(text))
}

/// The URI with each path segment and query value the client sent read back to store ids.
fn inward_uri(shared: &Shared, client: &str, uri: &axum::http::Uri) -> Option<axum::http::Uri> {
    let store = shared.lock();
    let aliases = store.aliases();
    let path: Vec<String> = uri.path().split('/').map(|s| aliases.inward(client, s)).collect();
    let query: Option<String> = uri.query().map(|q| {
        q.split('&')
            .map(|pair| match pair.split_once('=') {
                Some((k, v)) => format!("{k}={}", aliases.inward(client, v)),
                None => pair.to_string(),
            })
            .collect::<Vec<_>>()
            .join("&")
    });
    let joined = path.join("/");
    let text = match query {
        Some(q) => format!("{joined}?{q}"),
        None => joined,
    };
    text.parse().ok()
}
