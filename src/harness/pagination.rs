//! Page fetches and bounded cursor walks over `GET /v1/accounts/{id}/transactions` (§4.3).
//! A walk never trusts the target to end it: it stops at a page bound and on a repeated cursor.

use super::http::{Api, Exchange};
use super::outcome::Stop;
use serde_json::Value;
use std::collections::HashSet;

/// Most pages one walk follows.
pub const MAX_PAGES: usize = 2_000;

/// One page, with the fields a walk needs read out (the schema judges the rest).
#[derive(Clone, Debug)]
pub struct Page {
    pub exchange: Exchange,
    pub body: Value,
    pub items: Vec<Value>,
    pub has_more: bool,
    pub next_cursor: Option<String>,
}

impl Page {
    pub fn ids(&self) -> Vec<String> {
        self.items.iter().map(item_id).collect()
    }
}

/// The `id` of a transaction, or a placeholder naming what was there.
pub fn item_id(item: &Value) -> String {
    match item.get("id") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => format!("<id {other}>"),
        None => "<no id>".to_string(),
    }
}

/// Query of a page request.
pub fn query(limit: Option<u64>, starting_after: Option<&str>) -> Vec<(&'static str, String)> {
    let mut q = Vec::new();
    if let Some(l) = limit {
        q.push(("limit", l.to_string()));
    }
    if let Some(c) = starting_after {
        q.push(("starting_after", c.to_string()));
    }
    q
}

/// Fetches one page and reads `data`, `has_more` and `next_cursor` (§4.3).
pub async fn fetch_page(
    api: &Api,
    account_id: &str,
    limit: Option<u64>,
    starting_after: Option<&str>,
) -> Result<Page, Stop> {
    let exchange = api.get(&["v1", "accounts", account_id, "transactions"], &query(limit, starting_after)).await?;
    let body = exchange.success_json()?;
    let items = match body.get("data") {
        Some(Value::Array(items)) => items.clone(),
        _ => {
            return Err(Stop::fail(format!(
                "{}: expected an object with a data array, got {}",
                exchange.request,
                exchange.snippet()
            )))
        }
    };
    let has_more = match body.get("has_more") {
        Some(Value::Bool(b)) => *b,
        _ => {
            return Err(Stop::fail(format!(
                "{}: expected a boolean has_more, got {}",
                exchange.request,
                exchange.snippet()
            )))
        }
    };
    let next_cursor = match body.get("next_cursor") {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    };
    Ok(Page { exchange, body, items, has_more, next_cursor })
}

/// A walk from one starting point to the page whose `has_more` is false.
#[derive(Clone, Debug, Default)]
pub struct Walk {
    pub pages: Vec<Page>,
}

impl Walk {
    pub fn ids(&self) -> Vec<String> {
        self.pages.iter().flat_map(Page::ids).collect()
    }

    pub fn items(&self) -> impl Iterator<Item = &Value> {
        self.pages.iter().flat_map(|p| p.items.iter())
    }
}

/// Follows `next_cursor` while `has_more` is true (§4.3 rules 1 and 2), bounded by
/// [`MAX_PAGES`] and by never following the same cursor twice.
pub async fn walk(api: &Api, account_id: &str, limit: Option<u64>, starting_after: Option<&str>) -> Result<Walk, Stop> {
    let mut walk = Walk::default();
    let mut followed = HashSet::new();
    let mut cursor = starting_after.map(str::to_string);
    loop {
        let page = fetch_page(api, account_id, limit, cursor.as_deref()).await?;
        let more = page.has_more;
        let next = page.next_cursor.clone();
        let request = page.exchange.request.clone();
        walk.pages.push(page);
        if !more {
            return Ok(walk);
        }
        let next = next.ok_or_else(|| {
            Stop::fail(format!("{request}: has_more is true but there is no next_cursor to follow (§4.3 rule 1)"))
        })?;
        if !followed.insert(next.clone()) {
            return Err(Stop::fail(format!("{request}: next_cursor {next:?} was already followed: the walk loops")));
        }
        if walk.pages.len() >= MAX_PAGES {
            return Err(Stop::fail(format!("{request}: still has_more after {MAX_PAGES} pages; stopped the walk")));
        }
        cursor = Some(next);
    }
}
