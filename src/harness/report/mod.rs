//! Reports of a run, side by side: the terminal lines and summary, the JSON report
//! (`schemas/report.json`), JUnit XML, a Markdown summary and an HTML page, one module each.
//! All of them read one [`Report`] ([`super::rules::verdict`]), made by `bankconf run` or by
//! `bankconf check-events`. Reports depend on outcomes, never on the runner.

pub(crate) mod html;
pub(crate) mod json;
pub(crate) mod junit;
pub(crate) mod libtest;
pub(crate) mod markdown;
pub(crate) mod progress;
pub(crate) mod selection;
pub(crate) mod terminal;

/// The run every format renders (its data sits below the runner, in [`super::rules::verdict`]).
use super::rules::verdict;
pub(crate) use verdict::{Origin, Report, EXIT_FAILED, EXIT_INCOMPLETE, EXIT_NOT_RUN, EXIT_PASSED};

use super::setup::config::OutputPaths;
use super::transport::files;
use super::vocab::errors::ReportWriteError;
use super::vocab::sanitize;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Writes every report asked for, each whole ([`files::write_atomically`]); an error names the
/// file that could not be written.
pub(crate) fn write(paths: &OutputPaths, report: &Report) -> Result<(), ReportWriteError> {
    let files = [
        (&paths.report_json, json::render_text(report)),
        (&paths.junit, junit::render(report)),
        (&paths.report_md, markdown::render(report)),
        (&paths.report_html, html::render(report)),
    ];
    // A run that could not start judged nothing: it must not overwrite an expectations file.
    let expectations = report.setup_error.is_none().then(|| (&paths.write_expectations, expectations(report)));
    for (path, text) in files.into_iter().chain(expectations) {
        if let Some(path) = path {
            files::write_atomically(path, text.as_bytes())?;
        }
    }
    Ok(())
}

/// The `--write-expectations` file: the gating cases that did not pass in this run.
fn expectations(report: &Report) -> String {
    let results: Vec<_> = report.results.iter().filter(|r| report.gate.gates(r.case.level)).collect();
    // Nothing that changes from run to run (a date, a loopback port): the same failures write
    // the same bytes, so a regenerated file shows only real changes.
    let header = format!(
        "bankconf expectations, written from a run against {}.\n\
         Review each reason, add `expires = YYYY-MM-DD` where a fix is planned, and pass the file\n\
         with --expect: these outcomes then no longer decide the exit code; any other does.",
        crate::harness::rules::expect::stable(&sanitize::visible(&report.server)),
    );
    crate::harness::rules::expect::write(&results, report.expectations.as_ref(), &header)
}

/// Fails early, before anything runs, when a report file cannot be written, or when two of
/// them (the HAR, `har`, included) are `-`: one standard output holds one report. With one
/// report on standard output, the terminal's lines go to standard error ([`say`]), so that
/// `--report-json - | jq` reads JSON alone.
pub(crate) fn check_writable(paths: &OutputPaths, har: Option<&Path>) -> Result<(), ReportWriteError> {
    let all = [&paths.report_json, &paths.junit, &paths.report_md, &paths.report_html, &paths.write_expectations];
    let all: Vec<&Path> = all.into_iter().flatten().map(PathBuf::as_path).chain(har).collect();
    let to_stdout = all.iter().filter(|p| files::is_stdout(p)).count();
    if to_stdout > 1 {
        let why = "two reports cannot both go to standard output: give all but one of them a file";
        return Err(ReportWriteError { path: "-".into(), source: std::io::Error::other(why) });
    }
    for path in all {
        writable(path)?;
    }
    if to_stdout == 1 {
        TERMINAL_ON_STDERR.store(true, Ordering::Relaxed);
    }
    Ok(())
}

/// Whether the terminal's lines go to standard error: a report is written to standard output.
static TERMINAL_ON_STDERR: AtomicBool = AtomicBool::new(false);

/// Whether `path` can be written, without creating or truncating it (a run cut short must not
/// leave an empty report behind).
pub(crate) fn writable(path: &std::path::Path) -> Result<(), ReportWriteError> {
    files::writable(path)
}

/// Writes to stdout and flushes. A closed stdout (`bankconf run | head`) is no error: the run
/// goes on without printing and still writes its report files (SIGPIPE stays ignored, as Rust
/// sets it, so that a peer closing a socket can never kill the harness either).
/// With a report on standard output (`--report-json -`), the lines go to standard error.
pub fn say(text: std::fmt::Arguments) {
    use std::io::Write;
    static CLOSED: AtomicBool = AtomicBool::new(false);
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let written = if TERMINAL_ON_STDERR.load(Ordering::Relaxed) {
        let mut err = std::io::stderr().lock();
        err.write_fmt(text).and_then(|()| err.flush())
    } else {
        let mut out = std::io::stdout().lock();
        out.write_fmt(text).and_then(|()| out.flush())
    };
    if written.is_err() {
        CLOSED.store(true, Ordering::Relaxed);
    }
}

