//! §4.3 rule 1 under changes: walks of a fresh connection's longest account with transactions
//! added or removed between their page reads, and the syncs after them.

use super::reference;
use crate::harness::fixtures::context::{Driven, RunContext, LONG_ACCOUNT_DRAWS};
use crate::harness::setup::steps::Created;
use crate::harness::transport::answers::Auth;
use crate::harness::transport::pagination::{self, fetch_page};
use crate::harness::vocab::kind::WalkKind;
use crate::harness::vocab::outcome::{Failure, Problem, Problems, Stop};
use crate::spec::Action;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// Insertions a walk interleaves: `update_accounts` after each of its first pages.
const INSERTIONS: usize = 3;

/// §4.3 rule 1: `starting_after` returns the items after the item it names, so transactions
/// added between two page reads (`update_accounts`, §6.3) neither repeat nor hide one that
/// existed throughout (new ones may show or not). On a fresh connection, which no other case
/// reads, in the account with the most transactions, in 4 pages or more.
pub(super) async fn walk_under_insertions(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let (created, account, before, limit) = longest_account(&ctx, 4).await?;
    let walk = interleaved_walk(&ctx, &created, &account, limit, |read, _, _, _| {
        (read < INSERTIONS).then_some(Between::Insert)
    })
    .await?;
    let walked = format!(
        "{} and following next_cursor, with update_accounts after each of the first {INSERTIONS} pages",
        walk.first
    );
    unless_removed(&ctx, before.iter().collect(), (&walk, &walked)).await
}

/// §4.3 rule 1 under deletions: a transaction removed between two page reads
/// (`delete_transaction`, §6.3), one the walk already listed (before the cursor), then one it
/// has not reached (after it), then the very one the next cursor names (the page's last item
/// when the cursor is opaque), neither hides nor repeats one that is still there. No
/// `transaction.deleted` is awaited within the walk: the driver's answer says the deletion was
/// done, and the walk needs no event; all are awaited with the first round of the changes after
/// it (one late wait, not one per deletion: issue 72), and `state.deletions-hold` judges every
/// page read after one arrived. The cursor whose item is gone may be refused (`cases/README.md`,
/// "Walks under deletions"): the walk then goes on after the last item it listed that is still
/// there; a page that answers it is the next page, held to the same promise.
pub(super) async fn walk_under_deletions(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let (created, account, before, limit) = longest_account(&ctx, 6).await?;
    let known = ctx.known_events(&created);
    let mut picked = Vec::<String>::new();
    let walk = interleaved_walk(&ctx, &created, &account, limit, |_, seen, next, refused| {
        // Never the page's last item first, which an opaque cursor may name: that one is the
        // third deletion's.
        let fresh = |id: &&String| !picked.contains(id);
        let listed = |id: &&String| seen.contains(id) && **id != next && Some(*id) != seen.last();
        let own = cursor_item(seen, next);
        let pick = match picked.len() - refused.len() {
            0 => before.iter().filter(fresh).find(listed),
            1 => before.iter().filter(fresh).find(|id| !seen.contains(id)),
            2 => before.iter().filter(fresh).find(|id| Some(id.as_str()) == own),
            _ => None,
        };
        let id = pick.cloned()?;
        picked.push(id.clone());
        Some(Between::Remove(id))
    })
    .await?;
    let removed = walk.removed.clone();
    if removed.len() < 2 {
        return Err(Stop::ignore(format!("the walk of {account} ended before both of its deletions; not judged")));
    }
    let walked = describe(&walk, &removed);
    let kept = before.iter().filter(|id| !removed.contains(id)).collect();
    let verdict = unless_removed(&ctx, kept, (&walk, &walked)).await;
    let survivor = before.iter().find(|id| !removed.contains(id)).cloned().unwrap_or_default();
    let deletions = removed
        .iter()
        .map(|id| Driven {
            action: Action::DeleteTransaction,
            account: Some(account.clone()),
            transaction: Some(id.clone()),
        })
        .collect();
    if let Err(stop) = sync_after_deletions(&ctx, &created, &account, &survivor, (known, deletions)).await {
        ctx.note("not judged", format!("the sync of {account} after its walk under deletions: {stop}"));
    }
    verdict
}

