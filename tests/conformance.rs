//! `cargo test --test conformance`: the catalogue as a libtest-mimic harness, so test-name
//! filters, `--list`, `--ignored` and the usual `test result:` line work. Configured by the
//! `BANKCONF_*` environment variables; with no `BANKCONF_BASE_URL`, the embedded sandbox.
//!
//! - Failures at levels outside the gate (`BANKCONF_GATE`, default `must,security`) are printed
//!   but do not fail the test, as in `bankconf run`.
//! - Against a target (`BANKCONF_BASE_URL`), a gating case that goes unjudged fails its test:
//!   an INCOMPLETE run never reads `test result: ok`. Against the embedded sandbox (the
//!   harness testing itself) it is reported ignored, with its reason.
//! - `BANKCONF_REPORT_JSON`, `BANKCONF_JUNIT` and `BANKCONF_REPORT_MD` are written as by
//!   `bankconf run`.
//! - A gating case that passed its trial but whose endpoint rule a later read broke (see
//!   `runner::attribute`) is named after the trials, and the test binary fails.
//! - With `BANKCONF_EXPECT`, an expected outcome is reported ignored with its reason, and a
//!   gating case whose line no longer holds or has expired fails its test.

use bankconf::harness::catalogue;
use bankconf::harness::config::RunConfig;
use bankconf::harness::expect::{Expectations, Standing};
use bankconf::harness::outcome::{CaseResult, Outcome};
use bankconf::harness::report::{self, Origin, Report};
use bankconf::harness::runner;
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Instant;

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let config = match RunConfig::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("bankconf: bad BANKCONF_* configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let started = Instant::now();
    let runtime = Arc::new(tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime"));
    let (gate, settings, outputs, against_target) =
        (config.gate(), config.rerun_settings(), config.outputs.clone(), config.base_url.is_some());
    let expectations = match config.expect.as_deref().map(Expectations::load).transpose() {
        Ok(e) => e.map(Arc::new),
        Err(e) => {
            eprintln!("bankconf: {e}");
            return ExitCode::from(2);
        }
    };
    // Listing needs no target.
    let (ctx, notes) = if args.list {
        (None, Vec::new())
    } else {
        match runtime.block_on(runner::start(config)) {
            Ok((ctx, notes)) => {
                eprintln!("bankconf: testing {} (seed {})", ctx.server, ctx.seed);
                for note in &notes {
                    eprintln!("bankconf: {note}");
                }
                (Some(ctx), notes)
            }
            Err(e) => {
                eprintln!("bankconf: {e}");
                return ExitCode::from(2);
            }
        }
    };
    let results: Arc<Mutex<Vec<CaseResult>>> = Arc::default();
    let trials = catalogue::all()
        .iter()
        .filter(|case| !case.offline)
        .map(|case| {
            let (ctx, runtime, results) = (ctx.clone(), runtime.clone(), results.clone());
            let expectations = expectations.clone();
            let gating = gate.gates(case.level);
            Trial::ignorable_test(case.id.clone(), move || {
                let Some(ctx) = ctx else { return Ok(Completion::Completed) };
                let result = runtime.block_on(runner::run_case(ctx, case));
                let outcome = result.outcome.clone();
                let what = format!("{} ({}, {})", case.id, case.section, case.level);
                if let Some(e) = &expectations {
                    let line = e.get(&case.id).cloned();
                    match (e.standing(&result), line) {
                        (Some(Standing::Held), Some(line)) => {
                            results.lock().unwrap_or_else(|e| e.into_inner()).push(result);
                            return Ok(Completion::ignored_with(format!(
                                "expected {}: {}",
                                line.outcome.as_str(),
                                line.reason
                            )));
                        }
                        (Some(standing), Some(line)) if gating => {
                            results.lock().unwrap_or_else(|e| e.into_inner()).push(result);
                            return Err(Failed::from(format!(
                                "{what}: expected {} ({}) in {}, now {}: {}",
                                line.outcome.as_str(),
                                line.reason,
                                e.file,
                                outcome.label(),
                                standing.as_str()
                            )));
                        }
                        _ => {}
                    }
                }
                results.lock().unwrap_or_else(|e| e.into_inner()).push(result);
                match outcome {
                    Outcome::Passed => Ok(Completion::Completed),
                    Outcome::Ignored { reason, .. } if gating && against_target => {
                        Err(Failed::from(format!("{what}: not judged, so the run is INCOMPLETE: {reason}")))
                    }
                    Outcome::Ignored { reason, .. } => Ok(Completion::ignored_with(reason)),
                    Outcome::Error { source, message } => Err(Failed::from(format!(
                        "{what}: ERROR ({}, not the target's fault): {message}",
                        source.as_str()
                    ))),
                    Outcome::Failed(f) if gating => Err(Failed::from(format!("{what}: {}", f.message))),
                    Outcome::Failed(f) => {
                        eprintln!("note: {what}, not gating: {}", f.message);
                        Ok(Completion::Completed)
                    }
                }
            })
            .with_kind(case.level.as_str())
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    let mut hidden = false;
    if let Some(ctx) = ctx {
        let mut results = std::mem::take(&mut *results.lock().unwrap_or_else(|e| e.into_inner()));
        // In catalogue order, as `bankconf run` writes them.
        results.sort_by_key(|r| catalogue::all().iter().position(|c| c.id == r.case.id));
        // A read made for one case may break another case's endpoint rule after that case
        // passed: as in `bankconf run`, the rule's case fails, here after the trials.
        let passed: Vec<String> =
            results.iter().filter(|r| r.outcome == Outcome::Passed).map(|r| r.case.id.clone()).collect();
        let results = runner::attribute(results, &ctx);
        for r in results.iter().filter(|r| passed.contains(&r.case.id) && r.outcome.is_failed()) {
            eprintln!("bankconf: {} FAILED after its trial: {}", r.case.id, r.outcome.message().unwrap_or_default());
            hidden |= gate.gates(r.case.level);
        }
        let report = Report {
            origin: Origin::Run { seed: ctx.seed, settings },
            server: ctx.server.clone(),
            gate,
            results,
            duration: started.elapsed(),
            notes,
            setup_error: None,
            transition_graph: ctx.graph().cloned(),
            expectations: expectations.map(|e| (*e).clone()),
            latency: ctx.api.recorder().latency.summary(),
            har: None,
        };
        if let Err(e) = report::write(&outputs, &report) {
            eprintln!("bankconf: {e}");
        }
        runtime.block_on(ctx.shutdown());
    }
    if hidden {
        return ExitCode::FAILURE;
    }
    conclusion.exit_code()
}
