//! Every `bankconf` command the README and docs/*.md quote, checked against the binary: its
//! subcommand exists, each flag it quotes is one of that subcommand's (`bankconf SUB --help`,
//! or a hidden flag of `run` the docs name on purpose), each case id it names selects a case;
//! a flag quoted alone is bankconf's or one of the other tools the docs name. The quick commands
//! (`--help`, `--list`, `--print-config` on the docs' own `bankconf.toml`, `openapi`,
//! `completions`, `check-events` on a fixture, `serve`) run and end as the docs say; the figures
//! the docs state that the catalogue decides are compared with it exactly. Whole sandbox runs
//! (seconds each, in a debug build) and the traffic figures they measure are `#[ignore]`d: the
//! full matrix runs them (`.ci/run`, `docs --ignored`).

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod common;

use common::{temp_path, text, BIN};

/// A `bankconf` command quoted by a doc: where, its subcommand (empty for `bankconf --version`)
/// and the words after it, up to a pipe, a redirection or a comment.
#[derive(Clone, Debug)]
struct Quoted {
    at: String,
    sub: String,
    words: Vec<String>,
    /// Inline, with no word after the subcommand (`bankconf check-events`): a name, not a
    /// command to run.
    named: bool,
}

/// The Markdown files a newcomer reads (docs/cases.md included: generated, it quotes commands).
fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![PathBuf::from("README.md"), PathBuf::from("cases/README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir("docs")
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The code of a Markdown file, each piece with its first line: every line of a fenced block
/// (lines ending in `\` joined to the next), and every inline code span (which may wrap).
fn code_pieces(markdown: &str) -> Vec<(usize, String, bool)> {
    let mut out = Vec::new();
    let (mut fenced, mut joined, mut start) = (false, String::new(), 0);
    let (mut span, mut span_start, mut in_span) = (String::new(), 0, false);
    for (n, line) in markdown.lines().enumerate().map(|(n, l)| (n + 1, l)) {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            in_span = false;
            continue;
        }
        if fenced {
            if joined.is_empty() {
                start = n;
            }
            match line.trim_end().strip_suffix('\\') {
                Some(head) => joined.push_str(&format!("{head} ")),
                None => out.push((start, std::mem::take(&mut joined) + line, true)),
            }
            continue;
        }
        if line.trim().is_empty() {
            in_span = false;
        }
        for c in line.chars() {
            match (c, in_span) {
                ('`', false) => (in_span, span_start) = (true, n),
                ('`', true) => {
                    in_span = false;
                    out.push((span_start, std::mem::take(&mut span), false));
                }
                (c, true) => span.push(c),
                _ => {}
            }
        }
        if in_span {
            span.push(' ');
        }
    }
    out
}

/// Shell words of `line`, quotes removed (`'X-Tenant: acme'` is one word).
fn shell_words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quote, mut any) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (c, quote) {
            ('\'' | '"', None) => (quote, any) = (Some(c), true),
            (c, Some(q)) if c == q => quote = None,
            (c, None) if c.is_whitespace() => {
                if any || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            (c, _) => word.push(c),
        }
    }
    if any || !word.is_empty() {
        words.push(word);
    }
    words
}

