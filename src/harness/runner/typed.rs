//! Every failed problem is typed (issue 74): a kind, and what was expected against what came
//! wherever its rule compared two values. Shown on the embedded sandbox with mutants of each
//! family of rules, run in-process as the self-test runs them.

use crate::harness::embedded::Mutant;
use crate::harness::setup::config::RunConfig;
use crate::harness::vocab::catalogue::Level;
use crate::harness::vocab::outcome::Outcome;

/// A mutant of each family: its name, and the kinds among its findings whose rule compares two
/// values (each must say both, and one at least is found).
const MUTANTS: [(&str, &[&str]); 9] = [
    ("created-at-restamped", &["state.fixed-field"]),
    ("page-gap", &[]),
    ("isolation-transactions", &["isolation.leak"]),
    ("key-prefix-match", &["auth.not-refused"]),
    ("last-synced-goes-back", &["state.sync-back"]),
    ("account-answered-under-other-id", &["invariants.answered-other", "invariants.id-two-accounts"]),
    ("data-type-mismatch", &["event.envelope-disagrees"]),
    ("verifying-after-mfa-silent", &[]),
    ("partial-content-pages", &["http.status"]),
];

/// The run of the cases that catch `mutant`, as the self-test makes it (seed 4, event wait 2 s).
fn config(mutant: Mutant) -> RunConfig {
    RunConfig {
        ids: mutant.caught_by().iter().map(|id| id.to_string()).collect(),
        gate: vec![Level::Must, Level::Security, Level::Robustness],
        seed: Some(4),
        event_timeout: 2.0,
        sandbox_mutant: Some(mutant),
        ..RunConfig::embedded()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_failed_problem_has_a_kind_and_a_comparison_says_both_values() {
    let runs = MUTANTS.iter().map(|(name, comparing)| async move {
        let mutant = Mutant::from_name(name).unwrap_or_else(|| panic!("no mutant {name}"));
        (name, *comparing, super::run_report(config(mutant), None).await)
    });
    for (name, comparing, report) in futures::future::join_all(runs).await {
        let failed: Vec<_> = report
            .results
            .iter()
            .filter_map(|r| match &r.outcome {
                Outcome::Failed(f) => Some((r.case.id.as_str(), f)),
                _ => None,
            })
            .collect();
        assert!(!failed.is_empty(), "{name}: caught by nothing");
        let mut kinds = Vec::new();
        for (case, failure) in failed {
            for p in &failure.problems {
                let kind = p.kind.unwrap_or_else(|| panic!("{name}: {case}'s problem has no kind: {}", p.text()));
                kinds.push(kind.name());
                if comparing.contains(&kind.name()) {
                    assert!(p.contrast.is_some(), "{name}: {case}'s {} says no values: {}", kind.name(), p.text());
                }
            }
        }
        assert!(comparing.is_empty() || kinds.iter().any(|k| comparing.contains(k)), "{name}: {kinds:?}");
    }
}