/// The item a page's `next` cursor names: the cursor itself when the walk listed it (a
/// transaction id, §4.3's sample), else the page's last item (an opaque cursor).
fn cursor_item<'a>(seen: &'a [String], next: &'a str) -> Option<&'a str> {
    match seen.iter().any(|id| id == next) {
        true => Some(next),
        false => seen.last().map(String::as_str),
    }
}

/// The walk under deletions as its findings name it.
fn describe(walk: &Walked, removed: &[String]) -> String {
    let own = walk.own.as_ref().filter(|id| removed.contains(id));
    let others: Vec<&String> = removed.iter().filter(|id| Some(*id) != own).collect();
    let mut text = format!("{} and following next_cursor, with {} (listed)", walk.first, others[0]);
    match (others.get(1), own) {
        (Some(next), Some(own)) => {
            text += &format!(", {next} (not yet) and {own} (the one the next cursor names) deleted between page reads")
        }
        (Some(next), None) => text += &format!(" and {next} (not yet) deleted between page reads"),
        (None, Some(own)) => text += &format!(" and {own} (the one the next cursor names) deleted between page reads"),
        (None, None) => text += " deleted between page reads",
    }
    if let Some(after) = &walk.resumed {
        text += &format!(" (the cursor was refused once its item was gone; the walk went on after {after})");
    }
    text
}

/// How many of a walk's deletions the driver may refuse before the walk stops with its error:
/// the walk picks from the account as it was before, and a target that deduplicates on its own
/// may have removed several of those since (variant `background-dedup` removes five).
const REFUSALS: usize = 8;

/// A change a walk makes between two page reads of its account.
enum Between {
    /// `update_accounts`, not awaited (new transactions may show or not).
    Insert,
    /// `delete_transaction` of this one, its `transaction.deleted` awaited after the walk.
    Remove(String),
}

/// What an interleaved walk listed: every id in order, its pages (the evidence) and its first
/// request.
struct Walked {
    seen: Vec<String>,
    /// The deletions the driver did not make (the target may have removed the item on its own
    /// first, §6: a deduplication); the walk picks another.
    refused: Vec<String>,
    /// The deletions the driver made, in order.
    removed: Vec<String>,
    /// The removed item the next cursor named when it was removed, if any.
    own: Option<String>,
    /// The item the walk went on after, when the cursor naming a removed item was refused.
    resumed: Option<String>,
    pages: Vec<Option<u64>>,
    first: String,
}

