//! `bankconf`: run the conformance catalogue against a target, or serve the reference sandbox.

use bankconf::internal::check_events::{self, CheckEventsConfig};
use bankconf::internal::config::completing;
use bankconf::internal::config::file::{print_config, ConfigChoice, ConfigFile, FromFile};
use bankconf::internal::{catalogue, command, openapi, report, selftest};
use bankconf::sandbox::{Conditions, Mutant, Sandbox, SandboxConfig, Variant};
use bankconf::{RunConfig, EXIT_FAILED, EXIT_INCOMPLETE, EXIT_NOT_RUN, EXIT_PASSED};
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};
use std::io::Write;
use std::net::SocketAddr;
use std::process::ExitCode;

/// `bankconf --version`: the crate's version and the commit it was built from (build.rs).
const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("BANKCONF_COMMIT"), ")");

#[derive(Parser)]
#[command(name = "bankconf", version = VERSION, about = "Conformance harness for the Bank Connection Aggregation Service")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The sections `bankconf run --help` and its man page end with (the options' own variables
/// are listed with each option).
const RUN_AFTER: &str = "EXIT STATUS:
  0  passed: every gating case passed (or deviated only as the --expect file expects)
  1  failed: the target broke a gating rule (or deviated from the --expect file)
  2  error: the setup (base URL, key, driver, receiver, browser) kept a case from running
  3  INCOMPLETE: gating cases were not judged (ignored); the verdict says how to complete the run
  130, 143  interrupted (SIGINT, SIGTERM): the reports written are whole, marked interrupted

ENVIRONMENT:
  Each option with a BANKCONF_* variable names it (the selection, CASE, --section, --level and
  --exclude, and --list have none); the command line wins over it.
  NO_COLOR, CLICOLOR, CLICOLOR_FORCE  colour of the terminal report";

#[derive(Subcommand)]
enum Command {
    /// Run the conformance catalogue (against the embedded sandbox when no --base-url is given).
    #[command(after_long_help = RUN_AFTER)]
    Run {
        #[command(flatten)]
        config: Box<RunConfig>,
        /// `--config`, `--profile`, `--print-config`: the settings file.
        #[command(flatten)]
        choice: ConfigChoice,
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
        /// Break one rule of the spec on purpose (see --list-mutants).
        #[arg(long, value_parser = completing::mutants(), hide_possible_values = true, conflicts_with = "variant")]
        mutant: Option<Mutant>,
        /// Serve a conforming variant that reads the spec's freedoms differently (see --list-variants).
        #[arg(long, value_parser = completing::variants(), hide_possible_values = true)]
        variant: Option<Variant>,
        /// Conditions of a real deployment (none is a violation).
        #[command(flatten)]
        conditions: Conditions,
        /// Print every mutant with the cases that must catch it, and exit.
        #[arg(long)]
        list_mutants: bool,
        /// Print every variant, and exit.
        #[arg(long)]
        list_variants: bool,
    },
    /// Run the catalogue against every mutant (each must be caught) and every variant (each
    /// must pass) of the embedded sandbox; exits 1 unless the score is complete, 3 when some
    /// mutants could not be tried (no browser).
    SelfTest {
        /// Runs at a time.
        #[arg(long, default_value_t = 4)]
        parallel: usize,
        /// Seconds a case waits for an expected event.
        #[arg(long, default_value_t = 8.0)]
        event_timeout: f64,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) to stdout.
    Completions {
        #[arg(value_name = "SHELL")]
        shell: clap_complete::Shell,
    },
    /// Write the man pages (`bankconf.1`, `bankconf-run.1`, …) into a folder: docs/man is
    /// written so, and a test checks it is current.
    #[command(hide = true)]
    Man {
        #[arg(value_name = "DIR")]
        dir: std::path::PathBuf,
    },
}

/// glibc gives threads that allocate at once an arena each (up to eight per core) and keeps
/// what each freed: a target's large pages, parsed by several cases at once, then cost the run
/// about twice their size in resident memory (`fat_pages_that_never_end` in tests/hostile.rs:
/// 449 MiB with glibc's default, about 300 MiB with two arenas). Two arenas bound that; called
/// first, before any thread starts.
fn few_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: sets one allocator parameter while the process has a single thread.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

