//! Names the commit bankconf is built from, for `--version` and the JSON report's `tool`
//! (`BANKCONF_COMMIT`: a short hash). Read from git for release builds (`cargo build --release`,
//! `cargo install`, the release workflow), which rerun this script only when HEAD or the branch
//! it points at moves. Debug builds (`cargo test`, `cargo run`) say `unknown` and never rerun
//! it: every commit would otherwise rebuild the library and relink every test binary (about a
//! minute on two busy cores). A `BANKCONF_COMMIT` variable given to the build is used as is, in
//! any profile (a container build has no `.git`).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=BANKCONF_COMMIT");
    let given = std::env::var("BANKCONF_COMMIT").ok().filter(|c| !c.trim().is_empty());
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let commit = given.or_else(|| release.then(|| git(&["rev-parse", "--short=12", "HEAD"])).flatten());
    if release && commit.is_some() {
        // HEAD (a checkout, a commit on a detached HEAD), the branch's ref, packed refs.
        let branch = git(&["symbolic-ref", "-q", "HEAD"]);
        let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
        watched.extend(branch);
        for name in watched {
            if let Some(path) = git(&["rev-parse", "--git-path", &name]) {
                if std::path::Path::new(&path).exists() {
                    println!("cargo:rerun-if-changed={path}");
                }
            }
        }
    }
    // Only letters and digits (a hash, or `unknown`) reach the version string.
    let commit = commit
        .map(|c| c.chars().filter(char::is_ascii_alphanumeric).take(40).collect::<String>())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=BANKCONF_COMMIT={commit}");
}