/// Walks `account` at `limit`, making the change `between` asks for after each page that has a
/// next one (given the page's number, the ids listed so far, the cursor to follow and the
/// deletions the driver refused). A refused deletion is no verdict: another is asked for at
/// once; more than [`REFUSALS`] stop the walk with the driver's error. A cursor refused once the
/// item it names was removed is open (§4.3 places the items after an item, §7 shows no error):
/// the walk goes on with `starting_after` the last listed item it did not remove.
async fn interleaved_walk(
    ctx: &RunContext,
    created: &Created,
    account: &str,
    limit: u64,
    mut between: impl FnMut(usize, &[String], &str, &[String]) -> Option<Between>,
) -> Result<Walked, Stop> {
    let mut walked = Walked {
        seen: Vec::new(),
        refused: Vec::new(),
        removed: Vec::new(),
        own: None,
        resumed: None,
        pages: Vec::new(),
        first: String::new(),
    };
    let mut cursor = None::<String>;
    let mut gone = false;
    for read in 0.. {
        if read == pagination::MAX_LIMITED_PAGES {
            return Err(Stop::ignore(format!("the walk stopped at its bound of {read} pages; not judged")));
        }
        // The cursor whose item is gone may be refused, or answered as naming nothing: an empty
        // last page ("no items after an item that is not there"). Either way the walk goes on.
        let page = match pagination::fetch_with_status(&ctx.api, account, Some(limit), cursor.as_deref()).await {
            (400..=599, Err(_)) if gone => resume(ctx, account, limit, &mut walked).await?,
            (_, Ok(page)) if gone && page.items.is_empty() && !page.has_more => {
                resume(ctx, account, limit, &mut walked).await?
            }
            (_, page) => page?,
        };
        gone = false;
        if read == 0 {
            walked.first = page.request.clone();
        }
        walked.pages.push(page.seq);
        walked.seen.extend(page.ids());
        if !page.has_more {
            return Ok(walked);
        }
        // A page without a cursor to follow is has-more-honest's failure, not this one's.
        let next = page.next().ok_or_else(|| Stop::ignore("has_more without next_cursor: no walk to judge"))?;
        // A refused deletion is replaced at once by another, between the same two pages.
        while let Some(change) = between(read, &walked.seen, &next, &walked.refused) {
            let Between::Remove(id) = change else {
                ctx.drive(Action::UpdateAccounts, created, Some(account), None).await?;
                break;
            };
            match ctx.drive(Action::DeleteTransaction, created, Some(account), Some(&id)).await {
                Ok(()) => {
                    gone = cursor_item(&walked.seen, &next) == Some(id.as_str());
                    if gone {
                        walked.own = Some(id.clone());
                    }
                    walked.removed.push(id);
                    break;
                }
                Err(stop) if walked.refused.len() == REFUSALS => return Err(stop),
                Err(_) => walked.refused.push(id),
            }
        }
        cursor = Some(next);
    }
    Ok(walked)
}

/// The page after the last listed item the walk did not remove, where the cursor naming a
/// removed item was refused or named nothing.
async fn resume(
    ctx: &RunContext,
    account: &str,
    limit: u64,
    walked: &mut Walked,
) -> Result<crate::harness::transport::reads::Page, Stop> {
    let after = walked.seen.iter().rev().find(|id| !walked.removed.contains(id));
    let after = after.cloned().ok_or_else(|| Stop::ignore("no listed item left to go on after"))?;
    walked.resumed = Some(after.clone());
    fetch_page(&ctx.api, account, Some(limit), Some(&after)).await
}

/// After a walk's deletions, more changes of the same account interleaved, in two rounds, each
/// driven whole, its events awaited at once (one webhook delay a round, not one a step), and
/// the account read again after each: a sync and a deletion (of `survivor`, listed by the
/// walk); then a sync again and a sync of an account the target picks (the driver may name
/// none, docs/driver.md). The read between the rounds brackets the second sync, so a change it
/// made that no event announces shows (`state.changes-announced`; `tests/foreign/node-side-effects`'s
/// `update-silenced` drops the event of a sync that comes within 3 s of the last). No verdict
/// of the walk's own: the rules over the record judge what they show (a new transaction under
/// an id already given: `invariants.identity`; an `accounts.updated` without its account:
/// `events.schema`).
///
/// The first round's wait also awaits the walk's own deletions (`before`: the events heard
/// before the walk, and its deletions), so the whole case waits for its events twice: the read
/// between the rounds must come after the first round's events, or a late one would explain a
/// change the second round made unannounced.
async fn sync_after_deletions(
    ctx: &RunContext,
    created: &Created,
    account: &str,
    survivor: &str,
    (known, mut driven): (std::collections::HashSet<String>, Vec<Driven>),
) -> Result<(), Stop> {
    let first =
        [(Action::UpdateAccounts, Some(account), None), (Action::DeleteTransaction, Some(account), Some(survivor))];
    driven.extend(ctx.drive_steps(created, &first).await?);
    ctx.await_steps(created, &known, &driven).await;
    pagination::walk_again(&ctx.api, account).await?;
    let second = [(Action::UpdateAccounts, Some(account), None), (Action::UpdateAccounts, None, None)];
    ctx.drive_all_and_await(created, &second).await?;
    pagination::walk_again(&ctx.api, account).await?;
    Ok(())
}

