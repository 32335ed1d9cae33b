//! `bankconf self-test`: proves that every case can fail and that none fails falsely, by
//! running the whole catalogue against every mutant (each must be caught by the cases it names)
//! and every variant (each must pass) of the embedded sandbox ([`crate::sandbox::faults`]).
//! `cargo test --test mutants` runs the same function.

use crate::harness::catalogue::Level;
use crate::harness::config::RunConfig;
use crate::harness::outcome::Outcome;
use crate::harness::report::{EXIT_FAILED, EXIT_PASSED};
use crate::sandbox::{Mutant, Variant};
use serde_json::{json, Map, Value};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// What one run was against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    Mutant(Mutant),
    Variant(Variant),
}

impl Target {
    pub fn name(self) -> &'static str {
        match self {
            Self::Mutant(m) => m.name(),
            Self::Variant(v) => v.name(),
        }
    }
}

/// The run of the catalogue against one mutant or variant.
#[derive(Clone, Debug)]
pub struct Trial {
    pub target: Target,
    /// Exit code of the run (0, 1, or 2 when it could not run).
    pub exit_code: i32,
    /// Ids of the failed cases (every level), sorted, each with its message.
    pub failed: Vec<(String, String)>,
    /// Why the run could not start, if it could not.
    pub error: Option<String>,
}

impl Trial {
    pub fn failed_ids(&self) -> Vec<&str> {
        self.failed.iter().map(|(id, _)| id.as_str()).collect()
    }

