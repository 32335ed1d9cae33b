//! `scripts/layers.py` holds the stated layers and sizes: the tree passes it, and an upward
//! import (a module of the access layer importing the runner, a macro named through the crate
//! root), a module outside the layer folders, a second way into the sandbox, a file over 600
//! lines or a function over 100 makes it fail; a test module ending a file does not count.
//! Without python3 these are reported ignored, never ok.

use libtest_mimic::{Arguments, Failed, Trial};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    let args = Arguments::from_args();
    let missing = Command::new("python3").arg("--version").output().is_err();
    // A function of `n` lines (its `fn` line to its `}`), with braces in a string and a comment
    // that must not end it early.
    let function = |n: usize| format!("fn _long() {{\n{}}}\n", "    let _ = \"}}\"; // }\n".repeat(n - 2));
    let tests_module = format!("#[cfg(test)]\nmod tests {{\n{}}}\n", "    // a test\n".repeat(700));
    let trials = [
        ("the_tree_keeps_its_layers", None),
        (
            "an_upward_import_fails",
            Some(("harness/transport/http/mod.rs", "use crate::harness::runner;\n".into(), "upward import")),
        ),
        (
            "a_second_way_into_the_sandbox_fails",
            Some(("harness/fixtures/tour.rs", "use crate::sandbox::Mutant;\n".into(), "only through")),
        ),
        // A macro named through the crate root is an import of the root (the top layer).
        (
            "a_macro_through_the_crate_root_fails",
            Some(("harness/checks/widget.rs", "fn _f() { crate::cases! {} }\n".into(), "upward import")),
        ),
        (
            "a_module_outside_the_layer_folders_fails",
            Some(("harness/loose.rs", "use crate::harness::vocab::outcome;\n".into(), "no layer's folder")),
        ),
        ("a_file_over_600_lines_fails", Some(("harness/vocab/long.rs", "//\n".repeat(601), "has 601 lines"))),
        ("a_function_over_100_lines_fails", Some(("harness/vocab/long.rs", function(101), "fn _long has 101 lines"))),
        // At the limits, and with a long test module ending the file, the tree still passes.
        ("sizes_at_the_limits_pass", Some(("harness/vocab/long.rs", "//\n".repeat(499) + &function(100), ""))),
        ("a_long_test_module_does_not_count", Some(("harness/vocab/long.rs", function(100) + &tests_module, ""))),
    ]
    .into_iter()
    .map(|(name, injected)| Trial::test(name, move || check(injected)).with_ignored_flag(missing))
    .collect();
    libtest_mimic::run(&args, trials).exit_code()
}

/// Runs the script over a copy of `src/` with `line` put before the text of `file`; expects
/// `said` (or a pass, with no injection or an empty `said`).
fn check(injected: Option<(&str, String, &str)>) -> Result<(), Failed> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let copy = std::env::temp_dir().join(format!("bankconf-layers-{}-{}", std::process::id(), rand_suffix()));
    copy_dir(&root.join("src"), &copy).map_err(|e| format!("copying src: {e}"))?;
    if let Some((file, line, _)) = &injected {
        let path = copy.join(file);
        // A file that does not exist is made (a new module).
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        std::fs::write(&path, format!("{line}{text}")).map_err(|e| e.to_string())?;
    }
    let out = Command::new("python3")
        .arg(root.join("scripts/layers.py"))
        .arg("--src")
        .arg(&copy)
        .output()
        .map_err(|e| e.to_string())?;
    let _ = std::fs::remove_dir_all(&copy);
    let said = String::from_utf8_lossy(&out.stdout);
    match injected {
        None | Some((_, _, "")) if out.status.success() => Ok(()),
        Some((_, _, expected)) if !expected.is_empty() && !out.status.success() && said.contains(expected) => Ok(()),
        _ => Err(format!("scripts/layers.py exited {:?}: {said}", out.status.code()).into()),
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
}

fn copy_dir(from: &Path, to: &PathBuf) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}
