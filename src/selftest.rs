//! `bankconf self-test`: proves that every case can fail and that none fails falsely, by
//! running the whole catalogue against every mutant (each must be caught by the cases it names)
//! and every variant (each must pass) of the embedded sandbox ([`crate::sandbox::Mutant`], [`crate::sandbox::Variant`]).
//! `cargo test --test mutants` runs the same function.

use crate::harness::report::{html, EXIT_FAILED, EXIT_INCOMPLETE, EXIT_PASSED};
use crate::harness::runner;
use crate::harness::setup::config::RunConfig;
use crate::harness::transport::browser::{self, BrowserPool};
use crate::harness::vocab::catalogue::{self, Level, Need};
use crate::harness::vocab::outcome::{Failure, Outcome};
use crate::sandbox::{Mutant, Variant};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// What one trial runs the catalogue against: a mutant or a variant of the sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subject {
    Mutant(Mutant),
    Variant(Variant),
}

impl Subject {
    pub fn name(self) -> &'static str {
        match self {
            Self::Mutant(m) => m.name(),
            Self::Variant(v) => v.name(),
        }
    }

    /// Whether a case that must catch this mutant runs only in a browser: without one the
    /// mutant cannot be caught, so it is left untried rather than counted missed.
    pub fn needs_browser(self) -> bool {
        match self {
            Self::Mutant(m) => m.caught_by().iter().any(|id| browser_case(id)),
            Self::Variant(_) => false,
        }
    }
}

/// Whether case `id` runs only in a browser.
fn browser_case(id: &str) -> bool {
    catalogue::find(id).is_some_and(|c| c.needs.contains(&Need::Browser))
}

/// Why subjects that need a browser cannot be tried on this machine, if they cannot.
pub fn browser_missing() -> Option<&'static str> {
    browser::find(None).is_none().then_some(browser::INSTALL_HINT)
}

/// The run of the catalogue against one mutant or variant.
#[derive(Clone, Debug)]
pub struct Trial {
    pub subject: Subject,
    /// Exit code of the run (0, 1, or 2 when it could not run).
    pub exit_code: i32,
    /// Ids of the failed cases (every level), sorted, each with its failure.
    pub failed: Vec<(String, Failure)>,
    /// Why the run could not start, if it could not.
    pub error: Option<String>,
    /// Cases the gate left unjudged, each with why (an INCOMPLETE run names them here).
    pub unjudged: Vec<String>,
    /// What is wrong with the run's HTML report, rendered in memory
    /// ([`html::well_formed`]), if anything: a trial with one is not ok.
    pub html: Option<String>,
}

impl Trial {
    pub fn failed_ids(&self) -> Vec<&str> {
        self.failed.iter().map(|(id, _)| id.as_str()).collect()
    }

    /// The cases that should have failed and did not (mutants only).
    pub fn missed(&self) -> Vec<&'static str> {
        match self.subject {
            Subject::Mutant(m) => {
                m.caught_by().iter().copied().filter(|c| !self.failed.iter().any(|(id, _)| id == c)).collect()
            }
            Subject::Variant(_) => Vec::new(),
        }
    }

    /// A mutant: every case it names failed, and the run failed when one of them gates (a
    /// mutant of an advisory case leaves the run green). A variant: the run passed.
    pub fn ok(&self) -> bool {
        match self.subject {
            Subject::Mutant(m) => {
                let gating =
                    m.caught_by().iter().any(|id| catalogue::find(id).is_some_and(|c| GATE.contains(&c.level)));
                let expected = if gating { EXIT_FAILED } else { EXIT_PASSED };
                self.exit_code == expected && self.missed().is_empty() && self.html.is_none()
            }
            Subject::Variant(_) => self.exit_code == EXIT_PASSED && self.html.is_none(),
        }
    }

    /// What `tests/mutants.rs` pins per subject: the sorted failing case ids (for a noisy
    /// mutant, see [`Mutant::noisy`], only the cases it names; browser cases only for the
    /// mutants a browser catches). The sequence the lifecycle
    /// property shrank to is not pinned: shrinking is time-boxed, so it depends on the machine.
    pub fn pinned(&self) -> Value {
        let mut failed = self.failed_ids();
        // Browser cases run only where a browser is found: pinned only for the subjects that
        // need one (ignored elsewhere), so that every pin holds with and without Chromium.
        if !self.subject.needs_browser() {
            failed.retain(|id| !browser_case(id));
        }
        if let Subject::Mutant(m) = self.subject {
            if m.noisy() {
                failed.retain(|id| m.caught_by().contains(id));
            }
        }
        json!({ "failed": failed })
    }

    /// One line for the terminal.
    pub fn line(&self) -> String {
        let verdict = match (self.subject, self.ok()) {
            (Subject::Mutant(_), true) => "CAUGHT",
            (Subject::Mutant(_), false) => "MISSED",
            (Subject::Variant(_), true) => "PASSED",
            (Subject::Variant(_), false) => "FALSE ",
        };
        let mut line = format!("{verdict} {:<32} exit {}", self.subject.name(), self.exit_code);
        if let Some(e) = &self.error {
            line.push_str(&format!("  ({e})"));
        }
        if let Some(e) = &self.html {
            line.push_str(&format!("  HTML REPORT: {e}"));
        }
        match self.subject {
            Subject::Mutant(_) => {
                line.push_str(&format!("  failed: {}", self.failed_ids().join(", ")));
                if !self.missed().is_empty() {
                    line.push_str(&format!("  NOT FAILED: {}", self.missed().join(", ")));
                }
            }
            Subject::Variant(_) => {
                for (id, failure) in &self.failed {
                    line.push_str(&format!("\n         {id}: {failure}"));
                }
            }
        }
        line
    }
}