    /// The cases that should have failed and did not (mutants only).
    pub fn missed(&self) -> Vec<&'static str> {
        match self.target {
            Target::Mutant(m) => {
                m.caught_by().iter().copied().filter(|c| !self.failed.iter().any(|(id, _)| id == c)).collect()
            }
            Target::Variant(_) => Vec::new(),
        }
    }

    /// A mutant: the run failed and every case it names failed. A variant: the run passed.
    pub fn ok(&self) -> bool {
        match self.target {
            Target::Mutant(_) => self.exit_code == EXIT_FAILED && self.missed().is_empty(),
            Target::Variant(_) => self.exit_code == EXIT_PASSED,
        }
    }

    /// One line for the terminal.
    pub fn line(&self) -> String {
        let verdict = match (self.target, self.ok()) {
            (Target::Mutant(_), true) => "CAUGHT",
            (Target::Mutant(_), false) => "MISSED",
            (Target::Variant(_), true) => "PASSED",
            (Target::Variant(_), false) => "FALSE ",
        };
        let mut line = format!("{verdict} {:<32} exit {}", self.target.name(), self.exit_code);
        if let Some(e) = &self.error {
            line.push_str(&format!("  ({e})"));
        }
        match self.target {
            Target::Mutant(_) => {
                line.push_str(&format!("  failed: {}", self.failed_ids().join(", ")));
                if !self.missed().is_empty() {
                    line.push_str(&format!("  NOT FAILED: {}", self.missed().join(", ")));
                }
            }
            Target::Variant(_) => {
                for (id, message) in &self.failed {
                    line.push_str(&format!("\n         {id}: {message}"));
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

    /// `mutants 62/62 caught, variants 14/14 passed in 21.3s`.
    pub fn score(&self) -> String {
        format!(
            "mutants {}/{} caught, variants {}/{} passed in {:.1}s",
            self.mutants_caught(),
            self.mutants.len(),
            self.variants_passed(),
            self.variants.len(),
            self.duration.as_secs_f64()
        )
    }

    /// Mutant → sorted failing case ids, and the same for variants (what the snapshot pins).
    /// For a noisy mutant (see [`Mutant::noisy`]) only the cases it names are listed.
    pub fn failure_map(&self) -> Value {
        let map = |trials: &[Trial]| {
            let m: Map<String, Value> = trials
                .iter()
                .map(|t| {
                    let mut failed = t.failed_ids();
                    if let Target::Mutant(m) = t.target {
                        if m.noisy() {
                            failed.retain(|id| m.caught_by().contains(id));
                        }
                    }
                    (t.target.name().to_string(), json!(failed))
                })
                .collect();
            Value::Object(m)
        };
        json!({ "mutants": map(&self.mutants), "variants": map(&self.variants) })
    }
}

/// The configuration of one self-test run: the embedded sandbox only (whatever `BANKCONF_*`
/// says, nothing but 127.0.0.1 is reached), a fixed seed so that the failing cases are
/// reproducible, and robustness gating so that the 5xx mutants fail the run.
pub fn config(target: Target, event_timeout: f64) -> Result<RunConfig, String> {
    let mut config = RunConfig::from_env().map_err(|e| e.to_string())?;
    config.base_url = None;
    config.api_key = None;
    config.second_api_key = None;
    config.service = None;
    config.driver = None;
    config.connection_id = None;
    config.outputs = Default::default();
    config.webhook_listen = SocketAddr::from(([127, 0, 0, 1], 0));
    config.webhook_public_url = None;
    config.gate = vec![Level::Must, Level::Security, Level::Robustness];
    config.seed = Some(4);
    config.cases = 16;
    config.event_timeout = event_timeout;
    config.request_timeout = 10.0;
    config.sections.clear();
    config.levels.clear();
    config.ids.clear();
    config.sandbox_mutant = None;
    config.sandbox_variant = None;
    match target {
        Target::Mutant(m) => config.sandbox_mutant = Some(m.name().to_string()),
        Target::Variant(v) => config.sandbox_variant = Some(v.name().to_string()),
    }
    Ok(config)
}

/// Runs the catalogue once against `target`.
pub async fn trial(target: Target, event_timeout: f64) -> Trial {
    let config = match config(target, event_timeout) {
        Ok(c) => c,
        Err(e) => return Trial { target, exit_code: 2, failed: Vec::new(), error: Some(e) },
    };
    match crate::harness::run_report(config, false).await {
        Ok(report) => {
            let mut failed: Vec<(String, String)> = report
                .results
                .iter()
                .filter_map(|r| match &r.outcome {
                    Outcome::Failed(m) => Some((r.case.id.clone(), m.clone())),
                    _ => None,
                })
                .collect();
            failed.sort();
            Trial { target, exit_code: report.exit_code(), failed, error: None }
        }
        Err(e) => Trial { target, exit_code: 2, failed: Vec::new(), error: Some(e) },
    }
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
        Self { parallel: 4, event_timeout: 3.0 }
    }
}

/// Runs every mutant and every variant, `options.parallel` at a time; `on_trial` sees each as
/// it finishes. Results in catalogue order.
pub async fn self_test(options: &Options, on_trial: impl Fn(&Trial)) -> SelfTest {
    let started = Instant::now();
    let targets: Vec<Target> = Mutant::ALL
        .iter()
        .map(|m| Target::Mutant(*m))
        .chain(Variant::ALL.iter().map(|v| Target::Variant(*v)))
        .collect();
    let permits = Arc::new(Semaphore::new(options.parallel.max(1)));
    let mut set = tokio::task::JoinSet::new();
    for (i, target) in targets.iter().copied().enumerate() {
        let (permits, timeout) = (permits.clone(), options.event_timeout);
        set.spawn(async move {
            let _permit = permits.acquire_owned().await;
            (i, trial(target, timeout).await)
        });
    }
    let mut trials: Vec<Option<Trial>> = vec![None; targets.len()];
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
        .zip(&targets)
        .map(|(t, target)| {
            t.unwrap_or(Trial {
                target: *target,
                exit_code: 2,
                failed: Vec::new(),
                error: Some("the run did not report".into()),
            })
        })
        .collect();
    let (mutants, variants) = trials.into_iter().partition(|t| matches!(t.target, Target::Mutant(_)));
    SelfTest { mutants, variants, duration: started.elapsed() }
}
