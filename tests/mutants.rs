//! The harness tested against itself, one trial per sandbox mutant and variant (the same runs
//! as `bankconf self-test`): a mutant must fail the run in every case it names, a variant must
//! pass. `cargo test --test mutants -- page-gap` runs one.
//!
//! What each subject makes fail is pinned in `snapshots/self-test/<name>.snap`, so a change in
//! what the catalogue catches shows in review (`cargo insta review`).

use bankconf::sandbox::{Mutant, Variant};
use bankconf::selftest::{self, Options, Subject};
use libtest_mimic::{Arguments, Failed, Trial};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

fn main() -> ExitCode {
    let mut args = Arguments::from_args();
    // Each trial mostly waits on its embedded sandbox: four at a time, as the self-test does.
    args.test_threads.get_or_insert(Options::default().parallel);
    let runtime = Arc::new(tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime"));
    let event_timeout = Options::default().event_timeout;
    let subjects = Mutant::ALL
        .iter()
        .map(|m| (Subject::Mutant(*m), "mutant"))
        .chain(Variant::ALL.iter().map(|v| (Subject::Variant(*v), "variant")));
    let trials = subjects
        .map(|(subject, kind)| {
            let runtime = runtime.clone();
            Trial::test(subject.name(), move || {
                let run = async {
                    tokio::time::timeout(Duration::from_secs(120), selftest::trial(subject, event_timeout)).await
                };
                let trial = runtime.block_on(run).map_err(|_| Failed::from("the run took over 120 s"))?;
                let pinned = trial.pinned();
                insta::with_settings!({
                    snapshot_path => "../snapshots/self-test",
                    prepend_module_to_snapshot => false,
                    omit_expression => true,
                }, {
                    insta::assert_json_snapshot!(subject.name(), pinned);
                });
                if trial.ok() {
                    Ok(())
                } else {
                    Err(Failed::from(trial.line()))
                }
            })
            .with_kind(kind)
        })
        .collect();
    libtest_mimic::run(&args, trials).exit_code()
}
