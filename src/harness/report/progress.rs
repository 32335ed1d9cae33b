//! The terminal's progress while a run goes: the header, one line per case as its result is
//! final, and at a TTY a counter and what a long wait waits for (never in CI logs).

use super::terminal;
use crate::harness::vocab::outcome::CaseResult;
use crate::harness::vocab::progress::Progress;
use crate::harness::vocab::sanitize;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Progress printed to standard output (standard error with a report there, [`super::say`]);
/// `quiet`: only the failures and errors.
pub(crate) struct Terminal {
    tty: bool,
    quiet: bool,
    total: AtomicUsize,
    done: AtomicUsize,
    lines: terminal::Lines,
}

impl Terminal {
    /// `note` says where a cut message is whole ([`terminal::full_text`]).
    pub(crate) fn new(note: String) -> Self {
        let tty = std::io::stdout().is_terminal();
        let lines = terminal::Lines::stdout(note);
        Self { tty, quiet: false, total: AtomicUsize::new(0), done: AtomicUsize::new(0), lines }
    }

    /// `--quiet`: no header, no line for a case that passed or was not judged, no waiting line.
    pub(crate) fn quiet(self, quiet: bool) -> Self {
        Self { quiet, ..self }
    }
}

impl Default for Terminal {
    fn default() -> Self {
        Self::new(terminal::full_text(&Default::default()).to_string())
    }
}

impl Progress for Terminal {
    fn started(&self, server: &str, seed: u64, cases: usize) {
        self.total.store(cases, Ordering::Relaxed);
        if self.quiet {
            return;
        }
        super::say(format_args!("{}\n", terminal::header(server, Some(seed), cases)));
    }

    fn finished(&self, result: &CaseResult, gating: bool, expected: bool) {
        let n = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        if self.quiet && (expected || !matches!(result.outcome.mark(gating), "FAIL" | "ERROR")) {
            return;
        }
        // A counter for people at a terminal; CI logs (not a TTY) get the plain lines.
        let prefix = if self.tty {
            format!("\r\x1b[2K{}", terminal::progress(n, self.total.load(Ordering::Relaxed)))
        } else {
            String::new()
        };
        super::say(format_args!("{prefix}{}\n", self.lines.case(result, gating, expected)));
    }

    fn waiting(&self, status: &str) {
        // Redrawn each second on a line of its own, cleared by the next case line.
        if self.tty && !self.quiet {
            super::say(format_args!("\r\x1b[2K{}", sanitize::visible(status)));
        }
    }

    fn diagnosis(&self, message: &str) {
        // On stderr with the other setup errors; on a line of its own at a TTY.
        let clear = if self.tty { "\r\x1b[2K" } else { "" };
        super::say(format_args!("{clear}"));
        eprintln!("setup: {}", sanitize::visible(message));
    }

    fn done(&self) {
        if self.tty {
            super::say(format_args!("\r\x1b[2K"));
        }
    }
}