/// A fresh connection's account with the most transactions, if it has `at_least` (else the next
/// fresh connection's, up to [`LONG_ACCOUNT_DRAWS`]): its connection, id, transactions as a
/// walk lists them, and a `limit` that splits them into about four pages, never above the
/// target's own page size (which §8 lets it cap). Walked after this, the account is read by no
/// other case.
async fn longest_account(ctx: &RunContext, at_least: usize) -> Result<(Created, String, Vec<String>, u64), Stop> {
    for _ in 0..LONG_ACCOUNT_DRAWS {
        // The accounts as the connect served them: read once (issue 72).
        let (created, accounts) = ctx.connect_new_as(Auth::Primary).await?;
        let mut longest: Option<(String, Vec<String>, usize)> = None;
        for account in accounts {
            let Some(id) = account.get("id").and_then(Value::as_str) else { continue };
            let walk = pagination::walk(&ctx.api, id, None, None).await?;
            let page = walk.pages.iter().map(|p| p.items.len()).max().unwrap_or(0);
            if longest.as_ref().is_none_or(|(_, most, _)| walk.ids().len() > most.len()) {
                longest = Some((id.to_string(), walk.ids(), page));
            }
        }
        if let Some((account, before, page)) = longest.filter(|(_, ids, _)| ids.len() >= at_least) {
            let limit = (before.len() / 4).clamp(1, page.max(1)) as u64;
            return Ok((created, account, before, limit));
        }
    }
    Err(Stop::ignore(format!("no account of {LONG_ACCOUNT_DRAWS} new connections has {at_least} transactions to walk")))
}

/// Each of `expected` listed exactly once by `walk` ([`exactly_once`]), but for those the target
/// announced removing (whenever its event came): §6 names removals the service makes on its
/// own (a deduplication), which may land inside any walk and be announced after it, so a missing
/// item is awaited for its `transaction.deleted` before it is held against the walk.
async fn unless_removed(ctx: &RunContext, expected: Vec<&String>, (walk, walked): (&Walked, &str)) -> Result<(), Stop> {
    let missing: Vec<&String> = expected.iter().copied().filter(|id| !walk.seen.contains(id)).collect();
    let gone = match missing.is_empty() {
        true => Default::default(),
        false => reference::announced_removals(ctx, &missing).await,
    };
    exactly_once(expected.into_iter().filter(|id| !gone.contains(*id)), &walk.seen, walked, &walk.pages).finish()
}

/// Each of `expected` listed exactly once in `seen`, the ids a walk (`walked`, on `pages`) listed.
fn exactly_once<'a>(
    expected: impl Iterator<Item = &'a String>,
    seen: &[String],
    walked: &str,
    pages: &[Option<u64>],
) -> Problems {
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for id in seen {
        *counts.entry(id).or_default() += 1;
    }
    let mut problems = Problems::default();
    for id in expected {
        match counts.get(id.as_str()).copied().unwrap_or(0) {
            1 => {}
            0 => problems.add(on_pages(
                pages,
                WalkKind::NeverListed,
                format!("{walked}: {id} was never listed, though it existed throughout"),
            )),
            n => problems.add(on_pages(pages, WalkKind::Repeated, format!("{walked}: {id} was listed {n} times"))),
        }
    }
    problems
}

/// A finding resting on the answers of `pages` (their places in the answer log).
fn on_pages(pages: &[Option<u64>], kind: WalkKind, message: String) -> Failure {
    pages.iter().fold(Failure::from(Problem::found(kind, [], message)), |f, seq| f.on_answer(*seq))
}
