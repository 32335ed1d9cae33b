//! `bankconf`: run the conformance catalogue against a target, or serve the reference sandbox.

use bankconf::harness::capture::CheckEventsConfig;
use bankconf::harness::{self, catalogue, config::RunConfig};
use bankconf::sandbox::{Sandbox, SandboxConfig};
use clap::{Parser, Subcommand};
use std::io::Write;
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
    /// Check captured webhook deliveries offline (JSON Lines, or one JSON array), with the
    /// event rules of `run`; same reports and exit codes.
    CheckEvents(Box<CheckEventsConfig>),
    /// Print an OpenAPI 3.1 description of the service (§4, §5, §6), built from schemas/.
    Openapi,
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
    },
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
        Command::CheckEvents(config) => harness::capture::check_events(*config),
        Command::Openapi => {
            let text = bankconf::openapi::to_pretty_string(&bankconf::openapi::document());
            let mut stdout = std::io::stdout();
            match writeln!(stdout, "{text}").and_then(|()| stdout.flush()) {
                Ok(()) => 0,
                Err(_) => 2,
            }
        }
        Command::Serve { listen, api_keys, service } => {
            runtime.block_on(serve(SandboxConfig { listen, api_keys, service }))
        }
    };
    ExitCode::from(code as u8)
}

async fn serve(config: SandboxConfig) -> i32 {
    let sandbox = match Sandbox::start(config).await {
        Ok(s) => s,
        Err(e) => {
            eprintln!("bankconf serve: {e}");
            return 2;
        }
    };
    // The sandbox's own keys are printed so that the person who started it can use them.
    // Write errors are ignored: a closed stdout must not stop the server.
    let mut banner = format!("bankconf sandbox listening on {}\n", sandbox.base_url);
    banner += &format!("widget: {}/widget/{}-connect.js\n", sandbox.base_url, sandbox.service);
    for client in &sandbox.clients {
        banner += &format!("client {}  api key {}\n", client.client_id, client.api_key);
    }
    let mut stdout = std::io::stdout();
    let _ = stdout.write_all(banner.as_bytes()).and_then(|()| stdout.flush());
    tokio::select! {
        _ = sandbox.wait() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    0
}