/// The `bankconf` commands of one piece of code: each shell segment (split at `|`, `&&`, `;`,
/// a lone `&`) whose command word, after `VAR=value` words (or a YAML `run:`, a printed
/// `rerun:`), is `bankconf`, a path to it, or `cargo run [--release] --`; and `docker run` of
/// bankconf's image.
fn commands_in(code: &str) -> Vec<(String, Vec<String>)> {
    let code = code.split(" #").next().unwrap_or_default();
    let mut out = Vec::new();
    for segment in code.split("&&").flat_map(|s| s.split(['|', ';'])).flat_map(|s| s.split(" & ")) {
        let words: Vec<String> = shell_words(segment).into_iter().filter(|w| w != "&").collect();
        let mut at = 0;
        // `VAR=value` words, a YAML `run:` or list item `-`, a printed `rerun:`.
        let lead = |w: &str| (w.contains('=') && !w.starts_with('-')) || w.ends_with(':') || w == "-";
        while at < words.len() && lead(&words[at]) {
            at += 1;
        }
        let rest: &[String] = &words[at..];
        // The container image's entrypoint is `bankconf run` (docs/ci.md): its arguments are run's.
        let image = rest.iter().position(|w| w.starts_with("ghcr.io/bankconf/bankconf"));
        let entry: Vec<String>;
        let after = if let (Some(image), true) = (image, rest.first().is_some_and(|w| w == "docker")) {
            entry = std::iter::once("run".to_string()).chain(rest[image + 1..].iter().cloned()).collect();
            &entry[..]
        } else if rest.first().is_some_and(|w| w == "bankconf" || w.ends_with("/bankconf")) {
            &rest[1..]
        } else if rest.len() > 2 && rest[0] == "cargo" && rest[1] == "run" {
            match rest.iter().position(|w| w == "--") {
                Some(dashes) => &rest[dashes + 1..],
                None => continue,
            }
        } else {
            continue;
        };
        let end = after.iter().position(|w| w.starts_with('>') || w.starts_with("2>")).unwrap_or(after.len());
        let after = &after[..end];
        let word = |w: &str| w.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !w.starts_with('-');
        match after.first() {
            Some(first) if word(first) => out.push((first.clone(), after[1..].to_vec())),
            Some(first) if !first.starts_with('-') => {}
            Some(_) => out.push((String::new(), after.to_vec())),
            None => {}
        }
    }
    out
}

/// Every `bankconf` command quoted in the docs.
fn quoted() -> Vec<Quoted> {
    let mut out = Vec::new();
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for (line, code, fenced) in code_pieces(&text) {
            for (sub, words) in commands_in(&code) {
                let named = !fenced && shell_words(&code).len() <= 2;
                out.push(Quoted { at: format!("{}:{line}", file.display()), sub, words, named });
            }
        }
    }
    out
}

/// The flags of `bankconf SUB --help` (`SUB` empty: the top level), each with whether it takes a
/// value.
fn help_flags(sub: &str) -> Vec<(String, bool)> {
    let args: Vec<&str> = [sub, "--help"].into_iter().filter(|a| !a.is_empty()).collect();
    let output = Command::new(BIN).args(&args).env_clear().output().unwrap();
    assert_eq!(output.status.code(), Some(0), "bankconf {args:?}: {}", text(&output));
    let flag = regex::Regex::new(r"^\s+(?:(-[a-zA-Z]), )?(--[a-z0-9-]+)( <)?").unwrap();
    let mut out = Vec::new();
    for line in String::from_utf8_lossy(&output.stdout).lines() {
        if let Some(found) = flag.captures(line) {
            let value = found.get(3).is_some();
            out.extend(found.get(1).map(|short| (short.as_str().to_string(), value)));
            out.push((found[2].to_string(), value));
        }
    }
    out
}

/// The subcommands `bankconf --help` lists, and `man` (hidden: it writes docs/man).
fn subcommands() -> BTreeSet<String> {
    let output = Command::new(BIN).arg("--help").env_clear().output().unwrap();
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    let commands = out.split("Commands:").nth(1).unwrap().split("Options:").next().unwrap().to_string();
    let mut subs: BTreeSet<String> =
        commands.lines().filter_map(|l| l.split_whitespace().next()).map(str::to_string).collect();
    subs.insert("man".into());
    subs
}

/// The flags of `run` that `--help` does not show but the docs may name: the embedded
/// sandbox's own (`--sandbox-mutant`, `--sandbox-*` conditions, advanced) and the old names
/// `--junit` and `--har`, still read.
fn hidden_run_flags() -> Vec<(String, bool)> {
    use clap::Args;
    let command = bankconf::RunConfig::augment_args(clap::Command::new("run"));
    let mut out = Vec::new();
    for arg in command.get_arguments() {
        let takes = arg.get_num_args().is_none_or(|n| n.takes_values())
            && !matches!(arg.get_action(), clap::ArgAction::SetTrue);
        for name in arg.get_long().into_iter().chain(arg.get_all_aliases().unwrap_or_default()) {
            out.push((format!("--{name}"), takes));
        }
    }
    out
}

