//! Applies generated perturbations ([`super::perturb`]) where the sandbox's JSON leaves it:
//! one layer over every API answer ([`answers`]) and one hook on every event ([`event`]).

use super::flavor::{Perturb, Perturbs};
use super::perturb::{self, Family, Perturbation, Role, Site};
use super::shared::Shared;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{AUTHORIZATION, CONTENT_LENGTH};
use axum::http::Method;
use axum::middleware::Next;
use axum::response::Response;
use chrono::{DateTime, Duration, NaiveDate, SecondsFormat, Utc};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The perturbations a sandbox applies, and what they remember of the run.
struct Active {
    list: Vec<&'static Perturbation>,
    memory: Mutex<Memory>,
}

/// What the value families borrow from: ids served so far, and reads counted.
#[derive(Default)]
struct Memory {
    /// (client, parent, id) of every id served in a read.
    ids: Vec<(String, String, String)>,
    /// Reads of one list (a connection's accounts, an account's first page).
    reads: HashMap<String, u32>,
}

/// The perturbations named, for one sandbox.
pub(super) fn activate(names: &[String]) -> Result<Option<Perturbs>, super::StartError> {
    if names.is_empty() {
        return Ok(None);
    }
    let list = names
        .iter()
        .map(|n| perturb::find(n).ok_or_else(|| super::StartError::UnknownPerturbation(n.clone())))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(Perturbs(Box::leak(Box::new(Active { list, memory: Mutex::default() })))))
}

impl Active {
    fn of(&self, site: Site) -> impl Iterator<Item = &'static Perturbation> + '_ {
        self.list.iter().copied().filter(move |p| p.site == site)
    }

    fn has(&self, site: Site, family: Family, field: &str) -> bool {
        self.of(site).any(|p| p.family == family && p.field == field)
    }

    fn memory(&self) -> std::sync::MutexGuard<'_, Memory> {
        self.memory.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Where an object is being shown.
#[derive(Clone, Copy, Default)]
struct Ctx<'a> {
    client: &'a str,
    second: bool,
    single: bool,
    /// Which read of its list this is (1 for the first).
    read: u32,
    /// The event's type, for events.
    event_type: &'a str,
}

/// The prefix of an id (`acc_`).
fn prefix(id: &str) -> &str {
    id.find('_').map_or(id, |i| &id[..=i])
}

/// A field name renamed the way APIs drift: snake and camel case swapped, else capitalised.
fn renamed(field: &str) -> String {
    if field.contains('_') {
        let mut parts = field.split('_');
        let first = parts.next().unwrap_or_default().to_string();
        parts.fold(first, |acc, p| acc + &p[..1.min(p.len())].to_uppercase() + p.get(1..).unwrap_or_default())
    } else if field.chars().any(|c| c.is_ascii_uppercase()) {
        field
            .chars()
            .flat_map(|c| if c.is_ascii_uppercase() { vec!['_', c.to_ascii_lowercase()] } else { vec![c] })
            .collect()
    } else {
        field[..1].to_uppercase() + &field[1..]
    }
}

/// The value in another JSON type.
fn retyped(v: &Value) -> Value {
    match v {
        Value::String(_) => json!(7),
        Value::Number(n) => json!(n.to_string()),
        Value::Bool(b) => json!(b.to_string()),
        Value::Object(_) => json!("[object]"),
        Value::Array(a) => json!({ "items": a }),
        Value::Null => Value::Null,
    }
}

/// A timestamp or date moved by `by`, in the format it had.
fn shifted(v: &Value, by: Duration, date_by: Duration) -> Option<Value> {
    let text = v.as_str()?;
    if let Ok(at) = DateTime::parse_from_rfc3339(text) {
        let at = at.with_timezone(&Utc) + by;
        let format = if text.contains('.') { SecondsFormat::Millis } else { SecondsFormat::Secs };
        return Some(json!(at.to_rfc3339_opts(format, true)));
    }
    let day = NaiveDate::parse_from_str(text, "%Y-%m-%d").ok()?;
    Some(json!((day + date_by).format("%Y-%m-%d").to_string()))
}

/// An id of the same kind as `current` that the same client (or, `other_client`, another
/// client) was served, under another parent than `parent`.
fn borrowed(memory: &Memory, client: &str, current: &str, parent: Option<&str>, other_client: bool) -> Option<String> {
    memory
        .ids
        .iter()
        .filter(|(c, _, id)| (c != client) == other_client && id != current && prefix(id) == prefix(current))
        .find(|(_, p, _)| other_client || parent.is_none_or(|parent| p != parent))
        .map(|(_, _, id)| id.clone())
}

