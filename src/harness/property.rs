//! Property-based cases: proptest drives a synchronous runner, each generated input is checked
//! by an async check on the run's runtime. Failures shrink and report the minimal input and the
//! seed that replays them (`bankconf run --seed S <case-id>`).

use super::http;
use super::outcome::{ErrorSource, Failure, Stop};
use super::session::Session;
use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestError, TestRng, TestRunner};
use std::fmt::Debug;
use std::future::Future;

/// How long shrinking may take, so that a failing property reports within a bounded time.
const MAX_SHRINK_MILLIS: u32 = 20_000;

/// Runs `test` over inputs drawn from `strategy`, `--cases` times, seeded from the run's seed and
/// the case id; on failure, shrinks and reports the smallest failing input.
pub async fn for_all<S, F, Fut>(ctx: &Session, case_id: &'static str, strategy: S, test: F) -> Result<(), Stop>
where
    S: Strategy + Send + 'static,
    S::Value: Debug,
    F: Fn(S::Value) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), Stop>>,
{
    let handle = tokio::runtime::Handle::current();
    let seed = ctx.case_seed(case_id);
    let (run_seed, cases) = (ctx.seed, ctx.config.cases.max(1));
    // Dropped with this future (a case stopped at its time limit): the runner thread then ends
    // at once instead of running on into the runtime's shutdown.
    let (_alive, stopped) = tokio::sync::watch::channel(());
    let result = tokio::task::spawn_blocking(move || {
        let config = Config {
            cases,
            failure_persistence: None,
            max_shrink_iters: 64,
            max_shrink_time: MAX_SHRINK_MILLIS,
            ..Config::default()
        };
        let mut seed_bytes = [0u8; 32];
        for chunk in seed_bytes.chunks_mut(8) {
            chunk.copy_from_slice(&seed.to_le_bytes());
        }
        let mut runner = TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes));
        // The first error (the driver failed) stops the property as an error, not a failure.
        let error = std::cell::RefCell::new(None);
        // The last request of the last failing input (the shrunk one): the failure's curl.
        let failing_request = std::cell::RefCell::new(None);
        let result = runner.run(&strategy, |input| {
            if stopped.has_changed().is_err() {
                return Err(TestCaseError::fail("the case was stopped"));
            }
            let mut stopped = stopped.clone();
            let test = http::recording(test(input));
            let (verdict, log) = handle.block_on(async move {
                tokio::select! {
                    outcome = test => outcome,
                    _ = stopped.changed() => (Err(Stop::fail("the case was stopped")), Vec::new()),
                }
            });
            if let Err(Stop::Fail(f)) = &verdict {
                *failing_request.borrow_mut() = http::evidence(&f.message, &log).cloned();
            }
            // An input the target cannot be judged on (Stop::Ignore) is discarded, not failed.
            verdict.map_err(|stop| match stop {
                Stop::Fail(f) => TestCaseError::fail(f.message),
                Stop::Ignore(_, m) => TestCaseError::reject(m),
                e @ Stop::Error(..) => {
                    let message = e.to_string();
                    error.borrow_mut().get_or_insert(e);
                    TestCaseError::fail(message)
                }
            })
        });
        if let Some(e) = error.into_inner() {
            return (Err(e), None);
        }
        let failing_request = failing_request.into_inner();
        // Rendered here: the shrunk input need not be Send.
        let verdict = match result {
            Ok(()) => Ok(()),
            Err(TestError::Fail(reason, input)) => Err(Stop::Fail(Failure {
                message: format!(
                    "{reason} [shrunk input: {input:?}; seed {run_seed}: replay with `bankconf run --seed {run_seed} {case_id}`]"
                ),
                shrunk_input: Some(format!("{input:?}")),
            })),
            Err(TestError::Abort(reason)) => Err(Stop::fail(format!("property aborted: {reason} (seed {run_seed})"))),
        };
        (verdict, failing_request)
    })
    .await;
    match result {
        Ok((verdict, failing_request)) => {
            if let Some(sent) = failing_request {
                http::record(sent);
            }
            verdict
        }
        Err(e) => Err(Stop::Error(ErrorSource::Harness, format!("property runner stopped: {e}"))),
    }
}
