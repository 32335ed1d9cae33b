//! The whole catalogue against the embedded sandbox under the conditions of real deployments
//! (src/sandbox/conditions.rs): late deliveries, deliveries one at a time, API latency, a rate
//! limit. Slowness is never a violation (§6.3, §8): every case must pass, none be left unjudged
//! for time. (Wall times are measured by `scripts/bench-conditions.sh`, not here.)

use bankconf::harness::config::{RunConfig, SandboxConditions};
use bankconf::harness::outcome::Outcome;
use bankconf::harness::runner;

fn config(conditions: SandboxConditions) -> RunConfig {
    RunConfig { sandbox_conditions: conditions, seed: Some(7), ..RunConfig::embedded() }
}

/// Runs every case under `conditions`; fails naming every case that did not pass.
async fn all_pass(name: &str, conditions: SandboxConditions) -> Result<(), String> {
    let report = runner::run_report(config(conditions), None).await;
    if let Some(e) = report.setup_error {
        return Err(format!("{name}: the run did not start: {e}"));
    }
    let bad: Vec<String> = report
        .results
        .iter()
        .filter(|r| !matches!(r.outcome, Outcome::Passed))
        .map(|r| format!("{}: {:?}", r.case.id, r.outcome))
        .collect();
    if bad.is_empty() && !report.results.is_empty() {
        Ok(())
    } else {
        Err(format!("{name}: {} case(s) did not pass:\n{}", bad.len(), bad.join("\n")))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conforming_sandbox_passes_under_every_condition() {
    let none = SandboxConditions::default();
    // The four runs mostly wait: concurrently, the test takes about as long as the slowest.
    let runs = [
        ("deliveries 3 s late", SandboxConditions { sandbox_delivery_delay_ms: 3000, ..none }),
        ("deliveries one at a time, 0.3 s each", SandboxConditions { sandbox_delivery_serial_ms: 300, ..none }),
        ("100 ms API latency", SandboxConditions { sandbox_latency_ms: 100, ..none }),
        ("10 requests per second per key", SandboxConditions { sandbox_rate_limit: 10, ..none }),
    ];
    let [a, b, c, d] = runs.map(|(name, conditions)| tokio::spawn(all_pass(name, conditions)));
    let (a, b, c, d) = tokio::join!(a, b, c, d);
    let failures: Vec<String> =
        [a, b, c, d].into_iter().filter_map(|r| r.expect("the run stopped unexpectedly").err()).collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
