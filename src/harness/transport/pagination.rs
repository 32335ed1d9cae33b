//! Page fetches and bounded cursor walks over `GET /v1/accounts/{id}/transactions` (§4.3).
//! A walk never trusts the target to end it: it stops at a bound of pages, bytes, memory or time
//! (the harness's own effort: a walk stopped there is *ignored* beyond its bound, with the
//! cause, never failed) and on a repeated cursor (a loop: failed).

use crate::harness::transport::http::Api;
pub(crate) use crate::harness::transport::reads::{Item, Page};
use crate::harness::vocab::budget;
use crate::harness::vocab::kind::WalkKind;
use crate::harness::vocab::outcome::{Failure, Problem, Stop};
use crate::harness::vocab::redact;

use serde_json::Value;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Most pages a walk at the target's default page size follows (the reference walks every
/// case compares with): a legal 3,000-item account is walked whole at any default of 1 or more.
pub(crate) const MAX_PAGES: usize = 5_000;
/// Most pages a walk with an explicit `limit` follows (the properties' walks, hundreds a run):
/// with `limit=1` it covers a bounded prefix of a long account, and is ignored beyond it.
pub(crate) const MAX_LIMITED_PAGES: usize = 150;
/// Longest time one walk takes before it stops.
pub(crate) const MAX_WALK_TIME: Duration = Duration::from_secs(120);
/// Most body bytes one walk reads.
pub(crate) const MAX_WALK_BYTES: usize = 64 * 1024 * 1024;

