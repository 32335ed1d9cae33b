//! The reference the pagination properties compare their walks with: each account of the
//! shared connection and the ids of its default-limit walk, and the inputs drawn against it.

use crate::harness::fixtures::context::{Connected, RunContext};
use crate::harness::transport::pagination;
use crate::harness::vocab::outcome::Stop;
use crate::spec;
use proptest::prelude::*;
use std::time::Instant;

/// One generated input: which account, which page size, which starting point.
#[derive(Clone)]
pub(crate) struct Input {
    pub(super) account: usize,
    pub(super) limit: u64,
    /// Index of the item to start after, modulo the account's length.
    pub(super) position: usize,
}

/// Written in words in every report, not in Rust's syntax (`Input { account: 0, … }`).
impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "account #{}, limit={}, starting after item #{}", self.account, self.limit, self.position)
    }
}

/// The reference: each account and the ids of its default-limit walk.
pub(super) struct Reference {
    accounts: Vec<(String, Vec<String>)>,
    /// The longest page of the default-limit walks: the target serves pages this long, so a
    /// `limit` up to it must be accepted.
    default_page: usize,
    /// When the first of the walks was sent: a change announced after it may be in them or not.
    since: Option<Instant>,
}

impl Reference {
    /// The reference of every account of `fixtures` ([`RunContext::paged_connections`]).
    pub(super) fn of(ctx: &RunContext, fixtures: &[std::sync::Arc<Connected>]) -> Result<Self, Stop> {
        let mut walks = Vec::new();
        for fixture in fixtures {
            walks.extend(fixture.walks()?);
        }
        let sent = walks.iter().flat_map(|(_, w)| &w.pages).filter_map(|p| ctx.api.answers().get(p.seq?));
        let since = sent.map(|answer| answer.sent_at).min();
        let default_page = walks.iter().flat_map(|(_, w)| w.pages.iter().map(|p| p.items.len())).max().unwrap_or(0);
        let accounts: Vec<(String, Vec<String>)> = walks.into_iter().map(|(id, w)| (id.to_string(), w.ids())).collect();
        if accounts.is_empty() {
            return Err(Stop::ignore("the connection has no account"));
        }
        Ok(Self { accounts, default_page, since })
    }

    /// Whether the target refuses `input.limit` as above its maximum (§8 leaves the maximum
    /// open, and whether a larger limit is clamped or refused): a 4xx to a limit larger than
    /// its default pages. Such inputs are discarded, not failed.
    pub(super) async fn limit_refused(&self, ctx: &RunContext, input: &Input) -> Result<bool, Stop> {
        if input.limit <= self.default_page as u64 {
            return Ok(false);
        }
        let (account, _) = self.account(input);
        pagination::refuses_limit(&ctx.api, account, input.limit).await
    }

    /// The boundary inputs every run tries on every account, whatever the seed: `limit` 1, 2,
    /// the item count − 1, the count, the count + 1, a divisor of the count and the default page,
    /// each starting after the first, middle or last item in turn (so each of those is covered),
    /// but `limit` n − 1 after the first item and 2 after the fourth from the end (issue 51).
    pub(super) fn boundaries(&self) -> Vec<Input> {
        let mut inputs = Vec::new();
        for (account, (_, ids)) in self.accounts.iter().enumerate() {
            let n = ids.len() as u64;
            let divisor = (3..n).find(|d| n.is_multiple_of(*d)).or((2..n).find(|d| n.is_multiple_of(*d)));
            let mut limits: Vec<u64> =
                [Some(1), Some(2), n.checked_sub(1), Some(n), Some(n + 1), divisor, Some(self.default_page as u64)]
                    .into_iter()
                    .flatten()
                    .filter(|l| *l >= 1)
                    .collect();
            limits.sort_unstable();
            limits.dedup();
            let positions = [0, ids.len() / 2, ids.len().saturating_sub(1)];
            for (i, limit) in limits.into_iter().enumerate() {
                // A page after a starting point that ends at the end, and one that ends one item
                // before it: a fault at the end of a list shows whatever the account's length.
                let position = match limit {
                    l if l + 1 == n => 0,
                    2 if n >= 4 => ids.len() - 4,
                    _ => positions[i % positions.len()],
                };
                inputs.push(Input { account, limit, position });
            }
        }
        inputs
    }

