//! `bankconf`: run the conformance catalogue against a target, or serve the reference sandbox.

use bankconf::harness::{self, catalogue, config::RunConfig};
use bankconf::sandbox::{Mutant, Sandbox, SandboxConfig, Variant};
use bankconf::selftest;
use clap::{Parser, Subcommand};
use std::net::SocketAddr;
use std::process::ExitCode;

#[derive(Parser)]
#[command(name = "bankconf", version, about = "Conformance harness for the Bank Connection Aggregation Service")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the conformance catalogue (against the embedded sandbox when no --base-url is given).
    Run {
        #[command(flatten)]
        config: Box<RunConfig>,
        /// Print the catalogue (id, section, level, title) and exit.
        #[arg(long)]
        list: bool,
    },
    /// Serve the embedded reference sandbox.
    Serve {
        #[arg(long, default_value = "127.0.0.1:8080")]
        listen: SocketAddr,
        /// API key of a client (repeatable); without any, two are made and printed.
        #[arg(long = "api-key")]
        api_keys: Vec<String>,
        /// `<service>` in `/widget/<service>-connect.js`.
        #[arg(long, default_value = "bankconf")]
        service: String,
        /// Break one rule of the spec on purpose (see --list-mutants).
        #[arg(long, value_parser = parse_mutant, conflicts_with = "variant")]
        mutant: Option<Mutant>,
        /// Serve a conforming variant that reads the spec's freedoms differently (see --list-variants).
        #[arg(long, value_parser = parse_variant)]
        variant: Option<Variant>,
        /// Print every mutant with the cases that must catch it, and exit.
        #[arg(long)]
        list_mutants: bool,
        /// Print every variant, and exit.
        #[arg(long)]
        list_variants: bool,
    },
    /// Run the catalogue against every mutant (each must be caught) and every variant (each
    /// must pass) of the embedded sandbox; exits 1 unless the score is complete.
    SelfTest {
        /// Runs at a time.
        #[arg(long, default_value_t = 4)]
        parallel: usize,
        /// Seconds a case waits for an expected event.
        #[arg(long, default_value_t = 3.0)]
        event_timeout: f64,
    },
}

fn parse_mutant(name: &str) -> Result<Mutant, String> {
    Mutant::from_name(name).ok_or_else(|| format!("unknown mutant {name:?}; see --list-mutants"))
}

fn parse_variant(name: &str) -> Result<Variant, String> {
    Variant::from_name(name).ok_or_else(|| format!("unknown variant {name:?}; see --list-variants"))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bankconf: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let code = match cli.command {
        Command::Run { config, list: true } => {
            let selection = config.selection();
            for case in catalogue::all().iter().filter(|c| selection.matches(c)) {
                println!("{:<36} {:<5} {:<10} {}", case.id, case.section, case.level, case.title);
            }
            0
        }
        Command::Run { config, list: false } => runtime.block_on(harness::run(*config)),
        Command::Serve { list_mutants: true, .. } => {
            for m in Mutant::ALL {
                println!(
                    "{:<32} {:<5} {}\n{:<38} caught by: {}",
                    m.name(),
                    m.section(),
                    m.description(),
                    "",
                    m.caught_by().join(", ")
                );
            }
            0
        }
        Command::Serve { list_variants: true, .. } => {
            for v in Variant::ALL {
                println!("{:<32} {:<5} {}", v.name(), v.section(), v.description());
            }
            0
        }
        Command::Serve { listen, api_keys, service, mutant, variant, .. } => {
            runtime.block_on(serve(SandboxConfig { listen, api_keys, service, mutant, variant }))
        }
        Command::SelfTest { parallel, event_timeout } => {
            let options = selftest::Options { parallel, event_timeout };
            let result = runtime.block_on(selftest::self_test(&options, |t| println!("{}", t.line())));
            println!("{}", result.score());
            if result.complete() {
                0
            } else {
                1
            }
        }
    };
    ExitCode::from(code as u8)
}

async fn serve(config: SandboxConfig) -> i32 {
    let config_note = match (config.mutant, config.variant) {
        (Some(m), _) => Some(format!(
            "MUTANT {m}: {} (breaks {}; caught by {})",
            m.description(),
            m.section(),
            m.caught_by().join(", ")
        )),
        (_, Some(v)) => Some(format!("variant {v}: {}", v.description())),
        _ => None,
    };
    let sandbox = match Sandbox::start(config).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("bankconf serve: {e}");
            return 2;
        }
    };
    println!("bankconf sandbox listening on {}", sandbox.base_url);
    if let Some(m) = config_note {
        println!("{m}");
    }
    println!("widget: {}/widget/{}-connect.js", sandbox.base_url, sandbox.service);
    // The sandbox's own keys: printed so that the person who started it can use them.
    for client in &sandbox.clients {
        println!("client {}  api key {}", client.client_id, client.api_key);
    }
    tokio::select! {
        _ = sandbox.wait() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    0
}