fn main() -> ExitCode {
    few_malloc_arenas();
    bankconf::internal::config::forget_empty_env();
    let cli = match with_settings_file() {
        Ok(cli) => cli,
        Err(code) => return ExitCode::from(code),
    };
    command::name_this_binary();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bankconf: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let code = match cli.command {
        Command::Run { config, list: true, .. } => {
            let selection = config.selection();
            // The same rule as `run`: a selection that names no case is a mistake (exit 2).
            if let Err(e) = catalogue::check_selection(&selection) {
                eprintln!("bankconf: {e}");
                return ExitCode::from(EXIT_NOT_RUN as u8);
            }
            let lines: String = catalogue::all()
                .iter()
                .filter(|c| selection.matches(c))
                .map(|c| format!("{:<36} {:<5} {:<10} {}\n", c.id, c.section, c.level, c.title))
                .collect();
            emit(&lines)
        }
        Command::Run { config, list: false, .. } => runtime.block_on(command::run(*config)),
        Command::CheckEvents(config) => check_events::check_events(*config),
        Command::Openapi => emit(&format!("{}\n", openapi::to_pretty_string(&openapi::document()))),
        Command::Serve { list_mutants: true, .. } => emit(&mutant_list()),
        Command::Serve { list_variants: true, .. } => emit(
            &Variant::ALL
                .iter()
                .map(|v| format!("{:<32} {:<5} {}\n", v.name(), v.section(), v.description()))
                .collect::<String>(),
        ),
        Command::Serve { listen, api_keys, service, mutant, variant, conditions, .. } => {
            runtime.block_on(serve(SandboxConfig {
                listen,
                api_keys,
                service,
                mutant,
                variant,
                perturbations: Vec::new(),
                conditions,
            }))
        }
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "bankconf", &mut script);
            emit(&String::from_utf8_lossy(&script))
        }
        Command::Man { dir } => {
            match std::fs::create_dir_all(&dir).and_then(|()| write_man_pages(man_command(), &dir)) {
                Ok(()) => EXIT_PASSED,
                Err(e) => {
                    eprintln!("bankconf man: cannot write {}: {e}", dir.display());
                    EXIT_NOT_RUN
                }
            }
        }
        Command::SelfTest { parallel, event_timeout } => {
            let options = selftest::Options { parallel, event_timeout };
            let result =
                runtime.block_on(selftest::self_test(&options, |t| report::say(format_args!("{}\n", t.line()))));
            report::say(format_args!("{}\n", result.score()));
            // Untried subjects (no browser) leave the score incomplete, not failed.
            match (result.complete(), result.untried.is_empty()) {
                (false, _) => EXIT_FAILED,
                (true, false) => EXIT_INCOMPLETE,
                (true, true) => EXIT_PASSED,
            }
        }
    };
    ExitCode::from(code as u8)
}

/// The command line, with the settings of `bankconf.toml` (or `--config FILE`, its `--profile`)
/// that neither a flag nor a `BANKCONF_*` variable gives placed before the flags, and parsed
/// again: default < file < profile < environment < flag. `--print-config` prints the result and
/// where each setting came from; `Err`: the exit code (2, the file cannot be used; 0, printed).
fn with_settings_file() -> Result<Cli, u8> {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let (Command::Run { choice, .. }, Some(given)) = (&cli.command, matches.subcommand_matches("run")) else {
        return Ok(cli);
    };
    let file = ConfigFile::load(choice).map_err(|e| {
        eprintln!("bankconf: {e}");
        EXIT_NOT_RUN as u8
    })?;
    let from = match &file {
        Some(file) => file.args_for(given).map_err(|e| {
            eprintln!("bankconf: {e}");
            EXIT_NOT_RUN as u8
        })?,
        None => FromFile::default(),
    };
    let print = choice.print_config;
    let (cli, given) = match from.args.is_empty() && from.cases.is_empty() {
        true => (cli, given.clone()),
        false => {
            let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
            let (program, rest) = argv.split_at(2.min(argv.len()));
            let argv = program.iter().chain(&from.args).chain(rest).chain(&from.cases).cloned();
            let matches = Cli::command().try_get_matches_from(argv).unwrap_or_else(|e| e.exit());
            let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
            let given: ArgMatches = matches.subcommand_matches("run").cloned().unwrap_or_default();
            (cli, given)
        }
    };
    // The printed commands name the keys as $BANKCONF_API_KEY and $BANKCONF_SECOND_API_KEY.
    for (id, flag, name) in [
        ("api_key", "api-key-env", "BANKCONF_API_KEY"),
        ("second_api_key", "second-api-key-env", "BANKCONF_SECOND_API_KEY"),
    ] {
        let held = from.origins.get(id).and_then(|o| o.split(&format!("{flag} = ")).nth(1));
        if let (Some(variable), false) = (held, print) {
            eprintln!("bankconf: the key comes from ${variable} ({flag}); the printed commands name it ${name}: export {name}=\"${variable}\" before pasting one");
        }
    }
    if print {
        let source = file.as_ref().map_or_else(|| "no settings file".to_string(), ConfigFile::describe);
        emit(&format!(
            "# the settings of `bankconf run` ({source}); secrets redacted\n{}",
            print_config(&given, &from)
        ));
        return Err(EXIT_PASSED as u8);
    }
    Ok(cli)
}