/// A word that stands for something (`…`, `FILE`, `<case-id>`, `$BANKCONF_API_KEY`), not itself.
fn placeholder(word: &str) -> bool {
    word.contains('…')
        || word.contains("...")
        || word.contains('<')
        || word.contains('$')
        || (word.chars().any(|c| c.is_ascii_uppercase())
            && word.chars().all(|c| c.is_ascii_uppercase() || c == '_' || c == '-'))
}

/// The run's catalogue (the check-events cases are not `run`'s).
fn run_catalogue() -> Vec<bankconf::Case> {
    bankconf::internal::catalogue::all().iter().filter(|c| !c.offline).cloned().collect()
}

#[test]
fn every_quoted_command_names_a_subcommand_its_flags_and_cases() {
    let subs = subcommands();
    let ids: Vec<String> = run_catalogue().iter().map(|c| c.id.clone()).collect();
    let mut wrong = Vec::new();
    let quoted = quoted();
    assert!(quoted.len() > 40, "the extraction found {} commands", quoted.len());
    let mut flags_of = std::collections::BTreeMap::new();
    for q in &quoted {
        if !q.sub.is_empty() && !subs.contains(&q.sub) {
            wrong.push(format!("{}: bankconf {}: no such subcommand", q.at, q.sub));
            continue;
        }
        let flags: &Vec<(String, bool)> = flags_of.entry(q.sub.clone()).or_insert_with(|| {
            let mut flags = help_flags(&q.sub);
            if q.sub == "run" {
                flags.extend(hidden_run_flags());
            }
            flags
        });
        let mut words = q.words.iter();
        while let Some(word) = words.next() {
            if word.starts_with('-') && word.len() > 1 && !placeholder(word) {
                let name = word.split('=').next().unwrap();
                match flags.iter().find(|(f, _)| f == name) {
                    None => wrong.push(format!("{}: bankconf {} {word}: no such flag", q.at, q.sub)),
                    Some((_, true)) if !word.contains('=') => {
                        words.next();
                    }
                    Some(_) => {}
                }
            } else if q.sub == "run" && !placeholder(word) && !ids.iter().any(|id| id.starts_with(word.as_str())) {
                wrong.push(format!("{}: bankconf run {word}: selects no case", q.at));
            }
        }
    }
    assert!(wrong.is_empty(), "commands the docs quote that bankconf refuses:\n{}", wrong.join("\n"));
}

/// The flags of other tools the docs quote alone, each with its tool.
const OTHER_TOOLS: &[(&str, &str)] = &[
    ("--release", "cargo"),
    ("--ignored", "cargo test (the libtest harness)"),
    ("--entrypoint", "docker"),
    ("--cacert", "curl"),
    ("-k", "curl"),
    ("-H", "curl"),
    ("-p", "docker run"),
    ("--graph", "scripts/layers.py"),
    ("--no-sandbox", "Chromium"),
    ("--remote-debugging-pipe", "Chromium"),
    ("--ignore-certificate-errors", "Chromium"),
];

/// A flag quoted alone (`--skip-browser`, `--report-*`) is one of bankconf's subcommands'
/// (hidden ones included), or of another tool the docs name.
#[test]
fn every_flag_quoted_alone_is_bankconfs_or_another_tools() {
    let mut known: BTreeSet<String> = hidden_run_flags().into_iter().map(|(f, _)| f).collect();
    for sub in subcommands().into_iter().filter(|s| s != "help") {
        known.extend(help_flags(&sub).into_iter().map(|(f, _)| f));
    }
    known.extend(help_flags("").into_iter().map(|(f, _)| f));
    let mut wrong = Vec::new();
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        for (line, code, fenced) in code_pieces(&text) {
            let Some(first) = code.split_whitespace().next().filter(|w| !fenced && w.starts_with('-')) else {
                continue;
            };
            if first == "-" || first == "--" {
                continue;
            }
            let name = first.split('=').next().unwrap();
            let ok = match name.strip_suffix('*').or_else(|| name.strip_suffix('-').filter(|p| p.len() > 2)) {
                Some(prefix) => known.iter().any(|k| k.starts_with(prefix)),
                None => known.contains(name) || OTHER_TOOLS.iter().any(|(f, _)| *f == name),
            };
            if !ok {
                wrong.push(format!("{}:{line}: `{code}`", file.display()));
            }
        }
    }
    assert!(wrong.is_empty(), "flags quoted that neither bankconf nor a tool the docs name has:\n{}", wrong.join("\n"));
}