    pub(super) fn account(&self, input: &Input) -> (&str, &[String]) {
        let (id, ids) = &self.accounts[input.account % self.accounts.len()];
        (id, ids)
    }

    /// `failure`, a walk's difference from this reference on `account`, unless the target
    /// announced a change of the account's transactions since the reference was walked (§1 item 5:
    /// an `accounts.updated` or a `transaction.deleted` naming it, awaited up to the event wait,
    /// as deliveries may be late). Then the reference no longer describes the account and the
    /// difference is not judged here: whether the change was announced is
    /// `state.changes-announced`'s rule, and walks under changes are judged by the
    /// `walk-under-*` cases. A target that syncs in the background, announcing it, is legal.
    pub(super) async fn unless_changed(&self, ctx: &RunContext, account: &str, failure: Stop) -> Result<(), Stop> {
        let (Some(since), Ok(receiver)) = (self.since, ctx.receiver()) else { return Err(failure) };
        let announced = || {
            receiver.timeline().iter().any(|(arrived, d)| {
                *arrived >= since
                    && d.data_str("accountId") == Some(account)
                    && matches!(d.event_type(), Some(spec::ACCOUNTS_UPDATED | spec::TRANSACTION_DELETED))
            })
        };
        let until = Instant::now() + ctx.plan.event_wait();
        while !announced() {
            if !receiver.next_arrival(until).await {
                if announced() {
                    break;
                }
                return Err(failure);
            }
        }
        Err(Stop::ignore(format!(
            "not judged against the reference walk: the target announced a change of {account}'s transactions \
             since it was walked (§1 item 5)"
        )))
    }

    pub(super) fn strategy(&self) -> impl Strategy<Value = Input, Tree: Send> {
        let longest = self.accounts.iter().map(|(_, ids)| ids.len()).max().unwrap_or(0);
        let max_limit = (longest as u64 + 2).clamp(3, 60);
        (0..self.accounts.len(), 1..=max_limit, 0..1000usize).prop_map(|(account, limit, position)| Input {
            account,
            limit,
            position,
        })
    }
}

/// The ids among `missing` whose removal the target announced (a `transaction.deleted` naming
/// it, §6, whenever it arrived: the account was walked for the walk's `before` list earlier, and
/// an event of a removal since may come before the walk began), awaited until all are or the
/// event wait of the run has passed (its floor, the latency it learned, a busy queue): deliveries may
/// be late, and slow is never wrong.
pub(super) async fn announced_removals(ctx: &RunContext, missing: &[&String]) -> std::collections::HashSet<String> {
    let Ok(receiver) = ctx.receiver() else { return Default::default() };
    let announced = || -> std::collections::HashSet<String> {
        receiver
            .timeline()
            .iter()
            .filter(|(_, d)| d.event_type() == Some(spec::TRANSACTION_DELETED))
            .filter_map(|(_, d)| d.data_str("transactionId").map(str::to_string))
            .filter(|id| missing.contains(&id))
            .collect()
    };
    // As long as any wait for an event of the run: a queue seconds behind (webhooks 20 s late on
    // a loaded machine) announces a deduplication made inside the walk long after the walk.
    let started = Instant::now();
    loop {
        let gone = announced();
        let until = receiver.patience.deadline(started, ctx.plan.event_wait(), receiver.arrived_so_far() == 0);
        if gone.len() == missing.len() || !receiver.next_arrival(until).await {
            return announced();
        }
        receiver.patience.arrival();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever an account's length, its boundary inputs hold a page after a starting point
    /// that ends at the end and one that ends one item before it (issue 51).
    #[test]
    fn boundaries_end_at_and_before_the_end_at_every_length() {
        for n in 2..80usize {
            let ids = (0..n).map(|i| format!("txn_{i}")).collect();
            let reference = Reference { accounts: vec![("acc_1".into(), ids)], default_page: 25, since: None };
            let left: Vec<i64> = reference
                .boundaries()
                .iter()
                .map(|i| n as i64 - 1 - i.position.min(n - 1) as i64 - i.limit as i64)
                .collect();
            assert!(left.contains(&0), "n = {n}: no page ends at the end: {left:?}");
            assert!(n < 3 || left.contains(&1), "n = {n}: no page ends one item before the end: {left:?}");
        }
    }
}
