//! Helpers shared by the tests that run the `bankconf` binary.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

pub const BIN: &str = env!("CARGO_BIN_EXE_bankconf");

/// The target settings of a whole external run against `bankconf serve` at `url`: both keys,
/// the service name and the example shell driver.
pub fn external<'a>(url: &'a str, key: &'a str, second_key: &'a str) -> Vec<&'a str> {
    vec![
        "--base-url",
        url,
        "--api-key",
        key,
        "--second-api-key",
        second_key,
        "--service",
        "bankconf",
        "--driver",
        "./examples/sandbox-driver.sh",
    ]
}

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

/// A path for a file the test writes, in a folder of this test process under the target
/// directory (removed with it, never left in the system's temporary folder).
pub fn temp_path(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("bankconf-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create the test folder");
    dir.join(name)
}

/// A `bankconf serve` process on 127.0.0.1, killed when dropped, and with the thread that
/// started it (a test) at the latest.
pub struct Server {
    child: Child,
    pub url: String,
}

impl Server {
    /// `bankconf serve` with these client keys and more flags (`--mutant NAME`).
    pub fn start(keys: &[&str], extra: &[&str]) -> Server {
        use std::os::unix::process::CommandExt;
        let mut command = Command::new(BIN);
        command.args(["serve", "--listen", "127.0.0.1:0"]);
        for key in keys {
            command.args(["--api-key", key]);
        }
        // SAFETY: prctl is async-signal-safe; it only sets the child's parent-death signal.
        unsafe {
            command.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let mut child =
            command.args(extra).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("start bankconf serve");
        let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut first = String::new();
        stdout.read_line(&mut first).expect("read the serve banner");
        // Keep draining, so that the server never writes to a closed pipe.
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let url = first.trim().rsplit(' ').next().expect("URL in the banner").to_string();
        assert!(url.starts_with("http://127.0.0.1:"), "banner: {first}");
        Server { child, url }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