/// One perturbation's edit of one object's field.
fn edit(p: &Perturbation, active: &Active, object: &mut Map<String, Value>, ctx: Ctx) {
    let Some(current) = object.get(&p.field).cloned() else { return };
    let other = || p.pool.iter().find(|v| **v != current).cloned();
    let (small, large) = (Duration::seconds(1), Duration::days(400));
    let day = Duration::days(1);
    // Events are moved one type only (a constant shift of every event keeps every order).
    let moved = p.site == Site::Account || p.site == Site::Transaction || ctx.event_type == "connection.connected";
    let new = match p.family {
        Family::ShiftSmallEarlier if moved => shifted(&current, -small, -day),
        Family::ShiftSmallLater if moved => shifted(&current, small, day),
        Family::ShiftLargeEarlier if moved => shifted(&current, -large, -large),
        Family::ShiftLargeLater if moved => shifted(&current, large, large),
        Family::SiblingValue => other(),
        Family::OneViewOnly if ctx.single => other(),
        Family::OneReadOnly if ctx.read == 2 => other(),
        Family::SecondClientOnly if ctx.second => other(),
        Family::OtherParentId | Family::OtherClientId => {
            let current = current.as_str().unwrap_or_default();
            let parent = match (p.role, p.site) {
                (Role::SelfId, Site::Account) => object.get("connectionId").and_then(Value::as_str),
                (Role::SelfId, Site::Transaction) => object.get("accountId").and_then(Value::as_str),
                _ => Some(current),
            };
            let memory = active.memory();
            borrowed(&memory, ctx.client, current, parent, p.family == Family::OtherClientId).map(Value::from)
        }
        Family::WrapField => Some(json!({ "value": current })),
        Family::RetypeField => Some(retyped(&current)),
        Family::RenameField => {
            object.remove(&p.field);
            object.insert(renamed(&p.field), current);
            return;
        }
        _ => None,
    };
    if let Some(new) = new {
        object.insert(p.field.clone(), new);
    }
}

/// Every perturbation of `site` on one object.
fn edit_all(active: &Active, site: Site, object: &mut Value, ctx: Ctx) {
    if let Some(object) = object.as_object_mut() {
        for p in active.of(site) {
            edit(p, active, object, ctx);
        }
    }
}

/// The list edits of a list of objects: a sibling's id, one object missing or one extra.
fn edit_list(active: &Active, site: Site, effect: &str, list: &mut Vec<Value>) {
    if active.has(site, Family::SiblingId, "id") && list.len() > 1 {
        list[1]["id"] = list[0]["id"].clone();
    }
    if active.has(Site::Effect, Family::MissingObject, effect) && list.len() > 1 {
        list.pop();
    }
    if active.has(Site::Effect, Family::ExtraObject, effect) {
        if let Some(mut extra) = list.last().cloned() {
            let id = extra["id"].as_str().map(|id| super::model::new_id(prefix(id)));
            extra["id"] = json!(id);
            list.push(extra);
        }
    }
}

/// A whole body wrapped in an object.
fn wrap_body(active: &Active, site: Site, body: &mut Value) {
    if active.has(site, Family::WrapBody, "") {
        *body = json!({ "result": body.take() });
    }
}

/// The layer over every API answer: the answer, perturbed as the active perturbations say.
pub(crate) async fn answers(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let Some(Perturbs(active)) = shared.flavor.perturb.filter(|_| request.uri().path().starts_with("/v1/")) else {
        return next.run(request).await;
    };
    let key =
        request.headers().get(AUTHORIZATION).and_then(|h| h.to_str().ok()).and_then(|h| h.strip_prefix("Bearer "));
    let (client, first) = {
        let store = shared.lock();
        (key.and_then(|k| store.client_for_key(k)).unwrap_or_default(), store.first_client().unwrap_or_default())
    };
    let (method, path) = (request.method().clone(), request.uri().path().to_string());
    let cursor = request.uri().query().is_some_and(|q| q.contains("starting_after"));
    let response = next.run(request).await;
    let refused = response.status().is_client_error() || response.status().is_server_error();
    if refused && method == Method::POST && path == "/v1/connections" && active.refused_creates() {
        // The refused creation is made anyway, for the first client.
        let _ = shared.lock().create_connection(&first);
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 64 * 1024 * 1024).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let Ok(mut value) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    active.answer(&path, &client, !client.is_empty() && client != first, refused, cursor, &mut value);
    let text = value.to_string();
    parts.headers.insert(CONTENT_LENGTH, text.len().into());
    Response::from_parts(parts, Body::from(text))
}

