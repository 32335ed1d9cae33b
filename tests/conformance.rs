//! `cargo test --test conformance`: the catalogue as a libtest-mimic harness, so test-name
//! filters, `--list`, `--ignored` and the usual `test result:` line work. Configured by the
//! `BANKCONF_*` environment variables; with no `BANKCONF_BASE_URL`, the embedded sandbox.
//!
//! Failures at levels outside the gate (`BANKCONF_GATE`, default `must,security`) are printed
//! but do not fail the test, as in `bankconf run`.

use bankconf::harness::catalogue;
use bankconf::harness::config::RunConfig;
use bankconf::harness::fixtures::RunContext;
use bankconf::harness::outcome::Outcome;
use bankconf::harness::runner;
use bankconf::harness::session::Session;
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use std::process::ExitCode;
use std::sync::Arc;

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let config = match RunConfig::from_env() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("bankconf: bad BANKCONF_* configuration: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = Arc::new(tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("tokio runtime"));
    // Listing needs no target.
    let ctx: Option<Arc<RunContext>> = if args.list {
        None
    } else {
        match runtime.block_on(Session::setup(config.clone())) {
            Ok(session) => {
                eprintln!("bankconf: testing {} (seed {})", session.server, session.seed);
                Some(RunContext::new(session))
            }
            Err(e) => {
                eprintln!("bankconf: the run could not start: {e}");
                return ExitCode::from(2);
            }
        }
    };
    let gate = config.gate();
    let trials = catalogue::all()
        .iter()
        .filter(|case| !case.offline)
        .map(|case| {
            let (ctx, runtime, gating) = (ctx.clone(), runtime.clone(), gate.gates(case.level));
            Trial::ignorable_test(case.id.clone(), move || {
                let Some(ctx) = ctx else { return Ok(Completion::Completed) };
                match runtime.block_on(runner::run_case(ctx, case)).outcome {
                    Outcome::Passed => Ok(Completion::Completed),
                    Outcome::Ignored { reason, .. } => Ok(Completion::ignored_with(reason)),
                    Outcome::Error { source, message } => Err(Failed::from(format!(
                        "{} ({}, {}): ERROR ({}, not the target's fault): {message}",
                        case.id,
                        case.section,
                        case.level,
                        source.as_str()
                    ))),
                    Outcome::Failed(f) if gating => {
                        let m = f.message;
                        Err(Failed::from(format!("{} ({}, {}): {m}", case.id, case.section, case.level)))
                    }
                    Outcome::Failed(f) => {
                        let m = f.message;
                        eprintln!("note: {} ({}, {}, not gating): {m}", case.id, case.section, case.level);
                        Ok(Completion::Completed)
                    }
                }
            })
            .with_kind(case.level.as_str())
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    if let Some(ctx) = ctx {
        runtime.block_on(ctx.shutdown());
    }
    conclusion.exit_code()
}