/// Query of a page request.
pub(crate) fn query(limit: Option<u64>, starting_after: Option<&str>) -> Vec<(&'static str, String)> {
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
pub(crate) async fn fetch_page(
    api: &Api,
    account_id: &str,
    limit: Option<u64>,
    starting_after: Option<&str>,
) -> Result<Page, Stop> {
    fetch_with_status(api, account_id, limit, starting_after).await.1
}

/// [`fetch_page`] with the answer's status (0 when none came).
pub(crate) async fn fetch_with_status(
    api: &Api,
    account_id: &str,
    limit: Option<u64>,
    starting_after: Option<&str>,
) -> (u16, Result<Page, Stop>) {
    match api.get(&["v1", "accounts", account_id, "transactions"], &query(limit, starting_after)).await {
        Ok(exchange) => (exchange.status, read_page(exchange)),
        Err(stop) => (0, Err(stop)),
    }
}

fn read_page(exchange: crate::harness::transport::http::Exchange) -> Result<Page, Stop> {
    let body = exchange.success_json()?;
    let items = match body.get("data") {
        Some(Value::Array(items)) => items.iter().map(Item::of).collect(),
        _ => {
            let detail = format!("expected an object with a data array, got {}", exchange.snippet());
            let problem = Problem::found(WalkKind::PageShape, [], detail).expecting("a data array", exchange.snippet());
            return Err(exchange.fails(problem));
        }
    };
    let has_more = match body.get("has_more") {
        Some(Value::Bool(b)) => *b,
        _ => {
            let detail = format!("expected a boolean has_more, got {}", exchange.snippet());
            let problem =
                Problem::found(WalkKind::PageShape, [], detail).expecting("a boolean has_more", exchange.snippet());
            return Err(exchange.fails(problem));
        }
    };
    let next_cursor = match body.get("next_cursor") {
        Some(Value::String(s)) => Some(s.clone()),
        _ => None,
    };
    Ok(Page { size: exchange.body.len(), request: exchange.request, items, has_more, next_cursor, seq: exchange.seq })
}

/// A walk from one starting point to the page whose `has_more` is false.
#[derive(Debug, Default)]
pub(crate) struct Walk {
    pub pages: Vec<Page>,
    /// Whether the walk reached a page whose `has_more` is false.
    pub complete: bool,
    /// What this walk adds to its run's held bytes ([`Api::held`]).
    held: usize,
    /// The run's count of held bytes.
    budget: std::sync::Arc<AtomicUsize>,
}

impl Walk {
    pub(crate) fn ids(&self) -> Vec<String> {
        self.pages.iter().flat_map(Page::ids).collect()
    }

    /// A finding of `kind` this walk shows, said as `message`, resting on every page it read.
    pub(crate) fn fail(&self, kind: WalkKind, message: String) -> Stop {
        let problem = Problem::found(kind, [], message);
        Stop::Fail(self.pages.iter().fold(Failure::from(problem), |f, p| f.on_answer(p.seq)))
    }

    /// Keeps `page`, within the run's budget of held bytes.
    fn keep(&mut self, page: Page) -> Result<(), Stop> {
        let weight = page.request.len() + page.items.iter().map(Item::weight).sum::<usize>();
        self.held += weight;
        let held = self.budget.fetch_add(weight, Ordering::Relaxed) + weight;
        let request = page.request.clone();
        self.pages.push(page);
        if held > budget::MAX_HELD {
            return Err(stopped(&request, format!("the run's walks hold more than {} MiB", budget::MAX_HELD >> 20)));
        }
        Ok(())
    }
}

impl Drop for Walk {
    fn drop(&mut self) {
        self.budget.fetch_sub(self.held, Ordering::Relaxed);
    }
}

/// A walk stopped at a bound of the harness's effort: not judged beyond it (§8 leaves sizes
/// open, and slowness is no violation), with the cause.
fn stopped(request: &str, bound: String) -> Stop {
    Stop::ignore(format!(
        "{request}: still has_more, but the walk stopped at its bound ({bound}); not judged beyond it"
    ))
}

/// The account's transactions may have changed (the harness drove a data action on it): its
/// pages are read again.
pub(crate) fn forget(api: &Api, account_id: &str) {
    api.pages().forget(account_id);
}

/// [`fetch_page`], sent once per run: the pagination properties try the same boundaries, and a
/// walk from a cursor repeats the pages of a walk that passed it (§4.3), so every walk shares
/// the pages already read (within the cache's bytes, [`crate::harness::transport::reads::PageCache`]), until a data action driven on the
/// account ([`forget`]).
async fn shared_page(api: &Api, account_id: &str, limit: Option<u64>, cursor: Option<&str>) -> Result<Page, Stop> {
    shared_with_status(api, account_id, limit, cursor).await.1
}

/// One page as the run's cases share it (see `shared_page`).
pub(crate) async fn page(api: &Api, account_id: &str, limit: Option<u64>, cursor: Option<&str>) -> Result<Page, Stop> {
    shared_page(api, account_id, limit, cursor).await
}

async fn shared_with_status(
    api: &Api,
    account_id: &str,
    limit: Option<u64>,
    cursor: Option<&str>,
) -> (u16, Result<Page, Stop>) {
    let pages = api.pages();
    if pages.full() {
        return fetch_with_status(api, account_id, limit, cursor).await;
    }
    // Per key: a page read with one client's key is never another client's answer.
    let cell = pages.slot(account_id, limit, cursor, &format!("{:?}", api.reader()));
    let page = cell
        .get_or_init(|| async {
            let page = fetch_with_status(api, account_id, limit, cursor).await;
            if let (_, Ok(p)) = &page {
                pages.read(p.size);
            }
            page
        })
        .await;
    page.clone()
}

/// Whether the target refuses `limit` on `account_id` (a 4xx to its first page): the first
/// page of the walks at that limit, read once per run and client key (until [`forget`]).
pub(crate) async fn refuses_limit(api: &Api, account_id: &str, limit: u64) -> Result<bool, Stop> {
    match shared_with_status(api, account_id, Some(limit), None).await {
        (400..=499, _) => Ok(true),
        (_, Err(stop)) if stop.is_transport() => Err(stop),
        _ => Ok(false),
    }
}

/// Follows `next_cursor` while `has_more` is true (§4.3 rules 1 and 2), bounded by
/// [`MAX_PAGES`] (or [`MAX_LIMITED_PAGES`] with a `limit`), [`MAX_WALK_BYTES`], [`MAX_WALK_TIME`] and the run's memory budget (each
/// ignores the walk, see `stopped`), and by never following the same cursor twice (a failure).
/// Pages already read in the run are not sent again (`shared_page`).
pub(crate) async fn walk(
    api: &Api,
    account_id: &str,
    limit: Option<u64>,
    starting_after: Option<&str>,
) -> Result<Walk, Stop> {
    let bound = if limit.is_some() { MAX_LIMITED_PAGES } else { MAX_PAGES };
    follow(api, account_id, limit, starting_after, Bound::Stop(bound)).await
}

/// [`walk`] at the default page size with every page sent again, none taken from the run's
/// shared reads (and none given to them): a later read of the account, to compare with earlier
/// ones.
pub(crate) async fn walk_again(api: &Api, account_id: &str) -> Result<Walk, Stop> {
    follow(api, account_id, None, None, Bound::Again(MAX_PAGES)).await
}

/// Most pages a property walk reads from each end of an account it does not walk whole (see
/// [`windows`]).
pub(crate) const WINDOW_PAGES: usize = 3;

/// Where a walk ends when it is not judged whole.
#[derive(Clone, Copy)]
enum Bound {
    /// Stopped at this many pages: ignored beyond it (see `stopped`).
    Stop(usize),
    /// A window of this many pages: the walk so far is returned, [`Walk::complete`] false.
    Window(usize),
    /// As `Stop`, every page sent again (see [`walk_again`]).
    Again(usize),
}

/// A walk over part of an account: the items after item `after` (the first items when
/// `None`), as far as the walk went.
#[derive(Debug)]
pub(crate) struct Window {
    /// Index, in the reference walk, of the item the walk started after.
    pub after: Option<usize>,
    pub walk: Walk,
}

impl Window {
    /// The reference items this window must hold: those after its start, up to as many as it
    /// read when it did not reach the end.
    pub(crate) fn expected<'a>(&self, ids: &'a [String]) -> &'a [String] {
        let from = self.after.map_or(0, |k| k + 1).min(ids.len());
        let rest = &ids[from..];
        if self.walk.complete {
            rest
        } else {
            &rest[..self.walk.ids().len().min(rest.len())]
        }
    }
}