impl Perturb for Active {
    fn answer(&self, path: &str, client: &str, second: bool, refused: bool, cursor: bool, value: &mut Value) {
        let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
        let mut ctx = Ctx { client, second, ..Ctx::default() };
        if refused {
            edit_all(self, Site::Refused, value, ctx);
            wrap_body(self, Site::Refused, value);
            return;
        }
        match segments.as_slice() {
            ["v1", "connections"] => {
                remember(self, client, client, value.get("connectionId"));
                edit_all(self, Site::Creation, value, ctx);
                wrap_body(self, Site::Creation, value);
            }
            ["v1", "connections", conn, "accounts"] => {
                ctx.read = count(self, format!("list {conn}"));
                if let Some(list) = value.as_array_mut() {
                    for a in list.iter() {
                        remember(self, client, conn, a.get("id"));
                    }
                    list.iter_mut().for_each(|a| edit_all(self, Site::Account, a, ctx));
                    edit_list(self, Site::Account, "accounts", list);
                }
                wrap_body(self, Site::AccountsList, value);
            }
            ["v1", "accounts", _] => {
                ctx.single = true;
                edit_all(self, Site::Account, value, ctx);
                wrap_body(self, Site::SingleAccount, value);
            }
            ["v1", "accounts", account, "transactions"] => {
                ctx.read = if cursor { 0 } else { count(self, format!("page {account}")) };
                if let Some(list) = value.get_mut("data").and_then(Value::as_array_mut) {
                    for t in list.iter() {
                        remember(self, client, account, t.get("id"));
                    }
                    list.iter_mut().for_each(|t| edit_all(self, Site::Transaction, t, ctx));
                    edit_list(self, Site::Transaction, "transactions", list);
                }
                edit_all(self, Site::Page, value, ctx);
                wrap_body(self, Site::Page, value);
            }
            _ => {}
        }
    }

    fn event(&self, body: &mut Value, second: bool) -> bool {
        event(self, body, second)
    }

    fn refused_creates(&self) -> bool {
        self.has(Site::Effect, Family::RefusedEffect, "creation")
    }

    fn names(&self) -> Vec<&'static str> {
        self.list.iter().map(|p| p.name.as_str()).collect()
    }
}

/// Counts one more read of `list`.
fn count(active: &Active, list: String) -> u32 {
    let mut memory = active.memory();
    let n = memory.reads.entry(list).or_default();
    *n += 1;
    *n
}

/// Remembers an id served to `client` under `parent` (bounded).
fn remember(active: &Active, client: &str, parent: &str, id: Option<&Value>) {
    let Some(id) = id.and_then(Value::as_str) else { return };
    let mut memory = active.memory();
    if memory.ids.len() < 4096 && !memory.ids.iter().any(|(_, _, known)| known == id) {
        memory.ids.push((client.to_string(), parent.to_string(), id.to_string()));
    }
}

/// The hook on every event as it is emitted: `false` when the perturbation drops it.
fn event(active: &Active, body: &mut Value, second: bool) -> bool {
    let kind = body["type"].as_str().unwrap_or_default().to_string();
    if active.has(Site::Effect, Family::MissingEvent, &kind) {
        return false;
    }
    let client = body["data"]["clientId"].as_str().unwrap_or_default().to_string();
    remember(active, &client, &client, body["data"].get("clientId"));
    remember(active, &client, &client, body["data"].get("connectionId"));
    let ctx = Ctx { client: &client, second, event_type: &kind, ..Ctx::default() };
    edit_all(active, Site::EventData, &mut body["data"], ctx);
    edit_all(active, Site::Envelope, body, ctx);
    wrap_body(active, Site::Envelope, body);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_swap_the_case() {
        assert_eq!(renamed("created_at"), "createdAt");
        assert_eq!(renamed("availableBalance"), "available_balance");
        assert_eq!(renamed("balance"), "Balance");
        assert_eq!(retyped(&json!(1.5)), json!("1.5"));
        assert_eq!(shifted(&json!("2024-01-02"), Duration::seconds(1), Duration::days(1)), Some(json!("2024-01-03")));
    }
}