/// The whole self-test.
#[derive(Clone, Debug)]
pub struct SelfTest {
    pub mutants: Vec<Trial>,
    pub variants: Vec<Trial>,
    /// Subjects not tried, and why (no browser on this machine).
    pub untried: Vec<(Subject, &'static str)>,
    pub duration: Duration,
}

impl SelfTest {
    pub fn mutants_caught(&self) -> usize {
        self.mutants.iter().filter(|t| t.ok()).count()
    }

    pub fn variants_passed(&self) -> usize {
        self.variants.iter().filter(|t| t.ok()).count()
    }

    pub fn complete(&self) -> bool {
        self.mutants_caught() == self.mutants.len() && self.variants_passed() == self.variants.len()
    }

    /// `mutants 62/62 caught, variants 14/14 passed in 21.3s`, and what was not tried.
    pub fn score(&self) -> String {
        let mut score = format!(
            "mutants {}/{} caught, variants {}/{} passed in {:.1}s",
            self.mutants_caught(),
            self.mutants.len(),
            self.variants_passed(),
            self.variants.len(),
            self.duration.as_secs_f64()
        );
        if let Some((_, why)) = self.untried.first() {
            let names: Vec<&str> = self.untried.iter().map(|(s, _)| s.name()).collect();
            score.push_str(&format!("; not tried: {} ({why})", names.join(", ")));
        }
        score
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A mutant names the cases that must catch it; they exist and `bankconf run` runs them.
    #[test]
    fn every_mutant_names_cases_of_the_catalogue() {
        for m in Mutant::ALL {
            for id in m.caught_by() {
                assert!(catalogue::find(id).is_some_and(|c| !c.offline), "{m}: no case {id}");
            }
        }
    }
}

/// The self-test gates robustness too, so that the 5xx mutants fail the run.
const GATE: [Level; 3] = [Level::Must, Level::Security, Level::Robustness];

/// The configuration of one self-test run, built explicitly and never from the environment:
/// the embedded sandbox only (nothing but 127.0.0.1 is reached), a fixed seed so that the
/// failing cases are reproducible, and robustness gating so that the 5xx mutants fail the run.
pub(crate) fn config(subject: Subject, event_timeout: f64) -> RunConfig {
    config_with_seed(subject, event_timeout, SEED)
}

/// The browser the self-test's trials share (one Chromium for every trial, not one each).
static TRIALS_BROWSER: std::sync::LazyLock<BrowserPool> = std::sync::LazyLock::new(BrowserPool::default);

/// The seed of the self-test's pinned runs.
pub(crate) const SEED: u64 = 4;

/// `config` with another seed: a catch must not depend on the seed.
pub fn config_with_seed(subject: Subject, event_timeout: f64, seed: u64) -> RunConfig {
    // A mutant trial runs the cases the mutant names (what the self-test proves is that they
    // catch it); a variant gets the whole catalogue (no case may fail it).
    let (sandbox_mutant, sandbox_variant, ids) = match subject {
        Subject::Mutant(m) => {
            (Some(m), None, m.caught_by().iter().chain(m.shown_by()).map(|id| id.to_string()).collect())
        }
        Subject::Variant(v) => (None, Some(v), Vec::new()),
    };
    RunConfig {
        ids,
        browser_pool: TRIALS_BROWSER.clone(),
        gate: GATE.to_vec(),
        seed: Some(seed),
        event_timeout,
        sandbox_mutant,
        sandbox_variant,
        ..RunConfig::embedded()
    }
}

/// The configuration of a run against generated perturbations (`crate::generated`): `ids` of
/// the catalogue (empty: all), the perturbations by name, as [`config_with_seed`] otherwise.
pub(crate) fn perturbed_config(
    ids: Vec<String>,
    perturbations: Vec<String>,
    event_timeout: f64,
    seed: u64,
) -> RunConfig {
    RunConfig {
        ids,
        browser_pool: TRIALS_BROWSER.clone(),
        gate: GATE.to_vec(),
        seed: Some(seed),
        event_timeout,
        sandbox_perturb: perturbations,
        ..RunConfig::embedded()
    }
}

/// Runs the catalogue once against `subject`.
pub async fn trial(subject: Subject, event_timeout: f64) -> Trial {
    trial_with(config(subject, event_timeout), subject).await
}

/// Runs the catalogue once with `config` against `subject`.
pub async fn trial_with(config: RunConfig, subject: Subject) -> Trial {
    let report = runner::run_report(config, None).await;
    let mut failed: Vec<(String, Failure)> = report
        .results
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Failed(f) => Some((r.case.id.clone(), f.clone())),
            _ => None,
        })
        .collect();
    failed.sort();
    let mut exit_code = report.exit_code();
    // Without a browser its cases are ignored and the run is INCOMPLETE; that says nothing
    // about the subject, whose other cases all were judged.
    if exit_code == EXIT_INCOMPLETE && report.unjudged().iter().flat_map(|(_, ids)| ids).all(|id| browser_case(id)) {
        exit_code = EXIT_PASSED;
    }
    // Every trial's report is rendered as --report-html would write it, and its shape checked.
    let html = html::well_formed(&html::render(&report)).err();
    let unjudged = report.unjudged().into_iter().map(|(how, ids)| format!("{}: {how}", ids.join(", "))).collect();
    let error = report.setup_error.as_ref().map(ToString::to_string);
    Trial { subject, exit_code, failed, error, unjudged, html }
}

