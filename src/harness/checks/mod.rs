//! The code of every case, grouped by spec area; `cases/*.toml` holds their descriptions.
//! Each check is an `async fn(Arc<RunContext>) -> Result<(), Stop>`.

mod accounts;
mod create;
mod events;
mod lifecycle;
mod robustness;
mod security;
mod transactions;
mod widget;

use super::context::RunContext;
use super::outcome::Stop;
use crate::schemas::{self, Schema};
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

pub type CheckFuture = Pin<Box<dyn Future<Output = Result<(), Stop>> + Send>>;
pub type Check = fn(Arc<RunContext>) -> CheckFuture;

macro_rules! registry {
    ($($id:literal => $check:path,)*) => {
        /// The code of the case `id`.
        pub fn check(id: &str) -> Option<Check> {
            match id {
                $($id => Some(|ctx| Box::pin($check(ctx))),)*
                _ => None,
            }
        }

        /// Every case id that has code.
        pub const IDS: &[&str] = &[$($id,)*];
    };
}

registry! {
    "create.response-schema" => create::response_schema,
    "create.status-created" => create::status_created,
    "create.id-prefixes" => create::id_prefixes,
    "create.fresh-ids" => create::fresh_ids,
    "create.id-shape" => create::id_shape,
    "accounts.refused-before-connected" => accounts::refused_before_connected,
    "accounts.response-schema" => accounts::response_schema,
    "accounts.connection-id" => accounts::connection_id,
    "accounts.id-prefix" => accounts::id_prefix,
    "accounts.conditional-fields" => accounts::conditional_fields,
    "accounts.masked-numbers" => accounts::masked_numbers,
    "account.readable" => accounts::account_readable,
    "transactions.page-schema" => transactions::page_schema,
    "transactions.account-id" => transactions::account_id,
    "transactions.id-prefix" => transactions::id_prefix,
    "transactions.walk-exactly-once" => transactions::walk_exactly_once,
    "transactions.limit-respected" => transactions::limit_respected,
    "transactions.starting-after" => transactions::starting_after,
    "transactions.has-more-honest" => transactions::has_more_honest,
    "events.schema" => events::schema,
    "events.envelope-agrees" => events::envelope_agrees,
    "events.created-announced" => events::created_announced,
    "events.previous-status-chain" => events::previous_status_chain,
    "events.connected-announced" => events::connected_announced,
    "events.failed-auth-announced" => events::failed_auth_announced,
    "events.mfa-required-announced" => events::mfa_required_announced,
    "events.error-announced" => events::error_announced,
    "events.disconnected-announced" => events::disconnected_announced,
    "events.single-client-id" => events::single_client_id,
    "lifecycle.random-sequences" => lifecycle::random_sequences,
    "reactions.accounts-updated" => events::accounts_updated_reaction,
    "reactions.transaction-deleted" => events::transaction_deleted_reaction,
    "reactions.account-balance" => events::account_balance_reaction,
    "auth.missing-key" => security::missing_key,
    "auth.malformed-key" => security::malformed_key,
    "auth.unknown-key" => security::unknown_key,
    "isolation.accounts" => security::isolation_accounts,
    "isolation.account" => security::isolation_account,
    "isolation.transactions" => security::isolation_transactions,
    "widget.served" => widget::served,
    "widget.defines-open" => widget::defines_open,
    "widget.no-api-key" => widget::no_api_key,
    "widget.script-runs" => widget::script_runs,
    "widget.global-open" => widget::global_open,
    "widget.open-accepts-token" => widget::open_accepts_token,
    "robustness.bad-limit" => robustness::bad_limit,
    "robustness.unknown-cursor" => robustness::unknown_cursor,
    "robustness.unknown-ids" => robustness::unknown_ids,
}

/// Fails unless `instance` validates against `schema`; `what` names where it came from.
pub(crate) fn validate(schema: Schema, instance: &Value, what: &str) -> Result<(), Stop> {
    schemas::validate(schema, instance).map_err(|violations| {
        let first: Vec<String> = violations.iter().take(3).map(ToString::to_string).collect();
        let more = violations.len().saturating_sub(3);
        let more = if more > 0 { format!(" (and {more} more)") } else { String::new() };
        Stop::fail(format!("{what}: does not validate against {}: {}{more}", schema.file_name(), first.join("; ")))
    })
}

/// Collects every problem instead of stopping at the first, then fails with them all.
#[derive(Default)]
pub(crate) struct Problems(Vec<String>);

impl Problems {
    pub fn add(&mut self, problem: impl Into<String>) {
        self.0.push(problem.into());
    }

    pub fn check(&mut self, result: Result<(), Stop>) -> Result<(), Stop> {
        match result {
            Err(Stop::Fail(m)) => {
                self.0.push(m);
                Ok(())
            }
            other => other,
        }
    }

    pub fn finish(self) -> Result<(), Stop> {
        match self.0.len() {
            0 => Ok(()),
            1 => Err(Stop::Fail(self.0.into_iter().next().unwrap_or_default())),
            n => {
                let shown: Vec<String> = self.0.iter().take(3).cloned().collect();
                let more = if n > 3 { format!("; and {} more", n - 3) } else { String::new() };
                Err(Stop::Fail(format!("{n} problems: {}{more}", shown.join("; "))))
            }
        }
    }
}

/// A string field of a JSON object, if it is one.
pub(crate) fn str_field<'a>(value: &'a Value, field: &str) -> Option<&'a str> {
    value.get(field).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::catalogue;

    #[test]
    fn every_case_has_code_and_every_check_a_case() {
        for case in catalogue::all() {
            assert!(check(&case.id).is_some(), "case {} has no code in src/harness/checks", case.id);
        }
        for id in IDS {
            assert!(catalogue::find(id).is_some(), "check {id} has no entry in cases/");
        }
    }
}
