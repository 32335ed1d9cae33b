//! §6.3 Expected client reactions: after `accounts.updated` and `transaction.deleted`, what the
//! client re-reads shows what the event announced.

use crate::harness::fixtures::context::RunContext;
use crate::harness::rules::delivery::{self, Delivery};
use crate::harness::vocab::kind::ReactionKind;
use crate::harness::vocab::outcome::{Problem, Stop};
use crate::spec::{self, Action};
use serde_json::Value;
use std::sync::Arc;

super::cases! {
    ACCOUNTS_UPDATED = "reactions.accounts-updated" => accounts_updated, models [super::state::data_after_event];
    TRANSACTION_DELETED = "reactions.transaction-deleted" => transaction_deleted;
    ACCOUNT_BALANCE = "reactions.account-balance" => account_balance;
}

/// The tour's reaction (§6.3), then its reads made again: an update's data that shows only
/// after the reaction read is judged over every read of the run (`state::data_after_event`),
/// and these give it a later read whatever else the run selected. How the reads went is the
/// state cases' to report (they share them): it never decides this case.
async fn accounts_updated(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.tour().await?.step(Action::UpdateAccounts)?;
    let _shared = super::state::reread(ctx).await;
    Ok(())
}

/// §4.4 returns "the updated balance", and §6.3 sends the client there on accounts.updated; the
/// connection's account list (§4.2) shows the current balance too. After the update both must
/// agree. The shape of §4.4 is not shown: without a numeric `balance` there, nothing is judged.
async fn account_balance(ctx: Arc<RunContext>) -> Result<(), Stop> {
    let receiver = ctx.receiver()?;
    // The state cases' connection with an account updated, read singly before the update.
    let updated = super::state::updated(&ctx).await?;
    let (id, account, known) = (&updated.created.connection_id, updated.account.as_str(), &updated.known);
    let names = |d: &Delivery| d.body.pointer("/data/accountId").and_then(Value::as_str) == Some(account);
    let what = format!("{} for {id}", spec::ACCOUNTS_UPDATED);
    // Its own event, naming the account driven: another account's update may come first (a
    // sync of several), and which came first must not decide which account is judged.
    let (_, seen) = receiver
        .wait_until(&what, id, ctx.plan.event_wait(), |ds| {
            delivery::step_event(ds, known, spec::ACCOUNTS_UPDATED, names).is_some_and(names)
        })
        .await;
    let Some(event) = delivery::step_event(&seen, known, spec::ACCOUNTS_UPDATED, names) else {
        return Err(Stop::ignore(format!(
            "no {} arrived (judged by {ACCOUNTS_UPDATED}){}",
            spec::ACCOUNTS_UPDATED,
            receiver.refusals()
        )));
    };
    let account = event.body.pointer("/data/accountId").and_then(Value::as_str).unwrap_or(account).to_string();
    let mut last = None;
    for _ in 0..BALANCE_TRIES {
        match balances_agree(&ctx, id, &account).await? {
            None => return Ok(()),
            Some(failure) => last = Some(failure),
        }
    }
    Err(last.unwrap_or_else(|| Stop::ignore("no read compared")))
}

/// How many list-single-list readings a disagreement must survive: a server that syncs in the
/// background (§1) may change a balance between two reads, twice inside one reading only by
/// rare chance, and not in every reading; a cached or stale single read disagrees in each.
const BALANCE_TRIES: usize = 3;

/// One reading: the connection's account list (§4.2), the single account (§4.4), the list
/// again. The single read agrees when its balance is one of the two lists': a change between
/// the reads is no fault (the sweep's `background-sync` with late deliveries, 7.1 legal-96).
/// `None` when it agrees; the finding when not; an ignore when nothing can be compared.
async fn balances_agree(ctx: &RunContext, id: &str, account: &str) -> Result<Option<Stop>, Stop> {
    let before = ctx.accounts_when_ready(id).await?;
    let one = ctx.api.get(&["v1", "accounts", account], &[]).await?;
    let single = one.success_json()?;
    let after = ctx.accounts_when_ready(id).await?;
    let balance_in = |list: &[Value]| {
        list.iter()
            .find(|a| a.get("id").and_then(Value::as_str) == Some(account))
            .map(|a| a.get("balance").and_then(Value::as_f64))
    };
    // An account that dropped out of the list is judged once, by `state.nothing-vanishes` (§4.2),
    // over every read of the run, these included: here there is then nothing to compare.
    let (Some(was), Some(now)) = (balance_in(&before), balance_in(&after)) else {
        return Err(Stop::ignore(format!(
            "{account} is not in the list read after the update (judged by state.nothing-vanishes, §4.2)"
        )));
    };
    let got = spec::single_account(&single).and_then(|a| a.get("balance")).and_then(Value::as_f64);
    let (Some(got), Some(want)) = (got, now) else {
        return Err(Stop::ignore("no numeric balance in both GET /v1/accounts/{accountId} and the account list"));
    };
    let same = |b: f64| (got - b).abs() <= 1e-9;
    if same(want) || was.is_some_and(same) {
        return Ok(None);
    }
    let was = was.map_or_else(|| "no balance".to_string(), |b| b.to_string());
    let detail = format!(
        "after {} for {account}: {} shows balance {got}, GET /v1/connections/{id}/accounts shows {was} just before it and {want} just after",
        spec::ACCOUNTS_UPDATED,
        one.request
    );
    let problem = Problem::found(ReactionKind::Balance, [account.to_string()], detail)
        .expecting(format!("balance {want} (or {was})"), format!("balance {got}"));
    Ok(Some(one.cites(problem)))
}

async fn transaction_deleted(ctx: Arc<RunContext>) -> Result<(), Stop> {
    ctx.tour().await?.step(Action::DeleteTransaction)
}
