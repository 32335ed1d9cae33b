//! Reports of a run, side by side: the terminal lines and summary, the JSON report
//! (`schemas/report.json`), JUnit XML and a Markdown summary, one module each. All of them read
//! one [`Report`] ([`verdict`]), made by `bankconf run` or by `bankconf check-events`. Reports
//! depend on outcomes, never on the runner.

pub mod json;
pub mod junit;
pub mod markdown;
pub mod terminal;
pub mod verdict;

pub use verdict::{Origin, Report, EXIT_FAILED, EXIT_INCOMPLETE, EXIT_NOT_RUN, EXIT_PASSED};

use super::config::OutputPaths;

/// Writes every report asked for; an error names the file that could not be written.
pub fn write(paths: &OutputPaths, report: &Report) -> Result<(), String> {
    let files = [
        (&paths.report_json, json::render_text(report)),
        (&paths.junit, junit::render(report)),
        (&paths.report_md, markdown::render(report)),
    ];
    for (path, text) in files {
        if let Some(path) = path {
            std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
    }
    Ok(())
}

/// Fails early, before anything runs, when a report file cannot be written.
pub fn check_writable(paths: &OutputPaths) -> Result<(), String> {
    for path in [&paths.report_json, &paths.junit, &paths.report_md].into_iter().flatten() {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Prints the summary, writes the report files, and returns the exit code (2 when a file
/// cannot be written).
pub fn finish(report: &Report, paths: &OutputPaths) -> i32 {
    println!("{}", terminal::summary(report));
    if let Err(e) = write(paths, report) {
        eprintln!("bankconf: {e}");
        return EXIT_NOT_RUN;
    }
    report.exit_code()
}
