//! Names the commit bankconf is built from, for `--version` and the JSON report's `tool`
//! (`BANKCONF_COMMIT`: a short hash, `+dirty` never checked: that would need a rerun on every
//! build). Without git (a source archive, a container build without `.git`), a
//! `BANKCONF_COMMIT` variable given to the build is used, else `unknown`. It reruns only when
//! HEAD or the branch it points at moves.

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
    let commit = given.or_else(|| git(&["rev-parse", "--short=12", "HEAD"]));
    if commit.is_some() {
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
    // Only hex digits (or `unknown`) reach the version string.
    let commit = commit
        .map(|c| c.chars().filter(char::is_ascii_alphanumeric).take(40).collect::<String>())
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=BANKCONF_COMMIT={commit}");
}
