//! The terminal's progress while a run goes: the header, one line per case as its result is
//! final, and at a TTY a counter and what a long wait waits for (never in CI logs).

use super::terminal;
use crate::harness::outcome::CaseResult;
use crate::harness::runner::Progress;
use crate::harness::sanitize;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Progress printed to standard output.
#[derive(Default)]
pub struct Terminal {
    tty: bool,
    total: AtomicUsize,
    done: AtomicUsize,
}

impl Terminal {
    pub fn new() -> Self {
        Self { tty: std::io::stdout().is_terminal(), ..Self::default() }
    }
}

impl Progress for Terminal {
    fn started(&self, server: &str, seed: u64, cases: usize, notes: &[String]) {
        self.total.store(cases, Ordering::Relaxed);
        println!("{}", terminal::header(server, Some(seed), cases));
        for note in notes {
            println!("{}", sanitize::visible(note));
        }
    }

    fn finished(&self, result: &CaseResult, gating: bool) {
        let n = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        // A counter for people at a terminal; CI logs (not a TTY) get the plain lines.
        let prefix = if self.tty {
            format!("\r\x1b[2K{}", terminal::progress(n, self.total.load(Ordering::Relaxed)))
        } else {
            String::new()
        };
        println!("{prefix}{}", terminal::case_line(result, gating));
        let _ = std::io::stdout().flush();
    }

    fn waiting(&self, status: &str) {
        // Redrawn each second on a line of its own, cleared by the next case line.
        if self.tty {
            print!("\r\x1b[2K{}", sanitize::visible(status));
            let _ = std::io::stdout().flush();
        }
    }

    fn done(&self) {
        if self.tty {
            print!("\r\x1b[2K");
        }
    }
}
