//! The seam of an answer's body: a fault that is an edit of a 2xx JSON answer to `/v1/…` (a
//! field dropped or changed, items skipped, a page cut). Each row's code is the function named
//! on it, below the rows; one layer applies it (`edit_apply.rs`), after the routes answered.

use crate::sandbox::model::{key_order, Account};
use serde_json::Value;
use std::collections::HashMap;

/// The rows of this seam, handed to `$then` (`seam!` here, `collect!` in `faults/mod.rs`).
macro_rules! answers {
    ($then:ident $($args:tt)*) => { $then! { $($args)*
    mutants {
        PageMissingHasMore = "page-missing-has-more", "§4.3", ["transactions.page-schema"],
            "pages lack the required `has_more`" => page_missing_has_more;
        OffsetAfterDeletion = "offset-after-deletion", "§4.3", ["transactions.walk-under-deletions", "state.nothing-vanishes"],
            "a cursor is followed from where its item was when it was served, as an offset is: a deletion before it skips an item" => offset_after_deletion;
        HasMoreWithoutCursor = "has-more-without-cursor", "§4.3", ["transactions.has-more-honest", "transactions.walk-exactly-once"],
            "a page after the first that says has_more true comes with no items and no next_cursor: nothing to continue from" => has_more_without_cursor;
        DeletedCursorSkips = "deleted-cursor-skips", "§4.3", ["transactions.walk-under-deletions"],
            "a cursor whose own transaction was deleted since it was served skips the first item after it" => deleted_cursor_skips;
        InstitutionRenamedSilently = "institution-renamed-silently", "§2.2", ["state.changes-announced"],
            "from the second read of a connection's accounts on, each account's `institution.name` carries the read's number, with no event" => institution_renamed;
        SingleReadDrifts = "single-read-drifts", "§1", ["state.changes-announced"],
            "GET /v1/accounts/{id} shows `availableBalance` a cent lower on each read of the account after its first, with no event (the list stays right)" => single_read_drifts;
    }
    variants {
        DeletedCursorEmpty = "deleted-cursor-empty", "§4.3", [],
            "a cursor whose own transaction was deleted since it was served is answered with an empty last page: nothing is after an item that is not there" => deleted_cursor_empty;
    }
    } };
}

answers!(seam EDITS: AnswerEdit;);

/// An answer of the API on its way out, as an edit sees it (only a 2xx JSON answer to `/v1/…`
/// is edited).
pub(in crate::sandbox) struct Answer<'a> {
    /// The request's path, and its `starting_after` if it had one.
    pub path: &'a str,
    pub starting_after: Option<&'a str>,
    /// The account the path names (`/v1/accounts/{id}…`), as the store holds it now.
    pub account: Option<&'a Account>,
    /// What the edit remembers from one answer to the next, in this sandbox.
    pub memory: &'a mut HashMap<String, usize>,
}