/// `bankconf serve --list-mutants`: each mutant with its section, the cases that catch it, the
/// reads that show it and its flags (scripts read this list), then the generated perturbations.
fn mutant_list() -> String {
    Mutant::ALL
        .iter()
        .map(|m| {
            // The cases whose flows make the reads that show it, when they are others.
            let shown = match m.shown_by() {
                [] => String::new(),
                cases => format!("{:<38} with the reads of: {}\n", "", cases.join(", ")),
            };
            // Its flags (`#[seed]`, `#[noisy]`), which scripts read from this list.
            let flags = match m.flags() {
                [] => String::new(),
                flags => format!("{:<38} flags: {}\n", "", flags.join(", ")),
            };
            format!(
                "{:<32} {:<5} {}\n{:<38} caught by: {}\n{shown}{flags}",
                m.name(),
                m.section(),
                m.description(),
                "",
                m.caught_by().join(", ")
            )
        })
        .chain([bankconf::internal::generated::listing()])
        .collect::<String>()
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
    let conditions = (!config.conditions.is_local()).then(|| config.conditions.describe());
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
    if let Some(m) = config_note {
        banner += &format!("{m}\n");
    }
    if let Some(c) = conditions {
        banner += &format!("conditions: {c}\n");
    }
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

/// The command line the man pages describe: versioned by the crate alone (docs/man is committed,
/// and cannot name the commit that holds it).
fn man_command() -> clap::Command {
    Cli::command().version(env!("CARGO_PKG_VERSION"))
}

/// Writes the man page of `command` and of each of its visible subcommands into `dir`, each
/// `.TH` line naming bankconf and its version (`bankconf 0.1.0`) and, when `SOURCE_DATE_EPOCH`
/// is set (scripts/package.sh sets it to the release's), that day: docs/man is written without
/// it, so that the committed pages do not change from run to run (tests/docs.rs).
fn write_man_pages(command: clap::Command, dir: &std::path::Path) -> std::io::Result<()> {
    let date = std::env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .and_then(|secs| chrono::DateTime::from_timestamp(secs, 0))
        .map(|t| t.format("%Y-%m-%d").to_string())
        .unwrap_or_default();
    let source = format!("bankconf {}", env!("CARGO_PKG_VERSION"));
    let mut command = command.disable_help_subcommand(true);
    command.build();
    fn each(command: clap::Command, dir: &std::path::Path, date: &str, source: &str) -> std::io::Result<()> {
        for sub in command.get_subcommands().filter(|s| !s.is_hide_set()).cloned() {
            each(sub, dir, date, source)?;
        }
        clap_mangen::Man::new(command).date(date).source(source).generate_to(dir).map(drop)
    }
    each(command, dir, &date, &source)
}

/// Writes `text` to stdout. A closed pipe (`bankconf run --list | head`) is not an error.
fn emit(text: &str) -> i32 {
    let mut stdout = std::io::stdout();
    let _ = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush());
    0
}
