//! What the harness reads from the target, typed: a page of transactions as walks keep it, and
//! the run's cache of pages shared by its cases. Below the HTTP client, which owns the cache
//! (one per run, shared by the client's clones), so that no run sees another's pages.

use crate::harness::vocab::outcome::{Failure, Problem, Stop};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// One transaction as a walk keeps it: the fields that checks read, not the whole object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Item {
    /// The `id` (see [`item_id`]).
    pub id: String,
    /// `accountId` as JSON text (`"acc_1"`, `5`), when present and not null.
    pub account_id: Option<String>,
    /// `status` as JSON text (`"posted"`), cut to 64 characters, when present and not null.
    pub status: Option<String>,
}

impl Item {
    pub(crate) fn of(item: &Value) -> Self {
        let account_id = item.get("accountId").filter(|v| !v.is_null()).map(Value::to_string);
        let status = item.get("status").filter(|v| !v.is_null()).map(|v| v.to_string().chars().take(64).collect());
        Self { id: item_id(item), account_id, status }
    }

    pub(crate) fn weight(&self) -> usize {
        64 + self.id.len()
            + self.account_id.as_ref().map_or(0, String::len)
            + self.status.as_ref().map_or(0, String::len)
    }
}

/// One page, with the fields a walk needs read out (the HTTP client judged the whole page
/// against its endpoint's rules as it was read): the body itself is not kept (a walk may see
/// thousands of pages).
#[derive(Clone, Debug)]
pub(crate) struct Page {
    /// `GET /v1/accounts/acc_1/transactions?limit=3`.
    pub request: String,
    pub items: Vec<Item>,
    pub has_more: bool,
    pub next_cursor: Option<String>,
    /// Bytes of the body.
    pub size: usize,
    /// Its answer's place in the run's answer log (`http::Exchange::seq`).
    pub seq: Option<u64>,
}

impl Page {
    /// A finding this page takes part in, resting on its answer and on the answers of `others`
    /// (the page before it, the page after). Never reproduced by pasting this page's request:
    /// a page rule compares pages (`has_more` against the next page, a count against the
    /// reference), and a page on its own is a valid page ([`Failure::shown_by`] is for a rule
    /// that judges one answer alone).
    pub(crate) fn fail(&self, problem: Problem, others: &[&Page]) -> Stop {
        let failure = Failure::from(problem).on_answer(self.seq);
        Stop::Fail(others.iter().fold(failure, |f, p| f.on_answer(p.seq)))
    }

    pub(crate) fn ids(&self) -> Vec<String> {
        self.items.iter().map(|i| i.id.clone()).collect()
    }

    /// The cursor of the page after this one: its `next_cursor`, or, where it sent none, the
    /// id of its last item. §4.3 does not require `next_cursor`, and defines `starting_after`
    /// as the identifier of the item to continue after (the ruling "A page without
    /// next_cursor", docs/checks.md). `None` only for a page with neither.
    pub(crate) fn next(&self) -> Option<String> {
        self.next_cursor.clone().or_else(|| after_last(self.items.last().map(|i| i.id.as_str())))
    }
}

/// The cursor that continues after an item whose id is `last`, where a page sent no
/// `next_cursor` ([`Page::next`]): the id itself, unless the item had no string id.
pub(crate) fn after_last(last: Option<&str>) -> Option<String> {
    last.filter(|id| !id.starts_with('<')).map(str::to_string)
}

/// The `id` of a transaction, or a placeholder naming what was there.
pub(crate) fn item_id(item: &Value) -> String {
    match item.get("id") {
        Some(Value::String(s)) => s.clone(),
        Some(other) => format!("<id {other}>"),
        None => "<no id>".to_string(),
    }
}

/// One page shared by the run's cases, with the status it was answered with.
pub(crate) type SharedPage = tokio::sync::OnceCell<(u16, Result<Page, Stop>)>;

/// Most bytes of pages a run shares (a target chooses how large pages are).
const MAX_SHARED: usize = 8 * 1024 * 1024;

/// Which page: the account, the query, and whose key read it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct PageKey {
    account: String,
    limit: Option<u64>,
    cursor: Option<String>,
    reader: String,
}

/// The pages one run has read, each sent once and shared by its cases until a data action on
/// its account ([`PageCache::forget`]), within `MAX_SHARED` (8 MiB) bytes.
#[derive(Default)]
pub(crate) struct PageCache {
    bytes: AtomicUsize,
    pages: Mutex<HashMap<PageKey, Arc<SharedPage>>>,
}

impl PageCache {
    /// Whether the run has shared as many bytes of pages as it may: later pages are read anew.
    pub(crate) fn full(&self) -> bool {
        self.bytes.load(Ordering::Relaxed) > MAX_SHARED
    }

    /// The shared slot of one page (`reader`: whose key reads it, as the client names it).
    pub(crate) fn slot(
        &self,
        account: &str,
        limit: Option<u64>,
        cursor: Option<&str>,
        reader: &str,
    ) -> Arc<SharedPage> {
        let key = PageKey {
            account: account.to_string(),
            limit,
            cursor: cursor.map(str::to_string),
            reader: reader.to_string(),
        };
        self.pages.lock().unwrap_or_else(|e| e.into_inner()).entry(key).or_default().clone()
    }

    /// Counts the bytes of a page read into the cache.
    pub(crate) fn read(&self, bytes: usize) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Forgets the pages of `account` (what they hold has changed).
    pub(crate) fn forget(&self, account: &str) {
        self.pages.lock().unwrap_or_else(|e| e.into_inner()).retain(|k, _| k.account != account);
    }
}