/// The seam's interface: an edit of the answer's JSON body.
pub(in crate::sandbox) type AnswerEdit = fn(Answer<'_>, &mut Value);

/// Whether the answer is a page of an account's transactions (§4.3).
fn is_page(a: &Answer<'_>) -> bool {
    a.path.ends_with("/transactions")
}

/// `offset-after-deletion`: each served cursor remembers how many removed transactions were
/// listed before its item; followed, the page skips as many items as were removed there since.
fn offset_after_deletion(a: Answer<'_>, page: &mut Value) {
    let Some(account) = a.account.filter(|_| is_page(&a)) else { return };
    let removed_before = |cursor: &str| {
        let key = account.transactions.iter().find(|t| t.id == cursor).map(|t| (t.date, t.id.clone()));
        let Some((date, id)) = key.or_else(|| account.tombstones.get(cursor).cloned()) else { return 0 };
        let before = |(d, i): &(chrono::NaiveDate, String)| key_order((d, i), (&date, &id)).is_lt();
        account.tombstones.values().filter(|t| before(t)).count()
    };
    if let (Some(cursor), Some(items)) = (a.starting_after, page.get_mut("data").and_then(Value::as_array_mut)) {
        if let Some(then) = a.memory.get(cursor) {
            let skip = removed_before(cursor).saturating_sub(*then);
            items.drain(..skip.min(items.len()));
        }
    }
    if let Some(next) = page.get("next_cursor").and_then(Value::as_str) {
        a.memory.insert(next.to_string(), removed_before(next));
    }
}

/// `deleted-cursor-skips`: a page read with a cursor naming a transaction the account no longer
/// lists (one it deleted) loses its first item.
fn deleted_cursor_skips(a: Answer<'_>, page: &mut Value) {
    let Some(account) = a.account.filter(|_| is_page(&a)) else { return };
    let Some(cursor) = a.starting_after.filter(|c| account.tombstones.contains_key(*c)) else { return };
    if account.transactions.iter().all(|t| t.id != cursor) {
        if let Some(items) = page.get_mut("data").and_then(Value::as_array_mut).filter(|i| !i.is_empty()) {
            items.remove(0);
        }
    }
}

/// `deleted-cursor-empty`: a cursor naming a removed transaction names nothing, so no items
/// come after it (the ruling "A cursor whose own item was deleted", docs/checks.md).
fn deleted_cursor_empty(a: Answer<'_>, page: &mut Value) {
    let Some(account) = a.account.filter(|_| is_page(&a)) else { return };
    let Some(cursor) = a.starting_after.filter(|c| account.tombstones.contains_key(*c)) else { return };
    if let Some(page) = page.as_object_mut().filter(|_| account.transactions.iter().all(|t| t.id != cursor)) {
        page.insert("data".to_string(), Value::Array(Vec::new()));
        page.insert("has_more".to_string(), Value::Bool(false));
        page.remove("next_cursor");
    }
}

/// `page-missing-has-more`.
fn page_missing_has_more(a: Answer<'_>, page: &mut Value) {
    if let Some(page) = page.as_object_mut().filter(|_| is_page(&a)) {
        page.remove("has_more");
    }
}

/// `has-more-without-cursor`: a followed page that says more remain gives no way on, neither a
/// `next_cursor` nor an item whose id would continue the walk (the ruling "A page without
/// next_cursor", docs/checks.md).
fn has_more_without_cursor(a: Answer<'_>, page: &mut Value) {
    let more = page.get("has_more").and_then(Value::as_bool) == Some(true);
    if let Some(page) = page.as_object_mut().filter(|_| is_page(&a) && a.starting_after.is_some() && more) {
        page.remove("next_cursor");
        page.insert("data".to_string(), Value::Array(Vec::new()));
    }
}

/// `institution-renamed-silently`: each read of a connection's accounts after its first renames
/// every account's institution (its name and the read's number), announced by nothing.
fn institution_renamed(a: Answer<'_>, accounts: &mut Value) {
    if !(a.path.starts_with("/v1/connections/") && a.path.ends_with("/accounts")) {
        return;
    }
    let reads = a.memory.entry(format!("institution:{}", a.path)).or_default();
    *reads += 1;
    if *reads < 2 {
        return;
    }
    for name in accounts.as_array_mut().into_iter().flatten().filter_map(|acc| acc.pointer_mut("/institution/name")) {
        *name = Value::String(format!("{} {reads}", name.as_str().unwrap_or_default()));
    }
}

/// `single-read-drifts`: each read of one account alone (§4.4) after its first shows its
/// `availableBalance` a cent lower per read, announced by nothing.
fn single_read_drifts(a: Answer<'_>, account: &mut Value) {
    let Some(id) = a.path.strip_prefix("/v1/accounts/").filter(|rest| !rest.contains('/')) else { return };
    let reads = a.memory.entry(format!("single:{id}")).or_default();
    *reads += 1;
    let cents = (*reads - 1) as f64 / 100.0;
    if let Some(available) = account.get("availableBalance").and_then(Value::as_f64) {
        account["availableBalance"] = Value::from(((available - cents) * 100.0).round() / 100.0);
    }
}