/// Prints the summary (`quiet`: its closing block alone), writes the report files, and returns
/// the exit code (2 when a file cannot be written).
pub(crate) fn finish(report: &Report, paths: &OutputPaths, quiet: bool) -> i32 {
    let note = terminal::full_text(paths);
    let summary = match quiet {
        true => terminal::render_quiet_summary(report, terminal::Paint::stdout(), &note),
        false => terminal::summary(report, &note),
    };
    if report.setup_error.is_some() && report.results.is_empty() {
        // A run that could not start: its one line goes with the setup error, on stderr.
        eprintln!("{summary}");
    } else {
        say(format_args!("{summary}\n"));
    }
    if let Err(e) = write(paths, report) {
        eprintln!("bankconf: {e}");
        return EXIT_NOT_RUN;
    }
    report.exit_code()
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// Calls that read a string (issue 74: no report or runner step matches on text the project
    /// wrote; what it decides by is a value). `contains` counts with a literal or formatted
    /// needle: a membership test in a list of ids, sequence numbers or levels reads no text.
    const READS: [&str; 9] = [
        ".starts_with(",
        ".ends_with(",
        ".strip_prefix(",
        ".strip_suffix(",
        ".contains(\"",
        ".contains('",
        ".contains(&format!",
        "Regex",
        ".find(\"",
    ];

    /// The lines allowed to read text anyway: (file under `src/harness/`, what the line holds,
    /// why it reads no message of the project's).
    const ALLOWED: [(&str, &str, &str); 7] = [
        ("report/html/mod.rs", "tag.", "a validator of the HTML tags this module wrote (`well_formed`), no message"),
        ("report/html/mod.rs", "html.contains(&format!(\"<meta", "the same validator: the policy is in place"),
        ("report/html/failure.rs", "out.ends_with('#')", "builds a digits-blind folding key, char by char"),
        ("report/markdown.rs", "words[i].starts_with('-')", "wraps a command line by its flags for width"),
        ("runner/causes.rs", "b.starts_with('\\u{feff}')", "the target's bodies: a byte-order mark"),
        ("runner/causes.rs", ".contains(\"html\")", "the target's Content-Type"),
        ("runner/causes.rs", "body.trim_start().starts_with('<')", "the target's body: markup, not JSON"),
    ];

    fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("a source folder").flatten() {
            let path = entry.path();
            match path.is_dir() {
                true => sources(&path, out),
                false if path.extension().is_some_and(|e| e == "rs") => out.push(path),
                false => {}
            }
        }
    }

    /// A guard against the text matching issue 74 removed coming back: every line of `report/`
    /// and `runner/` outside its tests that reads a string is on [`ALLOWED`], which says why,
    /// and every entry of it still names a line.
    #[test]
    fn no_report_nor_runner_step_reads_text_the_project_wrote() {
        let harness = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/harness");
        let mut files = Vec::new();
        for dir in ["report", "runner"] {
            sources(&harness.join(dir), &mut files);
        }
        let (mut reading, mut used) = (Vec::new(), [false; ALLOWED.len()]);
        for file in files {
            let name = file.strip_prefix(&harness).expect("under src/harness").to_string_lossy().replace('\\', "/");
            let text = std::fs::read_to_string(&file).expect("a source file");
            // The tests end a file (docs/layout.md): what they assert is not the reports' logic.
            let code = text.split("#[cfg(test)]").next().unwrap_or_default();
            for (n, line) in code.lines().enumerate().filter(|(_, l)| !l.trim_start().starts_with("//")) {
                if !READS.iter().any(|r| line.contains(r)) {
                    continue;
                }
                match ALLOWED.iter().position(|(f, holds, _)| name == *f && line.contains(holds)) {
                    Some(i) => used[i] = true,
                    None => reading.push(format!("{name}:{}: {}", n + 1, line.trim())),
                }
            }
        }
        assert!(reading.is_empty(), "lines that read text (make what they decide by a value):\n{}", reading.join("\n"));
        // The scan sees what issue 74 removed (the HTML report's TLS banner read its own note).
        assert!(READS.iter().any(|r| r#"notes.iter().filter(|n| n.starts_with("TLS: "))"#.contains(r)));
        let stale: Vec<&str> = ALLOWED.iter().zip(used).filter(|(_, u)| !u).map(|((_, holds, _), _)| *holds).collect();
        assert!(stale.is_empty(), "allowed lines that are gone: {stale:?}");
    }
}