/// The walks at `limit` that stand for a whole walk of an account whose reference walk is
/// `ids`: the whole walk when it takes at most 2 × [`WINDOW_PAGES`] pages; else its first
/// [`WINDOW_PAGES`] pages, and the walk after the item `limit` × [`WINDOW_PAGES`] from the end
/// (full pages to the last). A small `limit` on a long account would cost a request per item
/// or two; its middle pages take the same path as the first and last ones. The caller says so
/// in a note ([`windowed`]).
pub(crate) async fn windows(api: &Api, account_id: &str, limit: u64, ids: &[String]) -> Result<Vec<Window>, Stop> {
    let span = (limit as usize).saturating_mul(WINDOW_PAGES);
    if !windowed(limit, ids.len()) {
        let walk = walk(api, account_id, Some(limit), None).await?;
        return Ok(vec![Window { after: None, walk }]);
    }
    let head = follow(api, account_id, Some(limit), None, Bound::Window(WINDOW_PAGES)).await?;
    let k = ids.len() - 1 - span;
    // One page more than it needs: a target may serve fewer items than `limit` (§8).
    let tail = follow(api, account_id, Some(limit), Some(&ids[k]), Bound::Window(WINDOW_PAGES + 1)).await?;
    Ok(vec![Window { after: None, walk: head }, Window { after: Some(k), walk: tail }])
}

/// Whether [`windows`] walks an account of `items` items at `limit` by its two ends only.
pub(crate) fn windowed(limit: u64, items: usize) -> bool {
    items > (limit as usize).saturating_mul(2 * WINDOW_PAGES)
}

/// [`walk`] from `starting_after`, reading at most `pages` pages: the walk so far, complete
/// or not.
pub(crate) async fn walk_window(
    api: &Api,
    account_id: &str,
    limit: u64,
    starting_after: Option<&str>,
    pages: usize,
) -> Result<Walk, Stop> {
    follow(api, account_id, Some(limit), starting_after, Bound::Window(pages)).await
}

async fn follow(
    api: &Api,
    account_id: &str,
    limit: Option<u64>,
    starting_after: Option<&str>,
    bound: Bound,
) -> Result<Walk, Stop> {
    let mut walk = Walk { pages: Vec::new(), complete: false, held: 0, budget: api.held() };
    let mut followed = HashSet::new();
    let mut read = 0;
    let mut cursor = starting_after.map(str::to_string);
    let started = Instant::now();
    loop {
        let page = match bound {
            Bound::Again(_) => fetch_page(api, account_id, limit, cursor.as_deref()).await?,
            _ => shared_page(api, account_id, limit, cursor.as_deref()).await?,
        };
        let more = page.has_more;
        let next = page.next();
        let request = page.request.clone();
        read += page.size;
        walk.keep(page)?;
        if !more {
            walk.complete = true;
            return Ok(walk);
        }
        let next = next.ok_or_else(|| {
            let detail = format!(
                "{request}: has_more is true but there is no next_cursor to follow, nor an item to continue after (§4.3 rules 1 and 2)"
            );
            walk.fail(WalkKind::NoNextCursor, detail)
        })?;
        // Cursors are kept as a hash: a target chooses their length.
        if !followed.insert(hash(&next)) {
            return Err(walk.fail(
                WalkKind::CursorLoops,
                format!(
                    "{request}: next_cursor {:?} was already followed: the walk loops",
                    redact::shorten(&next, 100)
                ),
            ));
        }
        match bound {
            Bound::Window(pages) if walk.pages.len() >= pages => return Ok(walk),
            Bound::Stop(pages) | Bound::Again(pages) if walk.pages.len() >= pages => {
                let what = limit.map_or(String::new(), |l| format!(" at limit={l}"));
                return Err(stopped(&request, format!("{pages} pages{what}")));
            }
            _ => {}
        }
        if read >= MAX_WALK_BYTES {
            return Err(stopped(&request, format!("{} pages and {} MiB", walk.pages.len(), MAX_WALK_BYTES >> 20)));
        }
        if started.elapsed() >= MAX_WALK_TIME {
            return Err(stopped(&request, format!("{} pages in {} s", walk.pages.len(), MAX_WALK_TIME.as_secs())));
        }
        cursor = Some(next);
    }
}

fn hash(text: &str) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault};
    BuildHasherDefault::<std::collections::hash_map::DefaultHasher>::default().hash_one(text)
}
