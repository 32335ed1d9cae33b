//! The harness tested against itself (`bankconf self-test`): the whole catalogue runs against
//! every mutant of the embedded sandbox (each must fail the run, in every case it names) and
//! every conforming variant (each must pass). The map mutant → failing cases is pinned in
//! `snapshots/self_test_failures.snap`, so a change in what the catalogue catches shows in review.

use bankconf::selftest::{self, Options, Target, Trial};
use std::collections::BTreeMap;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_mutant_is_caught_and_every_variant_passes() {
    let options = Options::default();
    let run = selftest::self_test(&options, |_| {});
    let result = tokio::time::timeout(Duration::from_secs(240), run).await.expect("the self-test took over 240 s");
    eprintln!("{}", result.score());
    let problems: Vec<String> =
        result.mutants.iter().chain(&result.variants).filter(|t| !t.ok()).map(Trial::line).collect();
    assert!(problems.is_empty(), "{}:\n{}", result.score(), problems.join("\n"));
    insta::with_settings!({ snapshot_path => "../snapshots", prepend_module_to_snapshot => false }, {
        insta::assert_json_snapshot!("self_test_failures", result.failure_map());
        insta::assert_json_snapshot!("lifecycle_shrunk_sequences", shrunk_sequences(&result.mutants));
    });
}

/// For every mutant the lifecycle property caught: the shortest action sequence it shrank to
/// (issue 6). The property's message holds it as `[shrunk input: [..]; seed ..]`.
fn shrunk_sequences(mutants: &[Trial]) -> BTreeMap<&'static str, String> {
    mutants
        .iter()
        .filter(|t| !matches!(t.target, Target::Mutant(m) if m.noisy()))
        .filter_map(|t| {
            let (_, message) = t.failed.iter().find(|(id, _)| id == "lifecycle.random-sequences")?;
            let start = message.find("[shrunk input: ")? + "[shrunk input: ".len();
            let end = start + message[start..].find("; seed")?;
            Some((t.target.name(), message[start..end].to_string()))
        })
        .collect()
}
