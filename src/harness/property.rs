//! Property-based cases: inputs drawn from a seeded proptest [`TestRunner`] are played
//! concurrently (each on its own connection or walk, as tokio tasks that end with the case;
//! their requests bounded by the run's window, `--concurrency`); the first failing input, in drawing order, is then
//! shrunk here, one attempt at a time and bounded in time and attempts, and reported with the
//! seed that replays it (`bankconf run --seed S <case-id>`).

use super::har;
use super::outcome::{ErrorSource, Failure, Stop};
use super::session::Session;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::task::JoinSet;

/// How long shrinking may take, so that a failing property reports within a bounded time.
const MAX_SHRINK_TIME: Duration = Duration::from_secs(60);
/// Most shrinking attempts.
const MAX_SHRINK_ITERS: u32 = 64;

/// Runs `test` over `--cases` inputs drawn from `strategy`, seeded from the run's seed and the
/// case id; on failure, shrinks and reports the smallest failing input found.
pub(super) async fn for_all<S, F, Fut>(ctx: &Session, case_id: &'static str, strategy: S, test: F) -> Result<(), Stop>
where
    S: Strategy,
    S::Tree: Send + 'static,
    S::Value: Debug + Send + 'static,
    F: Fn(S::Value) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<(), Stop>> + Send + 'static,
{
    let (run_seed, cases) = (ctx.seed, ctx.plan.cases.max(1));
    let mut trees = draw(&strategy, ctx.case_seed(case_id), cases)?;
    let test = Arc::new(test);
    let mut failing: Option<(usize, Failure)> = None;
    // An input the target left unanswered: without a failure, the property was not judged.
    let mut unanswered: Option<Stop> = None;
    // Dropping the set (the case overran its limit) aborts every input still playing.
    let mut playing = JoinSet::new();
    let mut next = 0;
    // Every input at once: what they send is bounded by the run's window of requests in flight
    // (`--concurrency`, see `throttle`), and their waits for webhooks overlap.
    let concurrency = trees.len().max(1);
    loop {
        while next < trees.len() && playing.len() < concurrency {
            let (test, input, i) = (test.clone(), trees[next].current(), next);
            // Each input's requests are the case's, in the HAR too.
            playing.spawn(har::in_case(har::current_case(), async move { (i, play(&*test, input).await) }));
            next += 1;
        }
        let Some(joined) = playing.join_next().await else { break };
        let (i, verdict) =
            joined.map_err(|e| Stop::Error(ErrorSource::Harness, format!("a property input stopped: {e}")))?;
        match verdict {
            Err(e) if e.is_transport() => {
                unanswered.get_or_insert(e);
            }
            // An input the target cannot be judged on (Stop::Ignore) is discarded, not failed.
            Ok(()) | Err(Stop::Ignore(..)) => {}
            Err(Stop::Fail(f)) => {
                if failing.as_ref().is_none_or(|(first, ..)| i < *first) {
                    failing = Some((i, f));
                }
            }
            // The first error (the driver failed) stops the property as an error, not a failure.
            Err(e) => return Err(e),
        }
    }
    let Some((i, failure)) = failing else { return unanswered.map_or(Ok(()), Err) };
    let tree = trees.swap_remove(i);
    // The failure carries the requests that show it: the reports' evidence.
    let (failure, input) = shrink(tree, &*test, failure).await?;
    let failure = failure.reworded(|message| {
        format!("{message} [shrunk input: {input}; seed {run_seed}: replay with `bankconf run --seed {run_seed} {case_id}`]")
    });
    Err(Stop::Fail(Failure { shrunk_input: Some(Box::new(input)), ..failure }))
}

/// `cases` value trees from a runner seeded with `seed`.
fn draw<S: Strategy>(strategy: &S, seed: u64, cases: u32) -> Result<Vec<S::Tree>, Stop> {
    let mut seed_bytes = [0u8; 32];
    for chunk in seed_bytes.chunks_mut(8) {
        chunk.copy_from_slice(&seed.to_le_bytes());
    }
    let mut runner = TestRunner::new_with_rng(
        Config { failure_persistence: None, ..Config::default() },
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    (0..cases)
        .map(|_| {
            // A fresh generator per input, as proptest's own runner makes one: the same seed
            // draws the same inputs as `TestRunner::run` would.
            let next = runner.new_rng();
            *runner.rng() = next;
            strategy.new_tree(&mut runner).map_err(|e| Stop::fail(format!("property aborted: {e}")))
        })
        .collect()
}

/// Plays one input.
async fn play<V, Fut>(test: &(impl Fn(V) -> Fut + ?Sized), input: V) -> Result<(), Stop>
where
    Fut: Future<Output = Result<(), Stop>>,
{
    test(input).await
}

/// Shrinks a failing input as proptest would (simplify while it fails, complicate while it
/// passes), one attempt at a time, within [`MAX_SHRINK_TIME`] and [`MAX_SHRINK_ITERS`]. Returns
/// the last failure and its input.
async fn shrink<T, Fut>(
    mut tree: T,
    test: &(impl Fn(T::Value) -> Fut + ?Sized),
    failure: Failure,
) -> Result<(Failure, String), Stop>
where
    T: ValueTree,
    T::Value: Debug,
    Fut: Future<Output = Result<(), Stop>>,
{
    let mut best = (failure, format!("{:?}", tree.current()));
    let deadline = Instant::now() + MAX_SHRINK_TIME;
    if !tree.simplify() {
        return Ok(best);
    }
    for _ in 0..MAX_SHRINK_ITERS {
        let input = tree.current();
        let shown = format!("{input:?}");
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(verdict) = tokio::time::timeout(left, play(test, input)).await else { break };
        let more = match verdict {
            Err(Stop::Fail(f)) => {
                best = (f, shown);
                tree.simplify()
            }
            Err(e @ Stop::Error(..)) => return Err(e),
            Ok(()) | Err(Stop::Ignore(..)) => tree.complicate(),
        };
        if !more {
            break;
        }
    }
    Ok(best)
}