/// How a quoted command that can run here ends, as the docs imply.
#[derive(Debug, PartialEq)]
enum Ends {
    Exit(i32),
    /// `serve`: prints its address and keeps serving.
    Serves,
}

/// Whether a command quoted can run here, and how it must end; `None`: it names a target,
/// a placeholder or a key, or takes minutes (`self-test`: `tests/mutants.rs` is its work).
fn how_it_ends(q: &Quoted, browser: bool) -> Option<Ends> {
    if q.named || q.words.iter().any(|w| placeholder(w)) {
        return None;
    }
    let has = |flag: &str| q.words.iter().any(|w| w == flag);
    match q.sub.as_str() {
        "" | "openapi" | "completions" | "man" | "check-events" => Some(Ends::Exit(0)),
        "serve" if has("--list-mutants") || has("--list-variants") => Some(Ends::Exit(0)),
        "serve" => Some(Ends::Serves),
        "run" if has("--list") || has("--print-config") || has("--help") => Some(Ends::Exit(0)),
        // The embedded sandbox passes every case; without a browser (or with the browser cases
        // left out) the run is INCOMPLETE.
        // A target of its own: given, or the docs' bankconf.toml's (a staging server).
        "run" if has("--base-url") || has("--profile") => None,
        "run" if has("--sandbox-mutant") => Some(Ends::Exit(1)),
        "run" => Some(Ends::Exit(if browser && !has("--skip-browser") && !has("--exclude") { 0 } else { 3 })),
        _ => None,
    }
}

/// A whole sandbox run (seconds in a debug build): in the full matrix only.
fn slow(q: &Quoted) -> bool {
    q.sub == "run" && !q.words.iter().any(|w| w == "--list" || w == "--print-config" || w == "--help")
}

/// The folder a quoted command runs in: a capture named as the docs name it
/// (`deliveries.jsonl`: a fixture that passes), the `conformance/` folder the docs write
/// into, and in `with-config/` the docs' own `bankconf.toml` (docs/running.md), where a
/// command that names a `--profile` runs.
fn scratch(name: &str) -> PathBuf {
    let dir = temp_path(name);
    std::fs::create_dir_all(dir.join("conformance")).unwrap();
    std::fs::create_dir_all(dir.join("with-config")).unwrap();
    let running = std::fs::read_to_string("docs/running.md").unwrap();
    let toml = running.split("```toml\n").nth(1).and_then(|t| t.split("```").next()).expect("a bankconf.toml example");
    std::fs::write(dir.join("with-config/bankconf.toml"), toml).unwrap();
    std::fs::copy("tests/fixtures/events/good.jsonl", dir.join("deliveries.jsonl")).unwrap();
    dir
}