/// Options of [`self_test`].
#[derive(Clone, Debug)]
pub struct Options {
    /// Runs at a time.
    pub parallel: usize,
    /// Seconds a case waits for an expected event (short: several mutants never send one).
    pub event_timeout: f64,
}

impl Default for Options {
    fn default() -> Self {
        Self { parallel: 4, event_timeout: 8.0 }
    }
}

/// Runs every mutant and every variant, `options.parallel` at a time; `on_trial` sees each as
/// it finishes. Results in catalogue order.
pub async fn self_test(options: &Options, on_trial: impl Fn(&Trial)) -> SelfTest {
    let started = Instant::now();
    let (subjects, untried): (Vec<Subject>, Vec<Subject>) = Mutant::ALL
        .iter()
        .map(|m| Subject::Mutant(*m))
        .chain(Variant::ALL.iter().map(|v| Subject::Variant(*v)))
        .partition(|s| !(s.needs_browser() && browser_missing().is_some()));
    let untried = untried.into_iter().map(|s| (s, browser_missing().unwrap_or_default())).collect();
    let permits = Arc::new(Semaphore::new(options.parallel.max(1)));
    let mut set = tokio::task::JoinSet::new();
    for (i, subject) in subjects.iter().copied().enumerate() {
        let (permits, timeout) = (permits.clone(), options.event_timeout);
        set.spawn(async move {
            let _permit = permits.acquire_owned().await;
            (i, trial(subject, timeout).await)
        });
    }
    let mut trials: Vec<Option<Trial>> = vec![None; subjects.len()];
    while let Some(joined) = set.join_next().await {
        match joined {
            Ok((i, t)) => {
                on_trial(&t);
                trials[i] = Some(t);
            }
            Err(e) => eprintln!("bankconf self-test: a run stopped unexpectedly: {e}"),
        }
    }
    let trials: Vec<Trial> = trials
        .into_iter()
        .zip(&subjects)
        .map(|(t, subject)| {
            t.unwrap_or(Trial {
                subject: *subject,
                exit_code: 2,
                failed: Vec::new(),
                error: Some("the run did not report".into()),
                unjudged: Vec::new(),
                html: None,
            })
        })
        .collect();
    let (mutants, variants) = trials.into_iter().partition(|t| matches!(t.subject, Subject::Mutant(_)));
    SelfTest { mutants, variants, untried, duration: started.elapsed() }
}
