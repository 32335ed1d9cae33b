//! The harness tested against itself, one trial per sandbox mutant and variant (the same runs
//! as `bankconf self-test`): a mutant must fail the run in every case it names, a variant must
//! pass. `cargo test --test mutants -- page-gap` runs one.
//!
//! What each subject makes fail is pinned in `snapshots/self-test/<name>.snap`, so a change in
//! what the catalogue catches shows in review (`cargo insta review`).
//!
//! A mutant trial runs the cases the mutant names; a variant, the whole catalogue. The seed
//! sweeps (each mutant flagged `#[seed]` in `src/sandbox/faults/` under five more seeds) are marked ignored: `.ci/run` runs
//! them with `cargo test --test mutants -- --ignored`. Without a browser, the mutants only a
//! browser catches are reported ignored at run time.

use bankconf::internal::selftest::{self, Options, Subject};
use bankconf::sandbox::{Mutant, Variant};
use bankconf::Outcome;
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    // Each trial mostly waits on its embedded sandbox (a third of a core at eight at a time):
    // eight at a time, where the self-test's four took 156 s of the README's `cargo test` and
    // eight 91 s.
    args.test_threads.get_or_insert(8);
    let runtime = Arc::new(tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime"));
    let event_timeout = Options::default().event_timeout;
    let subjects = Mutant::ALL
        .iter()
        .map(|m| (Subject::Mutant(*m), "mutant"))
        .chain(Variant::ALL.iter().map(|v| (Subject::Variant(*v), "variant")));
    let trials: Vec<Trial> = subjects
        .map(|(subject, kind)| {
            let runtime = runtime.clone();
            let no_browser = subject.needs_browser().then(selftest::browser_missing).flatten();
            Trial::ignorable_test(subject.name(), move || {
                if let Some(why) = no_browser {
                    return Ok(Completion::ignored_with(why));
                }
                let run = async {
                    tokio::time::timeout(Duration::from_secs(300), selftest::trial(subject, event_timeout)).await
                };
                let trial = runtime.block_on(run).map_err(|_| Failed::from("the run took over 300 s"))?;
                // What it was caught by (or what failed a variant) first; then the pin.
                if !trial.ok() {
                    return Err(Failed::from(trial.line()));
                }
                let pinned = trial.pinned();
                insta::with_settings!({
                    snapshot_path => "../snapshots/self-test",
                    prepend_module_to_snapshot => false,
                    omit_expression => true,
                }, {
                    insta::assert_json_snapshot!(subject.name(), pinned);
                });
                Ok(Completion::Completed)
            })
            .with_kind(kind)
        })
        .collect();
    // A catch must not depend on the seed: the mutants whose fault only some inputs show are
    // run again under more seeds (not pinned: only that they are caught).
    let seeds = [1u64, 2, 3, 5, 6];
    // Which: the rows flagged `#[seed]` in src/sandbox/faults/ (`Mutant::seed_sensitive`).
    let seed_trials = Mutant::ALL.iter().copied().filter(|m| m.seed_sensitive()).flat_map(|mutant| {
        let name = mutant.name();
        let runtime = runtime.clone();
        seeds.into_iter().map(move |seed| {
            let runtime = runtime.clone();
            Trial::test(format!("{name}@seed-{seed}"), move || {
                let config = selftest::config_with_seed(Subject::Mutant(mutant), event_timeout, seed);
                let run = async {
                    tokio::time::timeout(
                        Duration::from_secs(300),
                        selftest::trial_with(config, Subject::Mutant(mutant)),
                    )
                    .await
                };
                let trial = runtime.block_on(run).map_err(|_| Failed::from("the run took over 300 s"))?;
                if trial.ok() {
                    Ok(())
                } else {
                    Err(Failed::from(format!("seed {seed}: {}", trial.line())))
                }
            })
            .with_kind("seed")
            // The full matrix, in `.ci/run`: `cargo test --test mutants -- --ignored`.
            .with_ignored_flag(true)
        })
    });
    let driven_again = {
        let runtime = runtime.clone();
        Trial::test("sync-replaces-silently/deletion-driven-again", move || {
            runtime.block_on(deletion_driven_again(event_timeout)).map_err(Failed::from)
        })
        .with_kind("mutant")
    };
    let shared_id = {
        let runtime = runtime.clone();
        Trial::test("transaction-in-two-accounts/what-rests-on-it", move || {
            runtime.block_on(shared_transaction_id(event_timeout)).map_err(Failed::from)
        })
        .with_kind("mutant")
    };
    let wrong_page = {
        let runtime = runtime.clone();
        Trial::test("page-missing-has-more/read-along", move || {
            runtime.block_on(read_along(event_timeout)).map_err(Failed::from)
        })
        .with_kind("mutant")
    };
    let trials: Vec<Trial> =
        trials.into_iter().chain(seed_trials).chain([driven_again, shared_id, wrong_page]).collect();
    libtest_mimic::run(&args, trials).exit_code()
}