/// Runs one quoted command in `dir` and says how it ended, or how it did not end as the docs imply.
fn run_quoted(q: &Quoted, ends: &Ends, dir: &Path) -> Result<(), String> {
    let mut words = q.words.clone();
    // A server of the docs listens on a port of its own here (8080 may be taken).
    match words.iter().position(|w| w == "--listen") {
        Some(at) => words[at + 1] = "127.0.0.1:0".into(),
        None if q.sub == "serve" => words.extend(["--listen".into(), "127.0.0.1:0".into()]),
        None => {}
    }
    let mut command = Command::new(BIN);
    let dir = if words.iter().any(|w| w == "--profile") { dir.join("with-config") } else { dir.to_path_buf() };
    command.args(std::iter::once(&q.sub).filter(|s| !s.is_empty()).chain(&words)).current_dir(dir);
    command.env_clear().env("PATH", std::env::var("PATH").unwrap_or_default());
    // The variables the docs' bankconf.toml names.
    for var in ["STAGING_KEY", "STAGING_KEY_2"] {
        command.env(var, format!("bankconf_test_{}", var.to_lowercase()));
    }
    command.env("GATEWAY_HEADER", "X-Tenant: acme");
    let stdin = std::fs::read("tests/fixtures/events/good.jsonl").unwrap();
    match ends {
        Ends::Serves => {
            use std::io::BufRead;
            let mut child = command.stdout(Stdio::piped()).stderr(Stdio::null()).spawn().unwrap();
            let mut banner = String::new();
            std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut banner).unwrap();
            let alive = child.try_wait().unwrap().is_none();
            let _ = child.kill();
            let _ = child.wait();
            match alive && banner.contains("http://127.0.0.1:") {
                true => Ok(()),
                false => Err(format!("serves nothing: {banner}")),
            }
        }
        Ends::Exit(code) => {
            use std::io::Write;
            let mut child =
                command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
            let _ = child.stdin.take().unwrap().write_all(&stdin);
            let output = child.wait_with_output().unwrap();
            match output.status.code() == Some(*code) {
                true => Ok(()),
                false => Err(format!("exit {:?}, not {code}: {}", output.status.code(), tail(&text(&output)))),
            }
        }
    }
}

fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(6)..].join("\n")
}

fn browser_here() -> bool {
    std::env::var_os("BANKCONF_BROWSER").is_some() || bankconf::internal::browser::find(None).is_some()
}

fn run_the_quoted(slow_ones: bool) {
    let browser = browser_here();
    let dir = scratch(if slow_ones { "doc-commands-slow" } else { "doc-commands" });
    let mut wrong = Vec::new();
    let mut ran = 0;
    let mut seen = BTreeSet::new();
    // The docs' `--write-expectations` first: their `--expect` reads the file it writes.
    let mut commands = quoted();
    commands.sort_by_key(|q| !q.words.iter().any(|w| w == "--write-expectations"));
    for q in commands {
        let Some(ends) = how_it_ends(&q, browser) else { continue };
        if slow(&q) != slow_ones || !seen.insert((q.sub.clone(), q.words.clone())) {
            continue;
        }
        ran += 1;
        eprintln!("{}: bankconf {} {} (expected: {ends:?})", q.at, q.sub, q.words.join(" "));
        if let Err(e) = run_quoted(&q, &ends, &dir) {
            wrong.push(format!("{}: bankconf {} {}: {e}", q.at, q.sub, q.words.join(" ")));
        }
    }
    assert!(ran > 3, "ran {ran} quoted commands");
    assert!(wrong.is_empty(), "quoted commands that do not end as the docs say:\n{}", wrong.join("\n"));
}

/// The quick commands the docs quote run, and end as the docs imply.
#[test]
fn the_quick_commands_the_docs_quote_end_as_they_say() {
    run_the_quoted(false);
}

/// The whole sandbox runs the docs quote (seconds each in a debug build).
#[test]
#[ignore = "whole sandbox runs: the full matrix runs them"]
fn the_sandbox_runs_the_docs_quote_end_as_they_say() {
    run_the_quoted(true);
}

/// A number the docs write in words or digits.
fn number(word: &str) -> usize {
    const WORDS: [&str; 16] = [
        "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
        "thirteen", "fourteen", "fifteen",
    ];
    WORDS.iter().position(|w| *w == word).unwrap_or_else(|| word.parse().unwrap_or_else(|_| panic!("a number: {word}")))
}

