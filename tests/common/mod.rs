//! Helpers shared by the tests that run the `bankconf` binary.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

pub const BIN: &str = env!("CARGO_BIN_EXE_bankconf");

/// Runs `bankconf ARGS` with an empty environment (but PATH), so that a developer's own
/// `BANKCONF_*` variables never leak into a test.
pub fn bankconf(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .expect("run bankconf")
}

/// Stdout and stderr of a finished command, for assertions and their messages.
pub fn text(output: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// A path for a file the test writes, in a folder of this test process.
pub fn temp_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("bankconf-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create the test folder");
    dir.join(name)
}