/// Under `sync-replaces-silently`, the walk under deletions' last rounds drive a sync and then
/// the deletion of the account's newest transaction, which the sync replaced: the target refuses
/// it. The flow deletes the transaction the list shows now (`Session::delete_listed`), so those
/// rounds are judged in every run, not left "not judged" by the order of the target's queue
/// (issue 51; `tests/foreign/python-steady`'s `silent-dedup-on-update`).
async fn deletion_driven_again(event_timeout: f64) -> Result<(), String> {
    let subject = Subject::Mutant(Mutant::SyncReplacesSilently);
    let config = selftest::config_with_seed(subject, event_timeout, 1);
    let report = bankconf::internal::runner::run_report(config, None).await;
    match report.notes.iter().find(|n| n.to_string().contains("after its walk under deletions")) {
        Some(note) => Err(format!("the walk's rounds were not judged: {note}")),
        None => Ok(()),
    }
}

/// Under `transaction-in-two-accounts`, one transaction id is listed under two accounts: the
/// state rules and reactions that key transactions by id cannot tell which one a read or event
/// concerns, so each is ignored naming `state.one-owner`'s finding, in every run alike (issue 51;
/// `tests/foreign/python-outsider`'s `txn-id-per-account` failed `reactions.accounts-updated` in 1 run of 5);
/// the rules over accounts alone are still judged.
async fn shared_transaction_id(event_timeout: f64) -> Result<(), String> {
    let subject = Subject::Mutant(Mutant::TransactionInTwoAccounts);
    let mut config = selftest::config_with_seed(subject, event_timeout, 1);
    config.ids = ["state.", "reactions."].map(String::from).to_vec();
    let report = bankconf::internal::runner::run_report(config, None).await;
    let said = "one client was shown one transaction id in the pages of two accounts";
    let outcome = |id: &str| report.results.iter().find(|r| r.case.id == id).map(|r| r.outcome.clone());
    let mut wrong = Vec::new();
    match outcome("state.one-owner") {
        Some(Outcome::Failed(f)) if f.problems.first().is_some_and(|p| p.detail.contains(said)) => {}
        other => wrong.push(format!("state.one-owner: {other:?}")),
    }
    for id in ["state.changes-announced", "state.deletions-hold", "reactions.accounts-updated"] {
        match outcome(id) {
            Some(Outcome::Ignored { reason, .. }) if reason.contains(said) => {}
            other => wrong.push(format!("{id}: {other:?}")),
        }
    }
    match outcome("state.list-complete") {
        Some(Outcome::Passed) => {}
        other => wrong.push(format!("state.list-complete (over accounts alone): {other:?}")),
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("\n"))
    }
}

/// Under `page-missing-has-more`, every walk stops at its first page: the transactions cases
/// fail on it, and the cases that only read along (the accounts' response checks, the state
/// model, identity) judge what they read and do not fail with the walk's message (issue 51:
/// `tests/foreign/python-stamps`'s `zero-txn-null` failed 20 such cases with a page's `{"data": null}`).
async fn read_along(event_timeout: f64) -> Result<(), String> {
    let subject = Subject::Mutant(Mutant::PageMissingHasMore);
    let mut config = selftest::config_with_seed(subject, event_timeout, 1);
    config.ids = ["transactions.page-schema", "accounts.", "state.", "invariants.identity", "isolation.transactions"]
        .map(String::from)
        .to_vec();
    let report = bankconf::internal::runner::run_report(config, None).await;
    let mut wrong = Vec::new();
    for r in &report.results {
        let page_schema = r.case.id == "transactions.page-schema";
        match (&r.outcome, page_schema) {
            (Outcome::Failed(_), true) => {}
            (Outcome::Failed(f), false) if f.problems.iter().any(|p| p.detail.contains("has_more")) => {
                wrong.push(format!("{} failed with the walk's finding", r.case.id));
            }
            (other, true) => wrong.push(format!("transactions.page-schema: {other:?}")),
            _ => {}
        }
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("\n"))
    }
}