/// The captures of `pattern` in `file` (its lines joined, spaces squeezed), or a failure naming
/// the sentence that moved.
fn stated(file: &str, pattern: &str) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap().replace('\n', " ");
    let text = regex::Regex::new(r" +").unwrap().replace_all(&text, " ").into_owned();
    let found = regex::Regex::new(pattern)
        .unwrap()
        .captures(&text)
        .unwrap_or_else(|| panic!("{file} no longer states /{pattern}/: update this test with the sentence"));
    found.iter().map(|m| m.map_or(String::new(), |m| m.as_str().to_string())).collect()
}

/// The counts the docs state that the catalogue, the sandbox's mutants or the OpenAPI document
/// decide, compared with them exactly.
#[test]
fn the_figures_the_catalogue_decides_are_its_own() {
    let cases = run_catalogue();
    let gating = |c: &bankconf::Case| matches!(c.level, bankconf::Level::Must | bankconf::Level::Security);
    // docs/running.md "What a run leaves out": the closing line of `--exclude PREFIX`.
    let line = stated(
        "docs/running.md",
        r"INCOMPLETE: (\d+) gating cases not judged \((\d+) passed, 0 failed, 0 errors, (\d+) ignored in [0-9.]+s; (\d+) cases left out by --exclude (\S+) \((\d+) gating\)\)",
    );
    let prefix = &line[5];
    let left: Vec<&bankconf::Case> = cases.iter().filter(|c| c.id.starts_with(prefix)).collect();
    let left_gating = left.iter().filter(|c| gating(c)).count();
    let said: Vec<usize> = [1, 2, 3, 4, 6].map(|i| line[i].parse().unwrap()).to_vec();
    assert_eq!(said, [left_gating, cases.len() - left.len(), left.len(), left.len(), left_gating], "{}", &line[0]);
    // "…; 79 cases not selected" of a rerun of one case.
    let one = stated("docs/running.md", r"--seed S events\.schema`\).*?; (\d+) cases not selected");
    assert_eq!(one[1].parse::<usize>().unwrap(), cases.len() - 1, "{}", &one[0]);
    // The mutants a browser case must catch: untried without a browser (`selftest::needs_browser`).
    let browser_only = bankconf::sandbox::Mutant::ALL
        .iter()
        .filter(|m| {
            m.caught_by()
                .iter()
                .any(|id| cases.iter().any(|c| c.id == *id && c.needs.contains(&bankconf::Need::Browser)))
        })
        .count();
    let said = stated("docs/running.md", r"leave the (\w+) mutants that a browser case must catch");
    assert_eq!(number(&said[1]), browser_only, "{}", &said[0]);
    // The event types of §6 the OpenAPI document describes as webhooks.
    let output = Command::new(BIN).arg("openapi").env_clear().output().unwrap();
    let openapi: Value = serde_json::from_slice(&output.stdout).unwrap();
    let said = stated("docs/running.md", r"the (\w+) event types of §6 as");
    assert_eq!(number(&said[1]), openapi["webhooks"].as_object().unwrap().len(), "{}", &said[0]);
}

/// The traffic the docs state for a plain sandbox run ("about 510–530 API requests") holds a
/// measured one, give or take a tenth (the count of retries and polls moves with the machine).
#[test]
#[ignore = "a whole sandbox run: the full matrix runs it"]
fn the_traffic_the_docs_state_is_measured() {
    let json = temp_path("doc-traffic.json");
    let output = Command::new(BIN)
        .args(["run", "--skip-browser", "--report-json", json.to_str().unwrap()])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(3), "{}", tail(&text(&output)));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let measured = |key: &str| report["latency"][key].as_u64().unwrap() as f64;
    let said =
        stated("docs/running.md", r"sends about (\d+)–(\d+) API requests and causes about (\d+)–(\d+) deliveries");
    let range = |lo: usize| -> (f64, f64) {
        (said[lo].parse::<f64>().unwrap() * 0.9, said[lo + 1].parse::<f64>().unwrap() * 1.1)
    };
    for (value, (lo, hi), what) in
        [(measured("requests"), range(1), "API requests"), (measured("deliveries"), range(3), "deliveries")]
    {
        assert!(lo <= value && value <= hi, "{}: measured {value} {what}", &said[0]);
    }
}
